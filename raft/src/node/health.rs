//! A node's account of itself for operators: raft position, the replicated state's fingerprint
//! (and, on request, the state hash at an earlier index, replayed from the audit archive, so
//! nodes at different indexes can still be compared at one), and bytes on disk by kind.
//!
//! Served to peers at `GET /raft/health` (cluster secret) and to the API, so any node can
//! gather all of them over the peer transport it already has. Must not: change anything, or
//! cost in proportion to the state more than once per applied index (live hash) or per asked
//! index (archive hash): computations take turns behind one lock and are cached.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use std::time::Duration;

use super::FedNode;
use crate::network::client::CallError;

/// Archive hashes kept (an operator's console asks for one common index per refresh).
const KEPT_ARCHIVE_HASHES: usize = 8;

/// Bytes on disk of a node's data directory, by kind (see `fedraft_store::DiskUse`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskFigures {
    pub log_bytes: Option<u64>,
    pub archive_bytes: Option<u64>,
    pub snapshot_bytes: Option<u64>,
    pub meta_bytes: Option<u64>,
    pub wal_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub capacity_bytes: Option<u64>,
}

impl From<fedraft_store::DiskUse> for DiskFigures {
    fn from(d: fedraft_store::DiskUse) -> Self {
        DiskFigures {
            log_bytes: d.log_bytes,
            archive_bytes: d.archive_bytes,
            snapshot_bytes: d.snapshot_bytes,
            meta_bytes: d.meta_bytes,
            wal_bytes: d.wal_bytes,
            total_bytes: d.total_bytes,
            free_bytes: d.free_bytes,
            capacity_bytes: d.capacity_bytes,
        }
    }
}

/// The state hash right after the command at `index`, from this node's audit archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HashAt {
    pub index: u64,
    /// `None` when this node cannot tell (see `error`).
    pub state_hash: Option<String>,
    /// Why not: not applied here yet, or before this node's archive begins.
    pub error: Option<String>,
}

/// What one node says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeHealth {
    pub node_id: u64,
    pub term: u64,
    pub leader_id: Option<u64>,
    pub is_leader: bool,
    pub last_log_index: u64,
    pub commit_index: u64,
    /// Raft's applied log index (raft-internal entries included).
    pub raft_applied_index: u64,
    /// Core's applied index (the last applied command) and the state's hash there.
    pub state_index: u64,
    pub state_hash: String,
    pub log_time_ms: u64,
    /// Present when the caller asked for the hash at an index.
    pub hash_at: Option<HashAt>,
    pub disk: DiskFigures,
}

#[derive(Default)]
struct Cached {
    /// (state index, hash, log time) of the last live fingerprint.
    live: Option<(u64, Arc<str>, u64)>,
    /// Archive answers by index, newest last.
    at: VecDeque<HashAt>,
}

/// Serializes and remembers the expensive parts of [`FedNode::health`].
#[derive(Default)]
pub(crate) struct HealthCache {
    gate: tokio::sync::Mutex<Cached>,
}

