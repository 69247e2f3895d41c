//! Karmada's `ClusterTaintPolicy` (`policy.karmada.io/v1alpha1`, cluster-scoped): which member
//! clusters it watches (`targetClusters`), on which of their conditions it adds its taints
//! (`addOnConditions`) and on which it takes them off again (`removeOnConditions`).
//!
//! Semantics, as Karmada's controller has them: a condition list matches when every entry
//! matches (AND); an empty list never matches; an entry matches only a condition the cluster
//! has (a missing condition type matches neither `In` nor `NotIn`). Adding and removing are two
//! separate tests, which gives hysteresis: a taint added stays until the removal conditions
//! hold, whatever the addition conditions do meanwhile. `targetClusters` is Karmada's cluster
//! affinity (names, exclusions, label and field selectors, ANDed); none means every cluster.
//! Two policies may not carry the same taint (key and effect), as Karmada's webhook refuses it.
//! fedraft has no `PreferNoExecute` effect (its failover is the propagation policy's own), so a
//! policy using it is refused, naming the field.
//!
//! Owns: the document's validation and the condition matching. Must not: keep state or decide
//! when to evaluate (`state/handlers/taint_policy.rs` does, in log order).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::propagation::{cluster_selector, ClusterAffinity};
use super::typed;
use crate::error::FieldError;
use crate::policy::{validate_label_value, LabelSelector, Taint, TaintEffect};

/// The condition fedraft derives itself, from its health probes: a status write may not set it.
pub const READY_CONDITION: &str = "Ready";

/// The statuses a condition may have (`metav1.ConditionStatus`).
pub const CONDITION_STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// Most conditions one cluster may carry from status writes.
pub const MAX_CONDITIONS: usize = 64;

/// One condition of a member cluster, as a status write of its Karmada `Cluster` carries it
/// (`Command::ClusterConditions`). Plain data: part of the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterCondition {
    pub condition_type: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// How a match condition compares the cluster condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum MatchOperator {
    In,
    NotIn,
}

/// One entry of `addOnConditions` or `removeOnConditions`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchCondition {
    pub condition_type: String,
    pub operator: MatchOperator,
    pub status_values: Vec<String>,
}

impl MatchCondition {
    /// Whether the cluster's conditions (type -> status) satisfy this entry.
    fn holds(&self, conditions: &BTreeMap<String, String>) -> bool {
        let Some(status) = conditions.get(&self.condition_type) else {
            return false;
        };
        let listed = self.status_values.iter().any(|v| v == status);
        match self.operator {
            MatchOperator::In => listed,
            MatchOperator::NotIn => !listed,
        }
    }

    /// `KubeComponentsHealthy NotIn [True]`: how explanations name the condition.
    pub fn describe(&self) -> String {
        let op = match self.operator {
            MatchOperator::In => "In",
            MatchOperator::NotIn => "NotIn",
        };
        format!(
            "{} {op} [{}]",
            self.condition_type,
            self.status_values.join(",")
        )
    }
}

/// A list of match conditions held (all of them, and at least one): the description of the
/// list for explanations; None when it does not hold.
pub fn conditions_hold(
    list: &[MatchCondition],
    conditions: &BTreeMap<String, String>,
) -> Option<String> {
    if list.is_empty() || !list.iter().all(|m| m.holds(conditions)) {
        return None;
    }
    Some(
        list.iter()
            .map(MatchCondition::describe)
            .collect::<Vec<_>>()
            .join(" and "),
    )
}

/// Which clusters a policy watches.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TargetClusters {
    /// Empty: any name.
    pub names: Vec<String>,
    pub exclude: Vec<String>,
    pub selector: LabelSelector,
}

impl TargetClusters {
    pub fn selects(&self, cluster: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.names.is_empty() || self.names.iter().any(|n| n == cluster))
            && !self.exclude.iter().any(|n| n == cluster)
            && self.selector.matches_cluster(cluster, labels)
    }
}

