//! Unit tests of the admission rules that need no state: actors, scope, RBAC, identity.

use serde_json::json;

use super::*;

fn admitted(doc: &Value) -> Admitted {
    Admitted::from_template(doc, "team-a").unwrap()
}

fn tenant() -> Actor {
    Actor::Tenant {
        tenant: "acme".into(),
        name: "alice".into(),
    }
}

#[test]
fn actors() {
    assert_eq!(Actor::parse("alice"), Actor::Admin);
    assert_eq!(Actor::parse("tenant:acme/alice"), tenant());
    assert_eq!(
        Actor::parse(&Actor::tenant_actor("acme", "alice")),
        tenant()
    );
    assert_eq!(Actor::parse("tenant:broken"), Actor::Admin);
}

#[test]
fn scope_rule_by_actor() {
    let policy = AdmissionPolicy::default();
    let ns = admitted(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}));
    let r = check_scope(&policy, &tenant(), &ns).unwrap_err();
    assert!(r.forbidden && r.rule == "cluster-scoped-kind");
    let r = check_scope(&policy, &Actor::Admin, &ns).unwrap_err();
    assert!(!r.forbidden, "an admin is refused by policy, not by rights");
    let allowing = AdmissionPolicy {
        cluster_scoped_kinds: vec!["Namespace".into()],
        ..AdmissionPolicy::default()
    };
    assert!(allowing.validate("spec").is_ok());
    assert!(check_scope(&allowing, &Actor::Admin, &ns).is_ok());
    assert!(check_scope(&allowing, &tenant(), &ns).is_err());

    let cr = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    assert_eq!(admitted(&cr).scope, Scope::Cluster);
    let mut with_ns = cr.clone();
    with_ns["metadata"]["namespace"] = json!("team-a");
    assert_eq!(admitted(&with_ns).scope, Scope::Namespaced);
    assert!(check_scope(&policy, &tenant(), &admitted(&with_ns)).is_ok());
    with_ns["metadata"]["namespace"] = json!("team-b");
    assert!(Admitted::from_template(&with_ns, "team-a").is_err());
}

#[test]
fn policy_validation() {
    let bad = |kinds: &[&str]| AdmissionPolicy {
        cluster_scoped_kinds: kinds.iter().map(|s| s.to_string()).collect(),
        ..AdmissionPolicy::default()
    };
    assert!(bad(&["apiextensions.k8s.io/CustomResourceDefinition"])
        .validate("spec")
        .is_ok());
    assert!(bad(&["apps/Deployment"]).validate("spec").is_err());
    assert!(bad(&["namespace"]).validate("spec").is_err());
    assert!(bad(&["Bad_Group/Kind"]).validate("spec").is_err());
}

#[test]
fn tenant_role_bindings() {
    let policy = AdmissionPolicy::default();
    let rb = |role_kind: &str, role: &str, subjects: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "b"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
               "subjects": subjects})
    };
    let check = |doc: &Value| check_tenant_rbac(&policy, &admitted(doc), doc, "spec.template");
    let sa = json!([{"kind": "ServiceAccount", "name": "app"}]);
    assert!(check(&rb("Role", "reader", sa.clone())).is_ok());
    assert!(check(&rb("ClusterRole", "edit", sa.clone())).is_ok());
    let r = check(&rb("ClusterRole", "cluster-admin", sa)).unwrap_err();
    assert_eq!(r.field, "spec.template.roleRef.name");
    let other_ns = json!([{"kind": "ServiceAccount", "name": "x", "namespace": "kube-system"}]);
    assert_eq!(
        check(&rb("Role", "r", other_ns)).unwrap_err().field,
        "spec.template.subjects[0].namespace"
    );
    let anon = json!([{"kind": "Group", "name": "system:unauthenticated"}]);
    assert!(check(&rb("Role", "r", anon)).is_err());
    assert!(check(&rb("Role", "r", json!([{"kind": "User", "name": "bob"}]))).is_ok());
}

#[test]
fn identity_check() {
    let doc = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let a = admitted(&doc);
    assert!(a.check(&doc).is_ok());
    let mut renamed = doc.clone();
    renamed["metadata"]["name"] = json!("other");
    assert!(matches!(
        a.check(&renamed),
        Err(RenderError::Identity {
            field: "metadata.name",
            ..
        })
    ));
    let mut moved = doc.clone();
    moved["metadata"]["namespace"] = json!("team-b");
    assert!(a.check(&moved).is_err());
    let mut rekinded = doc;
    rekinded["kind"] = json!("Secret");
    assert!(a.check(&rekinded).is_err());
}
