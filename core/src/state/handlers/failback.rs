//! Fail-back (`PutObjectWithFailBack`; `crate::rollout::failback`): an object whose policy says
//! `afterRecoveryHeld: N` remembers the clusters its replicas failed over from, and once such a
//! cluster has been Ready for N seconds of log time the object is re-placed from scratch. The
//! re-placement is an ordinary decision, so the clusters that lose replicas keep them until the
//! new placement is ready (`handover`): fail-back is make-before-break like any move.
//!
//! Propose: the API checks the choice (`FailBack::validate`) and the object body as for a put.
//! Apply: the choice is checked again, the put runs as `PutObject` (or `PutObjectWithRollout`
//! when the body carries a strategy), and only a put that is accepted keeps the choice; a plain
//! put keeps the choice the object has, as it keeps its rollout strategy. The caller gets the
//! put's resource version.
//!
//! When: a decision that takes replicas away from a cluster that is not Ready records that
//! cluster (`failback_note`); a cluster that becomes usable sets a timer per object that failed
//! over from it, at its Ready-since time plus N (`failback_cluster_gained`); the timer re-checks
//! at fire time that the cluster is still Ready and has been for N seconds (a flap moved its
//! Ready-since, and the later transition has set a later timer), so timers are only hints.
//!
//! Must not: read clocks (log time only), fail back more than `FAILBACKS_PER_ENTRY` objects in
//! one entry (the rest wait for the next entry), or keep anything for an object that is gone.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::{Health, ObjectKey, ObjectSpec};
use crate::rollout::failback::FailBack;
use crate::rollout::RolloutStrategy;
use crate::state::{Ctx, HandlerResult, State};

/// Most objects failed back in one entry: each is one scheduler decision (see
/// `placement::RESCHEDULE_OBJECTS_PER_ENTRY` for the cost of one), and fail-back is never
/// urgent, so a small share of the reschedule budget keeps an entry's cost bounded.
pub const FAILBACKS_PER_ENTRY: usize = 64;

/// The last fail-back of an object, for `explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailBackFired {
    /// The entry that re-placed the object.
    pub index: u64,
    /// Clusters it failed back to, with the log time each has been Ready since.
    pub clusters: Vec<(String, u64)>,
    /// The policy's hold, in seconds.
    pub held_seconds: u64,
}

/// A cluster an object failed over from, as it stands now (`rollout status`, the API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailBackPending {
    pub cluster: String,
    /// Log time the cluster has been Ready since; None while it is not Ready (or is gone).
    pub ready_since_ms: Option<u64>,
    /// Log time the object fails back to it if it stays Ready; None while it is not Ready.
    pub due_at_ms: Option<u64>,
}

/// The fail-back tables (replicated; encoded after the extended-resource tables).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailBacks {
    /// Objects whose choice is not `Never`.
    pub policies: BTreeMap<ObjectKey, FailBack>,
    /// Per object, the clusters its replicas failed over from and may return to.
    pub away: BTreeMap<ObjectKey, BTreeSet<String>>,
    /// (log time, object): when an object may fail back to a recovered cluster.
    pub due: BTreeSet<(u64, ObjectKey)>,
    /// Per object, its last fail-back.
    pub last: BTreeMap<ObjectKey, FailBackFired>,
}

impl FailBacks {
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
            && self.away.is_empty()
            && self.due.is_empty()
            && self.last.is_empty()
    }
}

impl State {
    /// The object's fail-back choice (`Never` unless it was put with another).
    pub fn failback(&self, key: &ObjectKey) -> FailBack {
        self.failbacks
            .policies
            .get(key)
            .copied()
            .unwrap_or_default()
    }

    /// Clusters the object failed over from and may fail back to.
    pub fn failback_away(&self, key: &ObjectKey) -> Option<&BTreeSet<String>> {
        self.failbacks.away.get(key)
    }

    /// The clusters the object may fail back to, each with when it would (None for an object
    /// whose choice is `Never`: it remembers nothing). The due time is the one the timer was
    /// set to (`failback_cluster_gained`), and the timer re-checks the same two facts.
    pub fn failback_pending(&self, key: &ObjectKey) -> Vec<FailBackPending> {
        let Some(held) = self.failback(key).held_ms() else {
            return Vec::new();
        };
        self.failback_away(key)
            .into_iter()
            .flatten()
            .map(|name| {
                let since = self
                    .d
                    .clusters
                    .get(name)
                    .filter(|c| c.status.health == Health::Ready)
                    .map(|c| c.status.health_since_ms);
                FailBackPending {
                    cluster: name.clone(),
                    ready_since_ms: since,
                    due_at_ms: since.map(|s| s.saturating_add(held)),
                }
            })
            .collect()
    }

