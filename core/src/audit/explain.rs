//! Why an object's placement changed at one record: the clusters that lost replicas and why
//! (failover after the grace period, a drain or NoExecute taint, a deregistration, a changed
//! spec), where the replicas went, and who or what caused it; and the steps of its rollouts
//! (a wave started, a gate passed, a pause with its reason, an undo), which change the
//! template revision clusters run rather than where replicas are. One step at a time: the
//! caller replays the archive and calls [`explain_step`] and [`rollout_steps`] with the state
//! after each record.

use std::collections::BTreeMap;

use super::Record;
use crate::command::Command;
use crate::model::{Health, ObjectKey};
use crate::policy::TaintEffect;
use crate::scheduler::decision::{diff as placement_moves, Decision, DropReason, ReplicaMove};
use crate::state::State;

/// The drain taint core adds (see `state::clusters`).
const DRAIN_TAINT_KEY: &str = "fedraft.io/drain";

/// One placement change of one object, with its cause and the entry that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementChange {
    pub index: u64,
    pub term: u64,
    /// The entry's log time (ms since the epoch); the edges render it.
    pub time_ms: u64,
    pub actor: String,
    pub request_id: String,
    pub command: String,
    pub before: BTreeMap<String, u32>,
    pub after: BTreeMap<String, u32>,
    pub moves: Vec<ReplicaMove>,
    /// Why, e.g. "dc2 NotReady since 03:11:42, grace 60 s passed".
    pub cause: String,
    /// Cause and movement in one line, e.g. "dc2 NotReady since 03:11:42, grace 60 s passed ->
    /// 3 replicas moved to dc1 (2) and dc3 (1)".
    pub explanation: String,
}

/// Desired and ready replicas of one object summed over its clusters, as they stood after one
/// record: the points of a "ready vs desired over time" chart. A sample is taken only where one
/// of the two numbers changed, so a long quiet stretch costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadySample {
    pub index: u64,
    pub time_ms: u64,
    /// Replicas placed over all clusters (what the scheduler gave the object).
    pub desired: u32,
    /// Ready replicas the placed clusters last reported.
    pub ready: u32,
}

impl ReadySample {
    /// The sample for `key` in `state` (after the entry at `index`, logged at `time_ms`); `None`
    /// when the object does not exist there.
    pub fn of(state: &State, key: &ObjectKey, index: u64, time_ms: u64) -> Option<Self> {
        let o = state.object(&key.namespace, &key.name)?;
        Some(Self {
            index,
            time_ms,
            desired: o.status.clusters.iter().map(|c| c.replicas).sum(),
            ready: o.status.ready_replicas,
        })
    }

    /// Whether `self` says something `prev` did not.
    pub fn differs(&self, prev: Option<&Self>) -> bool {
        prev.is_none_or(|p| (p.desired, p.ready) != (self.desired, self.ready))
    }
}

/// `03:11:42`: the UTC time of day of a log time, for the cause sentences (which the archive's
/// readers compare as text, so they are built here, once). Plain remainder arithmetic: no
/// calendar, no clock.
fn clock_utc(ms: u64) -> String {
    let sod = (ms / 1000) % 86_400;
    format!("{:02}:{:02}:{:02}", sod / 3600, sod % 3600 / 60, sod % 60)
}

fn join_and(items: &[String]) -> String {
    match items.len() {
        0 => String::new(),
        1 => items[0].clone(),
        n => format!("{} and {}", items[..n - 1].join(", "), items[n - 1]),
    }
}

fn replicas(n: u64) -> &'static str {
    if n == 1 {
        "replica"
    } else {
        "replicas"
    }
}

/// "3 replicas moved to dc1 (2) and dc3 (1)", "6 replicas added on ...", "2 replicas removed
/// from dc2".
fn movement(moves: &[ReplicaMove]) -> String {
    let gained: Vec<&ReplicaMove> = moves.iter().filter(|m| m.to > m.from).collect();
    let lost: Vec<&ReplicaMove> = moves.iter().filter(|m| m.to < m.from).collect();
    let list = |ms: &[&ReplicaMove]| {
        join_and(
            &ms.iter()
                .map(|m| format!("{} ({})", m.cluster, m.from.abs_diff(m.to)))
                .collect::<Vec<_>>(),
        )
    };
    let added: u64 = gained.iter().map(|m| u64::from(m.to - m.from)).sum();
    let removed: u64 = lost.iter().map(|m| u64::from(m.from - m.to)).sum();
    match (added, removed) {
        (0, 0) => "placement unchanged".into(),
        (0, r) => format!("{r} {} removed from {}", replicas(r), list(&lost)),
        (a, 0) => format!("{a} {} added on {}", replicas(a), list(&gained)),
        (a, _) => format!("{a} {} moved to {}", replicas(a), list(&gained)),
    }
}

