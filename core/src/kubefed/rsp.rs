//! KubeFed's ReplicaSchedulingPreference: a replica total divided among clusters by weight,
//! with per-cluster minimum and maximum, for the FederatedDeployment or FederatedReplicaSet of
//! the same name and namespace.
//!
//! fedraft's scheduler already runs KubeFed's planner for static weights with bounds
//! (`scheduler/rules/static_weights.rs`); this module only restates an RSP as such a division:
//! - `totalReplicas` becomes the template's `spec.replicas`, what the scheduler divides;
//! - `clusters` (name or `"*"` → weight, minReplicas, maxReplicas) becomes the weights, and an
//!   empty map means `"*"` with weight 1, as KubeFed defaults it. KubeFed reads a key as a
//!   cluster name and nothing more: a key that names no cluster (its user guide writes "A",
//!   "B", "C") matches nothing. Since `PEER_WIDENED_SINCE` such keys are accepted (bounded,
//!   printable); as no fedraft cluster can carry a name that is not a DNS-1123 label, they are
//!   left out of the weights, and an RSP whose keys all name no cluster places nothing;
//! - each preference without `maxReplicas` gets `totalReplicas` as its maximum: no cluster can
//!   hold more than the total anyway, and a bound is what selects the planner over Webster's
//!   apportionment, which rounds differently (10 over three equal weights: the planner gives
//!   4, 4, 2 where Webster gives 4, 3, 3);
//! - `rebalance` as KubeFed means it: without it, replicas stay where they run;
//! - `intersectWithClusterSelector: false` (the default) lets the RSP choose among every
//!   cluster, ignoring the federated object's placement; `true` keeps that placement and
//!   divides among the clusters it selects.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{FederatedKind, FederatedSpec};
use crate::error::FieldError;
use crate::karmada::PEER_WIDENED_SINCE;
use crate::policy::{
    validate_dns_label, ClusterPreference, Division, ReplicaMode, ReplicaPolicy,
    DEFAULT_PREFERENCE_KEY,
};

/// A ReplicaSchedulingPreference, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RspSpec {
    /// FederatedDeployment or FederatedReplicaSet.
    pub target: FederatedKind,
    pub total_replicas: u32,
    pub rebalance: bool,
    pub clusters: BTreeMap<String, ClusterPreference>,
    pub intersect_with_cluster_selector: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawRsp {
    target_kind: String,
    total_replicas: i64,
    #[serde(default)]
    rebalance: bool,
    #[serde(default)]
    clusters: BTreeMap<String, RawPreference>,
    #[serde(default)]
    intersect_with_cluster_selector: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPreference {
    #[serde(default)]
    min_replicas: i64,
    #[serde(default)]
    max_replicas: Option<i64>,
    #[serde(default)]
    weight: i64,
}

fn count(n: i64, field: &str) -> Result<u32, FieldError> {
    u32::try_from(n).map_err(|_| FieldError::new(field, format!("{n} is not between 0 and 2^32")))
}

/// The longest cluster key read: a Kubernetes object name's limit.
const MAX_KEY_LEN: usize = 253;

/// Reads the `spec` of a ReplicaSchedulingPreference manifest, as a log entry of `version`
/// means it (a stored one is read with the current version: widening only).
pub fn parse_rsp(manifest: &Value, version: u16) -> Result<RspSpec, FieldError> {
    let Some(spec) = manifest.get("spec") else {
        return Err(FieldError::new("spec", "required"));
    };
    let raw: RawRsp = crate::karmada::typed(spec, "spec")?;
    let target = match FederatedKind::ALL
        .into_iter()
        .find(|k| k.kind() == raw.target_kind)
    {
        Some(k) if k.schedulable() => k,
        _ => {
            return Err(FieldError::new(
                "spec.targetKind",
                format!(
                    "{:?}: must be FederatedDeployment or FederatedReplicaSet",
                    raw.target_kind
                ),
            ))
        }
    };
    let total_replicas = count(raw.total_replicas, "spec.totalReplicas")?;
    let mut clusters = BTreeMap::new();
    for (name, p) in raw.clusters {
        let field = format!("spec.clusters.{name}");
        if name != DEFAULT_PREFERENCE_KEY {
            if version < PEER_WIDENED_SINCE {
                validate_dns_label(&name, &field)?;
            } else if name.is_empty()
                || name.len() > MAX_KEY_LEN
                || name.chars().any(char::is_control)
            {
                return Err(FieldError::new(
                    field,
                    format!(
                        "{name:?}: a cluster name is 1 to {MAX_KEY_LEN} bytes without control \
                         characters"
                    ),
                ));
            }
        }
        let weight = u64::from(count(p.weight, &format!("{field}.weight"))?);
        let min_replicas = count(p.min_replicas, &format!("{field}.minReplicas"))?;
        let max_replicas = match p.max_replicas {
            Some(m) => Some(count(m, &format!("{field}.maxReplicas"))?),
            None => None,
        };
        if max_replicas.is_some_and(|m| m < min_replicas) {
            return Err(FieldError::new(
                format!("{field}.minReplicas"),
                "is greater than maxReplicas",
            ));
        }
        clusters.insert(
            name,
            ClusterPreference {
                weight,
                min_replicas,
                max_replicas,
            },
        );
    }
    Ok(RspSpec {
        target,
        total_replicas,
        rebalance: raw.rebalance,
        clusters,
        intersect_with_cluster_selector: raw.intersect_with_cluster_selector,
    })
}

impl RspSpec {
    /// The federated object as this preference schedules it (the caller checks that `fed` is
    /// its target: same kind, name and namespace).
    pub fn apply(&self, fed: &mut FederatedSpec) {
        if let Some(doc) = fed.template.as_object_mut() {
            let spec = doc
                .entry("spec")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(spec) = spec.as_object_mut() {
                spec.insert("replicas".into(), Value::from(self.total_replicas));
            }
        }
        // Only a DNS-1123 label can name a fedraft cluster: other keys match nothing.
        let mut weights: BTreeMap<String, ClusterPreference> = self
            .clusters
            .iter()
            .filter(|(k, _)| *k == DEFAULT_PREFERENCE_KEY || validate_dns_label(k, "").is_ok())
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        if weights.is_empty() && !self.clusters.is_empty() {
            fed.placement.clusters = Some(Vec::new());
            fed.placement.cluster_selector = None;
            fed.placement.replicas = ReplicaPolicy {
                mode: ReplicaMode::Divided,
                division: None,
            };
            return;
        }
        if weights.is_empty() {
            weights.insert(
                DEFAULT_PREFERENCE_KEY.to_string(),
                ClusterPreference {
                    weight: 1,
                    ..ClusterPreference::default()
                },
            );
        }
        for p in weights.values_mut() {
            p.max_replicas
                .get_or_insert(self.total_replicas.max(p.min_replicas));
        }
        fed.placement.replicas = ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: Some(Box::new(Division::StaticWeights {
                weights,
                rebalance: self.rebalance,
            })),
        };
        if !self.intersect_with_cluster_selector {
            fed.placement.clusters = None;
            fed.placement.cluster_selector = None;
        }
    }
}
