//! Make-before-break: when a placement change takes replicas away from a cluster that is still
//! Ready (a drain, a NoExecute taint, a rebalance, a changed policy), that cluster keeps running
//! its old replicas until every cluster of the new placement reports its replicas applied and
//! ready, or until a deadline passes. A cluster that is not Ready gives its replicas up at once,
//! as before: there is nothing to wait for.
//!
//! The hold changes only what executors are asked to run (`State::held_on`, read by rendering
//! and `desired_for_cluster`): the placement, the scheduler's bookings and the object's status
//! stay the new decision's, so a hold never blocks scheduling. Holds are released on the entry
//! that makes the new placement ready (a status report), on the first entry at or past the
//! deadline, when the object is deleted, and for a cluster that stops being Ready. Each release
//! bumps the object's resource version, so executors drop the held copy.
//!
//! Must not: hold anything when the change gained no replicas elsewhere (a scale-down or a
//! shortfall is not a move), or let a hold outlive its deadline.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::{Health, ObjectKey};
use crate::state::{ChangeKind, ChangeOp, Ctx, State};

/// How long a cluster keeps departing replicas when the object has no rollout strategy (one
/// with a strategy waits its `progressDeadlineSeconds`).
pub const HANDOVER_DEADLINE_MS: u64 = 600_000;

/// Replicas one object keeps on the clusters it is leaving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handover {
    /// Cluster -> replicas it keeps running meanwhile (its count before the move).
    pub held: BTreeMap<String, u32>,
    pub since_ms: u64,
    pub deadline_ms: u64,
}

/// The holds in force, with their deadlines in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handovers {
    pub by_object: BTreeMap<ObjectKey, Handover>,
    pub deadlines: BTreeSet<(u64, ObjectKey)>,
}

impl Handovers {
    pub fn is_empty(&self) -> bool {
        self.by_object.is_empty()
    }
}

impl State {
    /// Replicas `cluster` keeps running for `key` while the object moves away from it, if any.
    pub fn held_on(&self, key: &ObjectKey, cluster: &str) -> Option<u32> {
        let moving = self
            .rollouts
            .handovers
            .by_object
            .get(key)
            .and_then(|h| h.held.get(cluster))
            .copied();
        // Copies an application failover with `purgeMode: Never` left behind (`app_failover`).
        moving.max(self.kept_on(key, cluster))
    }

    /// Whether no object keeps replicas anywhere it is moving away from.
    pub(crate) fn holds_nothing(&self) -> bool {
        self.rollouts.handovers.is_empty() && self.life.kept.is_empty()
    }

    /// The object's hold, for the API.
    pub fn handover(&self, key: &ObjectKey) -> Option<&Handover> {
        self.rollouts.handovers.by_object.get(key)
    }

