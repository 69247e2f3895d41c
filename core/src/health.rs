//! Health beyond heartbeats, as plain data and pure rules: why a cluster cannot be reached and
//! from which vantage points (every fedraft node's prober, the owner's executors among them),
//! and the brake that pauses failover when too many clusters fail at once.
//!
//! Heartbeats still decide when the owner lost a cluster (`state/handlers/health.rs`); this
//! module decides what that means once other vantage points have spoken:
//! - the owner's view of a cluster is its executors' (heartbeats, and their reports naming the
//!   probe error); the owner is the cluster's assigned owner (`crate::owners`), or, while no
//!   ownership is in force (older logs), the actor of the latest heartbeats (the leader's
//!   executors);
//! - when the owner's deadline passes, the cluster turns NotReady only if the owner (alive, its
//!   report fresh) and at least one other fresh vantage point fail to reach it, or if no other
//!   vantage point reaches it, or if the owner is gone (its reports stale). A live owner that
//!   alone cannot reach a cluster others reach is a broken link: it is reported, not acted on;
//! - the brake: when more than a share of the fleet (or of one region) turned NotReady within a
//!   window of log time, failover pauses there until the share of NotReady clusters drops back
//!   to the threshold or below, as Kubernetes' node lifecycle controller stops evicting in a
//!   disrupted zone: moving everything during a partition on fedraft's side does more harm than
//!   waiting;
//! - a stalled log: log time in which nothing committed (no quorum, no leader) says nothing of
//!   the member clusters, whose heartbeats could not commit either. After a gap of more than
//!   [`LOG_STALL_MS`] between two entries, every cluster's failure threshold counts again from
//!   the entry that ended it, as Kubernetes' node lifecycle controller starts its grace periods
//!   afresh after it was itself away: a fedraft-side outage must not fail the fleet over.
//!
//! Must not: read clocks (every time is log time), or iterate a hash map into a result.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Longest probe error text kept; longer ones are cut at a char boundary.
pub const MAX_FAILURE_MESSAGE_BYTES: usize = 512;
/// A vantage point whose latest report (an empty one renews it) is older than this counts for
/// nothing: its node may be gone, and a stale "reachable" must not hold a dead cluster Ready.
pub const VANTAGE_LEASE_MS: u64 = 30_000;
/// Most reports in one `Reachability` entry.
pub const MAX_REACHABILITY_REPORTS: usize = 10_000;
/// A longer gap between two consecutive entries' log times is a stalled log. A leader with a
/// quorum commits a tick at least every `tick_interval_ms` (at most [`MAX_TICK_INTERVAL_MS`]),
/// and executors renew leases and report every second or so; an election takes one to two
/// seconds. Five seconds is none of those, and well under any sane failure threshold.
pub const LOG_STALL_MS: u64 = 5_000;
/// Longest tick interval a node may be configured with: a live log must never look stalled.
pub const MAX_TICK_INTERVAL_MS: u64 = LOG_STALL_MS / 2;

/// The latest stretch of log time in which nothing committed: from the entry before the gap to
/// the one after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogStall {
    pub from_ms: u64,
    pub to_ms: u64,
}

impl LogStall {
    /// The stall between an entry at `prev_ms` and the next at `now_ms`, if the gap is one.
    pub fn between(prev_ms: u64, now_ms: u64) -> Option<LogStall> {
        // Log time 0 is the empty state: the first entry ends no stall.
        (prev_ms > 0 && now_ms.saturating_sub(prev_ms) > LOG_STALL_MS).then_some(LogStall {
            from_ms: prev_ms,
            to_ms: now_ms,
        })
    }
}

/// Why a probe failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailureKind {
    /// No answer within the probe timeout.
    Timeout,
    /// An answer that was an error, or a connection that failed.
    Error,
}

/// A failed probe: its kind and the error text (at most [`MAX_FAILURE_MESSAGE_BYTES`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeFailure {
    pub kind: FailureKind,
    pub message: String,
}

impl ProbeFailure {
    pub fn new(kind: FailureKind, message: &str) -> Self {
        ProbeFailure {
            kind,
            message: cut(message, MAX_FAILURE_MESSAGE_BYTES).to_string(),
        }
    }

    /// "timeout: GET /readyz timed out after 3000 ms", "error: connection refused".
    pub fn describe(&self) -> String {
        let kind = match self.kind {
            FailureKind::Timeout => "timeout",
            FailureKind::Error => "error",
        };
        format!("{kind}: {}", self.message)
    }
}

