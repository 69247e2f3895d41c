//! Log time and cluster health: heartbeats, unreachable hints, and deadline expiry.
//!
//! Health follows heartbeats in log time, with hysteresis:
//! - registered -> Unknown; the first heartbeat -> Ready;
//! - Ready with no heartbeat for more than `failureThresholdSeconds` -> NotReady, dated at the
//!   deadline (not at the entry that noticed it, so replay and live agree);
//! - NotReady -> Ready only after an uninterrupted run of heartbeats (no gap longer than the
//!   failure threshold) lasting `successThresholdSeconds`;
//! - `ClusterUnreachable` is a hint only: it does not shortcut the failure threshold (a probe
//!   can fail for reasons on the prober's side), it only breaks a recovery run;
//! - from envelope version 6, a passed deadline is first weighed against the other vantage
//!   points (`crate::health`): a broken link between the owner and a cluster that others reach
//!   stays Ready (re-examined at every entry), and a change between Ready and NotReady
//!   recounts the failover brake (`vantage.rs`);
//! - from envelope version 15, a gap of more than `LOG_STALL_MS` between two entries is a
//!   stalled log, recorded in the health book: silence counts from the entry that ended it
//!   (`crate::health`), so no cluster turns NotReady for heartbeats that could not commit.
//!
//! Cost: a heartbeat that changes no health is one cluster lookup and a few stores: the health
//! alarm is not moved (see `Index::alarms`); an alarm that rings early is re-armed at the real
//! deadline. A tick pops only alarms that rang, so it is O(expired).
//! Heartbeats update capacity and last-seen silently (no resource version bump, no watch
//! event): those change every few seconds and nothing user-visible depends on them.

use super::validate;
use crate::command::{Heartbeat, LOG_STALL_SINCE};
use crate::health::LogStall;
use crate::model::{Capacity, Health};
use crate::state::store::index::health_deadline;
use crate::state::{check_batch_len, ChangeKind, ChangeOp, Ctx, HandlerResult, Rejection, State};

/// How a heartbeat moved a cluster's health.
enum Transition {
    None,
    BecameReady,
}

impl State {
    /// Advances log time to `ctx.now_ms` and processes what expired: health deadlines first
    /// (they may start failover timers), then failover timers.
    pub(crate) fn advance_time(&mut self, ctx: &mut Ctx) {
        debug_assert!(
            ctx.now_ms >= self.d.log_time_ms,
            "log time must not go backwards"
        );
        let prev_ms = std::mem::replace(&mut self.d.log_time_ms, ctx.now_ms);
        if ctx.version >= LOG_STALL_SINCE {
            if let Some(stall) = LogStall::between(prev_ms, ctx.now_ms) {
                // Alarms due meanwhile ring below, find the later deadline and re-arm there.
                self.health.stall = Some(stall);
            }
        }
        let from = self.health.judged_from_ms();
        // Owners first: a cluster whose owner's lease just ran out is weighed below with its
        // new owner (who has no view yet), not with the one that is gone.
        self.owners_advance(ctx);
        let mut expired = Vec::new();
        while let Some((at, _)) = self.ix.alarms.first() {
            // A gap of exactly the threshold is still fine; only a longer one breaks the run.
            if *at >= ctx.now_ms {
                break;
            }
            let Some((_, name)) = self.ix.alarms.pop_first() else {
                break;
            };
            self.ix.armed.remove(&name);
            let deadline = self
                .d
                .clusters
                .get(&name)
                .and_then(|c| health_deadline(c, from));
            match deadline {
                // Heartbeats arrived since the alarm was set: ring again at the real deadline.
                Some(d) if d >= ctx.now_ms => self.ix.rearm(&name, Some(d)),
                Some(d) => expired.push((d, name)),
                None => {}
            }
        }
        // Alarms may ring early, so their order is not the deadlines' order: sort, so that a
        // restored node (exact alarms) expires clusters in the same order as this one.
        expired.sort();
        let mut lost = false;
        for (d, name) in expired {
            lost |= self.expire(&name, d, ctx);
        }
        if lost {
            self.review_brake(ctx);
        }
        self.fire_failover_timers(ctx);
        self.rollouts_advance(ctx);
        self.handovers_advance(ctx);
        self.failbacks_advance(ctx);
        self.deschedules_advance(ctx);
        self.app_failovers_advance(ctx);
    }

