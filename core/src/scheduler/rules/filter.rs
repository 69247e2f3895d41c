//! Filters: sorts each cluster into candidate, frozen or evicted, with the first reason that
//! stopped it.
//!
//! Order of checks (first failing one is the recorded reason): tenant slices, cluster list,
//! selector (either passes a cluster an overflow tier selects, `overflow`), workload affinity and anti-affinity, NoExecute taints, health vs grace period, cordon, NoSchedule taints, and for
//! DynamicByCapacity and Aggregated the reported capacity (for any mode, a cluster where an
//! extended-resource or per-node limit leaves room for no replica). Must not: decide replica counts.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::decision::DropReason;
use super::overflow;
use crate::policy::{replicas_fit, tolerated, Division, LabelSelector, TaintEffect};
use crate::scheduler::support::bytes;
use crate::scheduler::{ClusterView, HealthView, ScheduleRequest};

/// What the filters made of one cluster; the reason, when there is one, is in
/// `Classes::reasons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// May receive new replicas.
    Candidate,
    /// Keeps the replicas it has (never more), e.g. cordoned or NotReady within grace.
    Frozen,
    /// Its replicas are re-placed elsewhere.
    Evicted,
}

/// Per-cluster filter results, parallel to the sorted cluster slice.
///
/// The class is one byte per cluster and the reasons sit apart, one per dropped cluster:
/// most clusters pass, and a reason per cluster (a `DropReason` is 56 bytes with a destructor)
/// made this table the largest allocation of a decision.
#[derive(Debug, Clone)]
pub(crate) struct Classes {
    pub class: Vec<Class>,
    /// (cluster position, why it was dropped), one per non-candidate, by position once
    /// `classify` and `spread::apply` are done.
    pub reasons: Vec<(usize, DropReason)>,
    /// The most replicas of this object the cluster may hold; None = no capacity limit.
    pub cap: Vec<Option<u64>>,
    /// Spread constraints ask for at least one replica here (to reach minGroups).
    pub need_one: Vec<bool>,
    /// Why the spread constraints cannot be met, if they cannot.
    pub spread_error: Option<String>,
    /// The overflow tier that selects each cluster (`overflow::tier_of`, `usize::MAX` for
    /// none); empty when no overflow tiers apply.
    pub tier: Vec<usize>,
}

impl Classes {
    /// Drops a candidate (each cluster is dropped at most once). Callers that drop out of
    /// position order call `sort_reasons` afterwards.
    pub(crate) fn drop(&mut self, i: usize, reason: DropReason) {
        debug_assert_eq!(self.class[i], Class::Candidate);
        self.class[i] = if reason.keeps_existing() {
            Class::Frozen
        } else {
            Class::Evicted
        };
        self.reasons.push((i, reason));
    }

    /// Puts the reasons back in position order (positions are unique: one drop per cluster).
    pub(crate) fn sort_reasons(&mut self) {
        if !self.reasons.is_sorted_by_key(|(i, _)| *i) {
            self.reasons.sort_unstable_by_key(|(i, _)| *i);
        }
    }
}

pub(crate) fn classify(req: &ScheduleRequest<'_>, clusters: &[ClusterView<'_>]) -> Classes {
    let n = clusters.len();
    let mut out = Classes {
        class: vec![Class::Candidate; n],
        reasons: Vec::new(),
        cap: vec![None; n],
        need_one: vec![false; n],
        spread_error: None,
        tier: Vec::new(),
    };
    let overflow = overflow::applies(req);
    let dynamic = req
        .placement
        .replicas
        .division
        .as_deref()
        .is_some_and(Division::by_capacity);
    for (i, c) in clusters.iter().enumerate() {
        let sums = c.available.map(|a| a.fits_times(&req.per_replica));
        let extended = extended_fit(req, c);
        let fits = match (sums, extended) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        out.cap[i] = if dynamic {
            Some(fits.unwrap_or(0))
        } else {
            fits.filter(|&f| f != u64::MAX)
        };
        // A cluster that left replicas Pending holds no more than it could run, whatever its
        // reported sums say (they do not see fragmentation, taints or per-node limits).
        if let Some(h) = c.held_to {
            out.cap[i] = Some(out.cap[i].map_or(h, |cap| cap.min(h)));
        }
        // An extended or per-node limit drops a cluster that holds not one replica in every
        // mode, so a Duplicated GPU workload does not land where no node can run it.
        let limited = dynamic || extended == Some(0);
        let tiered = overflow.map(|o| {
            let t = overflow::tier_of(req.placement, o, c.name, c.labels);
            out.tier.push(t.unwrap_or(usize::MAX));
            t.is_some()
        });
        if let Some(reason) = first_reason(req, c, limited, fits, tiered) {
            out.drop(i, reason);
        }
    }
    out
}

/// The replicas the cluster's extended resources and node shapes allow; None when neither
/// applies (no detailed report, no extended request): decisions are then what they were before
/// detailed reports existed.
fn extended_fit(req: &ScheduleRequest<'_>, c: &ClusterView<'_>) -> Option<u64> {
    if c.extended.is_none() && req.per_replica_extended.is_empty() {
        return None;
    }
    let current = req.current.get(c.name).copied().unwrap_or(0);
    let fit = replicas_fit(
        c.extended.map(|e| e.report),
        c.extended.map_or(req.per_replica_extended, |e| e.free),
        &req.per_replica,
        req.per_replica_extended,
        current,
    );
    (fit != u64::MAX).then_some(fit)
}

