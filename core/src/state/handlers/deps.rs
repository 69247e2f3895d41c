//! `propagateDeps`: the ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims a
//! workload's pod template names follow the workload to the clusters it runs on.
//!
//! A workload *requires* its dependencies when it is a door template bound to a propagation
//! policy with `propagateDeps: true` (`karmada::dependencies` reads the names). A dependency
//! that is itself a door template and bound to no policy of its own is placed on exactly the
//! union of the clusters its requirers are placed on, with their tolerations, every replica
//! count duplicated; one with a policy of its own keeps that policy's placement (a difference
//! from Karmada, which adds the requirers' clusters to it). Written in the same entry as the
//! change that moved a requirer, so members receive a workload and what it names together.
//!
//! When no requirer is left, a dependency that followed one is placed nowhere and so removed
//! from the members, except when a requirer lost its binding because its policy was deleted:
//! the workload then keeps its last placement (`door.rs`), and what it names stays with it.
//!
//! Must not: refuse the entry that moved a workload. A dependency that cannot be put (its
//! namespace's quota, an admission rule) stays where it was; the workload's own put is what
//! the user wrote and stands on its own.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::binding::nowhere;
use crate::admission::Actor;
use crate::door::{ResourceKey, TemplateRecord};
use crate::karmada::{dependencies, PolicySpec};
use crate::model::{ObjectKey, ObjectSpec};
use crate::policy::{Placement, ReplicaMode, ReplicaPolicy, Toleration};
use crate::state::{Ctx, State};

/// The API groups whose kinds may carry a pod template (`karmada::dependencies` reads the kind).
const WORKLOAD_GROUPS: [&str; 3] = ["", "apps", "batch"];

/// What one requirer's dependencies are, by workload.
pub(super) type Required = BTreeMap<ResourceKey, BTreeSet<ResourceKey>>;

impl State {
    /// Whether any stored propagation policy sets `propagateDeps`: without one, nothing here
    /// has work to do and every hook returns at once.
    pub(super) fn any_deps_policy(&self) -> bool {
        self.door_ix
            .values()
            .any(|s| matches!(s, PolicySpec::Propagation(p) if p.propagate_deps))
    }

    /// The dependencies `key` requires with its `record`'s binding, or None when it requires
    /// none (not bound to a `propagateDeps` policy, or no pod template).
    pub(super) fn requires(
        &self,
        key: &ResourceKey,
        record: &TemplateRecord,
    ) -> Option<BTreeSet<ResourceKey>> {
        if !WORKLOAD_GROUPS.contains(&key.group.as_str()) {
            return None;
        }
        let policy = record.bound_to.as_ref()?;
        match self.door_ix.get(policy)? {
            PolicySpec::Propagation(p) if p.propagate_deps => {}
            _ => return None,
        }
        let obj = self.object(&key.namespace, &key.object_name())?;
        // Stored only after it parsed as JSON at its put.
        let template: Value = serde_json::from_str(&obj.spec.template).ok()?;
        let deps: BTreeSet<ResourceKey> = dependencies(&key.kind, &template)
            .into_iter()
            .map(|(kind, name)| ResourceKey {
                group: String::new(),
                kind: kind.kind().to_string(),
                namespace: key.namespace.clone(),
                name,
            })
            .collect();
        (!deps.is_empty()).then_some(deps)
    }

    /// Every requirer and what it requires (empty without a `propagateDeps` policy).
    pub(super) fn all_required(&self) -> Required {
        if !self.any_deps_policy() {
            return Required::new();
        }
        self.door
            .templates
            .iter()
            .filter_map(|(k, r)| Some((k.clone(), self.requires(k, r)?)))
            .collect()
    }

