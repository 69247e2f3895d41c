//! Policy documents as users write them, read into placement and overrides; refusals name the
//! field.

use std::collections::BTreeMap;

use serde_json::Value;

use super::select::{best_match, Precedence};
use super::*;
use crate::command::LOG_ENTRY_VERSION;
use crate::policy::{Division, ReplicaMode, SelectorOperator, TaintEffect, CLUSTER_NAME_KEY};

pub(super) fn doc(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("test YAML: {e}"))
}

pub(super) fn kind_of(v: &Value) -> PolicyKind {
    let api = v["apiVersion"].as_str().unwrap_or_default();
    let kind = v["kind"].as_str().unwrap_or_default();
    PolicyKind::of(api, kind).unwrap_or_else(|| panic!("not a policy: {api} {kind}"))
}

pub(super) fn propagation(yaml: &str) -> PropagationSpec {
    let v = doc(yaml);
    match parse_spec(kind_of(&v), &v, LOG_ENTRY_VERSION) {
        Ok(PolicySpec::Propagation(p)) => p,
        other => panic!("expected a propagation spec, got {other:?}"),
    }
}

pub(super) fn refusal(yaml: &str) -> FieldError {
    refusal_at(yaml, LOG_ENTRY_VERSION)
}

pub(super) fn refusal_at(yaml: &str, version: u16) -> FieldError {
    let v = doc(yaml);
    match parse_spec(kind_of(&v), &v, version) {
        Err(e) => e,
        Ok(spec) => panic!("expected a refusal, got {spec:?}"),
    }
}

pub(super) const NGINX_POLICY: &str = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
spec:
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      name: nginx
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference:
        staticWeightList:
          - targetCluster:
              clusterNames: [member1]
            weight: 1
          - targetCluster:
              clusterNames: [member2]
            weight: 2
"#;

#[test]
fn static_weights_become_a_divided_placement() {
    let p = propagation(NGINX_POLICY);
    assert_eq!(
        p.placement.clusters,
        Some(vec!["member1".to_string(), "member2".to_string()])
    );
    assert_eq!(p.placement.replicas.mode, ReplicaMode::Divided);
    let Some(Division::StaticWeights { weights, .. }) = p.placement.replicas.division.as_deref()
    else {
        panic!("expected static weights: {:?}", p.placement.replicas);
    };
    assert_eq!(weights["member1"].weight, 1);
    assert_eq!(weights["member2"].weight, 2);
    assert!(!p.preempts, "Karmada's default preemption is Never");
}

#[test]
fn without_replica_scheduling_every_cluster_gets_the_whole_object() {
    let p = propagation(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: all}
spec:
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap}]
"#,
    );
    assert_eq!(p.placement.replicas.mode, ReplicaMode::Duplicated);
    assert_eq!(p.placement.clusters, None);
    assert_eq!(p.placement.cluster_selector, None);
}

#[test]
fn affinity_selectors_tolerations_and_spread_map_onto_cluster_labels() {
    let p = propagation(
        r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p, namespace: app}
spec:
  priority: 5
  preemption: Always
  resourceSelectors:
    - apiVersion: apps/v1
      kind: Deployment
      labelSelector: {matchLabels: {app: web}}
  placement:
    clusterAffinity:
      clusterNames: [a, b, c]
      exclude: [b]
      labelSelector: {matchLabels: {env: prod}}
      fieldSelector:
        matchExpressions:
          - {key: region, operator: In, values: [eu, us]}
    clusterTolerations:
      - {key: gpu, operator: Exists, effect: NoSchedule}
    spreadConstraints:
      - {spreadByField: region, maxGroups: 2, minGroups: 1}
      - {spreadByLabel: rack, maxGroups: 3}
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: AvailableReplicas}
"#,
    );
    assert_eq!(p.priority, 5);
    assert!(p.preempts);
    let pl = &p.placement;
    assert_eq!(pl.clusters, Some(vec!["a".to_string(), "c".to_string()]));
    let sel = pl
        .cluster_selector
        .as_ref()
        .unwrap_or_else(|| panic!("no selector"));
    assert_eq!(
        sel.match_labels.get("env").map(String::as_str),
        Some("prod")
    );
    assert_eq!(sel.match_expressions[0].key, REGION_LABEL);
    assert_eq!(sel.match_expressions[0].operator, SelectorOperator::In);
    assert_eq!(pl.tolerations[0].key, "gpu");
    assert_eq!(pl.tolerations[0].effect, Some(TaintEffect::NoSchedule));
    assert_eq!(pl.spread_constraints[0].label_key, REGION_LABEL);
    assert_eq!(pl.spread_constraints[0].max_groups, 2);
    assert_eq!(pl.spread_constraints[1].label_key, "rack");
    assert_eq!(pl.spread_constraints[1].min_groups, 1);
    assert_eq!(
        pl.replicas.division.as_deref(),
        Some(&Division::DynamicByCapacity { rebalance: false })
    );
}

