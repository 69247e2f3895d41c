//! Turning what the executors observe into few, batched log entries.
//!
//! Probes and reconcile passes write their latest observations into [`Observations`]; the
//! reporter task (`reporter`, one per node running executors) flushes them, health and statuses
//! side by side so that heartbeats never wait behind a status flush:
//! - every probe interval, one `Heartbeats` entry for all clusters whose latest probe succeeded
//!   recently. A heartbeat carries capacity only when a scan produced a value the state does not
//!   hold yet; otherwise `capacity: None`. These heartbeats are the only entries sent when
//!   nothing changed: the state machine needs them to keep a cluster Ready.
//! - with those heartbeats, one `CapacityDetails` entry with the extended resources and node
//!   shapes of the scans that differ from what the state holds (same resend rule as below).
//! - on a probe turning from success (or no result) to failure, that cluster's failure (the
//!   error or timeout) in one `Reachability` entry per flush, then nothing more until it answers
//!   again.
//! - every status flush interval, one `StatusReportsAt` entry with the per-object observations
//!   that differ from what the state holds, each naming the applied index of the state the
//!   pass that made it read (core counts a report only if the object has not changed since,
//!   and only from the cluster's owner: `fedraft_core::state` reports). A report already
//!   proposed is not sent again until `RESEND_AFTER` passes without the state reflecting it, or
//!   a later pass made it anew (lost or dropped proposals heal).
//!   Alike, one `WorkloadReports` entry with the workload status ([`crate::workload::observe_workload`]: the
//!   template revision, generations, replica counts, conditions) that differs from the state's,
//!   and one `StatusValues` entry with the statePreservation values (`crate::preserve`).
//! - a status flush compares with the state only the clusters whose reports a pass replaced
//!   since the last flush ([`Sweep::Changed`]), and every report once per `RESEND_AFTER`
//!   ([`Sweep::Full`]): comparing a hundred thousand settled reports twice a second was most of
//!   a busy node's reporting. A state change that makes a settled report wrong again changes an
//!   object, which wakes a pass of every cluster it is placed on; the full sweep catches the rest.
//!
//! Diffing against the state rather than a private memory means a new leader sends nothing for
//! what the old one already reported. The state machine decides health and failover from these
//! events; nothing here does.
//!
//! Must not: propose more than one entry of each kind per flush, or talk to member clusters.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use fedraft_core::command::{
    CapacityDetail, Heartbeat, ObjectStatusReport, ReachabilityReport, StatusReportAt,
    WorkloadReport,
};
use fedraft_core::health::ProbeFailure;
use fedraft_core::model::Capacity;
use fedraft_core::policy::ExtendedCapacity;
use fedraft_core::rollout::WorkloadObservation;
use fedraft_core::state::{State, MAX_BATCH_ITEMS};

use crate::desired::SharedKey;

/// A proposed observation not reflected by the state after this long is proposed again; the
/// status flush compares every report with the state this often.
pub(crate) const RESEND_AFTER: Duration = Duration::from_secs(5);

/// Which per-object and workload reports a status flush compares with the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Those of the clusters a pass reported on since the last flush.
    Changed,
    /// Every report.
    Full,
}

/// Messages longer than this are cut (at a char boundary) before they are proposed; core keeps
/// at most 1 KiB and a cut on our side keeps the comparison with the state exact.
pub const MAX_MESSAGE_BYTES: usize = 512;

/// Cuts `message` to [`MAX_MESSAGE_BYTES`].
pub fn short_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

#[derive(Debug, Default, Clone)]
struct ProbeState {
    /// Outcome of the latest probe; None before the first.
    last_ok: Option<bool>,
    last_success_at: Option<Instant>,
    /// Latest capacity scan result.
    capacity: Option<Capacity>,
    /// Latest extended resources and node shapes (sent as `CapacityDetails`).
    detail: Option<ExtendedCapacity>,
    /// The failure of the latest failed probe, until it is reported.
    unreachable_pending: Option<ProbeFailure>,
}

/// A pass's report on one object, as it is held until the next pass: the object's key shared
/// with the desired cache ([`SharedKey`]), the cluster being the table's. One is held per
/// object per cluster; an [`ObjectStatusReport`] is built only for a report that goes out.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldStatus {
    pub key: SharedKey,
    pub applied: bool,
    pub ready_replicas: u32,
    /// Already cut to [`MAX_MESSAGE_BYTES`].
    pub message: Option<Box<str>>,
}

