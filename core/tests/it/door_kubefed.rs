//! KubeFed's documents written through the door, applied by the state machine: the object a
//! FederatedX derives, an RSP's division with KubeFed's planner, a FederatedNamespace bounding
//! its namespace, conflicts with plain templates, deletes, restore and the version gate.

use fedraft_core::admission::AdmissionPolicy;
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::door::{ResourceKey, CLUSTER_SCOPE_NAMESPACE};
use fedraft_core::karmada::PEER_WIDENED_SINCE;
use fedraft_core::model::TenantSpec;
use fedraft_core::policy::ReplicaMode;
use fedraft_core::state::{Outcome, RejectCode, State};
use serde_json::{json, Value};

use crate::state_support::Harness;

fn put(v: Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn delete(group: &str, kind: &str, name: &str) -> Command {
    Command::DeleteResource {
        key: ResourceKey {
            group: group.into(),
            kind: kind.into(),
            namespace: "app".into(),
            name: name.into(),
        },
        expected_version: None,
    }
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2", "member3"]);
    h
}

fn federated_deployment(placement: Value) -> Value {
    json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedDeployment",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}},
            "placement": placement,
            "overrides": [{"clusterName": "member2", "clusterOverrides": [
                {"path": "/spec/template/spec/containers/0/image", "value": "nginx:1.26"}]}]}})
}

fn rsp(spec: Value) -> Value {
    json!({"apiVersion": "scheduling.kubefed.io/v1alpha1", "kind": "ReplicaSchedulingPreference",
        "metadata": {"name": "web", "namespace": "app"}, "spec": spec})
}

fn federated_namespace(placement: Value) -> Value {
    json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedNamespace",
        "metadata": {"name": "app", "namespace": "app"}, "spec": {"placement": placement}})
}

const WEB: &str = "deployment.apps:web";

#[test]
fn a_federated_deployment_is_a_full_copy_per_selected_cluster() {
    let mut h = fleet();
    h.ok(put(federated_deployment(
        json!({"clusters": [{"name": "member1"}, {"name": "member2"}]}),
    )));
    let obj = h.obj("app", WEB);
    assert_eq!(obj.spec.placement.replicas.mode, ReplicaMode::Duplicated);
    let template: Value = serde_json::from_str(&obj.spec.template).unwrap();
    assert_eq!(template["kind"], "Deployment");
    assert_eq!(template["metadata"]["name"], "web");
    assert_eq!(template["metadata"]["namespace"], "app");
    assert_eq!(
        obj.spec.overrides[0].cluster_name.as_deref(),
        Some("member2")
    );
    let placed = h.placement("app", WEB);
    assert_eq!(placed.len(), 2);
    assert!(placed.values().all(|r| *r == 3), "{placed:?}");

    // An empty selector: every cluster. Neither: none.
    h.ok(put(federated_deployment(json!({"clusterSelector": {}}))));
    assert_eq!(h.placement("app", WEB).len(), 3);
    h.ok(put(federated_deployment(json!({}))));
    assert!(h.placement("app", WEB).is_empty());
}

#[test]
fn an_rsp_divides_with_the_planner_and_its_delete_restores_the_copy() {
    let mut h = fleet();
    h.ok(put(federated_deployment(json!({"clusterSelector": {}}))));
    // KubeFed's planner, not Webster: 10 over three equal weights is 4, 4, 2.
    h.ok(put(rsp(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 10,
        "rebalance": true, "clusters": {"*": {"weight": 1}}}),
    )));
    let mut counts: Vec<u32> = h.placement("app", WEB).values().copied().collect();
    counts.sort_unstable();
    assert_eq!(counts, [2, 4, 4]);

    // Weights 2:1 with a cap, only the named clusters.
    h.ok(put(rsp(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 9,
        "rebalance": true,
        "clusters": {"member1": {"weight": 2, "maxReplicas": 5}, "member3": {"weight": 1}}}),
    )));
    let placed = h.placement("app", WEB);
    assert_eq!(placed.get("member1"), Some(&5));
    assert_eq!(placed.get("member3"), Some(&4));
    assert!(!placed.contains_key("member2"));

    h.ok(delete(
        "scheduling.kubefed.io",
        "ReplicaSchedulingPreference",
        "web",
    ));
    let placed = h.placement("app", WEB);
    assert_eq!(placed.len(), 3);
    assert!(placed.values().all(|r| *r == 3), "{placed:?}");
}