#[test]
fn what_fedraft_cannot_honour_is_refused_naming_the_field() {
    let cases = [
        (
            "failover:\n    application:\n      statePreservation: {rules: [{aliasLabelName: a, jsonPath: '{.jobs[*].id}'}]}",
            "spec.failover.application.statePreservation.rules[0].jsonPath",
        ),
        (
            "placement:\n    clusterTolerations: [{key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}]",
            "spec.placement.clusterTolerations[0].tolerationSeconds",
        ),
        // A typo is an unknown field, named as written.
        (
            "placement:\n    clusterAfinity: {clusterNames: [a]}",
            "spec.placement.clusterAfinity",
        ),
        (
            "placement:\n    replicaScheduling: {replicaSchedulingType: Split}",
            "spec.placement.replicaScheduling.replicaSchedulingType",
        ),
    ];
    for (extra, field) in cases {
        let yaml = format!(
            "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: p}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]\n  {extra}\n"
        );
        let e = refusal(&yaml);
        assert_eq!(e.field, field, "{extra}: {e}");
        assert!(!e.message.is_empty());
    }
}

#[test]
fn selectors_are_required_and_namespaced_policies_name_no_namespace() {
    let e = refusal(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n  resourceSelectors: []\n",
    );
    assert_eq!(e.field, "spec.resourceSelectors");
    let e = refusal(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, namespace: other}]\n",
    );
    assert_eq!(e.field, "spec.resourceSelectors[0].namespace");
    let e = refusal(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n  resourceSelectors: [{apiVersion: v1}]\n",
    );
    assert_eq!(e.field, "spec.resourceSelectors[0]");
}

#[test]
fn override_rules_target_clusters_and_rewrite_images_labels_and_fields() {
    let v = doc(r#"
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata: {name: o, namespace: app}
spec:
  resourceSelectors:
    - {apiVersion: apps/v1, kind: Deployment, name: nginx}
  overrideRules:
    - targetCluster:
        clusterNames: [member1, member2]
      overriders:
        imageOverrider:
          - {component: Registry, operator: replace, value: mirror.example.com}
          - {component: Tag, operator: replace, value: "1.25"}
        labelsOverrider:
          - {operator: add, value: {tier: edge}}
    - targetCluster:
        labelSelector: {matchLabels: {region: eu}}
      overriders:
        plaintext:
          - {path: /spec/replicas, operator: replace, value: 3}
          - {path: /metadata/annotations, operator: remove}
        annotationsOverrider:
          - {operator: replace, value: {owner: eu-team}}
"#);
    let Ok(PolicySpec::Override(o)) = parse_spec(PolicyKind::Override, &v, LOG_ENTRY_VERSION)
    else {
        panic!("expected an override spec");
    };
    assert!(!o.reads_template());
    let overrides = o.overrides(&Value::Null);
    assert_eq!(
        overrides.len(),
        3,
        "one per named cluster, one per selector"
    );
    assert_eq!(overrides[0].cluster_name.as_deref(), Some("member1"));
    assert_eq!(overrides[1].cluster_name.as_deref(), Some("member2"));
    let image = overrides[0]
        .image
        .as_ref()
        .unwrap_or_else(|| panic!("no image"));
    assert_eq!(image.registry.as_deref(), Some("mirror.example.com"));
    assert_eq!(image.tag.as_deref(), Some("1.25"));
    assert_eq!(image.container, None);
    assert_eq!(
        overrides[1].labels.get("tier").map(String::as_str),
        Some("edge")
    );
    let eu = &overrides[2];
    assert!(eu.cluster_selector.is_some());
    assert_eq!(eu.patches[0].path, "/spec/replicas");
    assert_eq!(eu.patches[0].value.as_deref(), Some("3"));
    assert_eq!(eu.patches[1].value, None);
    assert_eq!(
        eu.annotations.get("owner").map(String::as_str),
        Some("eu-team")
    );

    let refused = doc(r#"
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: o}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
    - overriders:
        imageOverrider:
          - {component: Tag, operator: replace, value: x, predicate: {path: /spec/template/spec/containers/0/image}}
"#);
    // Predicates are read since OVERRIDERS_WIDENED_SINCE (`image_overrider_tests`).
    let e = parse_spec(
        PolicyKind::ClusterOverride,
        &refused,
        OVERRIDERS_WIDENED_SINCE - 1,
    )
    .err();
    assert_eq!(
        e.map(|e| e.field).as_deref(),
        Some("spec.overrideRules[0].overriders.imageOverrider[0].predicate")
    );
}

#[test]
fn selection_ranks_names_over_labels_over_kinds() {
    let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
    let t = TemplateIdentity {
        api_version: "apps/v1",
        kind: "Deployment",
        namespace: "app",
        name: "web",
        labels: &labels,
    };
    let sel = |yaml: &str| -> ResourceSelector {
        serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("{e}"))
    };
    let by_kind = sel("{apiVersion: apps/v1, kind: Deployment}");
    let by_label =
        sel("{apiVersion: apps/v1, kind: Deployment, labelSelector: {matchLabels: {app: web}}}");
    let by_name = sel("{apiVersion: apps/v1, kind: Deployment, name: web}");
    let other_name = sel("{apiVersion: apps/v1, kind: Deployment, name: api, labelSelector: {matchLabels: {app: web}}}");
    let other_kind = sel("{apiVersion: v1, kind: Service}");
    assert_eq!(by_kind.matches(&t, None), Some(MatchRank::Kind));
    assert_eq!(by_label.matches(&t, None), Some(MatchRank::Labels));
    assert_eq!(by_name.matches(&t, Some("app")), Some(MatchRank::Name));
    assert_eq!(
        by_name.matches(&t, Some("other")),
        None,
        "own namespace only"
    );
    assert_eq!(
        other_name.matches(&t, None),
        None,
        "a name wins over labels"
    );
    assert_eq!(other_kind.matches(&t, None), None);
    assert_eq!(
        best_match(&[by_kind.clone(), by_name, by_label], &t, None),
        Some(MatchRank::Name)
    );

    // Explicit priority first, then namespaced over cluster-wide, then the match, then the name.
    let p = |priority, namespaced, rank, name| Precedence {
        priority,
        namespaced,
        rank,
        name: std::cmp::Reverse(name),
    };
    let mut order = [
        p(0, false, MatchRank::Name, "a"),
        p(0, true, MatchRank::Kind, "b"),
        p(1, false, MatchRank::Kind, "c"),
        p(0, true, MatchRank::Kind, "a"),
        p(0, true, MatchRank::Labels, "z"),
    ];
    order.sort();
    order.reverse();
    let names: Vec<&str> = order.iter().map(|p| p.name.0).collect();
    assert_eq!(names, ["c", "z", "a", "b", "a"]);
}

