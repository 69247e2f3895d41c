//! Karmada's `placement.workloadAffinity` for door templates: which other templates are a
//! template's peers, and where they run, handed to the scheduler as a filter
//! (`scheduler::WorkloadPeers`).
//!
//! Why at decision time and not in the stored placement: the restriction depends on where the
//! peers run now, which changes without the template or its policy being written. Kept out of
//! `spec.placement`, the stored placement stays exactly the policy's (or its affinity group's),
//! so `affinity_groups::group_in_use` still finds the group by equality, a policy write
//! re-derives the same specs, and nothing new needs to be in snapshots: the peers are read off
//! the templates' labels and their objects' decided clusters, which the state already holds,
//! in key order, so every node and every restored state decides the same.
//!
//! Peers of a template T under a term with label key K: the other door templates of T's
//! namespace whose label K has T's value, placed on some cluster. T without label K has no
//! constraint from that term. `affinity`: with placed peers, T goes only where one of them is
//! (the first of a group is placed freely); `antiAffinity`: T goes nowhere a peer is.
//!
//! Must not: store anything, or move the peers themselves (a decision of T changes T only).

use std::collections::{BTreeMap, BTreeSet};

use crate::door::{PolicyRef, ResourceKey};
use crate::karmada::{PolicySpec, WorkloadAffinity};
use crate::model::{FederatedObject, ObjectKey};
use crate::policy::Extended;
use crate::scheduler::{Decision, WorkloadPeers};
use crate::state::{Ctx, State};

/// The template a door write is putting, as the write will record it: the put decides the
/// object's placement before the template's record is stored (or while the old one still
/// is), so the decision reads its labels and binding from here.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub object: ObjectKey,
    pub template: ResourceKey,
    pub labels: BTreeMap<String, String>,
    pub policy: Option<PolicyRef>,
}

impl Subject {
    pub(super) fn new(
        template: &ResourceKey,
        labels: BTreeMap<String, String>,
        policy: Option<PolicyRef>,
    ) -> Subject {
        Subject {
            object: ObjectKey::new(template.object_namespace(), template.object_name()),
            template: template.clone(),
            labels,
            policy,
        }
    }
}

impl State {
    /// [`State::decide`] within the entry `ctx`: the door template it is putting, if any, is
    /// read as the put will record it. No gate by version is needed: only an entry of
    /// `WORKLOAD_AFFINITY_SINCE` or later can store a policy with workload affinity, so older
    /// logs decide as they did.
    pub(super) fn decide_in_entry(
        &self,
        obj: &FederatedObject,
        fresh: bool,
        ctx: &Ctx,
    ) -> Decision {
        let key = ObjectKey::new(obj.namespace.clone(), obj.name.clone());
        let none = Extended::new();
        let per = self.ext.objects.get(&key).unwrap_or(&none);
        let subject = ctx.door_subject.as_ref();
        self.decide_with(obj, per, fresh, ctx.at(), subject)
    }

    /// Whether some stored propagation policy has workload affinity: every other decision is
    /// spared the lookup.
    fn any_workload_affinity(&self) -> bool {
        self.door_ix
            .values()
            .any(|s| matches!(s, PolicySpec::Propagation(p) if p.workload_affinity.is_some()))
    }

    /// The workload affinity of the policy `policy`, if it has one.
    pub(super) fn workload_affinity_of(&self, policy: &PolicyRef) -> Option<&WorkloadAffinity> {
        match self.door_ix.get(policy)? {
            PolicySpec::Propagation(p) => p.workload_affinity.as_ref(),
            PolicySpec::Override(_) => None,
        }
    }

    /// Where the peers of the door object `key` run, for its decision; `subject` is the
    /// template being put, if any. None when no workload affinity applies to it.
    pub(crate) fn workload_peers(
        &self,
        key: &ObjectKey,
        subject: Option<&Subject>,
    ) -> Option<WorkloadPeers> {
        if !self.any_workload_affinity() {
            return None;
        }
        let (template, labels, policy) = match subject.filter(|s| s.object == *key) {
            Some(s) => (&s.template, &s.labels, s.policy.as_ref()),
            None => {
                let (k, r) = self.template_of(key)?;
                (k, &r.labels, r.bound_to.as_ref())
            }
        };
        let wa = self.workload_affinity_of(policy?)?;
        let mut peers = WorkloadPeers::default();
        if let Some((group, placed)) = self.group_placed(template, labels, wa.affinity.as_ref()) {
            let clusters: BTreeSet<String> = placed.into_iter().map(|(c, _)| c).collect();
            if !clusters.is_empty() {
                peers.together = Some((group, clusters));
            }
        }
        let apart = self.group_placed(template, labels, wa.anti_affinity.as_ref());
        if let Some((group, placed)) = apart {
            for (cluster, peer) in placed {
                peers
                    .apart
                    .entry(cluster)
                    .or_insert_with(|| (group.clone(), peer));
            }
        }
        (peers != WorkloadPeers::default()).then_some(peers)
    }

    /// For the term grouping by `label`: the group (`label=value`) of a template with
    /// `labels`, and every (cluster, peer) where a peer of it runs, peers in key order. None
    /// without the term or the label.
    fn group_placed(
        &self,
        template: &ResourceKey,
        labels: &BTreeMap<String, String>,
        label: Option<&String>,
    ) -> Option<(String, Vec<(String, String)>)> {
        let label = label?;
        let value = labels.get(label)?;
        let mut placed = Vec::new();
        for (k, r) in &self.door.templates {
            if k.namespace != template.namespace || k == template {
                continue;
            }
            if r.labels.get(label) != Some(value) {
                continue;
            }
            let Some(obj) = self.object(k.object_namespace(), &k.object_name()) else {
                continue;
            };
            for p in obj.status.clusters.iter().filter(|p| p.replicas > 0) {
                placed.push((String::from(&*p.cluster), k.to_string()));
            }
        }
        Some((format!("{label}={value}"), placed))
    }

    /// After a write that may change what workload affinity says of the door object `key`
    /// (its labels or binding changed, which its put alone does not re-place): decides it
    /// again. Nothing for a template whose policy has no workload affinity.
    pub(super) fn workload_affinity_recheck(
        &mut self,
        key: &ObjectKey,
        policy: Option<&PolicyRef>,
        ctx: &mut Ctx,
    ) {
        if policy.is_some_and(|p| self.workload_affinity_of(p).is_some()) {
            self.reschedule(key, false, ctx);
        }
    }

    /// After the policy `policy` was written or deleted (`old`: its spec before): when that
    /// changed its workload affinity, every template bound to it is decided again under the
    /// new terms (a re-derive puts only those whose spec changed).
    pub(super) fn workload_affinity_policy_written(
        &mut self,
        policy: &PolicyRef,
        old: Option<&PolicySpec>,
        ctx: &mut Ctx,
    ) {
        let was = match old {
            Some(PolicySpec::Propagation(p)) => p.workload_affinity.as_ref(),
            _ => None,
        };
        if was == self.workload_affinity_of(policy) {
            return;
        }
        let bound: Vec<ObjectKey> = self
            .door
            .templates
            .iter()
            .filter(|(_, r)| r.bound_to.as_ref() == Some(policy))
            .map(|(k, _)| ObjectKey::new(k.object_namespace(), k.object_name()))
            .collect();
        for key in &bound {
            self.reschedule(key, false, ctx);
        }
    }
}
