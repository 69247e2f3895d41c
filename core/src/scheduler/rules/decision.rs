//! The decision record a scheduling run returns: the placement plus why it looks that way.
//!
//! Owns: `Decision`, the closed set of `DropReason`s, the diff against the previous placement
//! and the one-sentence summary the audit log shows for "explain". Must not: compute placement.
//! Everything here is serde + bincode-encodable (no JSON values, no untagged enums, no flatten).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::overflow::AffinityTerms;
use crate::policy::TaintEffect;
use crate::scheduler::support::names::{ClusterNames, ClusterWeights};

/// The outcome of one scheduling run for one federated object.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// cluster -> replicas; clusters with 0 replicas are omitted. In Duplicated mode each value
    /// is the replica count that cluster runs.
    pub placement: BTreeMap<String, u32>,
    /// Clusters that passed every filter and may receive new replicas, sorted by name. Reads
    /// and serializes as a `Vec<String>` (see `ClusterNames`).
    pub candidates: ClusterNames,
    /// Clusters that did not pass, each with the first filter that stopped it, sorted by name.
    pub dropped: Vec<DroppedCluster>,
    /// The weight each candidate was given (static weight, or replicas that fit for
    /// DynamicByCapacity); empty in Duplicated mode. Reads and serializes as a
    /// `BTreeMap<String, u64>` (see `ClusterWeights`).
    pub weights: ClusterWeights,
    /// Set when not every replica could be placed.
    pub unschedulable: Option<Shortfall>,
    /// What changed against the placement before, sorted by cluster.
    pub moved: Vec<ReplicaMove>,
    /// With overflow tiers: the affinity term behind each placed cluster's replicas. Not
    /// encoded: the audit archive's records keep the shape older binaries wrote and read, and
    /// the audit's explain finds the terms in the replayed state (`State::overflow_note`).
    #[serde(skip)]
    pub terms: Option<AffinityTerms>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DroppedCluster {
    pub cluster: String,
    pub reason: DropReason,
}

/// Why a cluster cannot receive new replicas. `keeps_existing` says whether replicas already
/// there stay (cordon-like reasons) or are re-placed elsewhere (eviction-like reasons).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DropReason {
    /// `placement.clusters` does not name it.
    NotInClusterList,
    /// `placement.clusterSelector` does not match its labels.
    SelectorMismatch,
    /// Tenant two-level scheduling: the tenant holds no slice on it.
    NotInTenantSlices,
    /// A taint the object does not tolerate. NoSchedule keeps replicas, NoExecute evicts them.
    UntoleratedTaint { key: String, effect: TaintEffect },
    /// Cordoned: no new replicas, existing ones stay.
    Cordoned,
    /// NotReady since `since_ms`, still inside the grace period (or failover disabled).
    NotReady { since_ms: u64 },
    /// Health unknown since `since_ms`, still inside the grace period (or failover disabled).
    Unknown { since_ms: u64 },
    /// NotReady or Unknown since `since_ms` for longer than the grace period: replicas re-placed.
    FailedOver { since_ms: u64 },
    /// DynamicByCapacity: the cluster never reported capacity.
    CapacityNotReported,
    /// DynamicByCapacity: not even one replica fits.
    NoCapacity,
    /// The cluster lacks the label a spread constraint groups by.
    MissingSpreadLabel { label_key: String },
    /// Its group was not among those a spread constraint selected.
    SpreadConstraint { label_key: String, group: String },
    /// `workloadAffinity.affinity`: no workload of the object's group (`label=value`) runs
    /// there, and some runs elsewhere.
    WorkloadAffinity { group: String },
    /// `workloadAffinity.antiAffinity`: `peer`, of the object's group (`label=value`), runs
    /// there.
    WorkloadAntiAffinity { group: String, peer: String },
}

impl DropReason {
    /// Whether replicas already on the cluster stay (true) or are re-placed elsewhere (false).
    pub fn keeps_existing(&self) -> bool {
        match self {
            DropReason::UntoleratedTaint { effect, .. } => *effect == TaintEffect::NoSchedule,
            DropReason::Cordoned
            | DropReason::NotReady { .. }
            | DropReason::Unknown { .. }
            | DropReason::CapacityNotReported => true,
            DropReason::NotInClusterList
            | DropReason::SelectorMismatch
            | DropReason::NotInTenantSlices
            | DropReason::FailedOver { .. }
            | DropReason::NoCapacity
            | DropReason::MissingSpreadLabel { .. }
            | DropReason::SpreadConstraint { .. }
            | DropReason::WorkloadAffinity { .. }
            | DropReason::WorkloadAntiAffinity { .. } => false,
        }
    }

