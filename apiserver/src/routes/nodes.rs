//! `/v1/status/node` (this node about itself) and `/v1/status/nodes` (every raft member, as this
//! node gathers them): raft position, state fingerprint, bytes on disk of the log and archive.
//!
//! Nodes know each other only by their advertised peer addresses (the config and the membership
//! hold no API addresses), so the gathering goes over the peer transport: each member answers
//! `GET /raft/health` (cluster secret, mutual TLS when configured) about itself. Members at
//! different applied indexes are compared at the lowest of them: the ones ahead replay their
//! audit archive to that index, so a state hash that differs at an equal index is an alarm, not
//! a race. Operators and admins only, like `/v1/status`. Must not: change state, or wait on an
//! unreachable member for more than [`MEMBER_TIMEOUT`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::extract::State;
use axum::{Extension, Json};
use fedraft_raft::NodeHealth;
use serde::Deserialize;
use serde_json::{json, Value};

use super::common::{allow, Q};
use crate::auth::{Access, Principal};
use crate::error::ApiError;
use crate::App;

/// How long one member may take to answer (a replay to an older index included).
pub const MEMBER_TIMEOUT: Duration = Duration::from_secs(3);

/// `?at=INDEX`: also the state hash right after the command at INDEX. (`stale`, accepted by
/// every `/v1` read, changes nothing here: a node's account of itself is always local.)
#[derive(Debug, Default, Deserialize)]
pub struct AtIndex {
    pub at: Option<u64>,
}

fn to_json(h: &NodeHealth) -> Result<Value, ApiError> {
    serde_json::to_value(h).map_err(|e| ApiError::internal(e.to_string()))
}

/// This node's health; every node answers for itself.
pub async fn node(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<AtIndex>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadClusters)?;
    Ok(Json(to_json(&app.node.health(q.at).await)?))
}

/// One member's answer, or why there is none.
type Answer = Result<NodeHealth, String>;

async fn ask_all(app: &App, ids: &[u64], at: Option<u64>) -> BTreeMap<u64, Answer> {
    let asks = ids.iter().map(|&id| async move {
        let answer = match app.node.member_health(id, at, MEMBER_TIMEOUT).await {
            Some(Ok(h)) => Ok(h),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("no longer a member".to_string()),
        };
        (id, answer)
    });
    futures::future::join_all(asks).await.into_iter().collect()
}

/// The state hashes at one index, and whether they agree.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Comparison {
    pub index: u64,
    /// Member -> its hash at `index` (members that could not tell are absent).
    pub hashes: BTreeMap<u64, String>,
    /// Member -> why it could not tell.
    pub unknown: BTreeMap<u64, String>,
}

impl Comparison {
    pub(crate) fn agree(&self) -> bool {
        self.hashes.values().collect::<BTreeSet<_>>().len() <= 1
    }
}

/// Compares the members' hashes at `index`: the live hash of those applied exactly there, the
/// archive's answer (`at`) for the others.
pub(crate) fn compare(
    index: u64,
    live: &BTreeMap<u64, NodeHealth>,
    at: &BTreeMap<u64, Answer>,
) -> Comparison {
    let mut c = Comparison {
        index,
        hashes: BTreeMap::new(),
        unknown: BTreeMap::new(),
    };
    for (id, h) in live {
        if h.state_index == index {
            c.hashes.insert(*id, h.state_hash.clone());
            continue;
        }
        let told = match at.get(id) {
            Some(Ok(a)) => match &a.hash_at {
                Some(x) if x.index == index => match (&x.state_hash, &x.error) {
                    (Some(hash), _) => Ok(hash.clone()),
                    (None, e) => Err(e.clone().unwrap_or_else(|| "no answer".into())),
                },
                _ => Err("did not answer for that index".into()),
            },
            Some(Err(e)) => Err(e.clone()),
            None => Err("not asked".into()),
        };
        match told {
            Ok(hash) => c.hashes.insert(*id, hash),
            Err(e) => c.unknown.insert(*id, e),
        };
    }
    c
}

