//! Overflow tiers (Karmada's `overflowAffinities`, `karmada/overflow.rs`) for door templates:
//! which tiers a decision honours, and which term each placed cluster's replicas came from
//! for the audit's explain.
//!
//! The tiers are those of the affinity group in use (`affinity_groups::group_in_use`: the
//! group whose placement the object stores), read off the bound policy at decision time, as
//! workload affinity is: nothing new is stored, snapshots and replays need no field, and a
//! policy write re-derives the same specs. Moving to a later group when the whole group, its
//! overflow tiers included, cannot hold the replicas stays `affinity_groups`' job.
//!
//! No gate by version is needed: only an entry of `OVERFLOW_AFFINITIES_SINCE` or later can
//! store a policy with overflow tiers, so older logs decide as they did.
//!
//! Must not: store anything, or decide counts (the scheduler fills the tiers).

use std::collections::BTreeMap;

use super::affinity_groups::group_in_use;
use super::workload_affinity::Subject;
use crate::karmada::PolicySpec;
use crate::model::ObjectKey;
use crate::policy::Placement;
use crate::scheduler::{tier_of, AffinityTerms, Overflow};
use crate::state::State;

impl State {
    /// Whether some stored propagation policy has overflow tiers: every other decision is
    /// spared the lookup.
    fn any_overflow(&self) -> bool {
        self.door_ix.values().any(|s| {
            matches!(s, PolicySpec::Propagation(p)
                if p.affinity_groups.iter().any(|g| g.overflow.is_some()))
        })
    }

    /// The overflow tiers a decision of the door object `key`, placed by `placement`, honours;
    /// `subject` is the template being put, if any (its binding is not recorded yet).
    pub(crate) fn overflow_for(
        &self,
        key: &ObjectKey,
        placement: &Placement,
        subject: Option<&Subject>,
    ) -> Option<&Overflow> {
        if !self.any_overflow() {
            return None;
        }
        let policy = match subject.filter(|s| s.object == *key) {
            Some(s) => s.policy.as_ref(),
            None => self.template_of(key)?.1.bound_to.as_ref(),
        }?;
        let PolicySpec::Propagation(p) = self.door_ix.get(policy)? else {
            return None;
        };
        if p.affinity_groups.is_empty() {
            return None;
        }
        p.affinity_groups[group_in_use(&p.affinity_groups, placement)]
            .overflow
            .as_ref()
    }

    /// The affinity term behind each cluster the door object `key` runs on now, when its group
    /// has overflow tiers (a cluster no longer registered is matched by name only).
    pub fn affinity_terms(&self, key: &ObjectKey) -> Option<AffinityTerms> {
        let obj = self.object(&key.namespace, &key.name)?;
        let o = self.overflow_for(key, &obj.spec.placement, None)?;
        let none = BTreeMap::new();
        let tier_of = obj
            .status
            .clusters
            .iter()
            .filter_map(|p| {
                let labels = self
                    .d
                    .clusters
                    .get(&p.cluster)
                    .map_or(&none, |c| &c.spec.labels);
                let t = tier_of(&obj.spec.placement, o, &p.cluster, labels)?;
                Some((String::from(&*p.cluster), t))
            })
            .collect();
        let names = std::iter::once(o.primary.clone())
            .chain(o.tiers.iter().map(|t| t.name.clone()))
            .collect();
        Some(AffinityTerms { names, tier_of })
    }

    /// "beyond idc-gpu: cloud-gpu-cluster1 (2) by overflow cloud-gpu", for the audit's explain;
    /// None when the object's primary tier holds all its replicas or it has no overflow tiers.
    pub fn overflow_note(&self, key: &ObjectKey) -> Option<String> {
        let obj = self.object(&key.namespace, &key.name)?;
        self.affinity_terms(key)?
            .overflow_note(&obj.placement_map())
    }
}
