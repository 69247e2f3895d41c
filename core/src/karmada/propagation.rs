//! `PropagationPolicy` / `ClusterPropagationPolicy` specs onto fedraft's [`Placement`].
//!
//! The mapping, field by field (Karmada's defaults where the document is silent):
//! - `clusterAffinity.clusterNames` → the placement's cluster list; `exclude` removes names from
//!   it, or, without names, becomes a `NotIn` requirement on the cluster's name
//!   ([`CLUSTER_NAME_KEY`]); `labelSelector` → the cluster selector; `fieldSelector` on
//!   `provider`, `region` and `zone` → the same requirements on the cluster labels of those names.
//! - `clusterTolerations` → tolerations (a `tolerationSeconds` bound is refused: fedraft evicts
//!   at once and re-places after the failover grace period; an empty key with operator `Equal`
//!   tolerates no taint and is left out).
//! - `spreadConstraints` → spread constraints over a cluster label (`spreadByLabel`, or the label
//!   of `spreadByField` region, zone or provider), or over the clusters themselves
//!   (`spreadByField: cluster`: between minGroups and maxGroups clusters).
//! - `replicaScheduling` (`super::replicas`): absent or `Duplicated` → every selected cluster
//!   runs the template's replicas; `Divided` with `Weighted` → static weights per cluster name,
//!   or equal weights, or with `dynamicWeight: AvailableReplicas` the capacity-weighted
//!   division; `Aggregated` → the fewest clusters that can hold the replicas, sharing them by
//!   capacity.
//!
//! - `propagateDeps` (or its deprecated name `association`) → kept on the spec: the door makes
//!   what bound workloads name follow them.
//! - `clusterAffinities` → one placement per affinity group, in order (`super::affinities`),
//!   each with the tiers of its `overflowAffinities` (`super::overflow`);
//!   `activationPreference: Lazy` and `dependentOverrides` → kept on the spec for the door.
//! - `failover`, `suspension`, `preserveResourcesOnDeletion`, `schedulePriority` → kept on the
//!   spec as `super::lifecycle` reads them.
//! - `workloadAffinity` → the label keys of its terms (`super::workload`); the state machine
//!   restricts each bound template's clusters by where its peers run.
//!
//! Everything else Karmada defines is refused with a message naming the field, unless it is
//! absent or at the value that means what fedraft does anyway.

use serde::Deserialize;
use serde_json::Value;

use super::affinities::{self, AffinityGroup};
use super::lifecycle::{Lifecycle, RawLifecycle};
use super::overflow;
use super::replicas::RawReplicaScheduling;
use super::select::ResourceSelector;
use super::workload::WorkloadAffinity;
use super::{
    unsupported, DEPS_SINCE, KARMADA_WIDENED_SINCE, PEER_WIDENED_SINCE, PROVIDER_LABEL,
    REGION_LABEL, ZONE_LABEL,
};
use crate::error::FieldError;
use crate::policy::{
    LabelSelector, LabelSelectorRequirement, Placement, ReplicaMode, ReplicaPolicy,
    SelectorOperator, SpreadConstraint, TaintEffect, Toleration, TolerationOperator,
    CLUSTER_NAME_KEY,
};
use crate::rollout::RolloutStrategy;

/// A propagation policy's spec as fedraft keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropagationSpec {
    pub resource_selectors: Vec<ResourceSelector>,
    pub priority: i32,
    /// `preemption: Always`: may take a template over from a policy it outranks. Karmada's
    /// default is `Never`: a bound template stays with its policy.
    pub preempts: bool,
    /// `propagateDeps: true`: what the bound workloads' pod templates name follows them
    /// (`super::deps`, `state/handlers/deps.rs`).
    pub propagate_deps: bool,
    /// Boxed, as `rollout`: keeps the policy enum small.
    pub placement: Box<Placement>,
    /// `placement.clusterAffinities`: the groups in order, each a whole placement (the shared
    /// tolerations, spread and replica rules with the group's clusters); `placement` is then
    /// the first. Empty without them. Which group an object uses is read off its stored
    /// placement (`state/handlers/affinity_groups.rs`).
    pub affinity_groups: Vec<AffinityGroup>,
    /// `activationPreference: Lazy`: a change of the policy re-places no template it already
    /// binds; each takes the new placement when it is itself written again.
    pub lazy: bool,
    /// `dependentOverrides`: the override policies (of the policy's namespace, or cluster-wide
    /// ones for a ClusterPropagationPolicy) that must exist before a template is placed.
    pub dependent_overrides: Vec<String>,
    /// fedraft's rollout strategy for the templates it binds, from the policy's
    /// `fedraft.io/rollout-strategy` annotation (`crate::door::rollout_annotation`); set by
    /// `parse_spec`, None when absent or unreadable (a put checks it strictly).
    pub rollout: Option<Box<RolloutStrategy>>,
    /// `failover`, `suspension`, `preserveResourcesOnDeletion` and `schedulePriority`
    /// (`super::lifecycle`); boxed, as the policy enum's other variant is small.
    pub lifecycle: Box<Lifecycle>,
    /// `placement.workloadAffinity` (`super::workload`): set by `parse_spec`, which reads it
    /// apart from the rest of the placement; applied whenever a bound template is placed.
    pub workload_affinity: Option<WorkloadAffinity>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawPropagationSpec {
    resource_selectors: Vec<ResourceSelector>,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    preemption: Option<Preemption>,
    #[serde(default)]
    placement: RawPlacement,
    #[serde(default)]
    propagate_deps: bool,
    #[serde(default)]
    scheduler_name: Option<String>,
    #[serde(default)]
    conflict_resolution: Option<ConflictResolution>,
    #[serde(default)]
    dependent_overrides: Vec<String>,
    #[serde(default)]
    failover: Option<Value>,
    #[serde(default)]
    activation_preference: Option<String>,
    #[serde(default)]
    suspension: Option<Value>,
    #[serde(default)]
    preserve_resources_on_deletion: Option<bool>,
    #[serde(default)]
    schedule_priority: Option<Value>,
}

