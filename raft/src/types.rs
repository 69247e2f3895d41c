//! The openraft type configuration and the small public data types of the node: what a caller
//! proposes, what a subscriber receives, and what `status()` reports.

use std::collections::BTreeSet;
use std::io::Cursor;
use std::sync::Arc;

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::state::Applied;
use serde::{Deserialize, Serialize};

use crate::codec::Response;

openraft::declare_raft_types!(
    /// fedraft's raft: each normal entry carries a batch of core `LogEntry`s; applying it answers
    /// one core `Applied` per command (none for blank leader entries and membership changes).
    pub TypeConfig:
        D = EntryBatch,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// The commands of one raft entry, applied in order.
///
/// openraft 0.9 appends each client write with its own fsync and waits for it before taking the
/// next, so one command per raft entry caps throughput at one command per fsync. The leader
/// instead packs every proposal that queued up while earlier entries were being written into one
/// entry. A command's resource version (`Applied::index`) is its position in this command
/// sequence (core's applied index + 1), which every node derives identically from the log.
///
/// The commands sit behind an `Arc` because openraft clones entries to hand them to replication
/// and to the state machine, and the log store keeps the recent ones in memory: each of those is
/// a reference, not a copy of every template. serde encodes an `Arc` as what it holds, so on the
/// wire and on disk it is the plain list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryBatch(pub Arc<Vec<LogEntry>>);

impl EntryBatch {
    pub fn new(commands: Vec<LogEntry>) -> Self {
        EntryBatch(Arc::new(commands))
    }

    pub fn commands(&self) -> &[LogEntry] {
        &self.0
    }
}

pub type NodeId = u64;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type Raft = openraft::Raft<TypeConfig>;

/// The raft position of the snapshot saved in the store, written by the state machine and
/// read by the log store (which must not purge past it).
pub(crate) type SavedSnapshot = std::sync::Arc<tokio::sync::Mutex<Option<LogId>>>;

/// A command to commit. The leader wraps it in a `LogEntry` and stamps the time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// Identifies retries: the same id within core's retention window returns the first
    /// outcome instead of applying again. Empty = never deduplicated (and never retried after an
    /// ambiguous failure).
    pub request_id: String,
    pub actor: String,
    pub command: Command,
}

/// One applied command, as watch streams see it. It shares its raft entry's batch rather than
/// holding a copy of the command: the log's memory usually still holds that batch, and copying
/// each command out of it cost an allocation per string on every node.
#[derive(Debug, Clone)]
pub struct AppliedEntry {
    /// The command's resource version (its position in the command sequence).
    pub index: u64,
    batch: Arc<Vec<LogEntry>>,
    /// Always a valid position in `batch` (both are set together, only here).
    at: usize,
    pub applied: Applied,
}

impl AppliedEntry {
    /// The command at `at` in `batch`, which the caller has just applied from it.
    pub(crate) fn in_batch(
        index: u64,
        batch: Arc<Vec<LogEntry>>,
        at: usize,
        applied: Applied,
    ) -> AppliedEntry {
        debug_assert!(
            at < batch.len(),
            "position {at} outside a batch of {}",
            batch.len()
        );
        AppliedEntry {
            index,
            batch,
            at,
            applied,
        }
    }

    /// A command that was applied on its own.
    pub fn single(index: u64, entry: LogEntry, applied: Applied) -> AppliedEntry {
        AppliedEntry {
            index,
            batch: Arc::new(vec![entry]),
            at: 0,
            applied,
        }
    }

    pub fn entry(&self) -> &LogEntry {
        &self.batch[self.at]
    }
}

/// A point-in-time view of this node's raft role and progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub id: NodeId,
    pub term: u64,
    pub leader_id: Option<NodeId>,
    pub leader_peer_addr: Option<String>,
    pub is_leader: bool,
    /// Highest log index this node holds (committed or not).
    pub last_log_index: u64,
    /// Highest index this node knows to be committed (as last persisted by raft).
    pub commit_index: u64,
    /// Highest raft log index applied here (raft-internal entries included).
    pub applied_index: u64,
    pub voters: BTreeSet<NodeId>,
    pub learners: BTreeSet<NodeId>,
}

/// `status()` plus a fingerprint of the state, served at `GET /raft/status` so tests and
/// operators can compare nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    pub status: NodeStatus,
    /// Hex SHA-256 of core's replicated state.
    pub state_hash: String,
    /// Core's applied index: the resource version of the last applied command.
    pub state_applied_index: u64,
    pub log_time_ms: u64,
}

#[cfg(test)]
pub(crate) mod tests {
    use fedraft_core::model::ClusterSpec;
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    /// A raft-internal entry at `index` of `term`, for tests that only need log positions.
    pub(crate) fn blank_entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    #[test]
    fn an_entry_batch_encodes_as_the_plain_list() {
        #[derive(Serialize)]
        struct Plain(Vec<LogEntry>);
        let commands = vec![LogEntry::new(
            "r1",
            "tester",
            7,
            Command::RegisterCluster(ClusterSpec::new("dc1", "https://dc1:6443")),
        )];
        let shared = crate::codec::encode(&EntryBatch::new(commands.clone())).unwrap();
        assert_eq!(
            shared,
            crate::codec::encode(&Plain(commands.clone())).unwrap()
        );
        let back: EntryBatch = crate::codec::decode(&shared).unwrap();
        assert_eq!(back.commands(), &commands[..]);
    }
}