    /// A short human phrase, e.g. "NotReady since 12000 ms".
    pub fn describe(&self) -> String {
        match self {
            DropReason::NotInClusterList => "not in the placement's cluster list".to_string(),
            DropReason::SelectorMismatch => "labels do not match the cluster selector".to_string(),
            DropReason::NotInTenantSlices => "holds no slice of the tenant's quota".to_string(),
            DropReason::UntoleratedTaint { key, effect } => {
                format!("untolerated taint {key}:{}", effect.as_str())
            }
            DropReason::Cordoned => "cordoned".to_string(),
            DropReason::NotReady { since_ms } => format!("NotReady since {since_ms} ms"),
            DropReason::Unknown { since_ms } => format!("health Unknown since {since_ms} ms"),
            DropReason::FailedOver { since_ms } => {
                format!("unhealthy since {since_ms} ms, beyond the failover grace period")
            }
            DropReason::CapacityNotReported => "has not reported capacity".to_string(),
            DropReason::NoCapacity => "no capacity for one more replica".to_string(),
            DropReason::MissingSpreadLabel { label_key } => {
                format!("lacks spread label {label_key}")
            }
            DropReason::SpreadConstraint { label_key, group } => {
                format!("{label_key}={group} not chosen by the spread constraint")
            }
            DropReason::WorkloadAffinity { group } => {
                format!("workloadAffinity: no workload of affinity group {group} runs there")
            }
            DropReason::WorkloadAntiAffinity { group, peer } => {
                format!("workloadAffinity: {peer} of anti-affinity group {group} runs there")
            }
        }
    }
}

/// Replicas that could not be placed, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shortfall {
    pub replicas: u32,
    pub message: String,
}

/// One cluster's replica count before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaMove {
    pub cluster: String,
    pub from: u32,
    pub to: u32,
}

/// The per-cluster differences between two placements, sorted by cluster name.
pub fn diff(current: &BTreeMap<String, u32>, next: &BTreeMap<String, u32>) -> Vec<ReplicaMove> {
    let mut moves = Vec::new();
    let mut a = current.iter().filter(|(_, n)| **n > 0).peekable();
    let mut b = next.iter().filter(|(_, n)| **n > 0).peekable();
    loop {
        let (cluster, from, to) = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some((ca, na)), Some((cb, nb))) if ca == cb => {
                let r = ((*ca).clone(), **na, **nb);
                a.next();
                b.next();
                r
            }
            (Some((ca, na)), Some((cb, _))) if ca < cb => {
                let r = ((*ca).clone(), **na, 0);
                a.next();
                r
            }
            (Some((ca, na)), None) => {
                let r = ((*ca).clone(), **na, 0);
                a.next();
                r
            }
            (_, Some((cb, nb))) => {
                let r = ((*cb).clone(), 0, **nb);
                b.next();
                r
            }
        };
        if from != to {
            moves.push(ReplicaMove { cluster, from, to });
        }
    }
    moves
}

impl Decision {
    /// Total replicas placed.
    pub fn total(&self) -> u64 {
        self.placement.values().map(|&n| u64::from(n)).sum()
    }

    /// One human sentence: why replicas left clusters, where they went, and any shortfall.
    /// Example: "dc2 NotReady since 5000 ms; 3 replicas moved to dc1 (2) and dc3 (1)".
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let reasons: BTreeMap<&str, &DropReason> = self
            .dropped
            .iter()
            .map(|d| (d.cluster.as_str(), &d.reason))
            .collect();
        let mut lost = Vec::new();
        let mut gained = Vec::new();
        for m in &self.moved {
            if m.to < m.from {
                lost.push(m);
            } else {
                gained.push(m);
            }
        }
        for m in &lost {
            let why = reasons.get(m.cluster.as_str()).map(|r| r.describe());
            parts.push(match why {
                Some(why) => format!("{} {why} ({} -> {})", m.cluster, m.from, m.to),
                None => format!("{} reduced {} -> {}", m.cluster, m.from, m.to),
            });
        }
        if !gained.is_empty() {
            let added: u64 = gained.iter().map(|m| u64::from(m.to - m.from)).sum();
            let mut s = String::new();
            for (i, m) in gained.iter().enumerate() {
                if i > 0 {
                    s.push_str(if i + 1 == gained.len() { " and " } else { ", " });
                }
                let _ = write!(s, "{} ({})", m.cluster, m.to - m.from);
            }
            let verb = if lost.is_empty() {
                "added on"
            } else {
                "moved to"
            };
            let noun = if added == 1 { "replica" } else { "replicas" };
            parts.push(format!("{added} {noun} {verb} {s}"));
        }
        if parts.is_empty() {
            parts.push(format!(
                "placement unchanged: {} replicas on {} clusters",
                self.total(),
                self.placement.len()
            ));
        }
        if let Some(note) = self
            .terms
            .as_ref()
            .and_then(|t| t.overflow_note(&self.placement))
        {
            parts.push(note);
        }
        if let Some(sf) = &self.unschedulable {
            parts.push(format!(
                "{} replicas unschedulable: {}",
                sf.replicas, sf.message
            ));
        }
        parts.join("; ")
    }
}
