//! What `State::apply` hands back for each entry: the outcome the client sees, the changes a
//! watch stream emits, and the scheduler decisions the audit log keeps.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::model::ObjectKey;
use crate::scheduler::Decision;

/// Why a command was refused. Maps one-to-one onto API error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RejectCode {
    /// The input itself is malformed (HTTP 400/422).
    Invalid,
    /// The target does not exist (404).
    NotFound,
    /// `expected_version` did not match (409).
    Conflict,
    /// Create of something that exists (409).
    AlreadyExists,
    /// Valid input the current state does not allow, e.g. over quota (412/422).
    FailedPrecondition,
    /// The actor has no right to this (403). Appended last: older outcomes keep their encoding.
    Forbidden,
}

/// A refused command: nothing changed. `field` is the camelCase JSON path at fault, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub code: RejectCode,
    pub field: Option<String>,
    pub message: String,
}

impl Rejection {
    pub fn new(code: RejectCode, field: Option<&str>, message: impl Into<String>) -> Self {
        Self {
            code,
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }

    pub fn not_found(field: &str, what: impl std::fmt::Display) -> Self {
        Self::new(
            RejectCode::NotFound,
            Some(field),
            format!("{what} not found"),
        )
    }

    /// The compare-and-swap failure every versioned write shares.
    pub fn conflict(expected: u64, found: Option<u64>) -> Self {
        let message = match (expected, found) {
            (0, Some(v)) => format!("expected to create, but it exists at resource version {v}"),
            (e, Some(v)) => format!("expected resource version {e}, found {v}"),
            (e, None) => format!("expected resource version {e}, but it does not exist"),
        };
        Self::new(
            RejectCode::Conflict,
            Some("metadata.resourceVersion"),
            message,
        )
    }
}

impl From<FieldError> for Rejection {
    fn from(e: FieldError) -> Self {
        Self {
            code: RejectCode::Invalid,
            field: Some(e.field),
            message: e.message,
        }
    }
}

/// The result of one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Applied. `resource_version` of the target for intents on one resource (unchanged when the
    /// write was a no-op), None for events.
    Accepted {
        resource_version: Option<u64>,
    },
    Rejected(Rejection),
}

impl Outcome {
    pub fn is_accepted(&self) -> bool {
        matches!(self, Outcome::Accepted { .. })
    }

    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Outcome::Rejected(r) => Some(r),
            Outcome::Accepted { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeKind {
    Cluster,
    Object,
    Tenant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeOp {
    Added,
    Modified,
    Deleted,
}

/// One resource this entry changed, for watch streams. `key` is the cluster or tenant name, or
/// `namespace/name` for objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub kind: ChangeKind,
    pub key: String,
    pub op: ChangeOp,
}

/// Everything one applied entry produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub index: u64,
    pub outcome: Outcome,
    /// In the order they happened; a resource may appear more than once.
    pub changes: Vec<Change>,
    /// Every scheduling decision this entry made, for the audit log's "explain".
    pub decisions: Vec<(ObjectKey, Decision)>,
    /// Set when this entry repeated an earlier request id: nothing changed and `outcome` is the
    /// earlier entry's.
    pub duplicate_of: Option<u64>,
}
