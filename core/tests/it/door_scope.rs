//! Cluster-scoped resource templates through the door (log version 9): stored in the reserved
//! namespace, placed by ClusterPropagationPolicies, refused to tenants and to a kind the
//! admission policy does not list, and a CustomResourceDefinition kept while its objects live.

use fedraft_core::admission::AdmissionPolicy;
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::door::{ResourceKey, CLUSTER_SCOPE_NAMESPACE};
use fedraft_core::model::TenantSpec;
use fedraft_core::state::{Outcome, RejectCode};
use serde_json::{json, Value};

use crate::state_support::Harness;

fn put(v: Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn delete(key: ResourceKey) -> Command {
    Command::DeleteResource {
        key,
        expected_version: None,
    }
}

const CRD_KIND: &str = "apiextensions.k8s.io/CustomResourceDefinition";

fn fleet(kinds: &[&str]) -> Harness {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2", "member3"]);
    h.ok(Command::SetAdmissionPolicy(AdmissionPolicy {
        cluster_scoped_kinds: kinds.iter().map(|k| k.to_string()).collect(),
        ..AdmissionPolicy::default()
    }));
    h
}

fn cluster_role(name: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"team": "ops"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
}

fn crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}})
}

fn key(group: &str, kind: &str, namespace: &str, name: &str) -> ResourceKey {
    ResourceKey {
        group: group.into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn cluster_policy(selectors: Value) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
        "metadata": {"name": "cluster-wide"},
        "spec": {"resourceSelectors": selectors,
            "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}}})
}

#[test]
fn a_cluster_scoped_template_is_stored_apart_and_placed_by_a_cluster_policy() {
    let mut h = fleet(&["rbac.authorization.k8s.io/ClusterRole"]);
    h.ok(put(cluster_role("reader")));
    let k = key("rbac.authorization.k8s.io", "ClusterRole", "", "reader");
    assert_eq!(k.object_namespace(), CLUSTER_SCOPE_NAMESPACE);
    let rec = &h.state.door().templates[&k];
    assert_eq!((rec.generation, rec.bound_to.is_none()), (1, true));
    let obj = h.obj(CLUSTER_SCOPE_NAMESPACE, &k.object_name());
    let stored: Value = serde_json::from_str(&obj.spec.template).unwrap_or(Value::Null);
    assert!(
        stored["metadata"].get("namespace").is_none(),
        "a cluster-scoped template keeps no namespace: {stored}"
    );
    assert!(h
        .placement(CLUSTER_SCOPE_NAMESPACE, &k.object_name())
        .is_empty());

    // A namespaced PropagationPolicy cannot select it; a ClusterPropagationPolicy places it on
    // every cluster it names (a kind without replicas is duplicated).
    h.ok(put(
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "ns-only", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole"}], "placement": {}}}),
    ));
    assert!(h
        .placement(CLUSTER_SCOPE_NAMESPACE, &k.object_name())
        .is_empty());
    h.ok(put(cluster_policy(
        json!([{"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole", "labelSelector": {"matchLabels": {"team": "ops"}}}]),
    )));
    let placed = h.placement(CLUSTER_SCOPE_NAMESPACE, &k.object_name());
    assert_eq!(
        placed.keys().map(String::as_str).collect::<Vec<_>>(),
        ["member1", "member2"]
    );
    assert_eq!(
        h.state.door().templates[&k]
            .bound_to
            .as_ref()
            .map(|p| p.name.as_str()),
        Some("cluster-wide")
    );

    // Deleting it removes the object.
    h.ok(delete(k.clone()));
    assert!(!h.state.door().templates.contains_key(&k));
    assert!(h
        .state
        .object(CLUSTER_SCOPE_NAMESPACE, &k.object_name())
        .is_none());
}

#[test]
fn refusals_name_why() {
    let mut h = fleet(&[]);
    // Admission's rule still holds: an administrator's kind must be listed.
    let r = h.refused(put(cluster_role("reader")));
    assert_eq!(r.field.as_deref(), Some("spec.template.kind"));
    assert!(r.message.contains("clusterScopedKinds"), "{}", r.message);
    // A namespaced kind needs its namespace.
    let r = h.refused(put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c"}})));
    assert_eq!(r.field.as_deref(), Some("metadata.namespace"));
    assert!(r.message.contains("namespaced"), "{}", r.message);
    // The reserved namespace holds no namespaced template.
    let r = h.refused(put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": CLUSTER_SCOPE_NAMESPACE}})));
    assert_eq!(r.field.as_deref(), Some("metadata.namespace"));
    assert!(r.message.contains("reserved"), "{}", r.message);

    // A tenant may not write a cluster-scoped kind, even one admins may.
    let mut h = fleet(&["rbac.authorization.k8s.io/ClusterRole"]);
    h.ok(Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: vec!["app".into()],
        quota: Default::default(),
        slice_size: None,
        members: vec!["alice".into()],
    }));
    h.index += 1;
    let e = LogEntry::new("", "tenant:acme/alice", h.now_ms, put(cluster_role("mine")));
    let Outcome::Rejected(r) = h.state.apply(h.index, &e).outcome else {
        panic!("a tenant wrote a ClusterRole");
    };
    assert_eq!(r.code, RejectCode::Forbidden);
    assert!(
        r.message.contains("ClusterRole") && r.message.contains("administrator"),
        "{}",
        r.message
    );
    assert!(h.state.door().templates.is_empty());

    // Nor may a tenant own the namespace the cluster-scoped templates live in.
    h.index += 1;
    let claim = Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: vec!["app".into(), CLUSTER_SCOPE_NAMESPACE.into()],
        quota: Default::default(),
        slice_size: None,
        members: vec!["alice".into()],
    });
    let e = LogEntry::new("", "admin", h.now_ms, claim);
    let Outcome::Rejected(r) = h.state.apply(h.index, &e).outcome else {
        panic!("a tenant took the cluster-scoped templates' namespace");
    };
    assert_eq!(r.field.as_deref(), Some("spec.namespaces[1]"));
    assert!(r.message.contains("reserved"), "{}", r.message);
}

