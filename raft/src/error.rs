//! The one error type of fedraft-raft, shaped for callers: each variant says what to do next
//! (retry later, go to the leader, give up). openraft's own errors are translated here, once, so
//! the node, the batcher and the peer handlers all answer alike.

use openraft::error::{ClientWriteError, RaftError as OrRaftError};
use openraft::BasicNode;

/// What can go wrong proposing, reading or managing the cluster.
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    /// The bounded wait ran out and the cluster really lacks a working leader: none is known, or
    /// the leader has not heard from a majority within its lease. A proposal that timed out may
    /// still commit later: its outcome is unknown, retry with the same request id.
    #[error("no quorum: nothing committed within {waited_ms} ms")]
    NoQuorum { waited_ms: u64 },
    /// The bounded wait ran out although a leader with a quorum exists: the cluster is
    /// overloaded (queues are long), not broken. As with `NoQuorum` the outcome is unknown; retry
    /// later with the same request id.
    #[error("timed out after {waited_ms} ms (the leader has a quorum but is overloaded)")]
    Timeout { waited_ms: u64 },
    /// The operation must run on the leader and this node is not it.
    #[error("not the leader (leader: {leader_id:?} at {leader_addr:?})")]
    NotLeader {
        leader_id: Option<u64>,
        leader_addr: Option<String>,
    },
    /// Talking to the leader failed in a way that may or may not have delivered the request.
    #[error("forwarding to the leader failed: {0}")]
    Forward(String),
    /// The node's data directory refused to open or a write failed.
    #[error(transparent)]
    Storage(#[from] fedraft_store::StoreError),
    /// A log entry, snapshot or wire message could not be encoded or decoded.
    #[error("codec: {0}")]
    Codec(String),
    /// The request was refused by the cluster (bad membership change, invalid configuration).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// A membership change was refused because the previous one has not finished committing:
    /// the same request succeeds a moment later.
    #[error("busy: {0}")]
    Busy(String),
    /// The node is shutting down or has stopped.
    #[error("node is shut down")]
    Shutdown,
    /// Raft stopped on an unrecoverable error (storage failure, broken invariant).
    #[error("fatal: {0}")]
    Fatal(String),
}

pub(crate) fn fatal(f: openraft::error::Fatal<u64>) -> RaftError {
    match f {
        openraft::error::Fatal::Stopped => RaftError::Shutdown,
        other => RaftError::Fatal(other.to_string()),
    }
}

/// openraft's answer to a client write (or membership change) as this crate's error: a
/// `ForwardToLeader` names the leader, a refused membership change is `Invalid`.
pub(crate) fn write_error(e: OrRaftError<u64, ClientWriteError<u64, BasicNode>>) -> RaftError {
    match e {
        OrRaftError::APIError(ClientWriteError::ForwardToLeader(f)) => RaftError::NotLeader {
            leader_id: f.leader_id,
            leader_addr: f.leader_node.map(|n| n.addr),
        },
        OrRaftError::APIError(ClientWriteError::ChangeMembershipError(
            c @ openraft::error::ChangeMembershipError::InProgress(_),
        )) => RaftError::Busy(c.to_string()),
        OrRaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => {
            RaftError::Invalid(c.to_string())
        }
        OrRaftError::Fatal(f) => fatal(f),
    }
}
