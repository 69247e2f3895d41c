//! The descheduler (`PutObjectWithDescheduling`; `crate::rollout::deschedule`): replicas a
//! member leaves Pending unschedulable are recorded per object and cluster with the log time
//! they were first seen, and, for a Divided object whose policy says `pendingSeconds: N`, once
//! they have been stuck N seconds the cluster's share shrinks by the stuck count (never below
//! its ready replicas) and the scheduler places the rest elsewhere. The re-placement is an
//! ordinary decision, so it is make-before-break like any move (`handover`).
//!
//! Propose: the API checks the policy (`Descheduling::validate`) and the object as for a put.
//! Apply: the policy is checked again, the put runs as `PutObjectWithFailBack`,
//! `PutObjectWithRollout` or `PutObject` (by what else it carries), and only an accepted put
//! keeps the policy; a plain put keeps the policy the object has. The caller gets the put's
//! resource version.
//!
//! When: a `WorkloadReports` entry of version 11 or later records the count its observation
//! carries ([`DESCHEDULE_SINCE`]; older entries replay as they did) and, for a Divided object
//! with a policy, sets a timer at since + N. The timer re-checks at fire time that the replicas
//! are still stuck there and have been for N seconds, so timers are only hints. A fired cluster
//! is then held to what it could run (an estimate) until its reported capacity grows or
//! `ESTIMATE_KEPT_MS` passes, so the scheduler does not offer it the same replicas again:
//! without the hold, the next report of free capacity would move them back and round again.
//!
//! Must not: read clocks (log time only), move a Duplicated object's replicas (it is only
//! reported: every cluster runs them all), re-place more than `DESCHEDULES_PER_ENTRY` objects
//! in one entry, or keep anything for an object that is gone.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::command::DESCHEDULE_SINCE;
use crate::model::{ObjectKey, ObjectSpec};
use crate::policy::Resources;
use crate::rollout::deschedule::{held_share, Descheduling, ESTIMATE_KEPT_MS};
use crate::rollout::failback::FailBack;
use crate::rollout::RolloutStrategy;
use crate::state::{Ctx, HandlerResult, State};

/// Most timers fired in one entry: each may be one scheduler decision, and descheduling is
/// never urgent (it waited N seconds already), so the fail-back budget is ample.
pub const DESCHEDULES_PER_ENTRY: usize = 64;

/// Replicas of an object Pending unschedulable on one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stuck {
    pub replicas: u32,
    /// Log time they were first reported stuck (a changed count keeps it).
    pub since_ms: u64,
}

/// What a cluster is held to for one object after the descheduler shrank its share there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    /// The most replicas of the object the scheduler gives the cluster.
    pub replicas: u32,
    pub since_ms: u64,
    /// Log time the hold ends, unless the cluster's capacity grows first.
    pub until_ms: u64,
    /// The cluster's reported available capacity when the hold began (None: never reported,
    /// then only time ends the hold).
    pub available: Option<Resources>,
}

/// One cluster's share shrunk by a descheduling, for `explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shrunk {
    pub cluster: String,
    pub from: u32,
    pub to: u32,
    pub stuck: u32,
    pub stuck_since_ms: u64,
}

/// The last descheduling of an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescheduleFired {
    /// The entry that re-placed the object.
    pub index: u64,
    pub clusters: Vec<Shrunk>,
    pub pending_seconds: u64,
}

/// The descheduler's tables (replicated; encoded after the owners' book).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deschedules {
    /// Objects whose policy is on.
    pub policies: BTreeMap<ObjectKey, Descheduling>,
    /// Per object and placed cluster, replicas Pending unschedulable (any object, any mode).
    pub stuck: BTreeMap<ObjectKey, BTreeMap<String, Stuck>>,
    /// (log time, object, cluster): when stuck replicas may be re-placed.
    pub due: BTreeSet<(u64, ObjectKey, String)>,
    /// Per object, the clusters held to an estimate.
    pub held: BTreeMap<ObjectKey, BTreeMap<String, Estimate>>,
    /// (log time, object, cluster): when a hold ends.
    pub expiries: BTreeSet<(u64, ObjectKey, String)>,
    /// Per object, its last descheduling.
    pub last: BTreeMap<ObjectKey, DescheduleFired>,
}

