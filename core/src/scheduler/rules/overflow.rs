//! Overflow tiers (Karmada's `clusterAffinities[].overflowAffinities`): the placement's own
//! clusters are the primary tier; each overflow tier is a further set of clusters that takes
//! replicas only once every tier before it is full.
//!
//! How a run honours them, only for a Divided object whose division weighs clusters by their
//! capacity (`DynamicByCapacity`, `Aggregated`; any other object is placed by the primary tier
//! alone, as Karmada places a non-workload): a cluster belongs to the first tier that selects
//! it (the primary before any overflow tier, an earlier overflow tier before a later one);
//! after frozen clusters keep theirs, each tier in order gets the lesser of the replicas still
//! to place and what its candidates can hold, divided among them by the object's division
//! (so with the usual stability: a tier's current replicas are kept while it gets at least as
//! many). A cluster's capacity counts the replicas it already runs of this object, so a scale
//! down shrinks the last tier in use first and a scale up fills the primary tier first; what
//! no tier holds is the shortfall.
//!
//! Must not: filter clusters for any other reason than tier membership (that is `filter`), or
//! look up the tiers: the state machine finds them in the object's policy and hands them in.

use std::collections::BTreeMap;

use super::filter::selector_matches;
use crate::policy::{Division, LabelSelector, Placement};
use crate::scheduler::ScheduleRequest;

/// The overflow tiers of one object's affinity group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overflow {
    /// The affinity group's own name: the term of the placement's own clusters.
    pub primary: String,
    /// The overflow tiers, in the order they are used.
    pub tiers: Vec<OverflowTier>,
}

/// One overflow tier: its `affinityName` and the clusters it selects (both conditions ANDed,
/// as in a `Placement`; None = no restriction by that condition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverflowTier {
    pub name: String,
    pub clusters: Option<Vec<String>>,
    pub cluster_selector: Option<LabelSelector>,
}

/// Which affinity term each placed cluster's replicas were taken from, for the decision
/// record: `names[0]` is the primary term, `names[k]` the k-th overflow tier.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AffinityTerms {
    pub names: Vec<String>,
    /// Placed cluster → index into `names`.
    pub tier_of: BTreeMap<String, usize>,
}

impl AffinityTerms {
    /// The term of `cluster`'s replicas and whether it is an overflow tier.
    pub fn term(&self, cluster: &str) -> Option<(&str, bool)> {
        let k = *self.tier_of.get(cluster)?;
        Some((self.names.get(k)?.as_str(), k > 0))
    }

    /// "cloud-gpu-cluster1 (2) by overflow cloud-gpu", for the placed clusters of overflow
    /// tiers; None when the primary tier holds everything.
    pub fn overflow_note(&self, placement: &BTreeMap<String, u32>) -> Option<String> {
        let parts: Vec<String> = placement
            .iter()
            .filter_map(|(c, n)| match self.term(c)? {
                (term, true) => Some(format!("{c} ({n}) by overflow {term}")),
                (_, false) => None,
            })
            .collect();
        let primary = self.names.first()?;
        (!parts.is_empty()).then(|| format!("beyond {primary}: {}", parts.join(", ")))
    }
}

impl Overflow {
    /// Whether some tier could select a cluster not in a name list (the caller must then show
    /// the scheduler every cluster).
    pub fn selects_by_label(&self) -> bool {
        self.tiers.iter().any(|t| t.clusters.is_none())
    }

    /// The cluster names the tiers list.
    pub fn listed(&self) -> impl Iterator<Item = &str> {
        self.tiers
            .iter()
            .filter_map(|t| t.clusters.as_ref())
            .flatten()
            .map(String::as_str)
    }

    /// All term names, the primary first.
    fn names(&self) -> Vec<String> {
        std::iter::once(self.primary.clone())
            .chain(self.tiers.iter().map(|t| t.name.clone()))
            .collect()
    }
}

/// The tiers this run honours: only for a Divided object whose division weighs clusters by
/// their capacity.
pub(crate) fn applies<'a>(req: &ScheduleRequest<'a>) -> Option<&'a Overflow> {
    let o = req.overflow?;
    let by_capacity = req
        .placement
        .replicas
        .division
        .as_deref()
        .is_some_and(Division::by_capacity);
    (by_capacity && req.placement.replicas.mode.divides() && !o.tiers.is_empty()).then_some(o)
}

/// The tier that selects the cluster: 0 for the placement's own clusters, k for overflow tier
/// k, None when none does.
pub fn tier_of(
    placement: &Placement,
    overflow: &Overflow,
    cluster: &str,
    labels: &BTreeMap<String, String>,
) -> Option<usize> {
    let selects = |list: &Option<Vec<String>>, sel: Option<&LabelSelector>| {
        list.as_ref().is_none_or(|l| l.iter().any(|n| n == cluster))
            && sel.is_none_or(|s| selector_matches(s, cluster, labels))
    };
    if selects(&placement.clusters, placement.cluster_selector.as_deref()) {
        return Some(0);
    }
    overflow
        .tiers
        .iter()
        .position(|t| selects(&t.clusters, t.cluster_selector.as_ref()))
        .map(|k| k + 1)
}

/// Places `budget` replicas tier by tier: each tier's candidates (`cand` positions whose
/// `tier` is that tier) get the lesser of what is left and their summed `cap`, shared out by
/// `divide(candidates of the tier, replicas)`, which returns how many it placed. Returns the
/// replicas placed in all.
pub(crate) fn by_tier(
    tiers: usize,
    tier: &[usize],
    cap: &[Option<u64>],
    cand: &[usize],
    budget: u64,
    mut divide: impl FnMut(&[usize], u64) -> u64,
) -> u64 {
    let mut left = budget;
    for t in 0..=tiers {
        let members: Vec<usize> = cand.iter().copied().filter(|&i| tier[i] == t).collect();
        let room = members
            .iter()
            .fold(0u64, |sum, &i| sum.saturating_add(cap[i].unwrap_or(0)));
        // Every tier is divided, even one given nothing: its replicas then go (a scale down
        // releases the last tiers first).
        let placed = divide(&members, left.min(room));
        left = left.saturating_sub(placed);
    }
    budget - left
}

/// The decision's record of terms for the clusters that hold replicas.
pub(crate) fn record(
    o: &Overflow,
    tier: &[usize],
    names: impl Iterator<Item = (usize, String)>,
) -> AffinityTerms {
    AffinityTerms {
        names: o.names(),
        tier_of: names.map(|(i, c)| (c, tier[i])).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tier_gets_what_it_holds_in_order() {
        // Clusters 0..4: tiers 0, 1, 1, 2; capacities 3, 2, 2, 10.
        let tier = [0, 1, 1, 2];
        let cap = [Some(3), Some(2), Some(2), Some(10)];
        let mut given = Vec::new();
        let placed = by_tier(2, &tier, &cap, &[0, 1, 2, 3], 6, |m, n| {
            given.push((m.to_vec(), n));
            n
        });
        assert_eq!(placed, 6);
        assert_eq!(
            given,
            [(vec![0], 3), (vec![1, 2], 3), (vec![3], 0)],
            "the primary is filled first, the next tier takes the rest"
        );
        let placed = by_tier(2, &tier, &cap, &[0, 1, 2, 3], 30, |_, n| n);
        assert_eq!(placed, 17, "what no tier holds stays unplaced");
    }
}
