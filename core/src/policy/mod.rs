//! The user-facing placement and override specs of a federated object, plus resource amounts.
//!
//! Owns: `Placement` (which clusters, how replicas are divided, spread, failover), `Override`
//! (per-cluster changes to the template), tolerations and label selectors with Kubernetes
//! semantics, and `Resources` (cpu, memory, pods; extended resources and node shapes in
//! `extended`; per-cluster tenant quotas in `quota`). Each spec has a `validate(field_prefix)` that names the exact
//! field at fault.
//!
//! Must not: decide placement (that is `scheduler`) or touch JSON values. Every type here travels
//! inside log entries encoded by bincode 2 in serde mode, so there is no `serde_json::Value`, no
//! untagged enum and no `flatten`; JSON patch values are kept as JSON text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

mod extended;
mod names;
mod overrides;
mod quota;
mod selector;

pub use extended::{
    compact_shapes, replicas_fit, validate_extended_name, Extended, ExtendedCapacity, NodeShape,
    EXTENDED_SINCE, MAX_EXTENDED_NAMES, MAX_NODE_SHAPES, NO_EXTENDED,
};
pub use names::{
    validate_dns_label, validate_dns_subdomain, validate_label_key, validate_label_value,
};
pub use overrides::{ImageOverride, JsonPatchOp, Override, PatchOpKind};
pub use quota::{validate_per_cluster, ClusterQuota, MAX_QUOTA_CLUSTERS, PER_CLUSTER_QUOTA_SINCE};
pub use selector::{
    LabelSelector, LabelSelectorRequirement, SelectorOperator, CLUSTER_NAME_KEY,
    CLUSTER_NAME_KEY_SINCE,
};

/// Upper bound for one static weight; keeps `replicas * weight` far inside `u128` and the numbers
/// readable (KubeFed uses int64 weights, fedraft needs no more than a million-to-one ratio).
pub const MAX_WEIGHT: u64 = 1_000_000_000;
/// Upper bound for a failover grace period: one week, in seconds.
pub const MAX_GRACE_PERIOD_SECONDS: u64 = 7 * 24 * 3600;
/// The key in `StaticWeights::weights` that applies to every cluster not named explicitly.
pub const DEFAULT_PREFERENCE_KEY: &str = "*";

// ---------------------------------------------------------------------------------------------
// Taints and tolerations.

/// What an untolerated taint does to a federated object's replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// No new replicas go to the cluster; replicas already there stay.
    NoSchedule,
    /// Replicas already on the cluster are evicted and re-placed elsewhere.
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A taint on a member cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: TaintEffect,
}

impl Taint {
    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        validate_label_key(&self.key, &format!("{field_prefix}.key"))
    }
}

/// How a toleration compares its value with a taint's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// The taint's value must equal the toleration's value.
    #[default]
    Equal,
    /// Any value; with an empty key, any taint at all.
    Exists,
}

/// A toleration of a federated object, with the semantics of a Kubernetes pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Toleration {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: TolerationOperator,
    #[serde(default)]
    pub value: String,
    /// None tolerates both effects.
    #[serde(default)]
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Kubernetes rules: the effect must match unless unset; an empty key with `Exists` matches
    /// every key; `Exists` ignores the value, `Equal` compares it.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect {
            if effect != taint.effect {
                return false;
            }
        }
        if self.key.is_empty() {
            return self.operator == TolerationOperator::Exists;
        }
        if self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
        }
    }

    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        if self.key.is_empty() {
            if self.operator != TolerationOperator::Exists {
                return Err(FieldError::new(
                    format!("{field_prefix}.operator"),
                    "an empty key requires operator Exists",
                ));
            }
        } else {
            validate_label_key(&self.key, &format!("{field_prefix}.key"))?;
        }
        if self.operator == TolerationOperator::Exists && !self.value.is_empty() {
            return Err(FieldError::new(
                format!("{field_prefix}.value"),
                "must be empty with operator Exists",
            ));
        }
        Ok(())
    }
}

/// True when some toleration tolerates the taint.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

// ---------------------------------------------------------------------------------------------
// Placement.

/// Where a federated object may run and how its replicas are divided.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    /// Explicit cluster names; None = no restriction by name.
    #[serde(default)]
    pub clusters: Option<Vec<String>>,
    /// None = no restriction by label. Combined with `clusters` by AND. Boxed: most
    /// placements have none, and every stored object holds a placement inline, so the
    /// selector's 48 bytes made each object's allocation a size class larger.
    #[serde(default)]
    pub cluster_selector: Option<Box<LabelSelector>>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// Applied in order; each narrows the clusters the previous left.
    #[serde(default)]
    pub spread_constraints: Vec<SpreadConstraint>,
    #[serde(default)]
    pub replicas: ReplicaPolicy,
    #[serde(default)]
    pub failover: FailoverPolicy,
}