impl HeldStatus {
    /// The report as proposed, of this object on `cluster`.
    pub fn on(&self, cluster: &str) -> ObjectStatusReport {
        ObjectStatusReport {
            namespace: self.key.namespace.clone(),
            name: self.key.name.clone(),
            cluster: cluster.to_string(),
            applied: self.applied,
            ready_replicas: self.ready_replicas,
            message: self.message.as_deref().map(str::to_string),
        }
    }
}

/// A pass's workload observation of one object, held as [`HeldStatus`] is.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldWorkload {
    pub key: SharedKey,
    pub observed: WorkloadObservation,
}

impl HeldWorkload {
    /// The report as proposed, of this object on `cluster`.
    pub fn on(&self, cluster: &str) -> WorkloadReport {
        WorkloadReport {
            namespace: self.key.namespace.clone(),
            name: self.key.name.clone(),
            cluster: cluster.to_string(),
            observed: self.observed.clone(),
        }
    }
}

#[derive(Default)]
struct Inner {
    probes: BTreeMap<String, ProbeState>,
    /// cluster -> the applied index the latest pass read, and its reports.
    statuses: BTreeMap<String, (u64, Vec<HeldStatus>)>,
    workloads: BTreeMap<String, Vec<HeldWorkload>>,
    /// Clusters whose reports a pass replaced since their last comparison with the state.
    statuses_changed: BTreeSet<String>,
    workloads_changed: BTreeSet<String>,
}

/// Latest observations per cluster, shared by the per-cluster tasks and the reporter.
#[derive(Default)]
pub struct Observations {
    inner: Mutex<Inner>,
    /// statePreservation values (`crate::preserve`), sent as `StatusValues` with the statuses.
    pub values: crate::preserve::ValueObservations,
}

impl Observations {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cluster answered its probe; `capacity` is Some when a scan ran.
    pub fn probe_ok(&self, cluster: &str, capacity: Option<Capacity>) {
        let mut g = self.lock();
        let p = g.probes.entry(cluster.to_string()).or_default();
        p.last_ok = Some(true);
        p.last_success_at = Some(Instant::now());
        p.unreachable_pending = None;
        if capacity.is_some() {
            p.capacity = capacity;
        }
    }

    /// A scan's extended resources and node shapes.
    pub fn capacity_detail(&self, cluster: &str, detail: ExtendedCapacity) {
        self.lock()
            .probes
            .entry(cluster.to_string())
            .or_default()
            .detail = Some(detail);
    }

    pub fn probe_failed(&self, cluster: &str, failure: ProbeFailure) {
        let mut g = self.lock();
        let p = g.probes.entry(cluster.to_string()).or_default();
        if p.last_ok != Some(false) {
            p.unreachable_pending = Some(failure);
        }
        p.last_ok = Some(false);
    }

    /// Replaces the cluster's per-object and workload observations with those of the latest
    /// pass, which read the state at applied index `as_of`.
    pub fn set_statuses(
        &self,
        cluster: &str,
        as_of: u64,
        reports: Vec<HeldStatus>,
        workloads: Vec<HeldWorkload>,
    ) {
        let mut g = self.lock();
        g.statuses.insert(cluster.to_string(), (as_of, reports));
        g.workloads.insert(cluster.to_string(), workloads);
        g.statuses_changed.insert(cluster.to_string());
        g.workloads_changed.insert(cluster.to_string());
    }

    pub fn forget(&self, cluster: &str) {
        let mut g = self.lock();
        g.probes.remove(cluster);
        g.statuses.remove(cluster);
        g.workloads.remove(cluster);
        g.statuses_changed.remove(cluster);
        g.workloads_changed.remove(cluster);
        drop(g);
        self.values.forget(cluster);
    }
}

/// What one flush decided to propose.
#[derive(Debug, Default, PartialEq)]
pub struct Flush {
    pub heartbeats: Vec<Heartbeat>,
    /// Clusters whose probe turned to failure, with why.
    pub unreachable: Vec<ReachabilityReport>,
}

/// Remembers what was proposed, to avoid re-sending while an entry is in flight.
#[derive(Default)]
pub struct Sent {
    capacity: HashMap<String, (Capacity, Instant)>,
    details: HashMap<String, (ExtendedCapacity, Instant)>,
    statuses: HashMap<(String, String, String), (StatusReportAt, Instant)>,
    workloads: HashMap<(String, String, String), (WorkloadObservation, Instant)>,
}