/// `s` cut to at most `max` bytes at a char boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// One vantage point's latest view of one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    /// None: it answers; Some: why not.
    pub failure: Option<ProbeFailure>,
    /// Log time since which this view holds (the report that changed it).
    pub since_ms: u64,
}

impl Reach {
    pub fn reachable(&self) -> bool {
        self.failure.is_none()
    }
}

/// The brake's settings. Replicated (every node must brake alike); set by an admin through
/// `PUT /v1/admin/health-policy` or `fedraft health-policy set` (`SetHealthPolicy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HealthPolicy {
    /// The brake engages when more than this percentage of the fleet turned NotReady within the
    /// window; 0 disables it. Default 55 (Kubernetes' unhealthy-zone threshold).
    #[serde(default = "default_fleet_percent")]
    pub fleet_percent: u32,
    /// The same for the clusters of one region (by `region_label`); 0 (the default) disables
    /// it: a whole region going dark is then failed over, as it should be when only that region
    /// is lost.
    #[serde(default)]
    pub region_percent: u32,
    /// The label naming a cluster's region. Default `topology.kubernetes.io/region`.
    #[serde(default = "default_region_label")]
    pub region_label: String,
    /// How close together in log time the failures must be. Default 120 s.
    #[serde(default = "default_window")]
    pub window_seconds: u64,
    /// Scopes (fleet or region) with fewer clusters never brake: too few to tell a partition
    /// from failures. Default 10.
    #[serde(default = "default_min_clusters")]
    pub min_clusters: u32,
}

fn default_fleet_percent() -> u32 {
    55
}
fn default_region_label() -> String {
    "topology.kubernetes.io/region".to_string()
}
fn default_window() -> u64 {
    120
}
fn default_min_clusters() -> u32 {
    10
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            fleet_percent: default_fleet_percent(),
            region_percent: 0,
            region_label: default_region_label(),
            window_seconds: default_window(),
            min_clusters: default_min_clusters(),
        }
    }
}

impl HealthPolicy {
    /// Why the policy is unusable, if it is.
    pub fn check(&self) -> Result<(), String> {
        if self.fleet_percent > 100 || self.region_percent > 100 {
            return Err("percentages must be within 0..=100".into());
        }
        if self.window_seconds == 0 || self.window_seconds > 24 * 3600 {
            return Err("windowSeconds must be within 1..=86400".into());
        }
        if self.region_label.is_empty() || self.region_label.len() > 317 {
            return Err("regionLabel must be a label key".into());
        }
        Ok(())
    }
}

/// A scope (the fleet, or one region) where the brake holds failover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Engaged {
    /// Log time at which it engaged.
    pub since_ms: u64,
    /// NotReady clusters in the scope, and all of its clusters, when last counted.
    pub not_ready: u32,
    pub total: u32,
}

/// Where the brake holds failover now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Brake {
    pub fleet: Option<Engaged>,
    /// region -> engaged there.
    pub regions: BTreeMap<String, Engaged>,
}

impl Brake {
    pub fn is_engaged(&self) -> bool {
        self.fleet.is_some() || !self.regions.is_empty()
    }

    /// Whether failover is held for a cluster in `region`.
    pub fn holds(&self, region: Option<&str>) -> bool {
        self.fleet.is_some() || region.is_some_and(|r| self.regions.contains_key(r))
    }
}

/// One cluster as the brake counts it.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    pub region: Option<&'a str>,
    pub not_ready: bool,
    /// NotReady and turned so within the window.
    pub recent: bool,
}

/// Counts of one scope.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    total: u32,
    not_ready: u32,
    recent: u32,
}

/// Whether `part` is more than `percent` % of `total` (integers only).
fn over(part: u32, total: u32, percent: u32) -> bool {
    u64::from(part) * 100 > u64::from(total) * u64::from(percent)
}

/// The next scope state: engage on a burst (more than the share turned NotReady within the
/// window), stay engaged while more than the share is NotReady at all, release otherwise.
fn next(was: Option<&Engaged>, c: Counts, percent: u32, min: u32, now_ms: u64) -> Option<Engaged> {
    if percent == 0 || c.total < min.max(1) {
        return None;
    }
    let keep = match was {
        Some(_) => over(c.not_ready, c.total, percent),
        None => over(c.recent, c.total, percent),
    };
    keep.then(|| Engaged {
        since_ms: was.map_or(now_ms, |e| e.since_ms),
        not_ready: c.not_ready,
        total: c.total,
    })
}