/// Every member's health as this node reaches it, and the members' state hashes compared at
/// the lowest applied index among those that answered.
pub async fn nodes(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadClusters)?;
    let addrs = app.node.member_addrs();
    let st = app.node.status();
    let ids: Vec<u64> = addrs.keys().copied().collect();
    let first = ask_all(&app, &ids, None).await;
    let live: BTreeMap<u64, NodeHealth> = first
        .iter()
        .filter_map(|(id, a)| a.as_ref().ok().map(|h| (*id, h.clone())))
        .collect();
    let comparison = match live.values().map(|h| h.state_index).min() {
        None => None,
        Some(index) => {
            let behind: Vec<u64> = live
                .iter()
                .filter(|(_, h)| h.state_index != index)
                .map(|(id, _)| *id)
                .collect();
            let at = ask_all(&app, &behind, Some(index)).await;
            Some(compare(index, &live, &at))
        }
    };
    let mut members = Vec::new();
    for (id, answer) in &first {
        let mut m = match answer {
            Ok(h) => to_json(h)?,
            Err(e) => json!({"nodeId": id, "error": e}),
        };
        m["peerAddr"] = json!(addrs.get(id));
        m["voter"] = json!(st.voters.contains(id));
        m["reachable"] = json!(answer.is_ok());
        members.push(m);
    }
    let compared = comparison.map(|c| {
        json!({
            "index": c.index,
            "agree": c.agree(),
            "hashes": c.hashes,
            "unknown": c.unknown,
        })
    });
    Ok(Json(json!({
        "askedNode": st.id,
        "leaderId": st.leader_id,
        "term": st.term,
        "members": members,
        "compared": compared,
    })))
}

#[cfg(test)]
mod tests {
    use fedraft_raft::{DiskFigures, HashAt};

    use super::*;

    fn health(id: u64, index: u64, hash: &str, at: Option<HashAt>) -> NodeHealth {
        NodeHealth {
            node_id: id,
            term: 2,
            leader_id: Some(1),
            is_leader: id == 1,
            last_log_index: index,
            commit_index: index,
            raft_applied_index: index,
            state_index: index,
            state_hash: hash.into(),
            log_time_ms: 0,
            hash_at: at,
            disk: DiskFigures::default(),
        }
    }

    fn at(index: u64, hash: Option<&str>, error: Option<&str>) -> HashAt {
        HashAt {
            index,
            state_hash: hash.map(Into::into),
            error: error.map(Into::into),
        }
    }

    #[test]
    fn members_ahead_are_compared_through_their_archive_at_the_lowest_index() {
        let live = BTreeMap::from([
            (1, health(1, 12, "h12", None)),
            (2, health(2, 10, "h10", None)),
            (3, health(3, 11, "h11", None)),
        ]);
        let asked = BTreeMap::from([
            (1, Ok(health(1, 12, "h12", Some(at(10, Some("h10"), None))))),
            (3, Ok(health(3, 11, "h11", Some(at(10, Some("h10"), None))))),
        ]);
        let c = compare(10, &live, &asked);
        assert_eq!(c.hashes.len(), 3);
        assert!(c.unknown.is_empty());
        assert!(c.agree());
    }

    #[test]
    fn a_different_hash_at_an_equal_index_is_a_disagreement() {
        let live = BTreeMap::from([
            (1, health(1, 10, "h10", None)),
            (2, health(2, 10, "h10", None)),
            (3, health(3, 11, "h11", None)),
        ]);
        let asked =
            BTreeMap::from([(3, Ok(health(3, 11, "h11", Some(at(10, Some("bad"), None)))))]);
        let c = compare(10, &live, &asked);
        assert!(!c.agree());
        assert_eq!(c.hashes[&3], "bad");
    }

    #[test]
    fn members_that_cannot_tell_are_listed_with_their_reason_and_do_not_count() {
        let live = BTreeMap::from([
            (1, health(1, 10, "h10", None)),
            (2, health(2, 15, "h15", None)),
            (3, health(3, 15, "h15", None)),
        ]);
        let asked = BTreeMap::from([
            (
                2,
                Ok(health(
                    2,
                    15,
                    "h15",
                    Some(at(10, None, Some("before the archive"))),
                )),
            ),
            (3, Err("peer unreachable".to_string())),
        ]);
        let c = compare(10, &live, &asked);
        assert_eq!(c.hashes.len(), 1);
        assert_eq!(c.unknown[&2], "before the archive");
        assert_eq!(c.unknown[&3], "peer unreachable");
        assert!(c.agree());
    }
}
