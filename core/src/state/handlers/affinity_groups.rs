//! Ordered affinity groups (Karmada's `placement.clusterAffinities`) for door templates, and
//! the other conditions a propagation policy puts on the placement it derives (lazy
//! activation, dependent overrides).
//!
//! A template bound to a policy with groups is placed by one group at a time. Which one is not
//! stored anywhere new: it is the group whose placement the object's stored spec carries (the
//! first such group; none of them, e.g. after the policy changed, means the first group). So
//! snapshots and replays keep it without a field of their own, and every node reads the same.
//! A template is derived onto the group in use; when the scheduler finds no feasible placement
//! in it (its clusters, overflow tiers included (`overflow`), NotReady past the grace period,
//! tainted NoExecute, or unable to hold the replicas), the object moves to the first later group that yields one, in order, as
//! Karmada's scheduler does. It never moves back to an earlier group on its own: a write of the
//! template or the policy that no longer matches the group in use starts from the first again.
//!
//! Must not: decide placement within a group (the scheduler does), or move an object for an
//! entry older than `karmada::PEER_WIDENED_SINCE`.

use crate::admission::Actor;
use crate::door::{undivided_without_replicas, PolicyRef};
use crate::karmada::{AffinityGroup, PolicyKind, PolicySpec, PEER_WIDENED_SINCE};
use crate::model::{FederatedObject, ObjectKey, ObjectSpec};
use crate::policy::Placement;
use crate::scheduler::Decision;
use crate::state::{Ctx, State};

use super::binding::nowhere;

/// Whether a decision places the object: some cluster runs or may take it, and every replica
/// found a place.
pub(super) fn feasible(d: &Decision) -> bool {
    d.unschedulable.is_none() && !(d.placement.is_empty() && d.candidates.iter_str().len() == 0)
}

/// The index of the group `placement` is, or 0 when it is none of them. A template without
/// replicas holds its group's placement undivided (`door::undivided_without_replicas`), so the
/// replica policy is compared only when no group matches all else.
pub fn group_in_use(groups: &[AffinityGroup], placement: &Placement) -> usize {
    let but_replicas = |g: &Placement| {
        let mut g = g.clone();
        g.replicas = placement.replicas.clone();
        g == *placement
    };
    groups
        .iter()
        .position(|g| g.placement == *placement)
        .or_else(|| groups.iter().position(|g| but_replicas(&g.placement)))
        .unwrap_or(0)
}

impl State {
    /// The placement the policy `key` derives for a template whose object now has `existing`
    /// (None: a new template): the policy's placement, or its affinity group in use; kept where
    /// it is (nowhere if new) while an override policy it depends on does not exist.
    pub(super) fn derived_placement(
        &self,
        key: &PolicyRef,
        existing: Option<&Placement>,
    ) -> Placement {
        let Some(PolicySpec::Propagation(p)) = self.door_ix.get(key) else {
            return nowhere();
        };
        if !self.missing_overrides(key).is_empty() {
            return existing.cloned().unwrap_or_else(nowhere);
        }
        if p.affinity_groups.is_empty() {
            return (*p.placement).clone();
        }
        let i = existing.map_or(0, |e| group_in_use(&p.affinity_groups, e));
        p.affinity_groups[i].placement.clone()
    }

    /// The override policies the propagation policy `key` depends on that do not exist yet.
    pub(crate) fn missing_overrides(&self, key: &PolicyRef) -> Vec<String> {
        let Some(PolicySpec::Propagation(p)) = self.door_ix.get(key) else {
            return Vec::new();
        };
        if p.dependent_overrides.is_empty() {
            return Vec::new();
        }
        let kind = if key.namespace.is_empty() {
            PolicyKind::ClusterOverride
        } else {
            PolicyKind::Override
        };
        p.dependent_overrides
            .iter()
            .filter(|name| {
                let want = PolicyRef {
                    kind: kind.into(),
                    namespace: key.namespace.clone(),
                    name: (*name).clone(),
                };
                !self.door_ix.contains_key(&want)
            })
            .cloned()
            .collect()
    }

    /// Whether a policy change leaves the template's placement alone: its policy is lazy and
    /// it was already bound to it and placed.
    pub(super) fn lazily_kept(
        &self,
        bound_to: Option<&PolicyRef>,
        was_bound_to: Option<&PolicyRef>,
        existing: &Placement,
    ) -> bool {
        let Some(key) = bound_to else {
            return false;
        };
        was_bound_to == Some(key)
            && *existing != nowhere()
            && matches!(self.door_ix.get(key), Some(PolicySpec::Propagation(p)) if p.lazy)
    }

    /// The affinity groups of the policy that places the door object `key`, if it has some.
    fn groups_of(&self, key: &ObjectKey) -> Option<&[AffinityGroup]> {
        let any = self
            .door_ix
            .values()
            .any(|s| matches!(s, PolicySpec::Propagation(p) if !p.affinity_groups.is_empty()));
        if !any {
            return None;
        }
        let (_, record) = self.template_of(key)?;
        match self.door_ix.get(record.bound_to.as_ref()?)? {
            PolicySpec::Propagation(p) if !p.affinity_groups.is_empty() => Some(&p.affinity_groups),
            _ => None,
        }
    }

    /// The name of the affinity group the door object `key` is placed by, for explain.
    pub fn affinity_group(&self, key: &ObjectKey) -> Option<String> {
        let obj = self.object(&key.namespace, &key.name)?;
        let groups = self.groups_of(key)?;
        let i = group_in_use(groups, &obj.spec.placement);
        Some(groups[i].name.clone())
    }

    /// After a door write placed `key` by its policy's group in use: when that group cannot
    /// place it, on to the next that can. (The put's own re-placement could not know the
    /// group: the template's binding is recorded after its object is put.)
    pub(super) fn settle_affinity_group(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        if ctx.version < PEER_WIDENED_SINCE || self.groups_of(key).is_none() {
            return;
        }
        let Some(obj) = self.object(&key.namespace, &key.name) else {
            return;
        };
        if !feasible(&self.decide(obj, false, ctx.at())) {
            self.next_affinity_group(key, false, ctx);
        }
    }

    /// The scheduler found no feasible placement for `key` in its affinity group: moves it to
    /// the first later group that has one, by putting the object with that group's placement
    /// (the put re-places it). None when it has no later feasible group, or is no door object
    /// placed by groups.
    pub(super) fn next_affinity_group(
        &mut self,
        key: &ObjectKey,
        fresh: bool,
        ctx: &mut Ctx,
    ) -> Option<bool> {
        if ctx.version < PEER_WIDENED_SINCE {
            return None;
        }
        let obj = self.object(&key.namespace, &key.name)?;
        let groups = self.groups_of(key)?;
        let from = group_in_use(groups, &obj.spec.placement);
        let mut chosen = None;
        for g in groups.iter().skip(from + 1) {
            let candidate = FederatedObject {
                spec: ObjectSpec {
                    placement: undivided_without_replicas(
                        g.placement.clone(),
                        ("", &obj.spec.template),
                        ctx.version,
                    ),
                    ..obj.spec.clone()
                },
                ..obj.clone()
            };
            if feasible(&self.decide(&candidate, fresh, ctx.at())) {
                chosen = Some(candidate.spec);
                break;
            }
        }
        let spec = chosen?;
        // The move is the state machine's, whoever wrote the entry that triggered it.
        let actor = std::mem::replace(&mut ctx.actor, Actor::Admin);
        let put = self.put_object(&key.namespace, &key.name, &spec, None, ctx);
        ctx.actor = actor;
        put.ok().map(|_| true)
    }
}