fn health_word(s: &State, cluster: &str) -> &'static str {
    match s.cluster(cluster).map(|c| c.status.health) {
        Some(Health::NotReady) => "NotReady",
        Some(Health::Unknown) => "Unknown",
        Some(Health::Ready) | None => "unhealthy",
    }
}

/// Why `cluster` lost replicas, from the decision's drop reason and the state after.
fn loss_reason(s: &State, key: &ObjectKey, cluster: &str, d: Option<&Decision>) -> Option<String> {
    if s.cluster(cluster).is_none() {
        return Some(format!("{cluster} deregistered"));
    }
    let reason = d?.dropped.iter().find(|x| x.cluster == cluster)?;
    Some(match &reason.reason {
        DropReason::FailedOver { since_ms } => {
            let grace = s
                .object(&key.namespace, &key.name)
                .map(|o| o.spec.placement.failover.grace_period_seconds);
            let grace = grace
                .map(|g| format!(", grace {g} s passed"))
                .unwrap_or_default();
            format!(
                "{cluster} {} since {}{grace}",
                health_word(s, cluster),
                clock_utc(*since_ms)
            )
        }
        DropReason::UntoleratedTaint { key: k, effect } if k == DRAIN_TAINT_KEY => {
            let _ = effect;
            format!("{cluster} drained")
        }
        DropReason::UntoleratedTaint {
            key: k,
            effect: TaintEffect::NoExecute,
        } => format!(
            "{cluster} tainted {k}:NoExecute{}",
            taint_source(s, cluster, k)
        ),
        other => format!("{cluster} {}", other.describe()),
    })
}

/// ` by ClusterTaintPolicy P (COND)` when a taint policy added the NoExecute taint `key`.
fn taint_source(s: &State, cluster: &str, key: &str) -> String {
    s.policy_taints(cluster)
        .into_iter()
        .find(|(t, _)| t.key == key && t.effect == TaintEffect::NoExecute)
        .map(|(_, a)| format!(" by ClusterTaintPolicy {} ({})", a.policy, a.condition))
        .unwrap_or_default()
}

/// What the command itself did to the object or fleet, for changes no lost cluster explains.
fn command_cause(s: &State, r: &Record, key: &ObjectKey, before_empty: bool) -> String {
    let actor = &r.entry.actor;
    let mine = r.command_object() == Some((key.namespace.as_str(), key.name.as_str()));
    match &r.entry.command {
        Command::PutObject { .. }
        | Command::PutObjectWithDiscovery { .. }
        | Command::PutObjectWithFailBack { .. }
        | Command::PutObjectWithDescheduling { .. }
            if mine && before_empty =>
        {
            format!("created by {actor}")
        }
        Command::PutObject { .. }
        | Command::PutObjectWithDiscovery { .. }
        | Command::PutObjectWithFailBack { .. }
        | Command::PutObjectWithDescheduling { .. }
            if mine =>
        {
            format!("spec changed by {actor}")
        }
        Command::DeleteObject { .. } if mine => format!("deleted by {actor}"),
        Command::RevokePlacement { .. } if mine => {
            format!("placement revoked by {actor} (scheduled afresh)")
        }
        Command::Uncordon { name } => format!("{name} uncordoned by {actor}"),
        Command::RegisterCluster(spec) => format!("{} registered by {actor}", spec.name),
        Command::UpdateCluster { spec, .. } => format!("{} updated by {actor}", spec.name),
        _ if s.failback_last(key).is_some_and(|f| f.index == r.index) => {
            // The policy's fail-back: recovered clusters held Ready long enough.
            let f = s.failback_last(key).map(|f| {
                let back: Vec<String> = f
                    .clusters
                    .iter()
                    .map(|(c, since)| format!("{c} Ready since {}", clock_utc(*since)))
                    .collect();
                format!(
                    "fail-back: {} (held {} s, policy afterRecoveryHeld)",
                    join_and(&back),
                    f.held_seconds
                )
            });
            f.unwrap_or_default()
        }
        _ if s.deschedule_last(key).is_some_and(|f| f.index == r.index) => {
            // The policy's descheduling: replicas stuck Pending moved elsewhere.
            let f = s.deschedule_last(key).map(|f| {
                let shrunk: Vec<String> = f
                    .clusters
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {} -> {} ({} Pending unschedulable since {}; held to {} until its capacity grows or {} s pass)",
                            c.cluster,
                            c.from,
                            c.to,
                            c.stuck,
                            clock_utc(c.stuck_since_ms),
                            c.to,
                            crate::rollout::deschedule::ESTIMATE_KEPT_MS / 1000
                        )
                    })
                    .collect();
                format!(
                    "descheduled: {} (policy pendingSeconds {})",
                    join_and(&shrunk),
                    f.pending_seconds
                )
            });
            f.unwrap_or_default()
        }
        _ => {
            // A cluster that just turned Ready again pulls replicas back (rebalance).
            let now = s.log_time_ms();
            let recovered: Vec<String> = s
                .clusters()
                .filter(|c| c.status.health == Health::Ready && c.status.health_since_ms == now)
                .map(|c| format!("{} Ready again since {}", c.spec.name, clock_utc(now)))
                .collect();
            if recovered.is_empty() {
                format!(
                    "re-placed by the scheduler ({} from {actor})",
                    r.entry.command.kind()
                )
            } else {
                join_and(&recovered)
            }
        }
    }
}

