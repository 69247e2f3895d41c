//! Policy fields read since log entry version 12 (`PEER_WIDENED_SINCE`): ordered affinity
//! groups, spreads without a key, the policy's own namespace, `association`, lazy activation
//! and dependent overrides; entries of older versions keep their refusals.

use super::tests::{propagation, refusal, refusal_at, NGINX_POLICY};
use super::*;
use crate::policy::CLUSTER_NAME_KEY;

const GROUPS_POLICY: &str = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: test-propagation, namespace: default}
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
  placement:
    clusterAffinities:
      - affinityName: primary-clusters
        clusterNames: [member1, member2]
      - affinityName: backup-clusters
        labelSelector: {matchLabels: {tier: backup}}
    clusterTolerations:
      - {key: maintenance, operator: Exists, effect: NoSchedule}
"#;

#[test]
fn affinity_groups_are_whole_placements_in_order() {
    let p = propagation(GROUPS_POLICY);
    let names: Vec<&str> = p.affinity_groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["primary-clusters", "backup-clusters"]);
    let first = &p.affinity_groups[0].placement;
    assert_eq!(
        first.clusters.as_deref(),
        Some(&["member1".to_string(), "member2".to_string()][..])
    );
    assert_eq!(*p.placement, *first, "the first group is the placement");
    let second = &p.affinity_groups[1].placement;
    assert_eq!(second.clusters, None);
    assert!(second.cluster_selector.is_some());
    // What the groups share is in each of them.
    assert_eq!(second.tolerations, first.tolerations);
    assert_eq!(first.tolerations.len(), 1);
    assert!(propagation(NGINX_POLICY).affinity_groups.is_empty());
}

#[test]
fn affinity_groups_are_refused_before_their_version_and_when_malformed() {
    let e = refusal_at(GROUPS_POLICY, PEER_WIDENED_SINCE - 1);
    assert_eq!(e.field, "spec.placement.clusterAffinities");
    let both = GROUPS_POLICY.replace(
        "    clusterTolerations:",
        "    clusterAffinity: {clusterNames: [member1]}\n    clusterTolerations:",
    );
    assert_eq!(refusal(&both).field, "spec.placement.clusterAffinities");
    let twice = GROUPS_POLICY.replace("backup-clusters", "primary-clusters");
    assert_eq!(
        refusal(&twice).field,
        "spec.placement.clusterAffinities[1].affinityName"
    );
    let unnamed = GROUPS_POLICY.replace("affinityName: backup-clusters", "exclude: [member9]");
    assert_eq!(
        refusal(&unnamed).field,
        "spec.placement.clusterAffinities[1].affinityName"
    );
    let overflow = GROUPS_POLICY.replace(
        "        clusterNames: [member1, member2]",
        "        clusterNames: [member1]\n        overflowAffinities: [{affinityName: cloud, clusterNames: [member2]}]",
    );
    // Read from its own version on (`overflow_tests`); refused to the entries before it.
    let e = refusal_at(&overflow, OVERFLOW_AFFINITIES_SINCE - 1);
    assert_eq!(
        e.field,
        "spec.placement.clusterAffinities[0].overflowAffinities"
    );
    assert!(e.message.contains("not supported"), "{}", e.message);
}

#[test]
fn the_second_widening_reads_what_older_entries_were_refused() {
    let policy = |spec: &str| {
        format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: p, namespace: shop}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment, namespace: shop}}]\n{spec}"
        )
    };
    let old = PEER_WIDENED_SINCE - 1;
    // A spread constraint without a field or label spreads over clusters, minGroups 1.
    let spread = policy("  placement:\n    spreadConstraints: [{maxGroups: 2}]\n");
    let s = &propagation(&spread).placement.spread_constraints[0];
    assert_eq!(
        (s.label_key.as_str(), s.min_groups, s.max_groups),
        (CLUSTER_NAME_KEY, 1, 2)
    );
    // The selector may name the policy's own namespace (not another).
    assert_eq!(
        refusal_at(&spread, old).field,
        "spec.placement.spreadConstraints[0].spreadByField"
    );
    assert!(propagation(&policy(""))
        .placement
        .spread_constraints
        .is_empty());
    assert_eq!(
        refusal_at(&policy(""), old).field,
        "spec.resourceSelectors[0].namespace"
    );
    let other = spread.replace("namespace: shop}]", "namespace: web}]");
    assert_eq!(refusal(&other).field, "spec.resourceSelectors[0].namespace");
    // `association` is propagateDeps' old name.
    let assoc = policy("  association: true\n");
    assert!(propagation(&assoc).propagate_deps);
    assert_eq!(refusal_at(&assoc, old).field, "spec.association");
    let clash = policy("  association: true\n  propagateDeps: false\n");
    assert_eq!(refusal(&clash).field, "spec.association");
    // Lazy activation and dependent overrides are kept for the door.
    let lazy = policy("  activationPreference: Lazy\n  dependentOverrides: [my-override]\n");
    let p = propagation(&lazy);
    assert!(p.lazy);
    assert_eq!(p.dependent_overrides, ["my-override"]);
    assert_eq!(refusal_at(&lazy, old).field, "spec.dependentOverrides");
    assert_eq!(
        refusal(&policy("  activationPreference: Eager\n")).field,
        "spec.activationPreference"
    );
    // What an entry of this widening could not do is refused to it saying so (workload
    // affinity is read from its own version on: `workload_tests`), and a placement field
    // outside placement says where it belongs.
    let wa = policy("  placement:\n    workloadAffinity: {affinity: {groupByLabelKey: app}}\n");
    let e = refusal_at(&wa, WORKLOAD_AFFINITY_SINCE - 1);
    assert_eq!(e.field, "spec.placement.workloadAffinity");
    assert!(e.message.contains("not supported"), "{}", e.message);
    let misplaced = policy("  placement:\n  clusterAffinity: {clusterNames: [member1]}\n");
    let e = refusal(&misplaced);
    assert_eq!(e.field, "spec.clusterAffinity");
    assert!(e.message.contains("spec.placement"), "{}", e.message);
}