impl Deschedules {
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
            && self.stuck.is_empty()
            && self.due.is_empty()
            && self.held.is_empty()
            && self.expiries.is_empty()
            && self.last.is_empty()
    }
}

/// Whether `now` has more of any resource than `then`: a node added, a foreign pod gone.
fn grew(then: Option<Resources>, now: Option<Resources>) -> bool {
    match (then, now) {
        (Some(t), Some(n)) => {
            n.cpu_millis > t.cpu_millis || n.memory_bytes > t.memory_bytes || n.pods > t.pods
        }
        (None, Some(_)) => true,
        _ => false,
    }
}

impl State {
    /// The object's descheduling policy (off unless it was put with one).
    pub fn descheduling(&self, key: &ObjectKey) -> Descheduling {
        self.deschedules
            .policies
            .get(key)
            .copied()
            .unwrap_or_default()
    }

    /// Per placed cluster, the object's replicas Pending unschedulable and since when.
    pub fn stuck(&self, key: &ObjectKey) -> Option<&BTreeMap<String, Stuck>> {
        self.deschedules.stuck.get(key)
    }

    /// The clusters the object is held to an estimate on.
    pub fn held(&self, key: &ObjectKey) -> Option<&BTreeMap<String, Estimate>> {
        self.deschedules.held.get(key)
    }

    /// The object's last descheduling, if any.
    pub fn deschedule_last(&self, key: &ObjectKey) -> Option<&DescheduleFired> {
        self.deschedules.last.get(key)
    }

    /// Log time stuck replicas on `cluster` move, for an object whose policy is on and that
    /// divides its replicas.
    pub fn deschedule_due(&self, key: &ObjectKey, cluster: &str) -> Option<u64> {
        let wait = self.descheduling(key).pending_ms()?;
        let obj = self.object(&key.namespace, &key.name)?;
        if !obj.spec.placement.replicas.mode.divides() {
            return None;
        }
        let s = self.stuck(key)?.get(cluster)?;
        Some(s.since_ms.saturating_add(wait))
    }

