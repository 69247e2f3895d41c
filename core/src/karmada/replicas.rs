//! `placement.replicaScheduling` onto fedraft's [`ReplicaPolicy`]: Duplicated, or Divided by
//! static weights, by capacity (`dynamicWeight`) or Aggregated onto the fewest clusters.
//!
//! Must not: read any other part of the placement (`super::propagation` does).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::propagation::ClusterAffinity;
use super::{unsupported, KARMADA_WIDENED_SINCE};
use crate::error::FieldError;
use crate::policy::{ClusterPreference, Division, ReplicaMode, ReplicaPolicy};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawReplicaScheduling {
    #[serde(default)]
    replica_scheduling_type: Option<SchedulingType>,
    #[serde(default)]
    replica_division_preference: Option<DivisionPreference>,
    #[serde(default)]
    weight_preference: Option<WeightPreference>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
enum SchedulingType {
    Duplicated,
    Divided,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
enum DivisionPreference {
    Aggregated,
    Weighted,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WeightPreference {
    #[serde(default)]
    static_weight_list: Vec<StaticWeight>,
    #[serde(default)]
    dynamic_weight: Option<DynamicWeight>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StaticWeight {
    target_cluster: ClusterAffinity,
    weight: i64,
}

#[derive(Debug, Deserialize)]
enum DynamicWeight {
    AvailableReplicas,
}

impl RawReplicaScheduling {
    pub(super) fn check(self, field: &str, version: u16) -> Result<ReplicaPolicy, FieldError> {
        let kind = self
            .replica_scheduling_type
            .unwrap_or(SchedulingType::Duplicated);
        if kind == SchedulingType::Duplicated {
            if self.replica_division_preference.is_some() || self.weight_preference.is_some() {
                return Err(FieldError::new(
                    format!("{field}.replicaDivisionPreference"),
                    "only valid with replicaSchedulingType Divided",
                ));
            }
            return Ok(ReplicaPolicy {
                mode: ReplicaMode::Duplicated,
                division: None,
            });
        }
        if self.replica_division_preference == Some(DivisionPreference::Aggregated) {
            if version < KARMADA_WIDENED_SINCE {
                return Err(unsupported(
                    format!("{field}.replicaDivisionPreference"),
                    "Aggregated is not implemented yet; use Weighted (dynamicWeight: AvailableReplicas divides by capacity)",
                ));
            }
            // Karmada reads weights only for Weighted; a document that gives both would
            // expect weights that nothing honours.
            if self.weight_preference.is_some() {
                return Err(FieldError::new(
                    format!("{field}.weightPreference"),
                    "only valid with replicaDivisionPreference Weighted",
                ));
            }
            return Ok(ReplicaPolicy {
                mode: ReplicaMode::Divided,
                division: Some(Box::new(Division::Aggregated { rebalance: false })),
            });
        }
        let division = match self.weight_preference {
            None => None,
            Some(wp) => wp.check(&format!("{field}.weightPreference"))?,
        };
        Ok(ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: division.map(Box::new),
        })
    }
}

impl WeightPreference {
    fn check(self, field: &str) -> Result<Option<Division>, FieldError> {
        if self.dynamic_weight.is_some() {
            if !self.static_weight_list.is_empty() {
                return Err(FieldError::new(
                    format!("{field}.staticWeightList"),
                    "give staticWeightList or dynamicWeight, not both",
                ));
            }
            return Ok(Some(Division::DynamicByCapacity { rebalance: false }));
        }
        if self.static_weight_list.is_empty() {
            return Ok(None);
        }
        let mut weights = BTreeMap::new();
        for (i, w) in self.static_weight_list.into_iter().enumerate() {
            let f = format!("{field}.staticWeightList[{i}]");
            let t = &w.target_cluster;
            if t.label_selector.is_some() || t.field_selector.is_some() || !t.exclude.is_empty() {
                return Err(unsupported(
                    format!("{f}.targetCluster"),
                    "a weight's target must list clusterNames",
                ));
            }
            if t.cluster_names.is_empty() {
                return Err(FieldError::new(
                    format!("{f}.targetCluster.clusterNames"),
                    "required",
                ));
            }
            let weight = u64::try_from(w.weight)
                .ok()
                .filter(|w| *w > 0)
                .ok_or_else(|| FieldError::new(format!("{f}.weight"), "must be at least 1"))?;
            for name in &w.target_cluster.cluster_names {
                let previous = weights.insert(
                    name.clone(),
                    ClusterPreference {
                        weight,
                        ..ClusterPreference::default()
                    },
                );
                if previous.is_some() {
                    return Err(FieldError::new(
                        format!("{f}.targetCluster.clusterNames"),
                        format!("cluster {name:?} is weighted twice"),
                    ));
                }
            }
        }
        Ok(Some(Division::StaticWeights {
            weights,
            rebalance: false,
        }))
    }
}
