//! KubeFed's documents as its user guide and samples write them, read into fedraft's terms.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::command::LOG_ENTRY_VERSION;
use crate::policy::{ClusterPreference, Division, PatchOpKind, ReplicaMode};

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).expect("test YAML")
}

fn federated(text: &str) -> Result<FederatedSpec, crate::error::FieldError> {
    let v = yaml(text);
    let kind = FederatedKind::of(
        v["apiVersion"].as_str().unwrap(),
        v["kind"].as_str().unwrap(),
    )
    .expect("a federated kind");
    let ns = v["metadata"]["namespace"].as_str().unwrap_or("");
    let name = v["metadata"]["name"].as_str().unwrap();
    parse_federated(kind, &v, ns, name, LOG_ENTRY_VERSION)
}

const SAMPLE_DEPLOYMENT: &str = r#"
apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata:
  name: test-deployment
  namespace: test-namespace
spec:
  template:
    metadata:
      labels:
        app: nginx
    spec:
      replicas: 3
      selector:
        matchLabels:
          app: nginx
      template:
        metadata:
          labels:
            app: nginx
        spec:
          containers:
          - image: nginx
            name: nginx
  placement:
    clusters:
    - name: cluster2
    - name: cluster1
  overrides:
  - clusterName: cluster2
    clusterOverrides:
    - path: "/spec/replicas"
      value: 5
    - path: "/metadata/annotations"
      op: "add"
      value:
        foo: bar
    - path: "/metadata/annotations/foo"
      op: "remove"
"#;