#[test]
fn a_crd_is_a_propagatable_template_kept_while_its_objects_live() {
    let mut h = fleet(&[CRD_KIND]);
    h.ok(put(crd()));
    let crd_key = key(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "",
        "widgets.example.com",
    );
    assert!(crd_key.is_crd());
    h.ok(put(cluster_policy(
        json!([{"apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition", "name": "widgets.example.com"}]),
    )));
    assert_eq!(
        h.placement(CLUSTER_SCOPE_NAMESPACE, &crd_key.object_name())
            .len(),
        2
    );
    // A namespaced object of its kind: an ordinary template.
    h.ok(put(
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "app"}, "spec": {"size": 3}}),
    ));
    let widget = key("example.com", "Widget", "app", "w1");
    assert!(h.state.door().templates.contains_key(&widget));

    let before = h.state.state_hash();
    let r = h.refused(delete(crd_key.clone()));
    assert_eq!(r.code, RejectCode::FailedPrecondition);
    assert!(
        r.message.contains("1 Widget") && r.message.contains("delete them first"),
        "{}",
        r.message
    );
    assert_eq!(h.state.state_hash(), before, "a refusal changes nothing");
    h.ok(delete(widget));
    h.ok(delete(crd_key.clone()));
    assert!(!h.state.door().templates.contains_key(&crd_key));
}

#[test]
fn helm_release_secrets_bind_only_to_a_selector_naming_them() {
    let mut h = fleet(&[]);
    let release = json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": "sh.helm.release.v1.shop.v1", "namespace": "app",
            "labels": {"owner": "helm", "name": "shop", "status": "deployed", "version": "1"}},
        "data": {"release": "SDRzSQ=="}});
    let plain = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "app"}, "data": {"password": "cHc="}});
    h.ok(put(release));
    h.ok(put(plain));
    let policy = |name: &str, selector: Value| {
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": "app"},
            "spec": {"resourceSelectors": [selector], "placement": {}}})
    };
    h.ok(put(policy(
        "all-secrets",
        json!({"apiVersion": "v1", "kind": "Secret"}),
    )));
    assert_eq!(h.placement("app", "secret:db").len(), 3);
    assert!(
        h.placement("app", "secret:sh.helm.release.v1.shop.v1")
            .is_empty(),
        "a policy selecting every Secret does not propagate Helm's release records"
    );
    let by_labels = policy(
        "helm-by-label",
        json!({"apiVersion": "v1", "kind": "Secret",
            "labelSelector": {"matchLabels": {"owner": "helm"}}}),
    );
    h.ok(put(by_labels));
    assert!(h
        .placement("app", "secret:sh.helm.release.v1.shop.v1")
        .is_empty());
    h.ok(put(policy(
        "helm-by-name",
        json!({"apiVersion": "v1", "kind": "Secret", "name": "sh.helm.release.v1.shop.v1"}),
    )));
    assert_eq!(
        h.placement("app", "secret:sh.helm.release.v1.shop.v1")
            .len(),
        3
    );
}