/// A `ClusterTaintPolicy`'s spec, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaintPolicySpec {
    /// None: every cluster.
    pub target: Option<TargetClusters>,
    pub add_on: Vec<MatchCondition>,
    pub remove_on: Vec<MatchCondition>,
    pub taints: Vec<Taint>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    target_clusters: Option<ClusterAffinity>,
    #[serde(default)]
    add_on_conditions: Vec<MatchCondition>,
    #[serde(default)]
    remove_on_conditions: Vec<MatchCondition>,
    #[serde(default)]
    taints: Vec<RawTaint>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTaint {
    key: String,
    effect: String,
    #[serde(default)]
    value: String,
}

/// Reads and checks a `ClusterTaintPolicy` manifest (the whole document); errors name the field
/// from the document's root.
pub fn parse_taint_policy(manifest: &Value) -> Result<TaintPolicySpec, FieldError> {
    let spec = manifest
        .get("spec")
        .ok_or_else(|| FieldError::new("spec", "required"))?;
    let raw: RawSpec = typed(spec, "spec")?;
    let target = match raw.target_clusters {
        None => None,
        Some(aff) => {
            let selector = cluster_selector(
                aff.label_selector,
                aff.field_selector,
                "spec.targetClusters",
            )?;
            selector.validate("spec.targetClusters.labelSelector")?;
            Some(TargetClusters {
                names: aff.cluster_names,
                exclude: aff.exclude,
                selector,
            })
        }
    };
    for (list, name) in [
        (&raw.add_on_conditions, "addOnConditions"),
        (&raw.remove_on_conditions, "removeOnConditions"),
    ] {
        for (i, m) in list.iter().enumerate() {
            let f = format!("spec.{name}[{i}]");
            if m.condition_type.is_empty() {
                return Err(FieldError::new(format!("{f}.conditionType"), "required"));
            }
            if m.status_values.is_empty() {
                return Err(FieldError::new(
                    format!("{f}.statusValues"),
                    "required: one or more of True, False, Unknown",
                ));
            }
            for (j, v) in m.status_values.iter().enumerate() {
                if !CONDITION_STATUSES.contains(&v.as_str()) {
                    return Err(FieldError::new(
                        format!("{f}.statusValues[{j}]"),
                        format!("{v:?}: must be True, False or Unknown"),
                    ));
                }
            }
        }
    }
    if raw.taints.is_empty() {
        return Err(FieldError::new(
            "spec.taints",
            "required: at least one taint",
        ));
    }
    let mut taints = Vec::with_capacity(raw.taints.len());
    for (i, t) in raw.taints.into_iter().enumerate() {
        let effect =
            match t.effect.as_str() {
                "NoSchedule" => TaintEffect::NoSchedule,
                "NoExecute" => TaintEffect::NoExecute,
                "PreferNoExecute" => return Err(super::unsupported(
                    format!("spec.taints[{i}].effect"),
                    "PreferNoExecute; fedraft's taints are NoSchedule or NoExecute (failover on a \
                     condition is the propagation policy's `failover` or fedraft's health policy)",
                )),
                other => {
                    return Err(FieldError::new(
                        format!("spec.taints[{i}].effect"),
                        format!("{other:?}: must be NoSchedule or NoExecute"),
                    ))
                }
            };
        let f = format!("spec.taints[{i}]");
        let taint = Taint {
            key: t.key,
            value: t.value,
            effect,
        };
        taint.validate(&f)?;
        validate_label_value(&taint.value, &format!("{f}.value"))?;
        if taints
            .iter()
            .any(|o: &Taint| o.key == taint.key && o.effect == effect)
        {
            return Err(FieldError::new(
                format!("{f}.key"),
                format!("taint {}:{} is listed twice", taint.key, effect.as_str()),
            ));
        }
        taints.push(taint);
    }
    Ok(TaintPolicySpec {
        target,
        add_on: raw.add_on_conditions,
        remove_on: raw.remove_on_conditions,
        taints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_yaml::from_str(s).unwrap()
    }

    const SAMPLE: &str = "
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: foo
spec:
  targetClusters:
    clusterNames: [member1, member2]
  addOnConditions:
  - conditionType: KubeComponentsHealthy
    operator: NotIn
    statusValues: [\"True\"]
  removeOnConditions:
  - conditionType: KubeComponentsHealthy
    operator: In
    statusValues: [\"True\"]
  taints:
  - key: kube-components-unhealthy
    effect: NoSchedule
";

    fn conds(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_published_sample_reads() {
        let p = parse_taint_policy(&yaml(SAMPLE)).unwrap();
        let target = p.target.clone().unwrap();
        assert!(target.selects("member1", &BTreeMap::new()));
        assert!(!target.selects("member3", &BTreeMap::new()));
        assert_eq!(p.taints[0].key, "kube-components-unhealthy");
        assert_eq!(p.taints[0].effect, TaintEffect::NoSchedule);
        let bad = conds(&[("KubeComponentsHealthy", "False")]);
        let good = conds(&[("KubeComponentsHealthy", "True")]);
        assert_eq!(
            conditions_hold(&p.add_on, &bad).as_deref(),
            Some("KubeComponentsHealthy NotIn [True]")
        );
        assert!(conditions_hold(&p.remove_on, &bad).is_none());
        assert!(conditions_hold(&p.add_on, &good).is_none());
        assert!(conditions_hold(&p.remove_on, &good).is_some());
    }

    #[test]
    fn a_missing_condition_matches_neither_operator_and_an_empty_list_never_does() {
        let p = parse_taint_policy(&yaml(SAMPLE)).unwrap();
        let none = conds(&[("Ready", "True")]);
        assert!(conditions_hold(&p.add_on, &none).is_none());
        assert!(conditions_hold(&p.remove_on, &none).is_none());
        assert!(conditions_hold(&[], &none).is_none());
    }

    #[test]
    fn conditions_are_anded() {
        let list = vec![
            MatchCondition {
                condition_type: "A".into(),
                operator: MatchOperator::In,
                status_values: vec!["False".into()],
            },
            MatchCondition {
                condition_type: "B".into(),
                operator: MatchOperator::NotIn,
                status_values: vec!["True".into()],
            },
        ];
        assert!(conditions_hold(&list, &conds(&[("A", "False"), ("B", "Unknown")])).is_some());
        assert!(conditions_hold(&list, &conds(&[("A", "False"), ("B", "True")])).is_none());
    }

    #[test]
    fn refusals_name_the_field() {
        let cases = [
            (
                "effect: NoSchedule",
                "effect: PreferNoExecute",
                "spec.taints[0].effect",
            ),
            (
                "effect: NoSchedule",
                "effect: Sometimes",
                "spec.taints[0].effect",
            ),
            (
                "operator: NotIn",
                "operator: Exists",
                "spec.addOnConditions[0].operator",
            ),
            (
                "statusValues: [\"True\"]\n  removeOnConditions",
                "statusValues: [\"Yes\"]\n  removeOnConditions",
                "spec.addOnConditions[0].statusValues[0]",
            ),
            ("clusterNames:", "clusterNamez:", "spec.targetClusters"),
            (
                "  - key: kube-components-unhealthy\n    effect: NoSchedule",
                "  - key: a\n    effect: NoSchedule\n  - key: a\n    effect: NoSchedule",
                "spec.taints[1].key",
            ),
            (
                "  - key: kube-components-unhealthy",
                "  - key: \"bad key\"",
                "spec.taints[0].key",
            ),
        ];
        for (from, to, field) in cases {
            let doc = SAMPLE.replace(from, to);
            assert_ne!(doc, SAMPLE, "{from}");
            let e = parse_taint_policy(&yaml(&doc)).unwrap_err();
            assert!(
                e.field.starts_with(field),
                "{to}: {} {}",
                e.field,
                e.message
            );
        }
        let no_taints = SAMPLE.split("  taints:").next().unwrap_or_default();
        assert_eq!(
            parse_taint_policy(&yaml(no_taints)).unwrap_err().field,
            "spec.taints"
        );
    }

    #[test]
    fn field_selectors_and_labels_target_clusters() {
        let doc = SAMPLE.replace(
            "    clusterNames: [member1, member2]",
            "    fieldSelector:\n      matchExpressions:\n      - {key: region, operator: In, values: [eu]}\n    exclude: [member2]",
        );
        let t = parse_taint_policy(&yaml(&doc)).unwrap().target.unwrap();
        let eu = conds(&[("region", "eu")]);
        assert!(t.selects("member1", &eu));
        assert!(!t.selects("member2", &eu));
        assert!(!t.selects("member1", &BTreeMap::new()));
    }
}
