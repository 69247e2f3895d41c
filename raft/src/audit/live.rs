//! What a stopped node holds: its latest raft snapshot plus the committed entries of its raft
//! log after it, applied exactly as the node would on restart. Offline verification compares
//! the archive's replay with this; online, the running node's state plays that part.

use fedraft_core::state::State;
use fedraft_store::StoreReader;
use openraft::EntryPayload;

use crate::codec;
use crate::error::RaftError;
use crate::types::{Entry, LogId, SnapshotMeta};

/// A node's state fingerprint at a command index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveState {
    /// Core's applied index (the last command's resource version).
    pub index: u64,
    pub state_hash: String,
}

impl LiveState {
    pub fn of(s: &State) -> LiveState {
        LiveState {
            index: s.applied_index(),
            state_hash: s.state_hash_hex(),
        }
    }
}

/// Rebuilds the state a node restarting on this data directory would reach.
pub fn rebuild_offline(reader: &StoreReader) -> Result<State, RaftError> {
    let (mut state, next) = match reader.snapshot()? {
        Some((meta, data)) => {
            let meta: SnapshotMeta = codec::decode(&meta)?;
            let state = State::from_snapshot(&data).map_err(|e| RaftError::Codec(e.to_string()))?;
            (state, meta.last_log_id.map_or(0, |l| l.index + 1))
        }
        None => (State::new(), 0),
    };
    let committed: Option<LogId> = match reader.committed()? {
        Some(b) => codec::decode(&b)?,
        None => None,
    };
    let Some(committed) = committed else {
        return Ok(state);
    };
    for (_, bytes) in reader.log_range(next, committed.index.saturating_add(1))? {
        let entry: Entry = codec::decode(&bytes)?;
        if let EntryPayload::Normal(batch) = entry.payload {
            for le in batch.commands() {
                let seq = state.applied_index() + 1;
                state.apply(seq, le);
            }
        }
    }
    Ok(state)
}