    /// The most replicas of `key` the scheduler may give `cluster` (with `available` its
    /// reported free capacity): the estimate while it holds.
    pub(crate) fn held_to(
        &self,
        key: &ObjectKey,
        cluster: &str,
        available: Option<Resources>,
        now_ms: u64,
    ) -> Option<u64> {
        if self.deschedules.held.is_empty() {
            return None;
        }
        let e = self.deschedules.held.get(key)?.get(cluster)?;
        (now_ms < e.until_ms && !grew(e.available, available)).then_some(u64::from(e.replicas))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_put_object_with_descheduling(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        rollout: Option<&RolloutStrategy>,
        failback: Option<FailBack>,
        descheduling: Descheduling,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        descheduling.validate("descheduling")?;
        let key = ObjectKey::new(namespace, name);
        let before = self.deschedules.clone_for(&key);
        self.deschedule_set(&key, descheduling);
        let put = match failback {
            Some(f) => {
                self.on_put_object_with_failback(namespace, name, spec, rollout, f, expected, ctx)
            }
            None => match rollout {
                Some(r) => self.on_put_object_with_rollout(namespace, name, spec, r, expected, ctx),
                None => self.on_put_object(namespace, name, spec, expected, ctx),
            },
        };
        if put.is_err() {
            self.deschedules.restore_for(&key, before);
        } else {
            // The put may have changed the replica mode: timers follow what it is now.
            self.deschedule_rearm(&key);
        }
        put
    }

    /// Sets the policy of `key`. Off forgets the timers and holds: nothing moves any more, and
    /// the scheduler is no longer told to spare a cluster.
    fn deschedule_set(&mut self, key: &ObjectKey, d: Descheduling) {
        let t = &mut self.deschedules;
        if d.is_off() {
            t.policies.remove(key);
            t.due.retain(|(_, k, _)| k != key);
            t.held.remove(key);
            t.expiries.retain(|(_, k, _)| k != key);
        } else {
            t.policies.insert(key.clone(), d);
        }
    }

    /// One timer per stuck cluster of `key`, at since + wait (none unless the policy is on and
    /// the object divides its replicas).
    fn deschedule_rearm(&mut self, key: &ObjectKey) {
        self.deschedules.due.retain(|(_, k, _)| k != key);
        let Some(stuck) = self.deschedules.stuck.get(key) else {
            return;
        };
        let at: Vec<(u64, ObjectKey, String)> = stuck
            .keys()
            .filter_map(|c| Some((self.deschedule_due(key, c)?, key.clone(), c.clone())))
            .collect();
        self.deschedules.due.extend(at);
    }

    /// An executor's report of `key` on `cluster` says `n` replicas are Pending unschedulable.
    pub(crate) fn deschedule_observed(
        &mut self,
        key: &ObjectKey,
        cluster: &str,
        n: u32,
        ctx: &Ctx,
    ) {
        debug_assert!(ctx.version >= DESCHEDULE_SINCE);
        if n == 0 {
            if let Some(per) = self.deschedules.stuck.get_mut(key) {
                per.remove(cluster);
                if per.is_empty() {
                    self.deschedules.stuck.remove(key);
                }
            }
            return;
        }
        let per = self.deschedules.stuck.entry(key.clone()).or_default();
        if let Some(s) = per.get_mut(cluster) {
            s.replicas = n;
            return;
        }
        per.insert(
            cluster.to_string(),
            Stuck {
                replicas: n,
                since_ms: ctx.now_ms,
            },
        );
        if let Some(at) = self.deschedule_due(key, cluster) {
            self.deschedules
                .due
                .insert((at, key.clone(), cluster.to_string()));
        }
    }

    /// The object's placement changed: clusters it left have no stuck replicas of it any more
    /// (their holds stay: they are what keeps the replicas from coming back).
    pub(crate) fn deschedule_placement_changed(&mut self, key: &ObjectKey) {
        let Some(per) = self.deschedules.stuck.get_mut(key) else {
            return;
        };
        let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
            return;
        };
        per.retain(|c, _| obj.replicas_on(c) > 0);
        if per.is_empty() {
            self.deschedules.stuck.remove(key);
        }
    }

    /// Fires due timers (at most `DESCHEDULES_PER_ENTRY`) and ends holds whose time is up.
    pub(crate) fn deschedules_advance(&mut self, ctx: &mut Ctx) {
        if self.deschedules.is_empty() {
            return;
        }
        while let Some((at, key, cluster)) = self.deschedules.expiries.first().cloned() {
            if at > ctx.now_ms {
                break;
            }
            self.deschedules
                .expiries
                .remove(&(at, key.clone(), cluster.clone()));
            if let Some(per) = self.deschedules.held.get_mut(&key) {
                if per.get(&cluster).is_some_and(|e| e.until_ms <= ctx.now_ms) {
                    per.remove(&cluster);
                }
                if per.is_empty() {
                    self.deschedules.held.remove(&key);
                }
            }
        }
        for _ in 0..DESCHEDULES_PER_ENTRY {
            let Some((at, key, cluster)) = self.deschedules.due.first().cloned() else {
                return;
            };
            if at > ctx.now_ms {
                return;
            }
            self.deschedules
                .due
                .remove(&(at, key.clone(), cluster.clone()));
            self.deschedule_fire(&key, &cluster, ctx);
        }
    }