#[test]
fn a_federated_namespace_bounds_what_lives_in_it() {
    let mut h = fleet();
    h.ok(put(federated_deployment(json!({"clusterSelector": {}}))));
    h.ok(put(federated_namespace(
        json!({"clusters": [{"name": "member3"}, {"name": "member2"}]}),
    )));
    let placed = h.placement("app", WEB);
    assert_eq!(placed.keys().collect::<Vec<_>>(), ["member2", "member3"]);
    h.ok(delete("types.kubefed.io", "FederatedNamespace", "app"));
    assert_eq!(h.placement("app", WEB).len(), 3);
}

#[test]
fn a_plain_template_and_a_federated_x_of_one_object_refuse_each_other() {
    let mut h = fleet();
    h.ok(put(federated_deployment(json!({"clusterSelector": {}}))));
    let plain = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "w", "image": "x"}]}}}});
    let r = h.refused(put(plain.clone()));
    assert_eq!(r.code, RejectCode::FailedPrecondition);
    assert!(r.message.contains("FederatedDeployment"), "{}", r.message);

    h.ok(delete("types.kubefed.io", "FederatedDeployment", "web"));
    assert!(h.state.object("app", WEB).is_none());
    h.ok(put(plain));
    let r = h.refused(put(federated_deployment(json!({}))));
    assert_eq!(r.code, RejectCode::FailedPrecondition);
}

#[test]
fn refusals_name_the_field() {
    let mut h = fleet();
    let mut bad = federated_deployment(json!({}));
    bad["spec"]["overrides"][0]["clusterOverrides"][0]["path"] = json!("/metadata/name");
    let r = h.refused(put(bad));
    assert_eq!(
        r.field.as_deref(),
        Some("spec.overrides[0].clusterOverrides[0].path")
    );
    let r = h.refused(put(rsp(
        json!({"targetKind": "FederatedService", "totalReplicas": 1}),
    )));
    assert_eq!(r.field.as_deref(), Some("spec.targetKind"));
    assert!(h.state.door().policies.is_empty());
}

#[test]
fn restored_states_keep_the_documents_and_old_entries_keep_their_meaning() {
    let mut h = fleet();
    h.ok(put(federated_deployment(json!({"clusterSelector": {}}))));
    h.ok(put(rsp(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 4}),
    )));
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(restored.door(), h.state.door());

    // In a version-4 entry a FederatedDeployment was a resource template like any other.
    let mut h = fleet();
    h.index += 1;
    let mut old = LogEntry::new("", "admin", h.now_ms, put(federated_deployment(json!({}))));
    old.version = 4;
    let outcome = h.state.apply(h.index, &old).outcome;
    assert!(!matches!(outcome, Outcome::Rejected(_)), "{outcome:?}");
    assert!(h.state.door().policies.is_empty());
    assert!(h
        .state
        .object("app", "federateddeployment.types.kubefed.io:web")
        .is_some());
}

