//! The one error enum of fedraft-executors. Each variant says which step failed and carries what
//! a caller or a status message needs (cluster, object, the member API's answer).
//!
//! Must not: hide a member cluster's error text; it ends up in the object's per-cluster status.

use thiserror::Error;

/// What can go wrong while converging or observing a member cluster.
#[derive(Debug, Error)]
pub enum ExecError {
    /// The registration's endpoint or credentials do not make a usable client.
    #[error("cluster {cluster}: bad connection settings: {reason}")]
    Credentials { cluster: String, reason: String },

    /// A manifest lacks what server-side apply needs (apiVersion, kind, metadata.name).
    #[error("manifest: {0}")]
    Manifest(String),

    /// The member cluster does not serve this apiVersion/kind.
    #[error("{api_version}/{kind} is not served by the member cluster: {reason}")]
    UnknownKind {
        api_version: String,
        kind: String,
        reason: String,
    },

    /// A request to the member cluster failed (refused, timed out, or answered with an error).
    #[error("{action}: {}", describe_kube(source))]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },

    /// A request took longer than its bound.
    #[error("{action}: no answer within {waited_ms} ms")]
    Timeout { action: String, waited_ms: u64 },

    /// The watch on managed objects has not completed its first list yet.
    /// `cause` is the list's last failure (": 500 ..."), empty when none failed yet.
    #[error("waiting for the first list of {resource}{cause}")]
    CacheNotReady { resource: String, cause: String },

    /// The control plane refused or could not commit a proposal.
    #[error("proposing {command}: {reason}")]
    Propose {
        command: &'static str,
        reason: String,
    },

    /// A newer owner of the cluster wrote this object: this executor is stale and stops.
    #[error("{id}: written by a newer owner ({owner}); this executor stops")]
    Fenced { id: String, owner: String },

    /// This node's ownership lease is not fresh: it writes nothing until a renewal commits.
    #[error("{id}: not written while this node's ownership lease is not fresh")]
    LeaseLapsed { id: String },
}

impl ExecError {
    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        ExecError::Kube {
            action: action.into(),
            source,
        }
    }

    /// Whether retrying the same request later can help. Conflicts and refusals caused by the
    /// manifest itself (400, 403, 404 of a kind, 422) still get retried, only more slowly, since
    /// the desired state or the cluster may change under them.
    pub fn is_transient(&self) -> bool {
        match self {
            ExecError::Kube {
                source: kube::Error::Api(status),
                ..
            } => {
                matches!(status.code, 408 | 409 | 429 | 500..=599)
            }
            ExecError::Kube { .. }
            | ExecError::Timeout { .. }
            | ExecError::CacheNotReady { .. } => true,
            ExecError::Propose { .. } | ExecError::LeaseLapsed { .. } => true,
            ExecError::Credentials { .. }
            | ExecError::Manifest(_)
            | ExecError::UnknownKind { .. }
            | ExecError::Fenced { .. } => false,
        }
    }
}

/// A short sentence for a kube error: the API's code and message rather than its Debug dump.
pub(crate) fn describe_kube(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                "Error"
            } else {
                status.reason.as_str()
            };
            format!("{} {}: {}", status.code, reason, status.message)
        }
        other => other.to_string(),
    }
}

/// What the `executors::member_write` failpoint injects: a member that did not answer `what`.
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(crate) fn unanswered(what: &impl std::fmt::Display) -> ExecError {
    ExecError::Timeout {
        action: format!("applying {what} (failpoint executors::member_write)"),
        waited_ms: 0,
    }
}