    /// The owner's deadline for `name` passed. Returns whether it turned NotReady.
    fn expire(&mut self, name: &str, deadline: u64, ctx: &mut Ctx) -> bool {
        let ready = self
            .d
            .clusters
            .get(name)
            .is_some_and(|c| c.status.health == Health::Ready);
        // A cluster held on a broken link is NotReady from when that stops being the story.
        let since = match self.health.links.contains_key(name) {
            true => ctx.now_ms,
            false => deadline,
        };
        if ready && self.hold_as_link(name, deadline, ctx) {
            // A broken link: the alarm stays at the deadline, so the next entry looks again
            // (another vantage may fail meanwhile, or the owner's report go stale).
            self.ix.rearm(name, Some(deadline));
            return false;
        }
        let Some(c) = self.d.clusters.get_mut(name) else {
            return false;
        };
        match c.status.health {
            Health::Ready => {
                c.status.health = Health::NotReady;
                c.status.health_since_ms = since;
                c.status.recovering_since_ms = None;
                if c.resource_version != ctx.index {
                    ctx.change(ChangeKind::Cluster, name, ChangeOp::Modified);
                }
                c.resource_version = ctx.index;
                self.cluster_unhealthy(name, ctx);
                self.handovers_cluster_down(name, ctx);
                self.taint_conditions_changed(name, ctx);
                true
            }
            // A recovery run broken by silence starts again at the next heartbeat.
            Health::NotReady | Health::Unknown => {
                c.status.recovering_since_ms = None;
                false
            }
        }
    }

    pub(crate) fn on_heartbeats(&mut self, batch: &[Heartbeat], ctx: &mut Ctx) -> HandlerResult {
        check_batch_len(batch.len(), "heartbeats")?;
        for (i, hb) in batch.iter().enumerate() {
            // A registered cluster's name was validated when it registered; the lookup is
            // cheaper than the check, and this loop runs for every heartbeat.
            if self.d.clusters.contains_key(&hb.cluster) {
                continue;
            }
            validate::dns_label(&hb.cluster, "").map_err(|e| {
                crate::error::FieldError::new(format!("heartbeats[{i}].cluster"), e.message)
            })?;
        }
        self.note_owner(ctx.actor_id);
        let mut gained = false;
        for hb in batch {
            gained |= self.heartbeat(&hb.cluster, hb.capacity, ctx);
        }
        if gained {
            self.review_brake(ctx);
        }
        Ok(None)
    }

    /// One heartbeat. Unknown clusters are skipped: the executor may have raced a deregister.
    /// Returns whether a NotReady cluster turned Ready.
    fn heartbeat(&mut self, name: &str, capacity: Option<Capacity>, ctx: &mut Ctx) -> bool {
        let now = ctx.now_ms;
        let from = self.health.judged_from_ms();
        // Vantage views exist only once some node reported one: the common case costs nothing.
        if !self.health.reach.is_empty() || !self.health.links.is_empty() {
            self.owner_reached(name, ctx.actor_id, now);
        }
        let Some(c) = self.d.clusters.get_mut(name) else {
            return false;
        };
        let was_not_ready = c.status.health == Health::NotReady;
        let before = health_deadline(c, from);
        c.status.last_heartbeat_ms = Some(now);
        let mut grew = false;
        if let Some(cap) = capacity {
            let old = c.status.capacity.map(|o| o.available).unwrap_or_default();
            grew = cap.available.cpu_millis > old.cpu_millis
                || cap.available.memory_bytes > old.memory_bytes
                || cap.available.pods > old.pods;
            c.status.capacity = Some(cap);
            c.status.capacity_reported_ms = Some(now);
        }
        let transition = match c.status.health {
            Health::Ready => Transition::None,
            Health::Unknown => Transition::BecameReady,
            Health::NotReady => {
                let start = *c.status.recovering_since_ms.get_or_insert(now);
                let needed = c.spec.success_threshold_seconds.saturating_mul(1000);
                if now.saturating_sub(start) >= needed {
                    Transition::BecameReady
                } else {
                    Transition::None
                }
            }
        };
        if let Transition::BecameReady = transition {
            c.status.health = Health::Ready;
            c.status.health_since_ms = now;
            c.status.recovering_since_ms = None;
            if c.resource_version != ctx.index {
                ctx.change(ChangeKind::Cluster, name, ChangeOp::Modified);
            }
            c.resource_version = ctx.index;
        }
        let after = health_deadline(c, from);
        // Still watched: the alarm stays where it is and is re-armed when it rings.
        if before.is_none() || after.is_none() {
            self.ix.rearm(name, after);
        }
        if let Transition::BecameReady = transition {
            self.cluster_gained(name, ctx);
            self.taint_conditions_changed(name, ctx);
            return was_not_ready;
        } else if grew && ctx.version >= crate::policy::PER_CLUSTER_QUOTA_SINCE {
            // Waiting work takes the new room in fair order, as after a delete.
            self.enqueue_waiting_fairly(&[name.to_string()]);
        } else if grew {
            self.capacity_grew(name);
        }
        false
    }

    pub(crate) fn on_cluster_unreachable(&mut self, cluster: &str, ctx: &mut Ctx) -> HandlerResult {
        validate::dns_label(cluster, "cluster")?;
        let from = self.health.judged_from_ms();
        let Some(c) = self.d.clusters.get_mut(cluster) else {
            return Err(Rejection::not_found(
                "cluster",
                format!("cluster {cluster:?}"),
            ));
        };
        let before = health_deadline(c, from);
        c.status.last_unreachable_ms = Some(ctx.now_ms);
        c.status.recovering_since_ms = None;
        let after = health_deadline(c, from);
        if before != after {
            self.ix.rearm(cluster, after);
        }
        Ok(None)
    }
}
