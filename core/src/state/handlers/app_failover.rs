//! Application failover (Karmada's `failover.application` on the bound PropagationPolicy),
//! from log entry version `PEER_WIDENED_SINCE`: a workload whose verdict on a cluster has been
//! unhealthy (Degraded, or Progressing for anything but a running Job: `crate::rollout::verdict`)
//! for `tolerationSeconds` of log time is moved away from that cluster.
//!
//! When: a workload report that finds the object unhealthy on a cluster sets a timer at the
//! verdict's since plus the toleration; at fire time the timer checks again that the verdict is
//! still unhealthy and has been for the toleration (a recovery or a new verdict moved its
//! since), so timers are only hints. Firing evicts: the cluster carries a NoExecute taint of
//! its own ([`EVICTION_TAINT_KEY`]) for this object only, for [`EVICTION_KEPT_MS`], and the
//! object is re-placed. If the decision would place no replica anywhere else, nothing is
//! evicted (Karmada, too, moves an application only to somewhere).
//!
//! What the cluster it leaves keeps (`purgeMode`): `Immediately`, nothing; `Graciously`, its
//! copy until the new placement is ready or `gracePeriodSeconds` pass (the make-before-break
//! hold of `handover.rs`, with that deadline); `Never`, its copy until the template is changed
//! or deleted.
//!
//! Must not: read clocks (log time only), fire more than `APP_FAILOVERS_PER_ENTRY` timers in
//! one entry, or keep anything for an object that is gone.

use crate::karmada::{PurgeMode, PEER_WIDENED_SINCE};
use crate::model::ObjectKey;
use crate::policy::{Taint, TaintEffect};
use crate::rollout::{Verdict, WorkloadStatus};
use crate::state::{Ctx, State};

/// Most timers fired in one entry: each may be one scheduler decision.
pub const APP_FAILOVERS_PER_ENTRY: usize = 64;
/// How long an eviction keeps the object off the cluster it was moved away from.
pub const EVICTION_KEPT_MS: u64 = 3_600_000;
/// The key of the taint an evicted cluster carries for the object it was moved away from.
pub const EVICTION_TAINT_KEY: &str = "fedraft.io/application-failover";

/// Karmada's notion: not healthy, and not merely unknown. A Job still running is progressing,
/// not failing.
fn unhealthy(s: &WorkloadStatus) -> bool {
    match s.verdict {
        Verdict::Degraded => true,
        Verdict::Progressing => s.observed.kind != "Job",
        Verdict::Healthy | Verdict::Unknown => false,
    }
}

/// The taint an evicted cluster carries for the evicted object.
pub(crate) fn eviction_taint() -> Taint {
    Taint {
        key: EVICTION_TAINT_KEY.to_string(),
        value: String::new(),
        effect: TaintEffect::NoExecute,
    }
}

impl State {
    /// Whether application failover keeps `key` off `cluster` at `now_ms`.
    pub(crate) fn app_evicted(&self, key: &ObjectKey, cluster: &str, now_ms: u64) -> bool {
        if self.life.evicted.is_empty() {
            return false;
        }
        self.life
            .evicted
            .get(key)
            .and_then(|m| m.get(cluster))
            .is_some_and(|until| *until > now_ms)
    }

    /// Replicas kept on `cluster` for `key` after a failover with `purgeMode: Never`.
    pub(crate) fn kept_on(&self, key: &ObjectKey, cluster: &str) -> Option<u32> {
        if self.life.kept.is_empty() {
            return None;
        }
        self.life.kept.get(key)?.get(cluster).copied()
    }

    /// A workload report of `key` on `cluster` was recorded: if its verdict is unhealthy and
    /// its policy fails applications over, a timer at since + toleration.
    pub(super) fn app_failover_observed(&mut self, key: &ObjectKey, cluster: &str, ctx: &Ctx) {
        debug_assert!(ctx.version >= PEER_WIDENED_SINCE);
        let Some(since) = self
            .rollouts
            .workloads
            .get(key)
            .and_then(|m| m.get(cluster))
            .filter(|s| unhealthy(s))
            .map(|s| s.verdict_since_ms)
        else {
            return;
        };
        let Some(app) = self
            .bound_spec(key)
            .and_then(|p| p.lifecycle.failover.application)
        else {
            return;
        };
        let at = since.saturating_add(app.toleration_seconds.saturating_mul(1000));
        self.life
            .unhealthy_due
            .insert((at, key.clone(), cluster.to_string()));
    }

