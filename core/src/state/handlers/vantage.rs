//! Vantage points and the failover brake, applied: `Reachability` reports, `SetHealthPolicy`,
//! and the brake's review after a change of health (`crate::health` holds the rules).
//!
//! Entries older than envelope version 6 never reach these paths (no such commands existed,
//! and time advances check `Ctx::version` before holding a link or reviewing the brake), so old
//! logs replay exactly as they did.
//!
//! Must not: let a prober's report change health by itself. Reports are views; the owner's
//! missing heartbeats still decide when health is in question.

use super::validate;
use crate::admission::{Actor, Refusal};
use crate::command::{ReachabilityReport, HEALTH_VANTAGE_SINCE};
use crate::error::FieldError;
use crate::health::{self, HealthPolicy, Member, Reach, MAX_REACHABILITY_REPORTS};
use crate::model::Health;
use crate::state::store::index::{health_deadline, SharedKey};
use crate::state::{Ctx, HandlerResult, Rejection, State};

impl State {
    pub(crate) fn on_reachability(
        &mut self,
        batch: &[ReachabilityReport],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if batch.len() > MAX_REACHABILITY_REPORTS {
            return Err(Rejection::from(FieldError::new(
                "reachability",
                format!(
                    "{} reports exceed the limit of {MAX_REACHABILITY_REPORTS}",
                    batch.len()
                ),
            )));
        }
        for (i, r) in batch.iter().enumerate() {
            validate::dns_label(&r.cluster, "")
                .map_err(|e| FieldError::new(format!("reachability[{i}].cluster"), e.message))?;
            if let Some(f) = &r.failure {
                if f.message.len() > health::MAX_FAILURE_MESSAGE_BYTES {
                    return Err(Rejection::from(FieldError::new(
                        format!("reachability[{i}].failure.message"),
                        format!("longer than {} bytes", health::MAX_FAILURE_MESSAGE_BYTES),
                    )));
                }
            }
        }
        let vantage = ctx.actor_id;
        let now = ctx.now_ms;
        match self.health.vantages.get_mut(vantage) {
            Some(t) => *t = now,
            None => {
                self.health.vantages.insert(vantage.to_string(), now);
            }
        }
        for r in batch {
            // A report may race a deregister: such clusters are skipped, as heartbeats are.
            if !self.d.clusters.contains_key(&r.cluster) {
                continue;
            }
            let views = self.health.reach.entry(r.cluster.clone()).or_default();
            let changed = views
                .get(vantage)
                .is_none_or(|old| old.failure != r.failure);
            if changed {
                views.insert(
                    vantage.to_string(),
                    Reach {
                        failure: r.failure.clone(),
                        since_ms: now,
                    },
                );
            }
            if r.failure.is_some() && vantage == self.health_owner(&r.cluster) {
                self.owner_lost(&r.cluster, now);
            }
        }
        Ok(None)
    }

    /// The owner could not reach `cluster`: a hint, as `ClusterUnreachable` always was (it
    /// breaks a recovery run; it does not shortcut the failure threshold).
    pub(crate) fn owner_lost(&mut self, cluster: &str, now_ms: u64) {
        let from = self.health.judged_from_ms();
        let Some(c) = self.d.clusters.get_mut(cluster) else {
            return;
        };
        let before = health_deadline(c, from);
        c.status.last_unreachable_ms = Some(now_ms);
        c.status.recovering_since_ms = None;
        let after = health_deadline(c, from);
        if before != after {
            self.ix.rearm(cluster, after);
        }
    }

    pub(crate) fn on_set_health_policy(
        &mut self,
        policy: &HealthPolicy,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if ctx.actor != Actor::Admin {
            return Err(Refusal::forbidden(
                "admin-only",
                "spec",
                "only admins may set the health policy".to_string(),
            )
            .into());
        }
        policy
            .check()
            .map_err(|e| Rejection::from(FieldError::new("spec", e)))?;
        if self.health.policy != *policy {
            self.health.policy = policy.clone();
            self.review_brake(ctx);
        }
        Ok(Some(ctx.index))
    }

    /// Heartbeats came from `actor`: it owns the clusters now.
    pub(crate) fn note_owner(&mut self, actor: &str) {
        if self.health.owner != actor {
            self.health.owner = actor.to_string();
        }
    }

    /// A heartbeat from `actor`: if it owns the cluster, its view of the cluster is
    /// "reachable" again and a broken link it had is healed.
    pub(crate) fn owner_reached(&mut self, cluster: &str, actor: &str, now_ms: u64) {
        if self.health_owner(cluster) != actor {
            return;
        }
        self.health.links.remove(cluster);
        let owner = match self.owners.owner(cluster) {
            Some(o) => &o.node,
            None => &self.health.owner,
        };
        if let Some(view) = self
            .health
            .reach
            .get_mut(cluster)
            .and_then(|v| v.get_mut(owner.as_str()))
        {
            if view.failure.is_some() {
                *view = Reach {
                    failure: None,
                    since_ms: now_ms,
                };
            }
        }
    }

    /// Whether the owner's deadline passing should leave `cluster` Ready (a broken link): only
    /// for entries that know vantage points.
    pub(crate) fn hold_as_link(&mut self, cluster: &str, deadline: u64, ctx: &Ctx) -> bool {
        let owner = self.health_owner(cluster);
        if ctx.version < HEALTH_VANTAGE_SINCE || !self.health.link_only(cluster, owner, ctx.now_ms)
        {
            self.health.links.remove(cluster);
            return false;
        }
        self.health
            .links
            .entry(cluster.to_string())
            .or_insert(deadline);
        true
    }

