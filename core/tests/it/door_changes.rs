//! What an entry that writes the door's policy table reports as changed, for watch streams: one
//! policy change per document written or removed (Karmada's policies, KubeFed's documents,
//! member cluster documents and Secrets), none for a write that changes nothing or is refused.

use fedraft_core::command::{Command, MemberBinding};
use fedraft_core::door::{PolicyKindTag, PolicyRef, ResourceKey};
use fedraft_core::model::Credentials;
use fedraft_core::state::{Applied, Change, ChangeKind, ChangeOp};
use serde_json::{json, Value};

use crate::state_support::Harness;

fn put(v: Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn delete(group: &str, kind: &str, namespace: &str, name: &str) -> Command {
    Command::DeleteResource {
        key: ResourceKey {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        },
        expected_version: None,
    }
}

fn policy(kind: &str, ns: Option<&str>, name: &str, clusters: &[&str]) -> Value {
    let mut meta = json!({"name": name, "labels": {"tier": "gold"}});
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": meta,
        "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
            "placement": {"clusterAffinity": {"clusterNames": clusters}}}})
}

/// The policy changes an entry reports, as (policy, op).
fn policy_changes(a: &Applied) -> Vec<(PolicyRef, ChangeOp)> {
    a.changes
        .iter()
        .filter_map(|c| c.policy().map(|p| (p, c.op)))
        .collect()
}

fn pref(kind: PolicyKindTag, ns: &str, name: &str) -> PolicyRef {
    PolicyRef {
        kind,
        namespace: ns.into(),
        name: name.into(),
    }
}

#[test]
fn a_policy_is_added_modified_and_deleted_once_each() {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2"]);
    let pp = pref(PolicyKindTag::Propagation, "app", "web");
    let doc = policy("PropagationPolicy", Some("app"), "web", &["member1"]);
    let added = h.ok(put(doc.clone()));
    assert_eq!(policy_changes(&added), [(pp.clone(), ChangeOp::Added)]);
    // The key reads like an object's: its namespace first.
    let change = added
        .changes
        .iter()
        .find(|c| c.policy().is_some())
        .expect("a policy change");
    assert_eq!(change.key, "app/web");
    assert_eq!(change.kind, ChangeKind::Policy(PolicyKindTag::Propagation));

    // The same document again writes nothing.
    let same = h.ok(put(doc));
    assert!(same.changes.is_empty(), "{:?}", same.changes);

    let moved = h.ok(put(policy(
        "PropagationPolicy",
        Some("app"),
        "web",
        &["member2"],
    )));
    assert_eq!(policy_changes(&moved), [(pp.clone(), ChangeOp::Modified)]);

    let gone = h.ok(delete(
        "policy.karmada.io",
        "PropagationPolicy",
        "app",
        "web",
    ));
    assert_eq!(policy_changes(&gone), [(pp, ChangeOp::Deleted)]);
}

#[test]
fn a_cluster_wide_policy_is_keyed_by_its_name_alone() {
    let mut h = Harness::new();
    let a = h.ok(put(policy(
        "ClusterPropagationPolicy",
        None,
        "all",
        &["member1"],
    )));
    let c = a
        .changes
        .iter()
        .find(|c| c.policy().is_some())
        .expect("one");
    assert_eq!(c.key, "all");
    assert_eq!(
        c.policy(),
        Some(pref(PolicyKindTag::ClusterPropagation, "", "all"))
    );
    assert_eq!(
        Change::policy_key(&pref(PolicyKindTag::Override, "ns", "o")),
        "ns/o"
    );
}

#[test]
fn a_refused_policy_write_reports_nothing() {
    let mut h = Harness::new();
    let mut doc = policy("PropagationPolicy", Some("app"), "web", &["member1"]);
    doc["metadata"]["name"] = json!("Not A Name");
    let a = h.apply(put(doc));
    assert!(!a.outcome.is_accepted());
    assert!(a.changes.is_empty(), "{:?}", a.changes);
}

#[test]
fn kubefed_documents_report_their_changes() {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2"]);
    let rsp = |total: u32| {
        json!({"apiVersion": "scheduling.kubefed.io/v1alpha1",
            "kind": "ReplicaSchedulingPreference",
            "metadata": {"name": "web", "namespace": "app"},
            "spec": {"targetKind": "FederatedDeployment", "totalReplicas": total}})
    };
    let key = pref(PolicyKindTag::ReplicaSchedulingPreference, "app", "web");
    let a = h.ok(put(rsp(4)));
    assert_eq!(policy_changes(&a), [(key.clone(), ChangeOp::Added)]);
    let m = h.ok(put(rsp(6)));
    assert_eq!(policy_changes(&m), [(key.clone(), ChangeOp::Modified)]);
    let d = h.ok(delete(
        "scheduling.kubefed.io",
        "ReplicaSchedulingPreference",
        "app",
        "web",
    ));
    assert_eq!(policy_changes(&d), [(key, ChangeOp::Deleted)]);
}

#[test]
fn member_documents_report_their_changes_beside_the_cluster_they_register() {
    let mut h = Harness::new();
    let doc = json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "member1"},
        "spec": {"apiEndpoint": "https://10.0.0.1:6443",
            "secretRef": {"namespace": "karmada-cluster", "name": "member1"}}});
    let cluster = pref(PolicyKindTag::KarmadaCluster, "", "member1");
    let a = h.ok(Command::PutMemberCluster {
        manifest: doc.to_string(),
        binding: None,
        expected_version: None,
    });
    assert_eq!(policy_changes(&a), [(cluster.clone(), ChangeOp::Added)]);
    let version = h.state.door().policies[&cluster].resource_version;
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "member1", "namespace": "karmada-cluster"}});
    let s = h.ok(Command::PutMemberSecret {
        manifest: secret.to_string(),
        credentials: Credentials::Kubeconfig("sealed".into()),
        bindings: vec![MemberBinding {
            cluster: "member1".into(),
            read_version: version,
            credentials: Credentials::Kubeconfig("sealed-for-member1".into()),
        }],
        expected_version: None,
    });
    let secret_key = pref(PolicyKindTag::MemberSecret, "karmada-cluster", "member1");
    assert_eq!(policy_changes(&s), [(secret_key, ChangeOp::Added)]);
    assert!(s
        .changes
        .iter()
        .any(|c| c.kind == ChangeKind::Cluster && c.op == ChangeOp::Added));
    let d = h.ok(delete("cluster.karmada.io", "Cluster", "", "member1"));
    assert_eq!(policy_changes(&d), [(cluster, ChangeOp::Deleted)]);
    assert!(d
        .changes
        .iter()
        .any(|c| c.kind == ChangeKind::Cluster && c.op == ChangeOp::Deleted));
}