fn policy_with(extra: &str) -> String {
    format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: p}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]\n  {extra}\n"
    )
}

const WIDENED: [(&str, &str); 4] = [
    (
        "placement:\n    replicaScheduling:\n      replicaSchedulingType: Divided\n      replicaDivisionPreference: Aggregated",
        "spec.placement.replicaScheduling.replicaDivisionPreference",
    ),
    (
        "placement:\n    clusterAffinity:\n      exclude: [member2]",
        "spec.placement.clusterAffinity.exclude",
    ),
    (
        "placement:\n    spreadConstraints: [{spreadByField: cluster, minGroups: 2, maxGroups: 2}]",
        "spec.placement.spreadConstraints[0].spreadByField",
    ),
    (
        "placement:\n    clusterTolerations: [{effect: NoSchedule}]",
        "spec.placement.tolerations[0].operator",
    ),
];

#[test]
fn aggregation_exclusions_cluster_spread_and_empty_key_tolerations_are_read_since_version_4() {
    let p = propagation(&policy_with(WIDENED[0].0)).placement;
    assert_eq!(
        p.replicas.division.as_deref(),
        Some(&Division::Aggregated { rebalance: false })
    );
    assert_eq!(p.replicas.mode, ReplicaMode::Divided);

    let p = propagation(&policy_with(WIDENED[1].0)).placement;
    assert_eq!(p.clusters, None, "no names: every cluster but the excluded");
    let sel = p.cluster_selector.unwrap_or_default();
    assert_eq!(sel.match_expressions.len(), 1);
    let req = &sel.match_expressions[0];
    assert_eq!(
        (req.key.as_str(), req.operator, req.values.as_slice()),
        (
            CLUSTER_NAME_KEY,
            SelectorOperator::NotIn,
            &["member2".to_string()][..]
        )
    );
    let labels = BTreeMap::new();
    assert!(sel.matches_cluster("member1", &labels));
    assert!(!sel.matches_cluster("member2", &labels));

    let p = propagation(&policy_with(WIDENED[2].0)).placement;
    assert_eq!(p.spread_constraints.len(), 1);
    let sc = &p.spread_constraints[0];
    assert_eq!(
        (sc.label_key.as_str(), sc.min_groups, sc.max_groups),
        (CLUSTER_NAME_KEY, 2, 2)
    );

    // An empty key with operator Equal tolerates no taint: leaving it out means the same.
    let p = propagation(&policy_with(WIDENED[3].0)).placement;
    assert!(p.tolerations.is_empty(), "{:?}", p.tolerations);
}