    /// Shrinks `cluster`'s share of `key` by its stuck replicas if they are still stuck and
    /// have been for the policy's wait, holds the cluster to that, and re-places the object.
    fn deschedule_fire(&mut self, key: &ObjectKey, cluster: &str, ctx: &mut Ctx) {
        let Some(due) = self.deschedule_due(key, cluster) else {
            return;
        };
        if due > ctx.now_ms {
            return; // a later timer exists for a later since
        }
        let Some(obj) = self.object(&key.namespace, &key.name) else {
            return;
        };
        let share = obj.replicas_on(cluster);
        let Some(stuck) = self.stuck(key).and_then(|m| m.get(cluster)).copied() else {
            return;
        };
        let ready = self
            .workload_status(&key.namespace, &key.name)
            .and_then(|m| m.get(cluster))
            .map_or(0, |s| s.observed.ready);
        let to = held_share(share, ready, stuck.replicas);
        if to >= share {
            return;
        }
        let available = self
            .d
            .clusters
            .get(cluster)
            .and_then(|c| c.status.capacity)
            .map(|c| c.available);
        let until_ms = ctx.now_ms.saturating_add(ESTIMATE_KEPT_MS);
        let t = &mut self.deschedules;
        t.held.entry(key.clone()).or_default().insert(
            cluster.to_string(),
            Estimate {
                replicas: to,
                since_ms: ctx.now_ms,
                until_ms,
                available,
            },
        );
        t.expiries
            .insert((until_ms, key.clone(), cluster.to_string()));
        // A new report of stuck replicas starts a new wait.
        if let Some(per) = t.stuck.get_mut(key) {
            per.remove(cluster);
            if per.is_empty() {
                t.stuck.remove(key);
            }
        }
        let shrunk = Shrunk {
            cluster: cluster.to_string(),
            from: share,
            to,
            stuck: stuck.replicas,
            stuck_since_ms: stuck.since_ms,
        };
        let pending_seconds = due.saturating_sub(stuck.since_ms) / 1000;
        // Several clusters of one object may fire in the same entry: one record tells them all.
        match t.last.get_mut(key).filter(|f| f.index == ctx.index) {
            Some(f) => f.clusters.push(shrunk),
            None => {
                t.last.insert(
                    key.clone(),
                    DescheduleFired {
                        index: ctx.index,
                        clusters: vec![shrunk],
                        pending_seconds,
                    },
                );
            }
        }
        self.reschedule(key, false, ctx);
    }

    /// The object is gone: so is what the descheduler kept of it.
    pub(crate) fn deschedule_forget(&mut self, key: &ObjectKey) {
        self.deschedules.restore_for(key, Default::default());
    }
}

/// Everything the tables hold for one object, to put back after a refused put.
#[derive(Default)]
pub(crate) struct ObjectPart {
    policy: Option<Descheduling>,
    stuck: Option<BTreeMap<String, Stuck>>,
    due: Vec<(u64, ObjectKey, String)>,
    held: Option<BTreeMap<String, Estimate>>,
    expiries: Vec<(u64, ObjectKey, String)>,
    last: Option<DescheduleFired>,
}

impl Deschedules {
    fn clone_for(&self, key: &ObjectKey) -> ObjectPart {
        let of = |s: &BTreeSet<(u64, ObjectKey, String)>| {
            s.iter().filter(|(_, k, _)| k == key).cloned().collect()
        };
        ObjectPart {
            policy: self.policies.get(key).copied(),
            stuck: self.stuck.get(key).cloned(),
            due: of(&self.due),
            held: self.held.get(key).cloned(),
            expiries: of(&self.expiries),
            last: self.last.get(key).cloned(),
        }
    }

    fn restore_for(&mut self, key: &ObjectKey, part: ObjectPart) {
        fn put<V>(m: &mut BTreeMap<ObjectKey, V>, key: &ObjectKey, v: Option<V>) {
            match v {
                Some(v) => {
                    m.insert(key.clone(), v);
                }
                None => {
                    m.remove(key);
                }
            }
        }
        put(&mut self.policies, key, part.policy);
        put(&mut self.stuck, key, part.stuck);
        put(&mut self.held, key, part.held);
        put(&mut self.last, key, part.last);
        self.due.retain(|(_, k, _)| k != key);
        self.due.extend(part.due);
        self.expiries.retain(|(_, k, _)| k != key);
        self.expiries.extend(part.expiries);
    }
}