    /// Ends evictions whose time is up and fires due timers (at most
    /// `APP_FAILOVERS_PER_ENTRY`).
    pub(crate) fn app_failovers_advance(&mut self, ctx: &mut Ctx) {
        if ctx.version < PEER_WIDENED_SINCE {
            return;
        }
        if !self.life.evicted.is_empty() {
            let now = ctx.now_ms;
            self.life.evicted.retain(|_, per| {
                per.retain(|_, until| *until > now);
                !per.is_empty()
            });
        }
        for _ in 0..APP_FAILOVERS_PER_ENTRY {
            let Some((at, key, cluster)) = self.life.unhealthy_due.first().cloned() else {
                return;
            };
            if at > ctx.now_ms {
                return;
            }
            self.life
                .unhealthy_due
                .remove(&(at, key.clone(), cluster.clone()));
            self.app_failover_fire(&key, &cluster, ctx);
        }
    }

    fn app_failover_fire(&mut self, key: &ObjectKey, cluster: &str, ctx: &mut Ctx) {
        let Some(app) = self
            .bound_spec(key)
            .and_then(|p| p.lifecycle.failover.application)
        else {
            return;
        };
        let Some(status) = self
            .rollouts
            .workloads
            .get(key)
            .and_then(|m| m.get(cluster))
        else {
            return;
        };
        let due = status
            .verdict_since_ms
            .saturating_add(app.toleration_seconds.saturating_mul(1000));
        if !unhealthy(status) || due > ctx.now_ms {
            return;
        }
        let Some(obj) = self.object(&key.namespace, &key.name) else {
            return;
        };
        let was = obj.replicas_on(cluster);
        if was == 0 || self.app_evicted(key, cluster, ctx.now_ms) {
            return;
        }
        self.life.evicted.entry(key.clone()).or_default().insert(
            cluster.to_string(),
            ctx.now_ms.saturating_add(EVICTION_KEPT_MS),
        );
        // Only a move to somewhere: a dry run first, with the eviction in force.
        let gained: u64 = match self.object(&key.namespace, &key.name) {
            Some(obj) => self
                .decide(obj, false, ctx.at())
                .placement
                .iter()
                .filter(|(c, _)| c.as_str() != cluster)
                .map(|(c, n)| u64::from(n.saturating_sub(obj.replicas_on(c))))
                .sum(),
            None => 0,
        };
        if gained == 0 {
            if let Some(per) = self.life.evicted.get_mut(key) {
                per.remove(cluster);
                if per.is_empty() {
                    self.life.evicted.remove(key);
                }
            }
            return;
        }
        self.reschedule(key, false, ctx);
        let hs = &mut self.rollouts.handovers;
        match app.purge {
            PurgeMode::Graciously => {
                // The policy's grace period bounds the hold the move made.
                if let Some(h) = hs.by_object.get_mut(key) {
                    hs.deadlines.remove(&(h.deadline_ms, key.clone()));
                    h.deadline_ms = ctx
                        .now_ms
                        .saturating_add(app.grace_period_seconds.saturating_mul(1000));
                    hs.deadlines.insert((h.deadline_ms, key.clone()));
                }
            }
            PurgeMode::Immediately | PurgeMode::Never => {
                let emptied = hs.by_object.get_mut(key).is_some_and(|h| {
                    h.held.remove(cluster);
                    h.held.is_empty()
                });
                if emptied {
                    self.handover_forget(key);
                }
                if app.purge == PurgeMode::Never {
                    self.life
                        .kept
                        .entry(key.clone())
                        .or_default()
                        .insert(cluster.to_string(), was);
                }
                self.touch_object(key, ctx);
            }
        }
    }

    /// The template of `key` changed: copies kept with `purgeMode: Never` are let go.
    pub(super) fn app_failover_template_changed(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        if self.life.kept.remove(key).is_some() {
            self.touch_object(key, ctx);
        }
    }
}