    /// Objects holding replicas on `cluster` (few: only objects mid-move).
    pub(crate) fn held_keys_on<'a>(
        &'a self,
        cluster: &'a str,
    ) -> impl Iterator<Item = &'a ObjectKey> {
        let moving = self
            .rollouts
            .handovers
            .by_object
            .iter()
            .filter(move |(_, h)| h.held.contains_key(cluster))
            .map(|(k, _)| k);
        let kept = self
            .life
            .kept
            .iter()
            .filter(move |(_, per)| per.contains_key(cluster))
            .map(|(k, _)| k);
        moving.chain(kept)
    }

    /// A decision moved `key` from `before` (cluster -> replicas) to its current placement: the
    /// Ready clusters that lost replicas keep their old count until the move is done.
    pub(crate) fn hold_departing(&mut self, key: &ObjectKey, before: &[(String, u32)], ctx: &Ctx) {
        let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
            return;
        };
        let gained: u64 = obj
            .status
            .clusters
            .iter()
            .map(|p| {
                let was = before
                    .iter()
                    .find(|(c, _)| *c == *p.cluster)
                    .map_or(0, |(_, n)| *n);
                u64::from(p.replicas.saturating_sub(was))
            })
            .sum();
        let mut held: BTreeMap<String, u32> = self
            .rollouts
            .handovers
            .by_object
            .get(key)
            .map(|h| h.held.clone())
            .unwrap_or_default();
        if gained > 0 {
            for (cluster, was) in before {
                let now = obj.replicas_on(cluster);
                let ready = self
                    .d
                    .clusters
                    .get(cluster)
                    .is_some_and(|c| c.status.health == Health::Ready);
                if now < *was && (ready || self.keeps_on_failed_cluster(key, ctx)) {
                    let n = held.entry(cluster.clone()).or_insert(0);
                    *n = (*n).max(*was);
                }
            }
        }
        // A cluster the object is placed on again runs what the placement says.
        held.retain(|c, n| obj.replicas_on(c) < *n);
        let deadline = ctx.now_ms.saturating_add(
            self.rollouts
                .records
                .get(key)
                .map_or(HANDOVER_DEADLINE_MS, |r| {
                    r.strategy.progress_deadline_seconds.saturating_mul(1000)
                }),
        );
        let hs = &mut self.rollouts.handovers;
        if let Some(old) = hs.by_object.remove(key) {
            hs.deadlines.remove(&(old.deadline_ms, key.clone()));
            if !held.is_empty() {
                // A move during a move: the clock of the first one keeps running.
                hs.deadlines.insert((old.deadline_ms, key.clone()));
                hs.by_object.insert(
                    key.clone(),
                    Handover {
                        held,
                        since_ms: old.since_ms,
                        deadline_ms: old.deadline_ms,
                    },
                );
            }
            return;
        }
        if held.is_empty() {
            return;
        }
        hs.deadlines.insert((deadline, key.clone()));
        hs.by_object.insert(
            key.clone(),
            Handover {
                held,
                since_ms: ctx.now_ms,
                deadline_ms: deadline,
            },
        );
    }

    /// Releases the hold of `key` if its new placement is applied and ready everywhere, or
    /// drops the held clusters that are no longer Ready.
    pub(crate) fn handover_check(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        let Some(h) = self.rollouts.handovers.by_object.get(key) else {
            return;
        };
        let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
            self.handover_release(key, ctx);
            return;
        };
        let done = obj
            .status
            .clusters
            .iter()
            .all(|p| p.applied && p.ready_replicas >= p.replicas);
        let lost: Vec<String> = h
            .held
            .keys()
            .filter(|c| {
                self.d
                    .clusters
                    .get(c.as_str())
                    .is_none_or(|c| c.status.health != Health::Ready)
            })
            .cloned()
            .collect();
        // `failover.cluster.purgeMode: Gracefully`: a failed cluster's copy waits like any.
        let lost = if !lost.is_empty() && self.keeps_on_failed_cluster(key, ctx) {
            lost.into_iter()
                .filter(|c| !self.d.clusters.contains_key(c.as_str()))
                .collect()
        } else {
            lost
        };
        if done || lost.len() == h.held.len() {
            self.handover_release(key, ctx);
        } else if !lost.is_empty() {
            if let Some(h) = self.rollouts.handovers.by_object.get_mut(key) {
                for c in &lost {
                    h.held.remove(c);
                }
            }
            self.handover_touch(key, ctx);
        }
    }

    /// Releases every hold whose deadline passed, and re-checks the others on clusters whose
    /// health changed (cheap: holds exist only for objects mid-move).
    pub(crate) fn handovers_advance(&mut self, ctx: &mut Ctx) {
        if self.rollouts.handovers.is_empty() {
            return;
        }
        while let Some((at, key)) = self.rollouts.handovers.deadlines.first().cloned() {
            if at > ctx.now_ms {
                break;
            }
            self.handover_release(&key, ctx);
        }
    }

    /// Checks the holds of the objects of `keys` (after status reports about them).
    pub(crate) fn handovers_reported<'a>(
        &mut self,
        keys: impl IntoIterator<Item = &'a ObjectKey>,
        ctx: &mut Ctx,
    ) {
        if self.rollouts.handovers.is_empty() {
            return;
        }
        let mut seen: Vec<ObjectKey> = keys
            .into_iter()
            .filter(|k| self.rollouts.handovers.by_object.contains_key(*k))
            .cloned()
            .collect();
        seen.sort();
        seen.dedup();
        for k in seen {
            self.handover_check(&k, ctx);
        }
    }

    /// Whether the clusters `key` fails over from keep their copy until the move is done:
    /// its policy's `failover.cluster.purgeMode` is `Gracefully` (from `PEER_WIDENED_SINCE`).
    fn keeps_on_failed_cluster(&self, key: &ObjectKey, ctx: &Ctx) -> bool {
        ctx.version >= crate::karmada::PEER_WIDENED_SINCE
            && self.bound_spec(key).is_some_and(|p| {
                p.lifecycle.failover.cluster == Some(crate::karmada::PurgeMode::Graciously)
            })
    }

    /// A cluster stopped being Ready: holds on it end (nothing there to wait for).
    pub(crate) fn handovers_cluster_down(&mut self, cluster: &str, ctx: &mut Ctx) {
        if self.rollouts.handovers.is_empty() {
            return;
        }
        let keys: Vec<ObjectKey> = self.held_keys_on(cluster).cloned().collect();
        for k in keys {
            self.handover_check(&k, ctx);
        }
    }

    pub(crate) fn handover_release(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        if self.handover_forget(key) {
            self.handover_touch(key, ctx);
        }
    }

    /// Drops the hold of `key` with its deadline; whether there was one.
    pub(crate) fn handover_forget(&mut self, key: &ObjectKey) -> bool {
        let hs = &mut self.rollouts.handovers;
        let Some(h) = hs.by_object.remove(key) else {
            return false;
        };
        hs.deadlines.remove(&(h.deadline_ms, key.clone()));
        true
    }

    fn handover_touch(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        if let Some(obj) = self.d.objects.get_mut(&key.namespace, &key.name) {
            if obj.resource_version != ctx.index {
                obj.resource_version = ctx.index;
                ctx.change(ChangeKind::Object, key.path(), ChangeOp::Modified);
            }
        }
    }
}
