//! The scheduler: a pure function from (placement spec, cluster views, current placement) to a
//! `Decision`.
//!
//! Start at [`schedule`]. The pipeline is: `filter` sorts every cluster into candidates (may
//! receive new replicas), frozen (keep what they have, get nothing new) and evicted; then the
//! replica mode decides the counts: Duplicated (every candidate runs the full count) or Divided
//! via `static_weights` (KubeFed planner, when any min/max is set), `webster` (plain weights) or
//! `dynamic` (weights from capacity); `spread` narrows candidates to label groups first;
//! `overflow` fills a capacity-weighted object's tiers of clusters one after the other.
//! `slices` places a tenant's quota slices for two-level scheduling. A cluster's capacity for
//! an object is the tightest of its cluster sums and, once it reports them, its extended
//! resources and node shapes (`policy::replicas_fit`: every replica must fit on one node).
//!
//! Layout: `rules/` holds those rules and `decision` (the record a run returns); `support/`
//! holds what makes them cheap without deciding anything: `names` (one shared name buffer for a
//! record's per-cluster parts), `bytes` (inline name and label comparisons) and `order` (the
//! static-weights planner's tie-break order, computed lazily).
//!
//! Must not: read clocks, iterate hash maps into results, use floating point, or look at other
//! objects (what workload affinity needs of them comes in the request, `WorkloadPeers`): the
//! cost is O(clusters) per decision (plus a sort when the caller's cluster list is
//! not already sorted) and independent of how many objects exist.

use std::collections::{BTreeMap, BTreeSet};

use crate::policy::{Extended, ExtendedCapacity, Placement, Resources, Taint};

mod rules;
mod support;

pub use rules::decision::{diff, Decision, DropReason, DroppedCluster, ReplicaMove, Shortfall};
pub use rules::overflow::{tier_of, AffinityTerms, Overflow, OverflowTier};
pub use rules::slices::place_slices;
pub use rules::{decision, static_weights, webster};
pub use support::names::{ClusterNames, ClusterWeights};

use rules::{divided, filter, spread};
use support::bytes;

/// A cluster's health as the scheduler sees it; times are log time in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthView {
    Ready,
    NotReady {
        since_ms: u64,
    },
    Unknown {
        since_ms: u64,
    },
    /// NotReady, with failover paused by the brake (`crate::health`): its replicas stay,
    /// whatever the grace period says, and it gets no new ones.
    Held {
        since_ms: u64,
    },
}

/// What the scheduler needs to know about one registered cluster.
#[derive(Debug, Clone, Copy)]
pub struct ClusterView<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub taints: &'a [Taint],
    pub cordoned: bool,
    pub health: HealthView,
    /// Free capacity for this object: reported available minus what fedraft's OTHER placements
    /// booked. None = never reported. DynamicByCapacity treats `available.fits_times(per_replica)`
    /// as the most replicas of this object the cluster may hold in total (its current replicas
    /// included), so the caller must not subtract this object's own booking.
    pub available: Option<Resources>,
    /// Extended resources and node shapes from the cluster's last detailed scan, with what
    /// fedraft's other placements left free of the extended sums; None = never reported (then
    /// a replica asking for an extended resource does not fit, and nothing else changes).
    pub extended: Option<ExtendedFree<'a>>,
    /// The most replicas of this object the cluster may hold whatever its capacity says: the
    /// descheduler's estimate after replicas stayed Pending there (`state/handlers/deschedule.rs`);
    /// None = no such hold.
    pub held_to: Option<u64>,
}

/// A cluster's detailed capacity report and its extended sums free for one object.
#[derive(Debug, Clone, Copy)]
pub struct ExtendedFree<'a> {
    pub report: &'a ExtendedCapacity,
    /// `report.available` minus the extended requests other objects booked there.
    pub free: &'a Extended,
}

/// Everything one scheduling run looks at.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleRequest<'a> {
    /// The object's `namespace/name`. It salts the static-weights planner's tie-breaking hash, as
    /// KubeFed's object key does, so that equal-weight one-replica objects spread over clusters
    /// instead of all landing on the same one.
    pub object_key: &'a str,
    pub placement: &'a Placement,
    /// The template's spec.replicas (1 when absent).
    pub total_replicas: u32,
    /// The template's per-replica resource requests.
    pub per_replica: Resources,
    /// The template's per-replica extended resource requests (`nvidia.com/gpu`...).
    pub per_replica_extended: &'a Extended,
    /// Every registered cluster, sorted by name (any order works; sorted skips a sort).
    pub clusters: &'a [ClusterView<'a>],
    /// The object's current placement.
    pub current: &'a BTreeMap<String, u32>,
    /// Clusters holding the tenant's slices (two-level scheduling); None = all.
    pub allowed: Option<&'a BTreeSet<String>>,
    /// Where the object's workload-affinity peers run; None = no such rule applies.
    pub peers: Option<&'a WorkloadPeers>,
    /// The overflow tiers after the placement's own clusters (Karmada's
    /// `overflowAffinities`, found by the state machine); None = none.
    pub overflow: Option<&'a Overflow>,
    /// Log time of the entry being applied.
    pub now_ms: u64,
    /// The cluster of a spread group that must get a replica is one that can take it, and
    /// without rebalance one already running some (`rules::spread`), so re-placing an object
    /// keeps that group's replicas where they are. False only to replay entries written before
    /// the rule (`command::STEADY_SPREAD_SINCE`), which gave it to the heaviest candidate,
    /// first by name, even one without room.
    pub steady_spread: bool,
}

/// Where the workloads an object must join or avoid run (Karmada's `placement.workloadAffinity`),
/// as the state machine found them (`state/handlers/workload_affinity.rs`): the scheduler
/// filters clusters by it and never looks at the other objects itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadPeers {
    /// `affinity`: its group (`label=value`) and the clusters the group's placed workloads run
    /// on. None when there is no such group or none of it is placed yet: the first of a group
    /// goes wherever its placement allows, and the others follow it.
    pub together: Option<(String, BTreeSet<String>)>,
    /// `antiAffinity`: cluster → its group (`label=value`) and the first workload of that
    /// group (by name) running there; the object may not go to any of these clusters.
    pub apart: BTreeMap<String, (String, String)>,
}

/// Decides the placement of one federated object. Deterministic: the same request gives the same
/// decision regardless of the order of `clusters`.
pub fn schedule(req: &ScheduleRequest<'_>) -> Decision {
    let sorted: Vec<ClusterView<'_>>;
    // Strictly ascending (the usual case: a name-keyed map's values) proves the names unique
    // too, which lets the record share one name buffer between candidates and weights.
    let order =
        |a: &ClusterView<'_>, b: &ClusterView<'_>| bytes::cmp(a.name.as_bytes(), b.name.as_bytes());
    let strictly = req.clusters.is_sorted_by(|a, b| order(a, b).is_lt());
    let clusters: &[ClusterView<'_>] =
        if strictly || req.clusters.is_sorted_by(|a, b| order(a, b).is_le()) {
            req.clusters
        } else {
            sorted = {
                let mut v = req.clusters.to_vec();
                v.sort_by(|a, b| a.name.cmp(b.name));
                v
            };
            &sorted
        };
    let unique = strictly || clusters.windows(2).all(|w| w[0].name != w[1].name);
    let mut classes = filter::classify(req, clusters);
    spread::apply(req, clusters, &mut classes);
    divided::decide(req, clusters, unique, classes)
}
