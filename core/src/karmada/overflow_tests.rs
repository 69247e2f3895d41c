//! `clusterAffinities[].overflowAffinities`, read since log entry version 14
//! (`OVERFLOW_AFFINITIES_SINCE`): the published sample, the tiers each group carries, the
//! refusals of what Karmada refuses and of what fedraft cannot honour, and the older entries'
//! refusal kept word for word.

use super::tests::{propagation, refusal, refusal_at};
use super::*;
use crate::policy::{Division, ReplicaMode, SelectorOperator, CLUSTER_NAME_KEY};

/// Karmada's user guide, "Use case 3: Overflow from IDC GPU clusters to cloud GPU clusters".
const SAMPLE: &str = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: gpu-inference-overflow
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
  placement:
    clusterAffinities:
      - affinityName: idc-gpu
        clusterNames:
          - idc-gpu-cluster1
        overflowAffinities:
          - affinityName: cloud-gpu
            clusterNames:
              - cloud-gpu-cluster1
              - cloud-gpu-cluster2
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        dynamicWeight: AvailableReplicas
"#;

const FIELD: &str = "spec.placement.clusterAffinities[0].overflowAffinities";

/// What version 13 answered, word for word.
const OLD_REFUSAL: &str = "not supported by fedraft: a group's replicas do not overflow into \
further tiers; list the overflow clusters as a later group (used when this one cannot hold the \
replicas) or in this group with dynamicWeight: AvailableReplicas";

fn names(v: &[&str]) -> Option<Vec<String>> {
    Some(v.iter().map(|s| s.to_string()).collect())
}

#[test]
fn the_published_sample_reads_as_a_primary_and_one_overflow_tier() {
    let p = propagation(SAMPLE);
    assert_eq!(p.affinity_groups.len(), 1);
    let g = &p.affinity_groups[0];
    assert_eq!(g.name, "idc-gpu");
    assert_eq!(g.placement.clusters, names(&["idc-gpu-cluster1"]));
    assert_eq!(g.placement.replicas.mode, ReplicaMode::Divided);
    assert!(matches!(
        g.placement.replicas.division.as_deref(),
        Some(&Division::DynamicByCapacity { rebalance: false })
    ));
    let o = g.overflow.as_ref().expect("overflow tiers");
    assert_eq!(o.primary, "idc-gpu");
    assert_eq!(o.tiers.len(), 1);
    assert_eq!(o.tiers[0].name, "cloud-gpu");
    assert_eq!(
        o.tiers[0].clusters,
        names(&["cloud-gpu-cluster1", "cloud-gpu-cluster2"])
    );
    assert_eq!(o.tiers[0].cluster_selector, None);
    // The stored placement is the primary group's alone.
    assert_eq!(*p.placement, g.placement);
}

#[test]
fn version_13_entries_are_refused_it_as_before() {
    let old = OVERFLOW_AFFINITIES_SINCE - 1;
    assert_eq!(old, 13);
    let e = refusal_at(SAMPLE, old);
    assert_eq!((e.field.as_str(), e.message.as_str()), (FIELD, OLD_REFUSAL));
    // Whatever the field holds: it was refused before it was read.
    let odd = SAMPLE.replace(
        "        overflowAffinities:\n          - affinityName: cloud-gpu\n",
        "        overflowAffinities:\n          - nonsense: cloud-gpu\n",
    );
    let e = refusal_at(&odd, old);
    assert_eq!((e.field.as_str(), e.message.as_str()), (FIELD, OLD_REFUSAL));
}

#[test]
fn tiers_take_selectors_exclusions_and_field_selectors() {
    let doc = SAMPLE.replace(
        "          - affinityName: cloud-gpu\n            clusterNames:\n              - cloud-gpu-cluster1\n              - cloud-gpu-cluster2\n",
        "          - affinityName: cloud-gpu\n            labelSelector: {matchLabels: {gpu: cloud}}\n            exclude: [cloud-gpu-cluster9]\n          - affinityName: any-region-b\n            fieldSelector: {matchExpressions: [{key: region, operator: In, values: [b]}]}\n",
    );
    let p = propagation(&doc);
    let o = p.affinity_groups[0].overflow.as_ref().expect("tiers");
    let tier_names: Vec<&str> = o.tiers.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tier_names, ["cloud-gpu", "any-region-b"]);
    let first = o.tiers[0].cluster_selector.as_ref().expect("selector");
    assert_eq!(
        first.match_labels.get("gpu").map(String::as_str),
        Some("cloud")
    );
    let not_in = &first.match_expressions[0];
    assert_eq!(
        (not_in.key.as_str(), not_in.operator),
        (CLUSTER_NAME_KEY, SelectorOperator::NotIn)
    );
    let second = o.tiers[1].cluster_selector.as_ref().expect("selector");
    assert_eq!(second.match_expressions[0].key, REGION_LABEL);
    // Aggregated knows capacity too.
    let aggregated = SAMPLE.replace(
        "      replicaDivisionPreference: Weighted\n      weightPreference:\n        dynamicWeight: AvailableReplicas\n",
        "      replicaDivisionPreference: Aggregated\n",
    );
    assert!(propagation(&aggregated).affinity_groups[0]
        .overflow
        .is_some());
    // An empty list is no tier at all.
    let empty = SAMPLE.replace(
        "        overflowAffinities:\n          - affinityName: cloud-gpu\n            clusterNames:\n              - cloud-gpu-cluster1\n              - cloud-gpu-cluster2\n",
        "        overflowAffinities: []\n",
    );
    let p = propagation(&empty);
    assert_eq!(
        p.affinity_groups[0]
            .overflow
            .as_ref()
            .map(|o| o.tiers.len()),
        Some(0)
    );
}