#[test]
fn the_sample_deployment_keeps_its_template_placement_and_overrides() {
    let f = federated(SAMPLE_DEPLOYMENT).unwrap();
    assert_eq!(f.template["apiVersion"], "apps/v1");
    assert_eq!(f.template["kind"], "Deployment");
    assert_eq!(f.template["metadata"]["name"], "test-deployment");
    assert_eq!(f.template["metadata"]["namespace"], "test-namespace");
    assert_eq!(f.template["metadata"]["labels"]["app"], "nginx");
    assert_eq!(f.template["spec"]["replicas"], 3);
    assert_eq!(
        f.placement.clusters,
        Some(vec!["cluster1".to_string(), "cluster2".to_string()])
    );
    // A full copy per cluster.
    assert_eq!(f.placement.replicas.mode, ReplicaMode::Duplicated);
    assert_eq!(f.overrides.len(), 1);
    let o = &f.overrides[0];
    assert_eq!(o.cluster_name.as_deref(), Some("cluster2"));
    let ops: Vec<(PatchOpKind, &str, Option<&str>)> = o
        .patches
        .iter()
        .map(|p| (p.op, p.path.as_str(), p.value.as_deref()))
        .collect();
    assert_eq!(
        ops,
        [
            (PatchOpKind::Replace, "/spec/replicas", Some("5")),
            (
                PatchOpKind::Add,
                "/metadata/annotations",
                Some(r#"{"foo":"bar"}"#)
            ),
            (PatchOpKind::Remove, "/metadata/annotations/foo", None),
        ]
    );
}

fn placement_of(spec: &str) -> crate::policy::Placement {
    let doc = format!(
        "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata:\n  name: c\n  namespace: n\n{spec}"
    );
    federated(&doc).unwrap().placement
}

#[test]
fn placement_follows_the_user_guide_cases() {
    // Neither clusters nor a selector: nowhere.
    let p = placement_of("spec:\n  placement: {}\n");
    assert_eq!(p.clusters, Some(vec![]));
    assert!(p.cluster_selector.is_none());
    // Both: the selector is ignored.
    let p = placement_of(
        "spec:\n  placement:\n    clusters: [{name: cluster2}, {name: cluster1}]\n    clusterSelector: {matchLabels: {foo: bar}}\n",
    );
    assert_eq!(p.clusters, Some(vec!["cluster1".into(), "cluster2".into()]));
    assert!(p.cluster_selector.is_none());
    // An empty list hides the selector too.
    let p = placement_of(
        "spec:\n  placement:\n    clusters: []\n    clusterSelector: {matchLabels: {foo: bar}}\n",
    );
    assert_eq!(p.clusters, Some(vec![]));
    assert!(p.cluster_selector.is_none());
    // An empty selector: every cluster.
    let p = placement_of("spec:\n  placement:\n    clusterSelector: {}\n");
    assert_eq!(p.clusters, None);
    let sel = p.cluster_selector.unwrap();
    assert!(sel.matches(&BTreeMap::new()));
    // A selector: the clusters it matches.
    let p = placement_of("spec:\n  placement:\n    clusterSelector: {matchLabels: {foo: bar}}\n");
    let sel = p.cluster_selector.unwrap();
    assert!(!sel.matches(&BTreeMap::new()));
    assert!(sel.matches(&BTreeMap::from([("foo".into(), "bar".into())])));
}

#[test]
fn refusals_name_the_field() {
    let cases = [
        (
            SAMPLE_DEPLOYMENT.replace("op: \"remove\"", "op: \"move\""),
            "spec.overrides[0].clusterOverrides[2].op",
        ),
        (
            SAMPLE_DEPLOYMENT.replace("path: \"/spec/replicas\"", "path: \"/metadata/name\""),
            "spec.overrides[0].clusterOverrides[0].path",
        ),
        (
            SAMPLE_DEPLOYMENT.replace("  placement:\n", "  retainReplicas: true\n  placement:\n"),
            "spec.retainReplicas",
        ),
        (
            SAMPLE_DEPLOYMENT.replace("    - name: cluster1", "    - name: Cluster_1"),
            "spec.placement.clusters[1].name",
        ),
        (
            format!("{SAMPLE_DEPLOYMENT}  - clusterName: cluster2\n    clusterOverrides: []\n"),
            "spec.overrides[1].clusterName",
        ),
    ];
    for (doc, field) in cases {
        let err = federated(&doc).expect_err(field);
        assert_eq!(err.field, field, "{}", err.message);
    }
    let role = r#"
apiVersion: types.kubefed.io/v1beta1
kind: FederatedClusterRole
metadata:
  name: test-clusterrole
spec:
  template:
    rules: []
"#;
    let v = yaml(role);
    let before = crate::karmada::PEER_WIDENED_SINCE - 1;
    let err = parse_federated(
        FederatedKind::ClusterRole,
        &v,
        "",
        "test-clusterrole",
        before,
    )
    .unwrap_err();
    assert_eq!(err.field, "kind");
    assert!(err.message.contains("cluster-scoped"), "{}", err.message);
    // Since the widening, the target is a cluster-scoped template like any other.
    let f = federated(role).unwrap();
    assert_eq!(f.template["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(f.template["kind"], "ClusterRole");
    assert_eq!(f.template["metadata"], json!({"name": "test-clusterrole"}));
    assert_eq!(
        f.placement.clusters,
        Some(Vec::new()),
        "no placement: nowhere"
    );
}

#[test]
fn a_federated_namespace_is_named_after_its_namespace() {
    let ns = r#"
apiVersion: types.kubefed.io/v1beta1
kind: FederatedNamespace
metadata:
  name: test-namespace
  namespace: test-namespace
spec:
  placement:
    clusters:
    - name: cluster2
"#;
    let f = federated(ns).unwrap();
    assert_eq!(f.template["kind"], "Namespace");
    assert!(f.template["metadata"].get("namespace").is_none());
    let wrong = ns.replace("  name: test-namespace", "  name: other");
    assert_eq!(federated(&wrong).unwrap_err().field, "metadata.name");
}

#[test]
fn an_rsp_divides_its_total_with_the_planner() {
    let rsp = parse_rsp(
        &yaml(
            r#"
apiVersion: scheduling.kubefed.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata: {name: test-deployment, namespace: test-namespace}
spec:
  targetKind: FederatedDeployment
  totalReplicas: 10
  rebalance: true
  clusters:
    cluster1: {weight: 2}
    cluster2: {weight: 3, minReplicas: 1, maxReplicas: 8}
"#,
        ),
        LOG_ENTRY_VERSION,
    )
    .unwrap();
    let mut f = federated(SAMPLE_DEPLOYMENT).unwrap();
    rsp.apply(&mut f);
    assert_eq!(f.template["spec"]["replicas"], json!(10));
    assert_eq!(f.placement.replicas.mode, ReplicaMode::Divided);
    let Some(Division::StaticWeights { weights, rebalance }) =
        f.placement.replicas.division.as_deref()
    else {
        panic!("static weights expected: {:?}", f.placement.replicas);
    };
    assert!(*rebalance);
    // Every preference is bounded, which is what selects KubeFed's planner.
    assert_eq!(
        weights["cluster1"],
        ClusterPreference {
            weight: 2,
            min_replicas: 0,
            max_replicas: Some(10)
        }
    );
    assert_eq!(weights["cluster2"].max_replicas, Some(8));
    // Without intersectWithClusterSelector the RSP chooses among every cluster.
    assert_eq!(f.placement.clusters, None);
}

#[test]
fn an_rsp_without_clusters_weighs_every_cluster_alike_and_may_intersect() {
    let rsp = parse_rsp(
        &yaml(
            "spec:\n  targetKind: FederatedDeployment\n  totalReplicas: 4\n  intersectWithClusterSelector: true\n",
        ),
        LOG_ENTRY_VERSION,
    )
    .unwrap();
    let mut f = federated(SAMPLE_DEPLOYMENT).unwrap();
    rsp.apply(&mut f);
    let Some(Division::StaticWeights { weights, .. }) = f.placement.replicas.division.as_deref()
    else {
        panic!("static weights expected");
    };
    assert_eq!(weights.keys().collect::<Vec<_>>(), ["*"]);
    assert_eq!(weights["*"].weight, 1);
    assert_eq!(
        f.placement.clusters,
        Some(vec!["cluster1".into(), "cluster2".into()])
    );
}

#[test]
fn rsp_refusals_name_the_field() {
    for (spec, field) in [
        ("targetKind: FederatedService\n  totalReplicas: 1", "spec.targetKind"),
        ("targetKind: FederatedDeployment\n  totalReplicas: -1", "spec.totalReplicas"),
        (
            "targetKind: FederatedDeployment\n  totalReplicas: 1\n  clusters: {a: {weight: -2}}",
            "spec.clusters.a.weight",
        ),
        (
            "targetKind: FederatedDeployment\n  totalReplicas: 1\n  clusters: {a: {minReplicas: 3, maxReplicas: 2}}",
            "spec.clusters.a.minReplicas",
        ),
        (
            "targetKind: FederatedDeployment\n  totalReplicas: 1\n  clusters: {\"a\\tb\": {weight: 1}}",
            "spec.clusters.a\tb",
        ),
        (
            "targetKind: FederatedDeployment\n  totalReplicas: 1\n  clusters: {\"\": {weight: 1}}",
            "spec.clusters.",
        ),
    ] {
        let err = parse_rsp(&yaml(&format!("spec:\n  {spec}\n")), LOG_ENTRY_VERSION)
            .expect_err(field);
        assert_eq!(err.field, field, "{}", err.message);
    }
}

/// KubeFed's user guide weighs clusters "A", "B" and "C": keys KubeFed reads as cluster names.
#[test]
fn rsp_keys_that_name_no_cluster_match_nothing() {
    let guide = "spec:\n  targetKind: FederatedDeployment\n  totalReplicas: 9\n  clusters:\n    A: {weight: 1}\n    cluster1: {weight: 2}\n";
    let before = crate::karmada::PEER_WIDENED_SINCE - 1;
    let err = parse_rsp(&yaml(guide), before).expect_err("older entries refuse it");
    assert_eq!(err.field, "spec.clusters.A");
    let rsp = parse_rsp(&yaml(guide), LOG_ENTRY_VERSION).unwrap();
    assert!(rsp.clusters.contains_key("A"), "kept as written");
    let mut f = federated(SAMPLE_DEPLOYMENT).unwrap();
    rsp.apply(&mut f);
    let Some(Division::StaticWeights { weights, .. }) = f.placement.replicas.division.as_deref()
    else {
        panic!("static weights expected");
    };
    assert_eq!(weights.keys().collect::<Vec<_>>(), ["cluster1"]);
    assert!(f.placement.validate("spec.placement").is_ok());

    let none = "spec:\n  targetKind: FederatedDeployment\n  totalReplicas: 9\n  clusters:\n    A: {weight: 1}\n    B: {weight: 2}\n";
    let rsp = parse_rsp(&yaml(none), LOG_ENTRY_VERSION).unwrap();
    let mut f = federated(SAMPLE_DEPLOYMENT).unwrap();
    rsp.apply(&mut f);
    assert_eq!(f.placement.clusters, Some(Vec::new()), "no cluster matches");
    assert!(f.placement.validate("spec.placement").is_ok());
}