/// `tiered`: Some(true) when an overflow tier selects the cluster (the placement's own list
/// and selector are then not asked); otherwise they say why it is not selected.
fn first_reason(
    req: &ScheduleRequest<'_>,
    c: &ClusterView<'_>,
    dynamic: bool,
    fits: Option<u64>,
    tiered: Option<bool>,
) -> Option<DropReason> {
    let p = req.placement;
    if let Some(allowed) = req.allowed {
        if !allowed.contains(c.name) {
            return Some(DropReason::NotInTenantSlices);
        }
    }
    let selected = tiered == Some(true);
    if let Some(list) = p.clusters.as_ref().filter(|_| !selected) {
        if !list.iter().any(|n| n == c.name) {
            return Some(DropReason::NotInClusterList);
        }
    }
    if let Some(sel) = p.cluster_selector.as_ref().filter(|_| !selected) {
        if !selector_matches(sel, c.name, c.labels) {
            return Some(DropReason::SelectorMismatch);
        }
    }
    if let Some(peers) = req.peers {
        if let Some((group, clusters)) = &peers.together {
            if !clusters.contains(c.name) {
                return Some(DropReason::WorkloadAffinity {
                    group: group.clone(),
                });
            }
        }
        if let Some((group, peer)) = peers.apart.get(c.name) {
            return Some(DropReason::WorkloadAntiAffinity {
                group: group.clone(),
                peer: peer.clone(),
            });
        }
    }
    let untolerated = |effect: TaintEffect| {
        c.taints
            .iter()
            .find(|t| t.effect == effect && !tolerated(&p.tolerations, t))
            .map(|t| DropReason::UntoleratedTaint {
                key: t.key.clone(),
                effect,
            })
    };
    if let Some(r) = untolerated(TaintEffect::NoExecute) {
        return Some(r);
    }
    match c.health {
        HealthView::Ready => {}
        HealthView::Held { since_ms } => return Some(DropReason::NotReady { since_ms }),
        HealthView::NotReady { since_ms } | HealthView::Unknown { since_ms } => {
            let expired = p.failover.enabled
                && req.now_ms.saturating_sub(since_ms) > p.failover.grace_period_ms();
            return Some(if expired {
                DropReason::FailedOver { since_ms }
            } else if matches!(c.health, HealthView::NotReady { .. }) {
                DropReason::NotReady { since_ms }
            } else {
                DropReason::Unknown { since_ms }
            });
        }
    }
    if c.cordoned {
        return Some(DropReason::Cordoned);
    }
    if let Some(r) = untolerated(TaintEffect::NoSchedule) {
        return Some(r);
    }
    if dynamic {
        match fits {
            None => return Some(DropReason::CapacityNotReported),
            Some(0) => return Some(DropReason::NoCapacity),
            Some(_) => {}
        }
    }
    None
}

/// `LabelSelector::matches`, with `matchLabels` checked by one walk over both sorted maps
/// with inline comparisons instead of a map lookup (and two `memcmp` calls) per label: this
/// runs for every cluster of every decision.
pub(crate) fn selector_matches(
    sel: &LabelSelector,
    cluster: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let mut have = labels.iter();
    for (key, value) in &sel.match_labels {
        loop {
            let Some((k, v)) = have.next() else {
                return false;
            };
            match bytes::cmp(k.as_bytes(), key.as_bytes()) {
                Ordering::Less => continue,
                Ordering::Equal if bytes::eq(v.as_bytes(), value.as_bytes()) => break,
                _ => return false,
            }
        }
    }
    sel.match_expressions
        .iter()
        .all(|r| r.matches_cluster(cluster, labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{LabelSelectorRequirement, SelectorOperator};

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selector_walk_agrees_with_the_selector() {
        let label_sets = [
            map(&[]),
            map(&[("env", "prod")]),
            map(&[("env", "prod"), ("region", "r1")]),
            map(&[("env", "dev"), ("region", "r1"), ("zone", "z1")]),
            map(&[
                ("a", "1"),
                ("env", "prod"),
                ("region", "r2"),
                ("zone", "z2"),
            ]),
            map(&[("region", "r1"), ("zone", "z1")]),
        ];
        let mut selectors = Vec::new();
        for labels in &label_sets {
            for expr in [
                None,
                Some(SelectorOperator::In),
                Some(SelectorOperator::NotIn),
            ] {
                selectors.push(LabelSelector {
                    match_labels: labels.clone(),
                    match_expressions: expr
                        .map(|operator| LabelSelectorRequirement {
                            key: "zone".into(),
                            operator,
                            values: vec!["z1".into()],
                        })
                        .into_iter()
                        .collect(),
                });
            }
        }
        selectors.push(LabelSelector {
            match_labels: map(&[("env", "prod"), ("zz", "")]),
            match_expressions: vec![],
        });
        for sel in &selectors {
            for labels in &label_sets {
                assert_eq!(
                    selector_matches(sel, "c1", labels),
                    sel.matches_cluster("c1", labels),
                    "{sel:?} on {labels:?}"
                );
            }
        }
    }
}