#[test]
fn replica_rules_without_capacity_are_refused_as_karmada_does() {
    let weighted = "      replicaDivisionPreference: Weighted\n      weightPreference:\n        dynamicWeight: AvailableReplicas\n";
    for rule in [
        "      replicaSchedulingType: Duplicated\n",
        "      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n      weightPreference:\n        staticWeightList: [{targetCluster: {clusterNames: [idc-gpu-cluster1]}, weight: 1}]\n",
        "      replicaSchedulingType: Divided\n      replicaDivisionPreference: Weighted\n",
    ] {
        let doc = SAMPLE
            .replace("      replicaSchedulingType: Divided\n", "")
            .replace(weighted, rule);
        let e = refusal(&doc);
        assert_eq!(e.field, FIELD, "{rule}");
        assert!(e.message.contains("Divided"), "{}", e.message);
    }
    let none = SAMPLE[..SAMPLE.find("    replicaScheduling:").expect("sample")].to_string();
    assert_eq!(refusal(&none).field, FIELD);
}

#[test]
fn malformed_tiers_are_refused_naming_the_field() {
    let at = |from: &str, to: &str| refusal(&SAMPLE.replace(from, to)).field;
    let name = "          - affinityName: cloud-gpu\n";
    assert_eq!(
        at(
            name,
            "          - clusterNames: [x]\n            affinityName: \"\"\n"
        ),
        format!("{FIELD}[0].affinityName")
    );
    assert_eq!(
        at(name, "          - affinityName: idc-gpu\n"),
        format!("{FIELD}[0].affinityName"),
        "the group's own name"
    );
    assert_eq!(
        at(name, "          - affinityName: \"not a key!\"\n"),
        format!("{FIELD}[0].affinityName")
    );
    assert_eq!(
        at(
            name,
            "          - {affinityName: cloud-gpu, clusterNames: [c3]}\n          - affinityName: cloud-gpu\n"
        ),
        format!("{FIELD}[1].affinityName")
    );
    // Tiers do not nest, and know only a cluster affinity's fields (paths as `typed`
    // writes them).
    assert_eq!(
        at(
            name,
            "          - affinityName: cloud-gpu\n            overflowAffinities: []\n"
        ),
        format!("{FIELD}.[0].overflowAffinities")
    );
    let block = "        overflowAffinities:\n          - affinityName: cloud-gpu\n            clusterNames:\n              - cloud-gpu-cluster1\n              - cloud-gpu-cluster2\n";
    assert_eq!(at(block, "        overflowAffinities: {a: 1}\n"), FIELD);
    // The primary group must select by something of its own.
    let e = refusal(&SAMPLE.replace("        clusterNames:\n          - idc-gpu-cluster1\n", ""));
    assert_eq!(e.field, FIELD);
    assert!(e.message.contains("primary"), "{}", e.message);
    assert_eq!(
        at(
            "              - cloud-gpu-cluster2\n",
            "              - Not_A_Name\n"
        ),
        format!("{FIELD}[0].clusters[1]")
    );
}

#[test]
fn what_fedraft_cannot_honour_with_tiers_is_refused_saying_so() {
    let spread = SAMPLE.replace(
        "    replicaScheduling:\n",
        "    spreadConstraints: [{spreadByField: cluster, maxGroups: 2}]\n    replicaScheduling:\n",
    );
    let e = refusal(&spread);
    assert_eq!(e.field, FIELD);
    assert!(e.message.contains("not supported"), "{}", e.message);
    // A second group with the same primary clusters could not be told apart from the first.
    let twin = SAMPLE.replace(
        "    replicaScheduling:\n",
        "      - affinityName: idc-again\n        clusterNames: [idc-gpu-cluster1]\n    replicaScheduling:\n",
    );
    let e = refusal(&twin);
    assert_eq!(e.field, "spec.placement.clusterAffinities[1]");
    assert!(e.message.contains("clusterAffinities[0]"), "{}", e.message);
    // Another group of other clusters is fine, with or without tiers of its own.
    let next = SAMPLE.replace(
        "    replicaScheduling:\n",
        "      - affinityName: backup\n        clusterNames: [dr1]\n    replicaScheduling:\n",
    );
    let p = propagation(&next);
    assert!(p.affinity_groups[0].overflow.is_some());
    assert_eq!(p.affinity_groups[1].overflow, None);
}