    /// The object's last fail-back, if any.
    pub fn failback_last(&self, key: &ObjectKey) -> Option<&FailBackFired> {
        self.failbacks.last.get(key)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_put_object_with_failback(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        rollout: Option<&RolloutStrategy>,
        failback: FailBack,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        failback.validate("failBack")?;
        let key = ObjectKey::new(namespace, name);
        // The put's own decision must see the new choice; on a refusal the old one comes back.
        let old = self.failback_set(&key, failback);
        let put = match rollout {
            Some(r) => self.on_put_object_with_rollout(namespace, name, spec, r, expected, ctx),
            None => self.on_put_object(namespace, name, spec, expected, ctx),
        };
        if put.is_err() {
            self.failback_set(&key, old);
        }
        put
    }

    /// Sets the choice of `key`, returning the one it had. `Never` forgets what the object
    /// remembered: it will not fail back.
    fn failback_set(&mut self, key: &ObjectKey, failback: FailBack) -> FailBack {
        let fb = &mut self.failbacks;
        let old = match failback {
            FailBack::Never => fb.policies.remove(key),
            other => fb.policies.insert(key.clone(), other),
        };
        if failback == FailBack::Never {
            fb.away.remove(key);
            fb.due.retain(|(_, k)| k != key);
        }
        old.unwrap_or_default()
    }

    /// A decision moved `key` away from `before` (cluster -> replicas): clusters that lost
    /// replicas while not Ready are where it may fail back to.
    pub(crate) fn failback_note(&mut self, key: &ObjectKey, before: &[(String, u32)]) {
        if !self.failbacks.policies.contains_key(key) {
            return;
        }
        let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
            return;
        };
        let lost: Vec<String> = before
            .iter()
            .filter(|(c, was)| {
                obj.replicas_on(c) < *was
                    && self
                        .d
                        .clusters
                        .get(c)
                        .is_some_and(|c| c.status.health != Health::Ready)
            })
            .map(|(c, _)| c.clone())
            .collect();
        if !lost.is_empty() {
            self.failbacks
                .away
                .entry(key.clone())
                .or_default()
                .extend(lost);
        }
    }

    /// `cluster` became usable (Ready again, uncordoned, updated): each object that failed
    /// over from it may fail back once it has been Ready for the object's hold.
    pub(crate) fn failback_cluster_gained(&mut self, cluster: &str) {
        if self.failbacks.away.is_empty() {
            return;
        }
        let Some(c) = self.d.clusters.get(cluster) else {
            return;
        };
        if c.status.health != Health::Ready {
            return;
        }
        let since = c.status.health_since_ms;
        let fb = &mut self.failbacks;
        for (key, clusters) in &fb.away {
            if !clusters.contains(cluster) {
                continue;
            }
            if let Some(held) = fb.policies.get(key).and_then(FailBack::held_ms) {
                fb.due.insert((since.saturating_add(held), key.clone()));
            }
        }
    }

    /// Fails back the objects whose timers are due (at most `FAILBACKS_PER_ENTRY`).
    pub(crate) fn failbacks_advance(&mut self, ctx: &mut Ctx) {
        for _ in 0..FAILBACKS_PER_ENTRY {
            let Some((at, key)) = self.failbacks.due.first().cloned() else {
                return;
            };
            if at > ctx.now_ms {
                return;
            }
            self.failbacks.due.remove(&(at, key.clone()));
            self.failback_fire(&key, ctx);
        }
    }

    fn failback_fire(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        let Some(held_ms) = self.failbacks.policies.get(key).and_then(FailBack::held_ms) else {
            return;
        };
        let Some(away) = self.failbacks.away.get(key) else {
            return;
        };
        let now = ctx.now_ms;
        let mut back = Vec::new();
        let mut gone = Vec::new();
        for name in away {
            match self.d.clusters.get(name) {
                None => gone.push(name.clone()),
                Some(c)
                    if c.status.health == Health::Ready
                        && now.saturating_sub(c.status.health_since_ms) >= held_ms =>
                {
                    back.push((name.clone(), c.status.health_since_ms));
                }
                Some(_) => {}
            }
        }
        if back.is_empty() && gone.is_empty() {
            return;
        }
        if let Some(away) = self.failbacks.away.get_mut(key) {
            for n in gone.iter().chain(back.iter().map(|(n, _)| n)) {
                away.remove(n);
            }
            if away.is_empty() {
                self.failbacks.away.remove(key);
            }
        }
        if back.is_empty() || self.object(&key.namespace, &key.name).is_none() {
            return;
        }
        self.failbacks.last.insert(
            key.clone(),
            FailBackFired {
                index: ctx.index,
                clusters: back,
                held_seconds: held_ms / 1000,
            },
        );
        self.reschedule(key, true, ctx);
    }

    /// The object is gone: so is what it remembered.
    pub(crate) fn failback_forget(&mut self, key: &ObjectKey) {
        self.failback_set(key, FailBack::Never);
        self.failbacks.last.remove(key);
    }
}