#[derive(Debug, Deserialize)]
enum Preemption {
    Always,
    Never,
}

#[derive(Debug, Deserialize)]
enum ConflictResolution {
    Abort,
    Overwrite,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPlacement {
    #[serde(default)]
    cluster_affinity: Option<ClusterAffinity>,
    #[serde(default)]
    cluster_affinities: Option<Value>,
    #[serde(default)]
    cluster_tolerations: Vec<RawToleration>,
    #[serde(default)]
    spread_constraints: Vec<RawSpread>,
    #[serde(default)]
    replica_scheduling: Option<RawReplicaScheduling>,
}

/// Karmada's `ClusterAffinity`: a placement's clusters, a static weight's target and an override
/// rule's target are all written in it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ClusterAffinity {
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    #[serde(default)]
    pub field_selector: Option<FieldSelector>,
    #[serde(default)]
    pub cluster_names: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
}

impl ClusterAffinity {
    pub(super) fn new(
        label_selector: Option<LabelSelector>,
        field_selector: Option<FieldSelector>,
        cluster_names: Vec<String>,
        exclude: Vec<String>,
    ) -> Self {
        ClusterAffinity {
            label_selector,
            field_selector,
            cluster_names,
            exclude,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct FieldSelector {
    #[serde(default)]
    match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawToleration {
    #[serde(default)]
    key: String,
    #[serde(default)]
    operator: Option<TolerationOperator>,
    #[serde(default)]
    value: String,
    #[serde(default)]
    effect: Option<String>,
    #[serde(default)]
    toleration_seconds: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSpread {
    #[serde(default)]
    spread_by_field: Option<String>,
    #[serde(default)]
    spread_by_label: Option<String>,
    #[serde(default)]
    max_groups: u32,
    #[serde(default)]
    min_groups: u32,
}

impl RawPropagationSpec {
    /// `version`: the log entry's; the fields fedraft learned in version 4 are refused to older
    /// entries as they were then (see `LOG_ENTRY_VERSION`).
    pub(super) fn check(self, version: u16) -> Result<PropagationSpec, FieldError> {
        if self.resource_selectors.is_empty() {
            return Err(FieldError::new(
                "spec.resourceSelectors",
                "must select at least one kind",
            ));
        }
        if self.propagate_deps && version < DEPS_SINCE {
            return Err(unsupported(
                "spec.propagateDeps",
                "dependencies follow their workloads from log entry version 9 on",
            ));
        }
        if self
            .scheduler_name
            .as_deref()
            .is_some_and(|n| n != "default-scheduler")
        {
            return Err(unsupported(
                "spec.schedulerName",
                "fedraft has one scheduler (default-scheduler)",
            ));
        }
        // Karmada's default `Abort` leaves a same-named object a member already has alone;
        // fedraft's executors take such an object over (`Overwrite`). Both are accepted so that
        // existing documents apply; the difference is written down in the door's docs.
        let _ = self.conflict_resolution;
        if !self.dependent_overrides.is_empty() && version < PEER_WIDENED_SINCE {
            return Err(unsupported(
                "spec.dependentOverrides",
                "overrides apply as soon as they exist",
            ));
        }
        let lifecycle = RawLifecycle {
            failover: self.failover.as_ref(),
            activation_preference: self.activation_preference.as_deref(),
            suspension: self.suspension.as_ref(),
            preserve_resources_on_deletion: self.preserve_resources_on_deletion,
            schedule_priority: self.schedule_priority.as_ref(),
        }
        .check(version)?;
        let lazy = affinities::lazy(self.activation_preference.as_deref())?;
        let dependent_overrides = affinities::dependent_overrides(self.dependent_overrides)?;
        let (placement, affinity_groups) = self.placement.check(version)?;
        Ok(PropagationSpec {
            resource_selectors: self.resource_selectors,
            priority: self.priority,
            preempts: matches!(self.preemption, Some(Preemption::Always)),
            propagate_deps: self.propagate_deps,
            placement: Box::new(placement),
            affinity_groups,
            lazy,
            dependent_overrides,
            rollout: None,
            lifecycle: Box::new(lifecycle),
            workload_affinity: None,
        })
    }
}

impl RawPlacement {
    /// The placement, and the affinity groups' placements when `clusterAffinities` is given
    /// (the first of them is then the placement).
    fn check(self, version: u16) -> Result<(Placement, Vec<AffinityGroup>), FieldError> {
        let f = "spec.placement";
        let groups = match self.cluster_affinities {
            Some(_) if version < PEER_WIDENED_SINCE => {
                return Err(unsupported(
                    format!("{f}.clusterAffinities"),
                    "ordered affinity groups are not implemented yet; use clusterAffinity",
                ))
            }
            Some(_) if self.cluster_affinity.is_some() => {
                return Err(FieldError::new(
                    format!("{f}.clusterAffinities"),
                    "give clusterAffinity or clusterAffinities, not both",
                ))
            }
            Some(v) => affinities::terms(&v, &format!("{f}.clusterAffinities"), version)?,
            None => Vec::new(),
        };
        let mut placement = Placement::default();
        if let Some(aff) = self.cluster_affinity {
            apply_affinity(
                &mut placement,
                aff,
                &format!("{f}.clusterAffinity"),
                version,
            )?;
        }
        for (i, t) in self.cluster_tolerations.into_iter().enumerate() {
            // Karmada accepts an empty key with operator Equal; no taint has an empty key, so
            // such a toleration tolerates nothing and leaving it out changes nothing.
            let tolerates_nothing = t.key.is_empty()
                && t.operator.unwrap_or_default() == TolerationOperator::Equal
                && version >= KARMADA_WIDENED_SINCE;
            let toleration = t.check(&format!("{f}.clusterTolerations[{i}]"))?;
            if !tolerates_nothing {
                placement.tolerations.push(toleration);
            }
        }
        for (i, s) in self.spread_constraints.into_iter().enumerate() {
            placement
                .spread_constraints
                .push(s.check(&format!("{f}.spreadConstraints[{i}]"), version)?);
        }
        placement.replicas = match self.replica_scheduling {
            None => ReplicaPolicy {
                mode: ReplicaMode::Duplicated,
                division: None,
            },
            Some(rs) => rs.check(&format!("{f}.replicaScheduling"), version)?,
        };
        if groups.is_empty() {
            placement.validate(f)?;
            return Ok((placement, Vec::new()));
        }
        let mut out = Vec::with_capacity(groups.len());
        for (i, term) in groups.into_iter().enumerate() {
            let mut group = placement.clone();
            let field = format!("{f}.clusterAffinities[{i}]");
            apply_affinity(&mut group, term.affinity, &field, version)?;
            group.validate(f)?;
            let overflow = match term.overflow {
                Some(raw) => {
                    overflow::check_placement(&group, &field)?;
                    let apply = |p: &mut Placement, a, at: &str| apply_affinity(p, a, at, version);
                    Some(overflow::tiers(&term.name, raw, &field, apply)?)
                }
                None => None,
            };
            out.push(AffinityGroup {
                name: term.name,
                placement: group,
                overflow,
            });
        }
        let seen: Vec<(&Placement, bool)> = out
            .iter()
            .map(|g| (&g.placement, g.overflow.is_some()))
            .collect();
        overflow::check_distinct(&seen, &format!("{f}.clusterAffinities"))?;
        Ok((out[0].placement.clone(), out))
    }
}

/// Cluster names, exclusions, and label and field selectors, all ANDed as Karmada does.
fn apply_affinity(
    placement: &mut Placement,
    aff: ClusterAffinity,
    field: &str,
    version: u16,
) -> Result<(), FieldError> {
    let mut exclude = Vec::new();
    if !aff.cluster_names.is_empty() {
        let names: Vec<String> = aff
            .cluster_names
            .into_iter()
            .filter(|n| !aff.exclude.contains(n))
            .collect();
        placement.clusters = Some(names);
    } else if !aff.exclude.is_empty() {
        if version < KARMADA_WIDENED_SINCE {
            return Err(unsupported(
                format!("{field}.exclude"),
                "exclude is honoured only together with clusterNames",
            ));
        }
        exclude = aff.exclude;
    }
    let mut selector = cluster_selector(aff.label_selector, aff.field_selector, field)?;
    if !exclude.is_empty() {
        selector.match_expressions.push(LabelSelectorRequirement {
            key: CLUSTER_NAME_KEY.to_string(),
            operator: SelectorOperator::NotIn,
            values: exclude,
        });
    }
    if selector != LabelSelector::default() {
        placement.cluster_selector = Some(Box::new(selector));
    }
    Ok(())
}

/// A label selector and Karmada's field selector on `provider`, `region` and `zone` as one
/// selector over cluster labels.
pub(super) fn cluster_selector(
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
    field: &str,
) -> Result<LabelSelector, FieldError> {
    let mut selector = labels.unwrap_or_default();
    if let Some(fs) = fields {
        for (i, req) in fs.match_expressions.into_iter().enumerate() {
            let label = match req.key.as_str() {
                "provider" => PROVIDER_LABEL,
                "region" => REGION_LABEL,
                "zone" => ZONE_LABEL,
                _ => {
                    return Err(FieldError::new(
                        format!("{field}.fieldSelector.matchExpressions[{i}].key"),
                        "must be provider, region or zone",
                    ))
                }
            };
            if !matches!(req.operator, SelectorOperator::In | SelectorOperator::NotIn) {
                return Err(FieldError::new(
                    format!("{field}.fieldSelector.matchExpressions[{i}].operator"),
                    "must be In or NotIn",
                ));
            }
            selector.match_expressions.push(LabelSelectorRequirement {
                key: label.to_string(),
                operator: req.operator,
                values: req.values,
            });
        }
    }
    Ok(selector)
}

impl RawToleration {
    fn check(self, field: &str) -> Result<Toleration, FieldError> {
        if self.toleration_seconds.is_some() {
            return Err(unsupported(
                format!("{field}.tolerationSeconds"),
                "a NoExecute taint evicts at once; the failover grace period bounds re-placement",
            ));
        }
        let effect = match self.effect.as_deref() {
            None | Some("") => None,
            Some("NoSchedule") => Some(TaintEffect::NoSchedule),
            Some("NoExecute") => Some(TaintEffect::NoExecute),
            Some(other) => {
                return Err(FieldError::new(
                    format!("{field}.effect"),
                    format!("{other:?}: must be NoSchedule or NoExecute"),
                ))
            }
        };
        let operator = self.operator.unwrap_or_default();
        if operator == TolerationOperator::Exists && !self.value.is_empty() {
            return Err(FieldError::new(
                format!("{field}.value"),
                "must be empty with operator Exists",
            ));
        }
        Ok(Toleration {
            key: self.key,
            operator,
            value: self.value,
            effect,
        })
    }
}

impl RawSpread {
    fn check(self, field: &str, version: u16) -> Result<SpreadConstraint, FieldError> {
        let label = match (self.spread_by_field.as_deref(), self.spread_by_label) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    format!("{field}.spreadByLabel"),
                    "give spreadByField or spreadByLabel, not both",
                ))
            }
            (None, Some(label)) => label,
            (Some("region"), None) => REGION_LABEL.to_string(),
            (Some("zone"), None) => ZONE_LABEL.to_string(),
            (Some("provider"), None) => PROVIDER_LABEL.to_string(),
            (Some("cluster"), None) if version >= KARMADA_WIDENED_SINCE => {
                CLUSTER_NAME_KEY.to_string()
            }
            (Some("cluster"), None) => return Err(unsupported(
                format!("{field}.spreadByField"),
                "spreading by cluster count is not implemented yet; list clusters or use a label",
            )),
            (Some(other), None) => {
                return Err(FieldError::new(
                    format!("{field}.spreadByField"),
                    format!("{other:?}: must be cluster, region, zone or provider"),
                ))
            }
            // Karmada's default when neither is given: spread over the clusters themselves.
            (None, None) if version >= PEER_WIDENED_SINCE => CLUSTER_NAME_KEY.to_string(),
            (None, None) => {
                return Err(FieldError::new(
                    format!("{field}.spreadByField"),
                    "give spreadByField or spreadByLabel",
                ))
            }
        };
        // Karmada: minGroups defaults to 1 and maxGroups to unbounded.
        let min_groups = self.min_groups.max(1);
        let max_groups = if self.max_groups == 0 {
            u32::MAX
        } else {
            self.max_groups
        };
        Ok(SpreadConstraint {
            label_key: label,
            min_groups,
            max_groups,
        })
    }
}
