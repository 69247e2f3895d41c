//! Which fedraft node's executors own which member cluster, as plain data and pure rules.
//!
//! Every node's executors renew a lease by log entry (`Command::ExecutorLease`, carrying the
//! lease's length and the node's locality). The book keeps the live leases and one owner per
//! registered cluster, with the log index at which it took the cluster (`since_index`): the
//! fencing token executors stamp on what they write, so a newer owner's writes always carry a
//! higher token than a stale one's.
//!
//! Rules (applied by `state/handlers/owners.rs`, in log time):
//! - forming: the first lease into an empty book opens a window of that lease's length in
//!   which nothing is assigned, so that every node started with it (renewing every eighth
//!   of a lease) is live when the fleet is shared out; else the first node to renew would take every
//!   cluster and keep them (owners are sticky). Meanwhile ownership is not in force;
//! - sticky: a cluster keeps its owner while the owner's lease is live, whatever else changes
//!   (a node joining takes new and orphaned clusters only: no churn);
//! - a new or orphaned cluster goes to a live node preferring the one whose locality matches
//!   the cluster's labels earliest in the node's locality list (region before zone by
//!   default), then the one owning fewest clusters, then the first by name;
//! - a node whose lease expired (by entry time) is dropped and its clusters move at that
//!   entry's index, in name order;
//! - with no live lease at all (logs older than [`OWNERS_SINCE`], or no renewal yet) no
//!   cluster has an assigned owner: the executors fall back to leader-only ownership, and
//!   health to the actor of the latest heartbeats.
//!
//! Must not: read clocks, or let hash order reach a result (every map here is a B-tree).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The first envelope version whose entries may carry `ExecutorLease` and whose time advances
/// expire leases and move clusters.
pub const OWNERS_SINCE: u16 = 9;
/// Bounds of a lease's length: shorter ones would expire between two renewals of a busy node,
/// longer ones would leave a dead node's clusters unattended for too long.
pub const MIN_LEASE_MS: u64 = 1_000;
pub const MAX_LEASE_MS: u64 = 600_000;
/// Most locality pairs one node may declare.
pub const MAX_LOCALITY: usize = 8;
/// The annotation executors stamp on every object they write: `<node>@<since_index>`.
pub const OWNER_ANNOTATION: &str = "fedraft.io/owner";

/// One renewal: how long it holds and where the node is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorLease {
    pub lease_ms: u64,
    /// (label key, value) pairs in order of preference, e.g. the region then the zone.
    pub locality: Vec<(String, String)>,
}

/// A live node as the book holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLease {
    /// Log time of its latest renewal.
    pub renewed_ms: u64,
    pub lease_ms: u64,
    pub locality: Vec<(String, String)>,
}

impl NodeLease {
    /// Log time after which the lease no longer holds.
    pub fn expires_ms(&self) -> u64 {
        self.renewed_ms.saturating_add(self.lease_ms)
    }

    /// How early in this node's locality list a cluster's labels match (lower is nearer);
    /// `locality.len()` when nothing matches.
    fn affinity(&self, labels: &BTreeMap<String, String>) -> usize {
        self.locality
            .iter()
            .position(|(k, v)| labels.get(k) == Some(v))
            .unwrap_or(self.locality.len())
    }
}

/// One cluster's owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The node's executor actor (`system:executor:node2`).
    pub node: String,
    /// Log index at which it took the cluster.
    pub since_index: u64,
}

impl Owner {
    /// The fencing token: `node2@1234`.
    pub fn token(&self) -> String {
        format!(
            "{}@{}",
            crate::health::vantage_name(&self.node),
            self.since_index
        )
    }
}

/// A token read back from a member object: the node's short name and the index.
pub fn parse_token(token: &str) -> Option<(&str, u64)> {
    let (node, index) = token.rsplit_once('@')?;
    Some((node, index.parse().ok()?))
}

/// Live leases and cluster owners. A snapshot part of its own (snapshot version 8).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owners {
    /// node actor -> its lease; only live ones (expired ones are dropped when time passes).
    pub nodes: BTreeMap<String, NodeLease>,
    /// cluster -> its owner; empty while no node holds a lease, or while forming.
    pub clusters: BTreeMap<String, Owner>,
    /// Log time until which the book forms (nothing assigned yet); see the module doc.
    pub forming_until_ms: Option<u64>,
}

