//! Karmada's policy API (`policy.karmada.io/v1alpha1`) read into fedraft's own placement and
//! overrides: the language the Kubernetes-compatible door speaks for placement, since it is what
//! users of multi-cluster Kubernetes already write.
//!
//! Owns: the four policy kinds' documents (`PropagationPolicy`, `ClusterPropagationPolicy`,
//! `OverridePolicy`, `ClusterOverridePolicy`), the `cluster.karmada.io` `Cluster` (`cluster`) and
//! the `ClusterTaintPolicy` (`taint`: conditions that taint a cluster), their validation with errors naming the field,
//! which policy a resource template falls under (`select`), and the translation onto
//! [`Placement`](crate::policy::Placement) and [`Override`](crate::policy::Override)
//! (`propagation`, `overrides`). A field of Karmada's API that fedraft cannot honour exactly is
//! refused with a message saying so, never silently ignored: a policy that is accepted places
//! what its document says.
//!
//! Must not: keep state or decide placement itself. The documents travel in the log as JSON
//! text; the state machine parses them here at apply, and the scheduler decides. What this
//! module accepts and how it maps it is therefore replicated semantics, like any validation in
//! core: widen or change it only together with a new log entry version under which older
//! entries keep their meaning, and never refuse a document it once accepted (a restored state
//! parses its stored policies again).

mod affinities;
mod cluster;
mod deps;
mod edits;
mod field_overrider;
mod image_overrider;
pub mod jsonpath;
mod lifecycle;
mod overflow;
mod overrides;
mod propagation;
mod replicas;
mod select;
mod taint;
mod workload;

#[cfg(test)]
mod edits_tests;
#[cfg(test)]
mod field_overrider_tests;
#[cfg(test)]
mod image_overrider_tests;
#[cfg(test)]
mod jsonpath_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod overflow_tests;
#[cfg(test)]
mod preserve_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod widening_tests;
#[cfg(test)]
mod workload_tests;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::FieldError;

pub use affinities::AffinityGroup;
pub use cluster::parse_cluster;
pub(crate) use cluster::{member_name, metadata_labels};
pub use deps::{dependencies, Dependency, DependencyKind};
pub use lifecycle::{
    AppFailover, Failover, Lifecycle, PreserveRule, PurgeMode, Suspension,
    BUILT_IN_PRIORITY_CLASSES, MAX_PRESERVE_RULES,
};
pub use overrides::OverrideSpec;
pub use propagation::PropagationSpec;
pub use select::{best_match, MatchRank, Precedence, ResourceSelector, TemplateIdentity};
pub use taint::{
    conditions_hold, parse_taint_policy, ClusterCondition, MatchCondition, TaintPolicySpec,
    TargetClusters, CONDITION_STATUSES, MAX_CONDITIONS, READY_CONDITION,
};
pub use workload::WorkloadAffinity;

/// The first log entry version that keeps `ClusterTaintPolicy` documents and cluster conditions
/// (`Command::ClusterConditions`) and taints clusters by them (`state/handlers/taint_policy.rs`).
/// In an older entry such a document was an ordinary resource template (the door refused it
/// before proposing), and its delete was refused as no policy kind; both replay so.
pub const TAINT_POLICIES_SINCE: u16 = 14;

/// The first log entry version in which a cluster whose labels change is looked at again by the
/// taint policies (a policy's `targetClusters` may now select it). In an older entry it waited
/// for its next condition change, and replays so.
pub const TAINT_POLICIES_ON_LABELS_SINCE: u16 = 17;

/// The kind of Karmada's cluster taint policy.
pub const TAINT_POLICY_KIND: &str = "ClusterTaintPolicy";

/// The API group of the policy kinds.
pub const GROUP: &str = "policy.karmada.io";
/// The one version of it fedraft reads.
pub const VERSION: &str = "v1alpha1";

/// The cluster labels that Karmada's cluster fields (`provider`, `region`, `zone`) are read
/// from, in field selectors and `spreadByField`: a fedraft cluster carries them as labels.
pub const PROVIDER_LABEL: &str = "provider";
pub const REGION_LABEL: &str = "region";
pub const ZONE_LABEL: &str = "zone";

/// The first log entry version whose policies may use what fedraft learned after the first
/// mapping: `exclude` without `clusterNames`, `spreadByField: cluster`, a toleration with an
/// empty key and operator `Equal`, `replicaDivisionPreference: Aggregated`, and override
/// targets with exclusions, field selectors or both names and a label selector. Older entries are refused them as they were when written.
pub const KARMADA_WIDENED_SINCE: u16 = 4;

/// The first log entry version whose propagation policies may set `propagateDeps: true`.
pub const DEPS_SINCE: u16 = 9;

/// The first log entry version whose peer documents (Karmada's policies, KubeFed's documents)
/// may use the fields fedraft learned in the second widening: older entries are refused them
/// as they were when written.
pub const PEER_WIDENED_SINCE: u16 = 12;

/// The first log entry version whose propagation policies may set `placement.workloadAffinity`
/// (`workload`): older entries are refused it as they were when written.
pub const WORKLOAD_AFFINITY_SINCE: u16 = 13;