/// The brake after a change of health, from every registered cluster (any order).
pub fn review<'a>(
    policy: &HealthPolicy,
    was: &Brake,
    members: impl IntoIterator<Item = Member<'a>>,
    now_ms: u64,
) -> Brake {
    let mut fleet = Counts::default();
    let mut regions: BTreeMap<&str, Counts> = BTreeMap::new();
    for m in members {
        let add = |c: &mut Counts| {
            c.total += 1;
            c.not_ready += u32::from(m.not_ready);
            c.recent += u32::from(m.recent);
        };
        add(&mut fleet);
        if let Some(r) = m.region {
            add(regions.entry(r).or_default());
        }
    }
    let min = policy.min_clusters;
    Brake {
        fleet: next(was.fleet.as_ref(), fleet, policy.fleet_percent, min, now_ms),
        regions: regions
            .into_iter()
            .filter_map(|(r, c)| {
                let e = next(was.regions.get(r), c, policy.region_percent, min, now_ms)?;
                Some((r.to_string(), e))
            })
            .collect(),
    }
}

/// The replicated health facts beyond cluster status: vantage points' views, the brake and its
/// policy, the latest log stall. A snapshot part of its own (snapshot version 8; the stall since
/// version 12), so older layouts stay readable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthBook {
    pub policy: HealthPolicy,
    /// The actor of the latest heartbeats: the owner of every cluster that has no assigned
    /// owner (`crate::owners`; without leases, the leader's executors). Not part of the hash
    /// while nothing else is recorded (see `is_trivial`).
    pub owner: String,
    /// vantage (a node's executor actor) -> log time of its latest report.
    pub vantages: BTreeMap<String, u64>,
    /// cluster -> vantage -> its latest view.
    pub reach: BTreeMap<String, BTreeMap<String, Reach>>,
    /// cluster -> log time since which the owner alone cannot reach it while others can: a
    /// broken link, held Ready.
    pub links: BTreeMap<String, u64>,
    pub brake: Brake,
    /// The latest stall of the log (entries of envelope version [`crate::command::LOG_STALL_SINCE`]
    /// on): failure thresholds count from its end.
    pub stall: Option<LogStall>,
}

impl HealthBook {
    /// Log time from which silence counts against a cluster: the end of the latest stall.
    pub fn judged_from_ms(&self) -> u64 {
        self.stall.map_or(0, |s| s.to_ms)
    }

    /// True while the book holds nothing a version-8 log could have produced besides the
    /// owner: the state hash then leaves it out, so such logs hash as they did.
    pub fn is_trivial(&self) -> bool {
        self.policy == HealthPolicy::default()
            && self.vantages.is_empty()
            && self.reach.is_empty()
            && self.links.is_empty()
            && !self.brake.is_engaged()
            && self.stall.is_none()
    }

    /// What the state hash takes of a book that is not trivial: the fields of the layout before
    /// log stalls, then the stall when there is one, so a book without one hashes as it did.
    pub fn hash_bytes(&self) -> Vec<u8> {
        let cfg = bincode::config::standard();
        let before_stalls = (
            &self.policy,
            &self.owner,
            &self.vantages,
            &self.reach,
            &self.links,
            &self.brake,
        );
        // Plain owned data into a Vec: cannot fail (see `LogEntry::encode`).
        let mut bytes = bincode::serde::encode_to_vec(before_stalls, cfg)
            .unwrap_or_else(|e| unreachable!("health encoding failed: {e}"));
        if let Some(stall) = &self.stall {
            let more = bincode::serde::encode_to_vec(stall, cfg)
                .unwrap_or_else(|e| unreachable!("stall encoding failed: {e}"));
            bytes.extend_from_slice(&more);
        }
        bytes
    }