impl Owners {
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.clusters.is_empty() && self.forming_until_ms.is_none()
    }

    /// Whether clusters have assigned owners (some lease live, forming over): executors then
    /// run for their owned clusters only.
    pub fn in_force(&self) -> bool {
        !self.nodes.is_empty() && self.forming_until_ms.is_none()
    }

    /// The assigned owner of `cluster`, if ownership is in force.
    pub fn owner(&self, cluster: &str) -> Option<&Owner> {
        self.clusters.get(cluster)
    }

    /// Clusters owned per live node (nodes owning none included).
    pub fn counts(&self) -> BTreeMap<&str, usize> {
        let mut counts: BTreeMap<&str, usize> =
            self.nodes.keys().map(|n| (n.as_str(), 0)).collect();
        for o in self.clusters.values() {
            if let Some(c) = counts.get_mut(o.node.as_str()) {
                *c += 1;
            }
        }
        counts
    }

    /// The node a new or orphaned cluster with `labels` goes to, given the current counts.
    fn pick(
        &self,
        labels: &BTreeMap<String, String>,
        counts: &BTreeMap<&str, usize>,
    ) -> Option<String> {
        self.nodes
            .iter()
            .min_by_key(|(name, lease)| {
                let owned = counts.get(name.as_str()).copied().unwrap_or(0);
                (lease.affinity(labels), owned, name.as_str())
            })
            .map(|(name, _)| name.clone())
    }

    /// Gives every cluster of `fleet` (name -> labels) without a live owner one, at `index`,
    /// in name order (owners whose lease lapsed count as none). Returns the clusters moved.
    pub fn assign<'a>(
        &mut self,
        fleet: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
        index: u64,
    ) -> Vec<String> {
        if self.nodes.is_empty() {
            self.clusters.clear();
            self.forming_until_ms = None;
            return Vec::new();
        }
        if self.forming_until_ms.is_some() {
            return Vec::new();
        }
        let nodes = &self.nodes;
        self.clusters.retain(|_, o| nodes.contains_key(&o.node));
        let mut counts: BTreeMap<String, usize> = self
            .counts()
            .into_iter()
            .map(|(n, c)| (n.to_string(), c))
            .collect();
        let mut moved = Vec::new();
        for (name, labels) in fleet {
            if self.clusters.contains_key(name) {
                continue;
            }
            let view: BTreeMap<&str, usize> =
                counts.iter().map(|(n, c)| (n.as_str(), *c)).collect();
            let Some(node) = self.pick(labels, &view) else {
                break;
            };
            *counts.entry(node.clone()).or_default() += 1;
            self.clusters.insert(
                name.to_string(),
                Owner {
                    node,
                    since_index: index,
                },
            );
            moved.push(name.to_string());
        }
        moved
    }

    /// Drops the leases expired at `now_ms` and ends a forming window that passed; returns
    /// whether owners must be looked at again.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let before = self.nodes.len();
        self.nodes.retain(|_, l| now_ms <= l.expires_ms());
        let formed = self.forming_until_ms.is_some_and(|t| now_ms >= t);
        if formed {
            self.forming_until_ms = None;
        }
        self.nodes.len() != before || formed
    }

    /// Renews `node`'s lease at `now_ms`; returns whether it is a node the book did not hold.
    pub fn renew(&mut self, node: &str, lease: &ExecutorLease, now_ms: u64) -> bool {
        let next = NodeLease {
            renewed_ms: now_ms,
            lease_ms: lease.lease_ms,
            locality: lease.locality.clone(),
        };
        match self.nodes.get_mut(node) {
            Some(l) => {
                *l = next;
                false
            }
            None => {
                if self.nodes.is_empty() && self.clusters.is_empty() {
                    self.forming_until_ms = Some(now_ms.saturating_add(lease.lease_ms));
                }
                self.nodes.insert(node.to_string(), next);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(locality: &[(&str, &str)]) -> ExecutorLease {
        ExecutorLease {
            lease_ms: 10_000,
            locality: locality
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn locality_wins_then_counts_then_names() {
        let mut o = Owners::default();
        o.renew("n1", &lease(&[("region", "eu")]), 0);
        o.renew("n2", &lease(&[("region", "us")]), 0);
        let eu = BTreeMap::from([("region".to_string(), "eu".to_string())]);
        let none = BTreeMap::new();
        let fleet = [("a", &eu), ("b", &eu), ("c", &none), ("d", &none)];
        assert!(
            o.assign(fleet, 4).is_empty(),
            "nothing while the book forms"
        );
        assert!(o.expire(10_000));
        o.assign(fleet, 5);
        let owner = |c: &str| o.clusters[c].node.clone();
        assert_eq!(
            [owner("a"), owner("b"), owner("c"), owner("d")],
            ["n1", "n1", "n2", "n2"]
        );
        assert_eq!(o.clusters["a"].token(), "n1@5");
        assert_eq!(parse_token("node2@17"), Some(("node2", 17)));
        assert_eq!(parse_token("node2@x"), None);
    }
}
