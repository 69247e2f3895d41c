//! What `State::apply` hands back for each entry: the outcome the client sees, the changes a
//! watch stream emits, and the scheduler decisions the audit log keeps.

use serde::{Deserialize, Serialize};

use crate::door::{PolicyKindTag, PolicyRef};
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

/// Which table a [`Change`] is in. Outcomes travel in forwarded replies and the audit archive:
/// new variants go at the END.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ChangeKind {
    Cluster,
    Object,
    Tenant,
    /// A document of the door's policy table (`door::DoorTables::policies`), of this kind.
    Policy(PolicyKindTag),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeOp {
    Added,
    Modified,
    Deleted,
}

/// One resource this entry changed, for watch streams. `key` is the cluster or tenant name,
/// `namespace/name` for objects, and for policies `namespace/name`, or the name alone for a
/// cluster-wide kind ([`Change::policy_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub kind: ChangeKind,
    pub key: String,
    pub op: ChangeOp,
}

impl Change {
    /// The key a policy's change carries: shaped like an object's, so whatever reads a namespace
    /// out of a change key (the audit's tenant view) reads it out of this one too.
    pub fn policy_key(key: &PolicyRef) -> String {
        if key.namespace.is_empty() {
            key.name.clone()
        } else {
            format!("{}/{}", key.namespace, key.name)
        }
    }

    /// The policy a [`ChangeKind::Policy`] change names; None for any other change.
    pub fn policy(&self) -> Option<PolicyRef> {
        match self.kind {
            ChangeKind::Policy(kind) => Some(Self::policy_of(kind, &self.key)),
            _ => None,
        }
    }

    /// The policy of `kind` a change key made by [`Change::policy_key`] names.
    pub fn policy_of(kind: PolicyKindTag, key: &str) -> PolicyRef {
        let (namespace, name) = key.split_once('/').unwrap_or(("", key));
        PolicyRef {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
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