    /// Fresh views of `cluster`, by vantage.
    pub fn fresh_views<'a>(
        &'a self,
        cluster: &str,
        now_ms: u64,
    ) -> impl Iterator<Item = (&'a str, &'a Reach)> + 'a {
        let vantages = &self.vantages;
        self.reach
            .get(cluster)
            .into_iter()
            .flatten()
            .filter(move |(v, _)| {
                vantages
                    .get(v.as_str())
                    .is_some_and(|t| now_ms.saturating_sub(*t) <= VANTAGE_LEASE_MS)
            })
            .map(|(v, r)| (v.as_str(), r))
    }

    /// Whether a cluster whose owner's deadline passed is a broken link only: its owner (the
    /// assigned one, else [`HealthBook::owner`]) is alive and reports it unreachable, another
    /// vantage reaches it and none other fails.
    pub fn link_only(&self, cluster: &str, owner: &str, now_ms: u64) -> bool {
        let mut owner_fails = false;
        let mut others_reach = false;
        for (v, r) in self.fresh_views(cluster, now_ms) {
            match (v == owner, r.reachable()) {
                (true, false) => owner_fails = true,
                (true, true) => {}
                (false, true) => others_reach = true,
                (false, false) => return false,
            }
        }
        owner_fails && others_reach
    }

    /// The fresh vantages that reach `cluster` and those that do not (with their views).
    pub fn split(&self, cluster: &str, now_ms: u64) -> (Vec<&str>, Vec<(&str, &Reach)>) {
        let mut reach = Vec::new();
        let mut fail = Vec::new();
        for (v, r) in self.fresh_views(cluster, now_ms) {
            if r.reachable() {
                reach.push(v);
            } else {
                fail.push((v, r));
            }
        }
        (reach, fail)
    }
}

/// What the edges show of one cluster's health beyond its status (`State::health_note`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthNote {
    /// Why it is NotReady, which link is broken, whether failover is paused; None when all is
    /// well.
    pub condition: Option<String>,
    /// Fresh vantage points that reach it.
    pub reachable_from: Vec<String>,
    /// Fresh vantage points that do not, with their view.
    pub unreachable_from: Vec<(String, Reach)>,
    /// The brake holds its replicas where they are.
    pub failover_held: bool,
}

/// A node's short name in sentences: `system:executor:node2` -> `node2`.
pub fn vantage_name(actor: &str) -> &str {
    actor.rsplit(':').next().unwrap_or(actor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(list: &[(&'static str, bool, bool)]) -> Vec<Member<'static>> {
        list.iter()
            .map(|(r, nr, recent)| Member {
                region: Some(r),
                not_ready: *nr,
                recent: *recent,
            })
            .collect()
    }

    #[test]
    fn a_burst_engages_and_a_recovery_releases() {
        let p = HealthPolicy {
            min_clusters: 4,
            ..HealthPolicy::default()
        };
        let mut fleet: Vec<(&str, bool, bool)> = vec![("a", false, false); 10];
        for m in fleet.iter_mut().take(6) {
            *m = ("a", true, true);
        }
        let b = review(&p, &Brake::default(), members(&fleet), 7);
        assert_eq!(
            b.fleet,
            Some(Engaged {
                since_ms: 7,
                not_ready: 6,
                total: 10
            })
        );
        // Out of the window but still NotReady: stays engaged, since unchanged.
        for m in fleet.iter_mut().take(6) {
            m.2 = false;
        }
        let b = review(&p, &b, members(&fleet), 9);
        assert_eq!(b.fleet.as_ref().map(|e| e.since_ms), Some(7));
        // Two recover: 4 of 10 is not over 55 %.
        fleet[0].1 = false;
        fleet[1].1 = false;
        assert_eq!(review(&p, &b, members(&fleet), 11).fleet, None);
    }

    #[test]
    fn slow_failures_and_small_fleets_never_brake() {
        let p = HealthPolicy::default();
        let slow = vec![("a", true, false); 20];
        assert!(!review(&p, &Brake::default(), members(&slow), 1).is_engaged());
        let small = vec![("a", true, true); 9];
        assert!(!review(&p, &Brake::default(), members(&small), 1).is_engaged());
    }

    #[test]
    fn a_region_brakes_alone_when_asked() {
        let p = HealthPolicy {
            region_percent: 50,
            min_clusters: 2,
            ..HealthPolicy::default()
        };
        let mut list = vec![("east", true, true); 3];
        list.extend(vec![("west", false, false); 7]);
        let b = review(&p, &Brake::default(), members(&list), 5);
        assert!(b.fleet.is_none());
        assert!(b.holds(Some("east")) && !b.holds(Some("west")) && !b.holds(None));
    }

    #[test]
    fn failures_are_cut_at_a_char_boundary() {
        let long = "é".repeat(MAX_FAILURE_MESSAGE_BYTES);
        let f = ProbeFailure::new(FailureKind::Error, &long);
        assert!(f.message.len() <= MAX_FAILURE_MESSAGE_BYTES);
        assert!(f.describe().starts_with("error: é"));
    }
}