/// Use between `min_groups` and `max_groups` distinct values of the cluster label `label_key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpreadConstraint {
    pub label_key: String,
    #[serde(default = "one")]
    pub min_groups: u32,
    pub max_groups: u32,
}

fn one() -> u32 {
    1
}

/// How an object's replicas are shared among the selected clusters.
///
/// `ByKind` is what a placement without a mode means since log entry version 3: core resolves
/// it when the object is put (`ReplicaPolicy::resolved`), so a stored object, the scheduler and
/// the executors only ever see `Duplicated` or `Divided`. Entries of version 2 and older carry
/// `Divided` where the user wrote nothing, and keep replaying as they did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ReplicaMode {
    /// Every selected cluster runs the template's full replica count.
    Duplicated,
    /// The template's replica count is divided among the selected clusters.
    Divided,
    /// `Divided` for kinds that carry replicas (Deployment, StatefulSet, ReplicaSet,
    /// ReplicationController, or any template with `spec.replicas`) or when a division is
    /// given; `Duplicated` for the others (ConfigMap, Service, DaemonSet, Job...), which would
    /// otherwise land on one cluster only.
    #[default]
    ByKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplicaPolicy {
    #[serde(default)]
    pub mode: ReplicaMode,
    /// Only with `Divided`; None divides equally (Webster over weight 1 each). Boxed for the
    /// same reason as `Placement::cluster_selector`.
    #[serde(default)]
    pub division: Option<Box<Division>>,
}

/// How a `Divided` object's replicas are shared out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Division {
    /// Per-cluster preferences (cluster name or `"*"`). With any min/max set, KubeFed
    /// ReplicaSchedulingPreference planner semantics; plain weights use Webster apportionment.
    #[serde(rename_all = "camelCase")]
    StaticWeights {
        weights: BTreeMap<String, ClusterPreference>,
        #[serde(default)]
        rebalance: bool,
    },
    /// Weights are the replicas each cluster can still hold, from its reported capacity.
    #[serde(rename_all = "camelCase")]
    DynamicByCapacity {
        #[serde(default)]
        rebalance: bool,
    },
    /// As few clusters as can hold the replicas (Karmada's `Aggregated`): the clusters already
    /// running the object first (unless rebalancing), then by what they can still hold; the
    /// chosen ones divide the replicas by that capacity, as `DynamicByCapacity` does.
    #[serde(rename_all = "camelCase")]
    Aggregated {
        #[serde(default)]
        rebalance: bool,
    },
}

impl ReplicaMode {
    /// Whether replicas are divided. An unresolved `ByKind` counts as divided: every stored
    /// object is resolved at put, so only a dry run of a hand-written placement gets here, and
    /// dividing is what `ByKind` means for the replica-bearing kinds a scheduler is asked about.
    pub fn divides(self) -> bool {
        !matches!(self, ReplicaMode::Duplicated)
    }
}

impl ReplicaPolicy {
    /// The policy with `ByKind` decided for a template that does (`carries_replicas`) or does
    /// not carry a replica count.
    pub fn resolved(&self, carries_replicas: bool) -> ReplicaPolicy {
        let mode = match self.mode {
            ReplicaMode::ByKind if carries_replicas || self.division.is_some() => {
                ReplicaMode::Divided
            }
            ReplicaMode::ByKind => ReplicaMode::Duplicated,
            mode => mode,
        };
        ReplicaPolicy {
            mode,
            division: self.division.clone(),
        }
    }
}

impl Division {
    /// Whether each cluster's reported capacity decides its share (and a cluster that never
    /// reported any cannot take one).
    pub fn by_capacity(&self) -> bool {
        matches!(
            self,
            Division::DynamicByCapacity { .. } | Division::Aggregated { .. }
        )
    }

    pub fn rebalance(&self) -> bool {
        match self {
            Division::StaticWeights { rebalance, .. }
            | Division::DynamicByCapacity { rebalance }
            | Division::Aggregated { rebalance } => *rebalance,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterPreference {
    #[serde(default)]
    pub weight: u64,
    #[serde(default)]
    pub min_replicas: u32,
    #[serde(default)]
    pub max_replicas: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailoverPolicy {
    /// Re-place replicas of a cluster NotReady/Unknown for longer than the grace period.
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default = "sixty")]
    pub grace_period_seconds: u64,
}

fn yes() -> bool {
    true
}

fn sixty() -> u64 {
    60
}

impl Default for FailoverPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            grace_period_seconds: 60,
        }
    }
}

impl FailoverPolicy {
    pub fn grace_period_ms(&self) -> u64 {
        self.grace_period_seconds.saturating_mul(1000)
    }
}

impl Placement {
    /// The clusters named explicitly; none when the placement does not restrict by name.
    pub fn named_clusters(&self) -> &[String] {
        self.clusters.as_deref().unwrap_or_default()
    }

