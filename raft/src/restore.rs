//! Seeding the data directory of a node of a NEW cluster from a backup of another cluster's
//! state (`fedraft restore`).
//!
//! A seeded directory is what a freshly initialised node looks like after its first entry (the
//! new cluster's membership, at log id 0) has been applied and compacted into a snapshot: the
//! snapshot holds the backup's state, the log is empty and purged up to 0, there is no vote.
//! Every node of the new cluster gets the same seed, so they agree on the membership, elect a
//! leader at term 1 and continue from the backup's state; resource versions continue from the
//! backup's applied index because core numbers commands itself.
//!
//! The raft metadata is written here, in the encodings the log store and the state machine read
//! back (`codec`), so no caller needs to know them. Must not: write into a directory that holds
//! anything (a restore never merges), or give nodes of one cluster different membership tables
//! (the caller seeds every node from the same voters).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use fedraft_store::Store;
use openraft::{BasicNode, CommittedLeaderId, Membership};

use crate::codec;
use crate::error::RaftError;
use crate::types::{LogId, NodeId, SnapshotMeta, StoredMembership};

/// Seeds `data_dir` (absent or empty) as a node of the new cluster `cluster_id` whose voters
/// are `voters` (id -> advertised peer address), holding `state_snapshot` (core's snapshot
/// bytes, as a backup carries them) taken at core's `applied_index`.
///
/// Blocks on the store's writes: call it from a command-line tool or off the async runtime,
/// never on a directory a running node has open.
pub fn seed_data_dir(
    data_dir: &Path,
    cluster_id: &str,
    voters: &BTreeMap<NodeId, String>,
    state_snapshot: Vec<u8>,
    applied_index: u64,
) -> Result<(), RaftError> {
    if voters.is_empty() {
        return Err(RaftError::Invalid(
            "the new cluster needs at least one voter".into(),
        ));
    }
    if holds_anything(data_dir)? {
        return Err(RaftError::Invalid(format!(
            "{} is not empty: a restore only seeds new data directories (move the old one away first)",
            data_dir.display()
        )));
    }
    std::fs::create_dir_all(data_dir)
        .map_err(|e| RaftError::Invalid(format!("creating {}: {e}", data_dir.display())))?;
    // The log id an initialised node gives its first (membership) entry.
    let log_id = LogId::new(CommittedLeaderId::new(0, 0), 0);
    let ids: BTreeSet<NodeId> = voters.keys().copied().collect();
    let nodes: BTreeMap<NodeId, BasicNode> = voters
        .iter()
        .map(|(id, addr)| (*id, BasicNode::new(addr)))
        .collect();
    let meta = SnapshotMeta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership::new(Some(log_id), Membership::new(vec![ids], nodes)),
        snapshot_id: format!("restore-{applied_index}"),
    };
    // What the state machine reads as the snapshot's meta, and the log store as the purged and
    // the committed log id.
    let meta_bytes = codec::encode(&meta)?;
    let purged_bytes = codec::encode(&log_id)?;
    let committed_bytes = codec::encode(&Some(log_id))?;
    let store = Store::open(data_dir, cluster_id)?;
    // The audit chain starts at the backup's applied index, as after a snapshot install.
    Store::wait(|d| store.save_snapshot(meta_bytes, state_snapshot, Some(applied_index), d))?;
    Store::wait(|d| store.purge(0, purged_bytes, d))?;
    Store::wait(|d| store.save_committed(committed_bytes, d))?;
    Ok(())
}

/// Whether `dir` exists and has an entry; an absent directory holds nothing.
fn holds_anything(dir: &Path) -> Result<bool, RaftError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(RaftError::Invalid(format!(
            "reading {}: {e}",
            dir.display()
        ))),
    }
}