/// The change `r` made to `key`'s placement, if any. `before` is the placement just before
/// the record (None when the object did not exist), `after` the state just after it.
pub fn explain_step(
    before: Option<&BTreeMap<String, u32>>,
    after: &State,
    r: &Record,
    key: &ObjectKey,
) -> Option<PlacementChange> {
    let empty = BTreeMap::new();
    let b = before.unwrap_or(&empty).clone();
    let a = after
        .object(&key.namespace, &key.name)
        .map(|o| o.placement_map())
        .unwrap_or_default();
    let existed = before.is_some();
    let exists = after.object(&key.namespace, &key.name).is_some();
    if a == b && existed == exists {
        return None;
    }
    let moves = placement_moves(&b, &a);
    let decision = r
        .applied
        .decisions
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, d)| d);
    let losses: Vec<String> = moves
        .iter()
        .filter(|m| m.to < m.from && exists)
        .filter_map(|m| loss_reason(after, key, &m.cluster, decision))
        .collect();
    // A dependency goes where its workloads are (`propagateDeps`): that is its reason, whatever
    // moved them.
    let cause = match after.dependency_cause(key) {
        Some(cause) if exists => cause,
        _ if losses.is_empty() => command_cause(after, r, key, !existed || b.is_empty()),
        _ => losses.join("; "),
    };
    // Placed by a Karmada policy through the door: which one, and its replica rule.
    let cause = match after.policy_cause(key) {
        Some(policy) if exists => format!("{cause}; placed by {policy}"),
        _ => cause,
    };
    let explanation = format!("{cause} -> {}", movement(&moves));
    Some(PlacementChange {
        index: r.index,
        term: r.term,
        time_ms: r.entry.timestamp_ms,
        actor: r.entry.actor.clone(),
        request_id: r.entry.request_id.clone(),
        command: r.entry.command.kind().to_string(),
        before: b,
        after: a,
        moves,
        cause,
        explanation,
    })
}

/// The rollout steps record `r` wrote into `key`'s rollout story (`crate::rollout`), one change
/// each, with the placement as it stands (a rollout moves revisions, not replicas). The story
/// in the state keeps its newest lines only; replaying record by record sees every one.
pub fn rollout_steps(after: &State, r: &Record, key: &ObjectKey) -> Vec<PlacementChange> {
    let (Some(obj), Some(rec)) = (
        after.object(&key.namespace, &key.name),
        after.rollout(&key.namespace, &key.name),
    ) else {
        return Vec::new();
    };
    let placement = obj.placement_map();
    rec.events
        .iter()
        .filter(|e| e.index == r.index)
        .map(|e| PlacementChange {
            index: r.index,
            term: r.term,
            time_ms: e.time_ms,
            actor: r.entry.actor.clone(),
            request_id: r.entry.request_id.clone(),
            command: r.entry.command.kind().to_string(),
            before: placement.clone(),
            after: placement.clone(),
            moves: Vec::new(),
            cause: format!("rollout: {}", e.message),
            explanation: format!("rollout: {} -> placement unchanged", e.message),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn movement_sentences() {
        let m = |c: &str, from, to| ReplicaMove {
            cluster: c.into(),
            from,
            to,
        };
        assert_eq!(
            movement(&[m("dc1", 2, 4), m("dc2", 3, 0), m("dc3", 1, 2)]),
            "3 replicas moved to dc1 (2) and dc3 (1)"
        );
        assert_eq!(movement(&[m("dc1", 0, 1)]), "1 replica added on dc1 (1)");
        // 2026-11-30T03:11:42Z, and the same instant a day later.
        assert_eq!(clock_utc(1_796_008_302_000), "03:11:42");
        assert_eq!(clock_utc(1_796_008_302_999 + 86_400_000), "03:11:42");
        assert_eq!(
            movement(&[m("dc1", 2, 0), m("dc2", 2, 1)]),
            "3 replicas removed from dc1 (2) and dc2 (1)"
        );
    }
}