impl Observations {
    /// Heartbeats and unreachable hints due now. `fresh` bounds the age of a successful probe
    /// that still counts as the cluster being up.
    pub fn take_health(
        &self,
        state: &State,
        sent: &mut Sent,
        fresh: Duration,
        now: Instant,
    ) -> Flush {
        let mut g = self.lock();
        let mut out = Flush::default();
        for (cluster, p) in g.probes.iter_mut() {
            if let Some(failure) = p.unreachable_pending.take() {
                out.unreachable.push(ReachabilityReport {
                    cluster: cluster.clone(),
                    failure: Some(failure),
                });
            }
            let up = p.last_ok == Some(true)
                && p.last_success_at
                    .is_some_and(|t| now.saturating_duration_since(t) <= fresh);
            if !up {
                continue;
            }
            let recorded = state.cluster(cluster).and_then(|c| c.status.capacity);
            let capacity = p.capacity.filter(|cap| {
                let in_flight = sent.capacity.get(cluster).is_some_and(|(c, t)| {
                    c == cap && now.saturating_duration_since(*t) < RESEND_AFTER
                });
                recorded.as_ref() != Some(cap) && !in_flight
            });
            if let Some(cap) = capacity {
                sent.capacity.insert(cluster.clone(), (cap, now));
            }
            out.heartbeats.push(Heartbeat {
                cluster: cluster.clone(),
                capacity,
            });
        }
        out
    }

    /// Detailed scans that differ from what the state holds and are not in flight.
    pub fn take_details(
        &self,
        state: &State,
        sent: &mut Sent,
        now: Instant,
    ) -> Vec<CapacityDetail> {
        let g = self.lock();
        let mut out = Vec::new();
        for (cluster, p) in &g.probes {
            let Some(detail) = &p.detail else { continue };
            if state.cluster(cluster).is_none() || state.cluster_extended(cluster) == Some(detail) {
                continue;
            }
            let in_flight = sent.details.get(cluster).is_some_and(|(d, t)| {
                d == detail && now.saturating_duration_since(*t) < RESEND_AFTER
            });
            if in_flight {
                continue;
            }
            sent.details.insert(cluster.clone(), (detail.clone(), now));
            out.push(CapacityDetail {
                cluster: cluster.clone(),
                capacity: detail.clone(),
            });
            if out.len() == MAX_BATCH_ITEMS {
                break;
            }
        }
        out
    }

    /// Per-object reports that differ from the state, at most [`MAX_BATCH_ITEMS`]: of every
    /// cluster, or of those a pass reported on since the last call ([`Sweep`]).
    pub fn take_statuses(
        &self,
        state: &State,
        sent: &mut Sent,
        now: Instant,
        sweep: Sweep,
    ) -> Vec<StatusReportAt> {
        let mut g = self.lock();
        let inner = &mut *g;
        // Reports the state holds now need no guard against resending: dropped first, so that
        // one differing again goes out at once. Only the guards are walked here; the loop
        // below builds a key only for the few reports that differ.
        sent.statuses.retain(|_, (at, _)| {
            let r = &at.report;
            let id = (r.namespace.as_str(), r.name.as_str(), r.cluster.as_str());
            let seen = (r.applied, r.ready_replicas, r.message.as_deref());
            status_differs(state, id, seen) == Some(true)
        });
        release_spare_room(&mut sent.statuses);
        let clusters = due(&inner.statuses, &mut inner.statuses_changed, sweep);
        let mut out = Vec::new();
        for (i, cluster) in clusters.iter().enumerate() {
            let Some((as_of, reports)) = inner.statuses.get(cluster) else {
                continue;
            };
            for r in reports {
                // Not placed there (any more): core would ignore it. Same: nothing to say.
                let id = (
                    r.key.namespace.as_str(),
                    r.key.name.as_str(),
                    cluster.as_str(),
                );
                let seen = (r.applied, r.ready_replicas, r.message.as_deref());
                if status_differs(state, id, seen) != Some(true) {
                    continue;
                }
                let at = StatusReportAt {
                    report: r.on(cluster),
                    as_of: *as_of,
                };
                let key = (r.key.namespace.clone(), r.key.name.clone(), cluster.clone());
                if sent.statuses.get(&key).is_some_and(|(s, t)| {
                    *s == at && now.saturating_duration_since(*t) < RESEND_AFTER
                }) {
                    continue;
                }
                sent.statuses.insert(key, (at.clone(), now));
                out.push(at);
                if out.len() == MAX_BATCH_ITEMS {
                    // This cluster's rest and the clusters after it go next flush.
                    inner.statuses_changed.extend(clusters[i..].iter().cloned());
                    return out;
                }
            }
        }
        out
    }
}