    /// The requirers of `dep` and the placement they give it, if any requires it.
    pub(crate) fn required_placement(
        &self,
        dep: &ResourceKey,
    ) -> Option<(Vec<ResourceKey>, Placement)> {
        if !self.any_deps_policy() {
            return None;
        }
        let mut requirers = Vec::new();
        let mut clusters = BTreeSet::new();
        let mut tolerations: Vec<Toleration> = Vec::new();
        for (k, r) in &self.door.templates {
            if k.namespace != dep.namespace || !self.requires(k, r).is_some_and(|d| d.contains(dep))
            {
                continue;
            }
            let Some(obj) = self.object(&k.namespace, &k.object_name()) else {
                continue;
            };
            clusters.extend(obj.status.clusters.iter().map(|p| &*p.cluster));
            for t in &obj.spec.placement.tolerations {
                if !tolerations.contains(t) {
                    tolerations.push(t.clone());
                }
            }
            requirers.push(k.clone());
        }
        if requirers.is_empty() {
            return None;
        }
        let placement = Placement {
            clusters: Some(clusters.into_iter().map(String::from).collect()),
            tolerations,
            replicas: ReplicaPolicy {
                mode: ReplicaMode::Duplicated,
                division: None,
            },
            ..Placement::default()
        };
        Some((requirers, placement))
    }

    /// Places each of `deps` that is an unbound door template where its requirers are, or
    /// nowhere when none is left.
    pub(super) fn follow_deps(&mut self, deps: &BTreeSet<ResourceKey>, ctx: &mut Ctx) {
        for dep in deps {
            let Some(record) = self.door.templates.get(dep) else {
                continue;
            };
            if record.bound_to.is_some() {
                continue;
            }
            let name = dep.object_name();
            let Some(obj) = self.object(&dep.namespace, &name) else {
                continue;
            };
            let placement = match self.required_placement(dep) {
                Some((_, p)) => p,
                None => Placement {
                    replicas: ReplicaPolicy {
                        mode: ReplicaMode::Duplicated,
                        division: None,
                    },
                    ..nowhere()
                },
            };
            if obj.spec.placement == placement {
                continue;
            }
            let spec = ObjectSpec {
                placement,
                ..obj.spec.clone()
            };
            // Derived by fedraft from what the entry's actor was already allowed to place; the
            // actor of a heartbeat or a tick has no rights of its own to check.
            let actor = std::mem::replace(&mut ctx.actor, Actor::Admin);
            let _kept_where_it_was = self.put_object(&dep.namespace, &name, &spec, None, ctx);
            ctx.actor = actor;
        }
    }

    /// After the scheduler moved the object `key`: if it is a requirer, its dependencies follow.
    pub(crate) fn workload_moved(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        if !self.any_deps_policy() {
            return;
        }
        let Some(deps) = self.template_of(key).and_then(|(k, r)| self.requires(k, r)) else {
            return;
        };
        self.follow_deps(&deps, ctx);
    }

    /// Why the object `key` is where it is, when it is a dependency that follows workloads:
    /// "follows Deployment.apps app/web (propagateDeps of PropagationPolicy app/web)". For the
    /// audit's explain, which otherwise sees a placement change no command of its own caused.
    pub fn dependency_cause(&self, key: &ObjectKey) -> Option<String> {
        if !self.any_deps_policy() {
            return None;
        }
        let (dep, record) = self.template_of(key)?;
        if record.bound_to.is_some() {
            return None;
        }
        let (requirers, _) = self.required_placement(dep)?;
        let named: Vec<String> = requirers
            .iter()
            .map(|w| {
                let policy = self
                    .door
                    .templates
                    .get(w)
                    .and_then(|r| r.bound_to.as_ref())
                    .map(|p| format!(" (propagateDeps of {})", super::binding::policy_name(p)))
                    .unwrap_or_default();
                format!("{w}{policy}")
            })
            .collect();
        Some(format!("follows {}", named.join(", ")))
    }

    /// After a policy write re-derived the templates: what was required `before` by a workload
    /// still bound to a policy, and what is required now, follows.
    pub(super) fn deps_after_policy_write(&mut self, before: Required, ctx: &mut Ctx) {
        let mut candidates: BTreeSet<ResourceKey> = BTreeSet::new();
        for (workload, deps) in before {
            let bound = self
                .door
                .templates
                .get(&workload)
                .is_some_and(|r| r.bound_to.is_some());
            if bound {
                candidates.extend(deps);
            }
        }
        for deps in self.all_required().into_values() {
            candidates.extend(deps);
        }
        self.follow_deps(&candidates, ctx);
    }
}