fn federated_cluster_role(clusters: &[&str]) -> Value {
    let clusters: Vec<Value> = clusters.iter().map(|c| json!({"name": c})).collect();
    json!({"apiVersion": "types.kubefed.io/v1beta1", "kind": "FederatedClusterRole",
        "metadata": {"name": "reader"},
        "spec": {"template": {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
            "placement": {"clusters": clusters}}})
}

const ROLE_OBJECT: &str = "clusterrole.rbac.authorization.k8s.io:reader";

fn cluster_key(group: &str, kind: &str, name: &str) -> ResourceKey {
    ResourceKey {
        group: group.into(),
        kind: kind.into(),
        namespace: String::new(),
        name: name.into(),
    }
}

#[test]
fn a_federated_cluster_role_places_a_cluster_scoped_template_under_admission() {
    // Until an administrator lists ClusterRole, admission refuses it, and nothing is kept.
    let mut h = fleet();
    let r = h.refused(put(federated_cluster_role(&["member1"])));
    assert!(r.message.contains("clusterScopedKinds"), "{}", r.message);
    assert!(h.state.door().policies.is_empty());

    h.ok(Command::SetAdmissionPolicy(AdmissionPolicy {
        cluster_scoped_kinds: vec!["rbac.authorization.k8s.io/ClusterRole".into()],
        ..AdmissionPolicy::default()
    }));
    h.ok(put(federated_cluster_role(&["member1", "member3"])));
    let placed = h.placement(CLUSTER_SCOPE_NAMESPACE, ROLE_OBJECT);
    assert_eq!(placed.keys().collect::<Vec<_>>(), ["member1", "member3"]);
    let template: Value =
        serde_json::from_str(&h.obj(CLUSTER_SCOPE_NAMESPACE, ROLE_OBJECT).spec.template).unwrap();
    assert_eq!(template["kind"], "ClusterRole");
    assert!(template["metadata"].get("namespace").is_none());

    // A plain ClusterRole template of the same name would place the same member object twice.
    let plain = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "reader"}, "rules": []});
    let r = h.refused(put(plain));
    assert_eq!(r.code, RejectCode::FailedPrecondition);
    assert!(r.message.contains("FederatedClusterRole"), "{}", r.message);

    // A cluster-scoped document takes no namespace, and is never a tenant's.
    let mut in_ns = federated_cluster_role(&["member1"]);
    in_ns["metadata"]["namespace"] = json!("app");
    assert_eq!(
        h.refused(put(in_ns)).field.as_deref(),
        Some("metadata.namespace")
    );
    h.ok(Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: vec!["app".into()],
        quota: Default::default(),
        slice_size: None,
        members: vec!["alice".into()],
    }));
    h.index += 1;
    let e = LogEntry::new(
        "",
        "tenant:acme/alice",
        h.now_ms,
        put(federated_cluster_role(&["member2"])),
    );
    let Outcome::Rejected(r) = h.state.apply(h.index, &e).outcome else {
        panic!("a tenant wrote a FederatedClusterRole");
    };
    assert_eq!(r.code, RejectCode::Forbidden);

    // Deleting the document removes the object from the members.
    h.ok(Command::DeleteResource {
        key: cluster_key("types.kubefed.io", "FederatedClusterRole", "reader"),
        expected_version: None,
    });
    assert!(h
        .state
        .object(CLUSTER_SCOPE_NAMESPACE, ROLE_OBJECT)
        .is_none());
    assert!(h.state.door().policies.is_empty());
}

#[test]
fn older_entries_refuse_federated_cluster_roles_and_unknown_rsp_keys_as_before() {
    let mut h = fleet();
    h.ok(Command::SetAdmissionPolicy(AdmissionPolicy {
        cluster_scoped_kinds: vec!["rbac.authorization.k8s.io/ClusterRole".into()],
        ..AdmissionPolicy::default()
    }));
    for (cmd, field) in [
        (put(federated_cluster_role(&["member1"])), "kind"),
        (
            put(rsp(
                json!({"targetKind": "FederatedDeployment", "totalReplicas": 2,
                "clusters": {"A": {"weight": 1}}}),
            )),
            "spec.clusters.A",
        ),
    ] {
        h.index += 1;
        let mut old = LogEntry::new("", "admin", h.now_ms, cmd);
        old.version = PEER_WIDENED_SINCE - 1;
        let Outcome::Rejected(r) = h.state.apply(h.index, &old).outcome else {
            panic!("an older entry was accepted");
        };
        assert_eq!(r.field.as_deref(), Some(field));
    }
    assert!(h.state.door().policies.is_empty());
}

#[test]
fn an_rsp_keyed_by_names_of_no_cluster_matches_nothing() {
    let mut h = fleet();
    h.ok(put(federated_deployment(json!({"clusterSelector": {}}))));
    h.ok(put(rsp(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 6,
        "clusters": {"A": {"weight": 5}, "member2": {"weight": 1}}}),
    )));
    let placed = h.placement("app", WEB);
    assert_eq!(placed.keys().collect::<Vec<_>>(), ["member2"]);
    assert_eq!(placed["member2"], 6);
    h.ok(put(rsp(
        json!({"targetKind": "FederatedDeployment", "totalReplicas": 6,
        "clusters": {"A": {"weight": 1}, "B": {"weight": 2}}}),
    )));
    assert!(h.placement("app", WEB).is_empty());
}