/// Gives back a table's room once most of its entries are gone. Tables that fill in a burst and
/// empty as the state catches up (the guards against resending, the write memos) would
/// otherwise keep room for every placement of the fleet after it converged.
pub(crate) fn release_spare_room<K: Eq + std::hash::Hash, V>(table: &mut HashMap<K, V>) {
    if table.capacity() > 64 && table.len() < table.capacity() / 4 {
        table.shrink_to_fit();
    }
}

/// The clusters a flush of `sweep` compares, in name order; none of them stays marked changed.
fn due<V>(
    reports: &BTreeMap<String, V>,
    changed: &mut BTreeSet<String>,
    sweep: Sweep,
) -> Vec<String> {
    let marked = std::mem::take(changed);
    match sweep {
        Sweep::Full => reports.keys().cloned().collect(),
        Sweep::Changed => marked.into_iter().collect(),
    }
}

/// Whether a report of (applied, ready replicas, message) on `name` in `namespace` on
/// `cluster` is not what the state records; None when the object is not placed there.
fn status_differs(
    state: &State,
    (namespace, name, cluster): (&str, &str, &str),
    (applied, ready, message): (bool, u32, Option<&str>),
) -> Option<bool> {
    let placed = state
        .object(namespace, name)?
        .status
        .clusters
        .iter()
        .find(|c| &*c.cluster == cluster)?;
    Some(
        placed.applied != applied
            || placed.ready_replicas != ready
            || placed.message.as_deref() != message,
    )
}

/// Whether `observed` (of `name` in `namespace` on `cluster`) is not what the state records;
/// None when the object is not placed on that cluster.
fn workload_differs(
    state: &State,
    (namespace, name, cluster): (&str, &str, &str),
    observed: &WorkloadObservation,
) -> Option<bool> {
    let placed = state
        .object(namespace, name)
        .is_some_and(|o| o.status.clusters.iter().any(|c| &*c.cluster == cluster));
    if !placed {
        return None;
    }
    let recorded = state
        .workload_status(namespace, name)
        .and_then(|m| m.get(cluster));
    Some(recorded.is_none_or(|s| s.observed != *observed))
}

impl Observations {
    /// Workload observations that differ from the state, at most [`MAX_BATCH_ITEMS`], of the
    /// clusters `sweep` names.
    pub fn take_workloads(
        &self,
        state: &State,
        sent: &mut Sent,
        now: Instant,
        sweep: Sweep,
    ) -> Vec<WorkloadReport> {
        let mut g = self.lock();
        let inner = &mut *g;
        // As for statuses: guards of what the state holds now go first, keys only for news.
        sent.workloads
            .retain(|(namespace, name, cluster), (observed, _)| {
                workload_differs(state, (namespace, name, cluster), observed) == Some(true)
            });
        release_spare_room(&mut sent.workloads);
        let clusters = due(&inner.workloads, &mut inner.workloads_changed, sweep);
        let mut out = Vec::new();
        for (i, cluster) in clusters.iter().enumerate() {
            let Some(reports) = inner.workloads.get(cluster) else {
                continue;
            };
            for r in reports {
                // Not placed there: core would skip it. Recorded already: nothing to say.
                let id = (
                    r.key.namespace.as_str(),
                    r.key.name.as_str(),
                    cluster.as_str(),
                );
                if workload_differs(state, id, &r.observed) != Some(true) {
                    continue;
                }
                let key = (r.key.namespace.clone(), r.key.name.clone(), cluster.clone());
                if sent.workloads.get(&key).is_some_and(|(o, t)| {
                    *o == r.observed && now.saturating_duration_since(*t) < RESEND_AFTER
                }) {
                    continue;
                }
                sent.workloads.insert(key, (r.observed.clone(), now));
                out.push(r.on(cluster));
                if out.len() == MAX_BATCH_ITEMS {
                    inner
                        .workloads_changed
                        .extend(clusters[i..].iter().cloned());
                    return out;
                }
            }
        }
        out
    }
}

/// One object's status on a cluster, its message cut to [`MAX_MESSAGE_BYTES`].
pub fn object_report(
    key: &SharedKey,
    applied: bool,
    ready: u32,
    message: Option<String>,
) -> HeldStatus {
    HeldStatus {
        key: key.clone(),
        applied,
        ready_replicas: ready,
        message: message.map(|m| short_message(&m).into_boxed_str()),
    }
}

#[cfg(test)]
pub(crate) mod tests;
