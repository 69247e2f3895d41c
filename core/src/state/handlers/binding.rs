//! Which propagation policy binds a door template, and what the policies derive for it: the
//! placement of the bound policy and the overrides of every override policy that selects it,
//! in the order they apply.
//!
//! Must not: write anything. The door's writes (`door.rs`) and the dependency upkeep
//! (`deps.rs`) call these and decide what to store.

use crate::door::{PolicyRef, ResourceKey, TemplateRecord};
use crate::karmada::{
    best_match, MatchRank, OverrideSpec, PolicySpec, Precedence, TemplateIdentity,
};
use crate::model::ObjectKey;
use crate::policy::{Division, Override, Placement, ReplicaMode};
use crate::state::State;

/// "PropagationPolicy app/web", "ClusterPropagationPolicy all".
pub(super) fn policy_name(p: &PolicyRef) -> String {
    let (_, kind) = p.kind.api_version_kind();
    if p.namespace.is_empty() {
        format!("{kind} {}", p.name)
    } else {
        format!("{kind} {}/{}", p.namespace, p.name)
    }
}

/// The replica rule of a placement in Karmada's words, with its weights.
fn replica_rule(placement: &Placement) -> String {
    let r = &placement.replicas;
    match (&r.mode, r.division.as_deref()) {
        (ReplicaMode::Duplicated, _) => "Duplicated".to_string(),
        (_, None) => "Divided, equal weights".to_string(),
        (_, Some(Division::StaticWeights { weights, .. })) => {
            let list: Vec<String> = weights
                .iter()
                .map(|(c, w)| format!("{c}={}", w.weight))
                .collect();
            format!("Divided, staticWeightList {}", list.join(" "))
        }
        (_, Some(Division::DynamicByCapacity { .. })) => {
            "Divided, dynamicWeight AvailableReplicas".to_string()
        }
        (_, Some(Division::Aggregated { .. })) => "Divided, Aggregated".to_string(),
    }
}

impl State {
    /// The door template whose federated object is `key`, if it is one.
    pub(super) fn template_of(&self, key: &ObjectKey) -> Option<(&ResourceKey, &TemplateRecord)> {
        // `kind.group:name`: comparing the name and namespace first spares building every
        // template's object name.
        let (_, name) = key.name.split_once(':')?;
        self.door.templates.iter().find(|(k, _)| {
            k.name == name && k.namespace == key.namespace && k.object_name() == key.name
        })
    }

    /// Which propagation policy places the object `key` and by which rule, for the audit's
    /// explain: "PropagationPolicy app/web (priority 0; Divided, staticWeightList dc1=2 dc2=1)".
    /// None for an object no door policy places.
    pub fn policy_cause(&self, key: &ObjectKey) -> Option<String> {
        let (_, record) = self.template_of(key)?;
        let policy = record.bound_to.as_ref()?;
        let PolicySpec::Propagation(p) = self.door_ix.get(policy)? else {
            return None;
        };
        let preemption = if p.preempts {
            ", preemption Always"
        } else {
            ""
        };
        // The affinity group in use and what the placement still waits for, when they apply.
        let group = self
            .affinity_group(key)
            .map(|g| match self.overflow_note(key) {
                Some(note) => format!("; affinity group {g}, overflow {note}"),
                None => format!("; affinity group {g}"),
            })
            .unwrap_or_default();
        let missing = self.missing_overrides(policy);
        let waiting = if missing.is_empty() {
            String::new()
        } else {
            let kind = if policy.namespace.is_empty() {
                "ClusterOverridePolicy"
            } else {
                "OverridePolicy"
            };
            format!("; waiting for {kind} {}", missing.join(", "))
        };
        let workload = p.workload_affinity.as_ref().map_or(String::new(), |w| {
            let terms: Vec<String> = [
                ("affinity", &w.affinity),
                ("antiAffinity", &w.anti_affinity),
            ]
            .into_iter()
            .filter_map(|(term, key)| Some(format!("{term} by {}", key.as_ref()?)))
            .collect();
            format!("; workloadAffinity {}", terms.join(", "))
        });
        Some(format!(
            "{} (priority {}{preemption}; {}{group}{waiting}{workload})",
            policy_name(policy),
            p.priority,
            replica_rule(&p.placement)
        ))
    }

    /// The propagation policy a template is bound to: its current one while that still selects
    /// it and nothing that may preempt outranks it, else the best selecting one.
    pub(super) fn binding_for(
        &self,
        t: &TemplateIdentity<'_>,
        current: Option<&PolicyRef>,
        by_name: bool,
    ) -> Option<PolicyRef> {
        let mut best: Option<(Precedence<'_>, &PolicyRef, bool)> = None;
        let mut kept: Option<Precedence<'_>> = None;
        for (key, spec) in self.door_ix.iter() {
            let PolicySpec::Propagation(p) = spec else {
                continue;
            };
            let ns = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
            let Some(rank) = best_match(&p.resource_selectors, t, ns)
                .filter(|r| !by_name || *r == MatchRank::Name)
            else {
                continue;
            };
            let prec = Precedence {
                priority: p.priority,
                namespaced: ns.is_some(),
                rank,
                name: std::cmp::Reverse(key.name.as_str()),
            };
            if current == Some(key) {
                kept = Some(prec.clone());
            }
            if best.as_ref().is_none_or(|(b, _, _)| prec > *b) {
                best = Some((prec, key, p.preempts));
            }
        }
        match (kept, best) {
            (Some(kept), Some((prec, key, preempts))) if preempts && prec > kept => {
                Some(key.clone())
            }
            (Some(_), _) => current.cloned(),
            (None, best) => best.map(|(_, k, _)| k.clone()),
        }
    }

    pub(super) fn policy_placement(&self, key: &PolicyRef) -> Placement {
        match self.door_ix.get(key) {
            Some(PolicySpec::Propagation(p)) => (*p.placement).clone(),
            _ => nowhere(),
        }
    }

    /// The overrides of every override policy that selects `t` (whose manifest is `template`,
    /// JSON text): cluster-wide ones first, then namespaced ones, each from the lowest
    /// precedence to the highest, so the strongest is applied last and wins where two set the
    /// same field.
    pub(super) fn overrides_for(&self, t: &TemplateIdentity<'_>, template: &str) -> Vec<Override> {
        let mut selected: Vec<(Precedence<'_>, &OverrideSpec)> = Vec::new();
        for (key, spec) in self.door_ix.iter() {
            let PolicySpec::Override(o) = spec else {
                continue;
            };
            let ns = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
            if let Some(rank) = best_match(&o.resource_selectors, t, ns) {
                selected.push((
                    Precedence {
                        priority: 0,
                        namespaced: ns.is_some(),
                        rank,
                        name: std::cmp::Reverse(key.name.as_str()),
                    },
                    o,
                ));
            }
        }
        selected.sort_by(|a, b| a.0.cmp(&b.0));
        // Parsed only for the policies that read it (a stored template is JSON; anything else
        // reads as no container and no labels).
        let doc = if selected.iter().any(|(_, o)| o.reads_template()) {
            serde_json::from_str(template).unwrap_or(serde_json::Value::Null)
        } else {
            serde_json::Value::Null
        };
        selected
            .into_iter()
            .flat_map(|(_, o)| o.overrides(&doc))
            .collect()
    }
}

/// A placement that selects no cluster: a template no policy has placed yet.
pub(super) fn nowhere() -> Placement {
    Placement {
        clusters: Some(Vec::new()),
        ..Placement::default()
    }
}