    /// The field of the first use of [`CLUSTER_NAME_KEY`], if any: entries older than
    /// [`CLUSTER_NAME_KEY_SINCE`] are refused it as they were before it existed.
    pub fn cluster_name_key_field(&self, field_prefix: &str) -> Option<String> {
        if let Some(sel) = &self.cluster_selector {
            if let Some(i) = sel.cluster_name_key_at() {
                return Some(format!(
                    "{field_prefix}.clusterSelector.matchExpressions[{i}].key"
                ));
            }
        }
        self.spread_constraints
            .iter()
            .position(|s| s.label_key == CLUSTER_NAME_KEY)
            .map(|i| format!("{field_prefix}.spreadConstraints[{i}].labelKey"))
    }

    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        if let Some(clusters) = &self.clusters {
            for (i, name) in clusters.iter().enumerate() {
                // The path is formatted only on error: every put checks every listed cluster.
                validate_dns_label(name, "").map_err(|e| {
                    FieldError::new(format!("{field_prefix}.clusters[{i}]"), e.message)
                })?;
            }
        }
        if let Some(sel) = &self.cluster_selector {
            sel.validate_cluster_selector(&format!("{field_prefix}.clusterSelector"))?;
        }
        for (i, t) in self.tolerations.iter().enumerate() {
            t.validate(&format!("{field_prefix}.tolerations[{i}]"))?;
        }
        for (i, s) in self.spread_constraints.iter().enumerate() {
            let field = format!("{field_prefix}.spreadConstraints[{i}]");
            if s.label_key != CLUSTER_NAME_KEY {
                validate_label_key(&s.label_key, &format!("{field}.labelKey"))?;
            }
            if s.max_groups == 0 {
                return Err(FieldError::new(
                    format!("{field}.maxGroups"),
                    "must be at least 1",
                ));
            }
            if s.min_groups > s.max_groups {
                return Err(FieldError::new(
                    format!("{field}.minGroups"),
                    format!(
                        "{} is greater than maxGroups {}",
                        s.min_groups, s.max_groups
                    ),
                ));
            }
        }
        if let Some(division) = self.replicas.division.as_deref() {
            let rp = format!("{field_prefix}.replicas");
            if !self.replicas.mode.divides() {
                return Err(FieldError::new(
                    format!("{rp}.division"),
                    "only valid with mode Divided",
                ));
            }
            if let Division::StaticWeights { weights, .. } = division {
                if weights.is_empty() {
                    return Err(FieldError::new(
                        format!("{rp}.division.weights"),
                        "must name at least one cluster or \"*\"",
                    ));
                }
                for (name, pref) in weights {
                    let field = format!("{rp}.division.weights.{name}");
                    if name != DEFAULT_PREFERENCE_KEY {
                        validate_dns_label(name, &field)?;
                    }
                    if pref.weight > MAX_WEIGHT {
                        return Err(FieldError::new(
                            format!("{field}.weight"),
                            format!("{} exceeds the limit {MAX_WEIGHT}", pref.weight),
                        ));
                    }
                    if let Some(max) = pref.max_replicas {
                        if pref.min_replicas > max {
                            return Err(FieldError::new(
                                format!("{field}.minReplicas"),
                                format!("{} is greater than maxReplicas {max}", pref.min_replicas),
                            ));
                        }
                    }
                }
            }
        }
        if self.failover.grace_period_seconds > MAX_GRACE_PERIOD_SECONDS {
            return Err(FieldError::new(
                format!("{field_prefix}.failover.gracePeriodSeconds"),
                format!("exceeds the limit {MAX_GRACE_PERIOD_SECONDS}"),
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Resources.

/// An amount of compute: CPU in millicores, memory in bytes, pod slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    #[serde(default)]
    pub cpu_millis: u64,
    #[serde(default)]
    pub memory_bytes: u64,
    #[serde(default)]
    pub pods: u64,
}

impl Resources {
    pub const ZERO: Resources = Resources {
        cpu_millis: 0,
        memory_bytes: 0,
        pods: 0,
    };

    pub fn saturating_add(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            pods: self.pods.saturating_add(other.pods),
        }
    }

    pub fn saturating_sub(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(other.memory_bytes),
            pods: self.pods.saturating_sub(other.pods),
        }
    }

    /// `self` taken `n` times, saturating.
    pub fn saturating_mul(&self, n: u64) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_mul(n),
            memory_bytes: self.memory_bytes.saturating_mul(n),
            pods: self.pods.saturating_mul(n),
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == Resources::ZERO
    }

    /// How many times `per` fits in `self`: the minimum over the dimensions `per` requests. A
    /// dimension `per` does not request does not limit; if it requests nothing, `u64::MAX`.
    pub fn fits_times(&self, per: &Resources) -> u64 {
        let dim = |have: u64, need: u64| have.checked_div(need).unwrap_or(u64::MAX);
        dim(self.cpu_millis, per.cpu_millis)
            .min(dim(self.memory_bytes, per.memory_bytes))
            .min(dim(self.pods, per.pods))
    }
}