    /// Forgets what vantage points said of a deregistered cluster.
    pub(crate) fn forget_views(&mut self, cluster: &str) {
        self.health.reach.remove(cluster);
        self.health.links.remove(cluster);
    }

    /// Whether the brake holds failover for this cluster now.
    pub(crate) fn failover_held(&self, c: &crate::model::Cluster) -> bool {
        let b = &self.health.brake;
        b.is_engaged()
            && c.status.health == Health::NotReady
            && b.holds(
                c.spec
                    .labels
                    .get(&self.health.policy.region_label)
                    .map(String::as_str),
            )
    }

    /// Recounts the brake after health, labels, the fleet or the policy changed. A scope
    /// released re-places what its NotReady clusters hold (their failover timers may have
    /// fired while held); the scheduler moves only replicas past their grace period.
    pub(crate) fn review_brake(&mut self, ctx: &mut Ctx) {
        if ctx.version < HEALTH_VANTAGE_SINCE {
            return;
        }
        let now = ctx.now_ms;
        let policy = &self.health.policy;
        let window_ms = policy.window_seconds.saturating_mul(1000);
        let members = self.d.clusters.values().map(|c| {
            let not_ready = c.status.health == Health::NotReady;
            Member {
                region: c.spec.labels.get(&policy.region_label).map(String::as_str),
                not_ready,
                recent: not_ready && c.status.health_since_ms.saturating_add(window_ms) >= now,
            }
        });
        let next = health::review(policy, &self.health.brake, members, now);
        if next == self.health.brake {
            return;
        }
        let was = std::mem::replace(&mut self.health.brake, next);
        let released: Vec<String> = self
            .d
            .clusters
            .values()
            .filter(|c| c.status.health == Health::NotReady)
            .filter(|c| {
                let region = c
                    .spec
                    .labels
                    .get(&self.health.policy.region_label)
                    .map(String::as_str);
                was.holds(region) && !self.health.brake.holds(region)
            })
            .map(|c| c.spec.name.clone())
            .collect();
        let any = !released.is_empty();
        for name in released {
            let keys: Vec<SharedKey> = self
                .ix
                .placed_on
                .get(&name)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default();
            for k in &keys {
                self.enqueue(k);
            }
        }
        if any {
            self.replace_all_slices(ctx);
        }
    }
}

impl State {
    /// What the API and the CLI say of one cluster's health beyond its status: each fresh
    /// vantage point's view, a sentence saying why it is NotReady (or which link is broken),
    /// and whether the brake holds its failover. None for an unregistered cluster.
    pub fn health_note(&self, name: &str) -> Option<health::HealthNote> {
        let c = self.d.clusters.get(name)?;
        let now = self.d.log_time_ms;
        let (reach, fail) = self.health.split(name, now);
        let reachable_from: Vec<String> = reach.iter().map(|v| v.to_string()).collect();
        let unreachable_from: Vec<(String, Reach)> = fail
            .iter()
            .map(|(v, r)| (v.to_string(), (*r).clone()))
            .collect();
        let short = |v: &str| health::vantage_name(v).to_string();
        let failures = unreachable_from
            .iter()
            .filter_map(|(v, r)| {
                let f = r.failure.as_ref()?;
                Some(format!(
                    "{} ({} since {} ms)",
                    short(v),
                    f.describe(),
                    r.since_ms
                ))
            })
            .collect::<Vec<_>>()
            .join(", ");
        let reachers = reachable_from
            .iter()
            .map(|v| short(v))
            .collect::<Vec<_>>()
            .join(", ");
        let failover_held = self.failover_held(c);
        let mut condition = match c.status.health {
            Health::NotReady => {
                let mut s = format!("NotReady since {} ms", c.status.health_since_ms);
                match c.status.last_heartbeat_ms {
                    Some(t) => s.push_str(&format!("; last heartbeat at {t} ms")),
                    None => s.push_str("; never heard from"),
                }
                if !failures.is_empty() {
                    s.push_str(&format!("; unreachable from {failures}"));
                }
                if !reachers.is_empty() {
                    s.push_str(&format!("; reachable from {reachers}"));
                }
                Some(s)
            }
            Health::Ready | Health::Unknown if !failures.is_empty() => {
                let link = self
                    .health
                    .links
                    .get(name)
                    .map(|t| format!(" (owner's heartbeats missing since {t} ms: held Ready)"))
                    .unwrap_or_default();
                let others = match reachers.is_empty() {
                    true => String::new(),
                    false => format!("; {reachers} reach it"),
                };
                Some(format!(
                    "broken link: {failures} -> {name} unreachable{others}{link}"
                ))
            }
            Health::Ready | Health::Unknown => None,
        };
        if failover_held {
            let b = &self.health.brake;
            let scope = match &b.fleet {
                Some(e) => format!("fleet: {} of {} clusters NotReady", e.not_ready, e.total),
                None => b
                    .regions
                    .iter()
                    .map(|(r, e)| format!("region {r}: {} of {} NotReady", e.not_ready, e.total))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            let text = format!("failover paused by the brake ({scope})");
            condition = Some(match condition {
                Some(s) => format!("{s}; {text}"),
                None => text,
            });
        }
        Some(health::HealthNote {
            condition,
            reachable_from,
            unreachable_from,
            failover_held,
        })
    }
}