#[test]
fn entries_before_version_4_are_refused_what_they_were_refused_then() {
    for (extra, field) in WIDENED {
        let e = refusal_at(&policy_with(extra), 3);
        assert_eq!(e.field, field, "{extra}: {e}");
    }
    let target = doc(OVERRIDE_WITH_EXCLUDE);
    let e = parse_spec(PolicyKind::ClusterOverride, &target, 3).err();
    assert_eq!(
        e.map(|e| e.field).as_deref(),
        Some("spec.overrideRules[0].targetCluster")
    );
}

const OVERRIDE_WITH_EXCLUDE: &str = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterOverridePolicy
metadata: {name: o}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]
  overrideRules:
    - targetCluster:
        labelSelector: {matchLabels: {tier: edge}}
        fieldSelector:
          matchExpressions: [{key: region, operator: In, values: [eu]}]
        exclude: [edge-2]
      overriders:
        labelsOverrider: [{operator: add, value: {edge: "true"}}]
"#;

#[test]
fn an_override_target_ands_names_exclusions_labels_and_fields() {
    let Ok(PolicySpec::Override(o)) = parse_spec(
        PolicyKind::ClusterOverride,
        &doc(OVERRIDE_WITH_EXCLUDE),
        LOG_ENTRY_VERSION,
    ) else {
        panic!("expected an override spec");
    };
    let overrides = o.overrides(&Value::Null);
    assert_eq!(overrides.len(), 1);
    let ov = &overrides[0];
    let labels = |region: &str| {
        BTreeMap::from([
            ("tier".to_string(), "edge".to_string()),
            (REGION_LABEL.to_string(), region.to_string()),
        ])
    };
    assert!(ov.targets("edge-1", &labels("eu")));
    assert!(!ov.targets("edge-2", &labels("eu")), "excluded by name");
    assert!(
        !ov.targets("edge-1", &labels("us")),
        "outside the field selector"
    );
    assert!(!ov.targets("edge-1", &BTreeMap::new()), "lacks the label");
}

#[test]
fn propagate_deps_is_read_from_its_version_and_refused_before() {
    let yaml = "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\nspec:\n  propagateDeps: true\n  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment}]\n";
    assert!(propagation(yaml).propagate_deps);
    let e = refusal_at(yaml, DEPS_SINCE - 1);
    assert_eq!(e.field, "spec.propagateDeps");
    assert!(!propagation(NGINX_POLICY).propagate_deps);
}

#[test]
fn a_pod_template_names_its_dependencies_wherever_kubernetes_lets_it() {
    let d = doc(r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      serviceAccountName: web-sa
      imagePullSecrets: [{name: regcred}]
      volumes:
        - {name: a, configMap: {name: cm-vol}}
        - {name: b, secret: {secretName: sec-vol}}
        - {name: c, persistentVolumeClaim: {claimName: data}}
        - name: d
          projected:
            sources: [{configMap: {name: cm-proj}}, {secret: {name: sec-proj}}, {serviceAccountToken: {path: t}}]
        - {name: e, csi: {driver: x, nodePublishSecretRef: {name: csi-cred}}}
        - {name: f, emptyDir: {}}
      initContainers:
        - name: init
          envFrom: [{configMapRef: {name: cm-init}}]
      containers:
        - name: app
          env:
            - {name: A, valueFrom: {configMapKeyRef: {name: cm-env, key: a}}}
            - {name: B, valueFrom: {secretKeyRef: {name: sec-env, key: b}}}
            - {name: C, value: plain}
          envFrom: [{secretRef: {name: sec-from}}]
"#);
    let names = |k: DependencyKind| -> Vec<String> {
        dependencies("Deployment", &d)
            .into_iter()
            .filter(|(kind, _)| *kind == k)
            .map(|(_, n)| n)
            .collect()
    };
    assert_eq!(
        names(DependencyKind::ConfigMap),
        ["cm-env", "cm-init", "cm-proj", "cm-vol"]
    );
    assert_eq!(
        names(DependencyKind::Secret),
        ["csi-cred", "regcred", "sec-env", "sec-from", "sec-proj", "sec-vol"]
    );
    assert_eq!(names(DependencyKind::ServiceAccount), ["web-sa"]);
    assert_eq!(names(DependencyKind::PersistentVolumeClaim), ["data"]);
    // The pod spec is where each kind keeps it; a kind without one names nothing, and the
    // namespace's own default service account is no dependency.
    let cron = doc("kind: CronJob\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          serviceAccountName: default\n          volumes: [{name: a, configMap: {name: c}}]\n");
    assert_eq!(
        dependencies("CronJob", &cron)
            .into_iter()
            .collect::<Vec<_>>(),
        [(DependencyKind::ConfigMap, "c".to_string())]
    );
    assert!(dependencies("ConfigMap", &d).is_empty());
}