impl FedNode {
    /// This node's health, with the state hash at `at` when asked. Waits for at most one hash
    /// computation of another caller (they take turns, then share the result).
    pub async fn health(&self, at: Option<u64>) -> NodeHealth {
        let mut cached = self.inner.health.gate.lock().await;
        let st = self.status();
        let index_now = self.read_stale(|s| s.applied_index());
        let (state_index, state_hash, log_time_ms) = match &cached.live {
            Some((i, h, t)) if *i == index_now => (*i, h.clone(), *t),
            _ => {
                let node = self.clone();
                let fresh = tokio::task::spawn_blocking(move || {
                    node.read_stale(|s| (s.applied_index(), s.state_hash_hex(), s.log_time_ms()))
                })
                .await;
                let (i, h, t) = match fresh {
                    Ok(f) => f,
                    // A panic while hashing: answer from the state directly on this thread.
                    Err(_) => self
                        .read_stale(|s| (s.applied_index(), s.state_hash_hex(), s.log_time_ms())),
                };
                let h: Arc<str> = h.into();
                cached.live = Some((i, h.clone(), t));
                (i, h, t)
            }
        };
        let hash_at = match at {
            None => None,
            Some(i) if i == state_index => Some(HashAt {
                index: i,
                state_hash: Some(state_hash.to_string()),
                error: None,
            }),
            Some(i) => Some(match cached.at.iter().find(|h| h.index == i) {
                Some(h) => h.clone(),
                None => {
                    let h = self.archive_hash(i, state_index).await;
                    if cached.at.len() >= KEPT_ARCHIVE_HASHES {
                        cached.at.pop_front();
                    }
                    cached.at.push_back(h.clone());
                    h
                }
            }),
        };
        drop(cached);
        let reader = self.inner.sm.store.reader();
        let disk = tokio::task::spawn_blocking(move || reader.disk_use())
            .await
            .unwrap_or_default();
        let hash_at = hash_at.map(|mut h| {
            h.state_hash = h.state_hash.map(reported_hash);
            h
        });
        NodeHealth {
            node_id: st.id,
            term: st.term,
            leader_id: st.leader_id,
            is_leader: st.is_leader,
            last_log_index: st.last_log_index,
            commit_index: st.commit_index,
            raft_applied_index: st.applied_index,
            state_index,
            state_hash: reported_hash(state_hash.to_string()),
            log_time_ms,
            hash_at,
            disk: disk.into(),
        }
    }

    /// Asks the member `id` (this node included) for its health over the peer transport,
    /// within `timeout`. `None` when `id` is not a member.
    pub async fn member_health(
        &self,
        id: u64,
        at: Option<u64>,
        timeout: Duration,
    ) -> Option<Result<NodeHealth, CallError>> {
        if id == self.inner.cfg.node_id {
            return Some(Ok(self.health(at).await));
        }
        let addr = self.member_addr(id)?;
        Some(self.inner.client.health(&addr, at, timeout).await)
    }

    /// Every member (voters and learners) with its advertised peer address.
    pub fn member_addrs(&self) -> std::collections::BTreeMap<u64, String> {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        m.membership_config
            .membership()
            .nodes()
            .map(|(id, n)| (*id, n.addr.clone()))
            .collect()
    }

    fn member_addr(&self, id: u64) -> Option<String> {
        self.member_addrs().remove(&id)
    }

    async fn archive_hash(&self, index: u64, state_index: u64) -> HashAt {
        let refuse = |error: String| HashAt {
            index,
            state_hash: None,
            error: Some(error),
        };
        if index > state_index {
            return refuse(format!("not applied here yet (applied {state_index})"));
        }
        let log = self.audit().await;
        match tokio::task::spawn_blocking(move || log.state_at(index)).await {
            Ok(Ok(s)) => HashAt {
                index,
                state_hash: Some(s.state_hash_hex()),
                error: None,
            },
            Ok(Err(e)) => refuse(e.to_string()),
            Err(e) => refuse(format!("replay failed: {e}")),
        }
    }
}

/// The state hash this node reports about itself: its own, unless the `raft::health_hash`
/// failpoint replaces it (`return(HEX)`; tests only, `store/src/failpoints.rs`), which lets a
/// test see how the console shows members that disagree. Only the report changes: the state,
/// the archive and what `/v1/system/state` answers stay as they are.
fn reported_hash(real: String) -> String {
    fail::fail_point!("raft::health_hash", |arg: Option<String>| arg
        .unwrap_or_else(|| "0".repeat(64)));
    real
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_figures_travel_as_camel_case_json_and_back() {
        let d = DiskFigures {
            log_bytes: Some(1),
            archive_bytes: Some(2),
            wal_bytes: None,
            ..DiskFigures::default()
        };
        let v = serde_json::to_value(d).unwrap();
        assert_eq!(v["logBytes"], 1);
        assert_eq!(v["archiveBytes"], 2);
        assert!(v["walBytes"].is_null());
        assert_eq!(serde_json::from_value::<DiskFigures>(v).unwrap(), d);
    }
}