/// The first log entry version whose propagation policies may give an affinity group
/// `overflowAffinities` (`overflow`): older entries are refused it as they were when written.
pub const OVERFLOW_AFFINITIES_SINCE: u16 = 14;
/// The first log entry version whose propagation policies may set
/// `failover.application.statePreservation` and `failover.cluster.statePreservation`
/// (`lifecycle`, `state/handlers/preserve.rs`): older entries are refused them as they were
/// when written.
pub const STATE_PRESERVATION_SINCE: u16 = 14;

/// The first log entry version whose override policies may use `fieldOverrider`, and
/// `imageOverrider` items with the `add` or `remove` operator or a `predicate`
/// (`field_overrider`, `image_overrider`): older entries are refused them as they were when
/// written.
pub const OVERRIDERS_WIDENED_SINCE: u16 = 14;

/// Which of the four policy kinds a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PolicyKind {
    Propagation,
    ClusterPropagation,
    Override,
    ClusterOverride,
}

impl PolicyKind {
    /// The kind of a document of `apiVersion`, or None if it is not one of the policy kinds.
    pub fn of(api_version: &str, kind: &str) -> Option<PolicyKind> {
        if api_version != format!("{GROUP}/{VERSION}") {
            return None;
        }
        match kind {
            "PropagationPolicy" => Some(PolicyKind::Propagation),
            "ClusterPropagationPolicy" => Some(PolicyKind::ClusterPropagation),
            "OverridePolicy" => Some(PolicyKind::Override),
            "ClusterOverridePolicy" => Some(PolicyKind::ClusterOverride),
            _ => None,
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            PolicyKind::Propagation => "PropagationPolicy",
            PolicyKind::ClusterPropagation => "ClusterPropagationPolicy",
            PolicyKind::Override => "OverridePolicy",
            PolicyKind::ClusterOverride => "ClusterOverridePolicy",
        }
    }

    /// Namespaced kinds select only templates of their own namespace, and win over the
    /// cluster-wide kinds at equal explicit priority.
    pub fn namespaced(self) -> bool {
        matches!(self, PolicyKind::Propagation | PolicyKind::Override)
    }

    pub fn propagates(self) -> bool {
        matches!(
            self,
            PolicyKind::Propagation | PolicyKind::ClusterPropagation
        )
    }
}

/// A policy document's spec, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySpec {
    Propagation(PropagationSpec),
    Override(OverrideSpec),
}

impl PolicySpec {
    pub fn resource_selectors(&self) -> &[ResourceSelector] {
        match self {
            PolicySpec::Propagation(p) => &p.resource_selectors,
            PolicySpec::Override(o) => &o.resource_selectors,
        }
    }
}

/// Reads the `spec` of a policy document of `kind` (the whole manifest as a JSON value), as a
/// log entry of `version` means it (a restored state reparses with `LOG_ENTRY_VERSION`: what
/// was accepted once maps the same under every later version). Every error names its field
/// from the document's root (`spec.placement.clusterAffinity.exclude`).
pub fn parse_spec(
    kind: PolicyKind,
    manifest: &Value,
    version: u16,
) -> Result<PolicySpec, FieldError> {
    let Some(spec) = manifest.get("spec") else {
        return Err(FieldError::new("spec", "required"));
    };
    let spec = match kind {
        PolicyKind::Propagation | PolicyKind::ClusterPropagation => {
            let spec = affinities::widen(spec, version)?;
            let (spec, workload_affinity) = workload::split(spec, version)?;
            let raw: propagation::RawPropagationSpec = typed(&spec, "spec")?;
            let mut p = raw.check(version)?;
            p.workload_affinity = workload_affinity;
            // Lenient whatever the version: a restored state must read the strategy an older
            // entry's policy carried exactly as replay does (its use is what is versioned).
            p.rollout = crate::door::rollout_annotation(manifest)
                .ok()
                .flatten()
                .map(Box::new);
            PolicySpec::Propagation(p)
        }
        PolicyKind::Override | PolicyKind::ClusterOverride => {
            let raw: overrides::RawOverrideSpec = typed(spec, "spec")?;
            PolicySpec::Override(raw.check(version)?)
        }
    };
    // From PEER_WIDENED_SINCE a namespaced policy may name its own namespace, as Karmada's
    // samples do; before, any namespace there was refused.
    let own_namespace = (version >= PEER_WIDENED_SINCE && kind.namespaced())
        .then(|| {
            manifest
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
        })
        .flatten();
    for (i, s) in spec.resource_selectors().iter().enumerate() {
        s.validate(kind, own_namespace, &format!("spec.resourceSelectors[{i}]"))?;
    }
    Ok(spec)
}

/// Deserializes `value` into `T`, naming the offending field (from `prefix`) on error: an
/// unknown field, a wrong type or a value outside an enum's variants.
pub(crate) fn typed<T: DeserializeOwned>(value: &Value, prefix: &str) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            prefix.to_string()
        } else {
            format!("{prefix}.{path}")
        };
        FieldError::new(field, e.into_inner().to_string())
    })
}

/// A field fedraft reads but cannot honour as Karmada would: refused, so that nobody relies on
/// a placement the document does not get.
fn unsupported(field: impl Into<String>, what: &str) -> FieldError {
    FieldError::new(field, format!("not supported by fedraft: {what}"))
}
