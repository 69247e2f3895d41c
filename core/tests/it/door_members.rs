//! Member clusters registered through the door: a Karmada `Cluster` or a `KubeFedCluster` and
//! the Secret holding its credentials, in either order; the binding versions that make a raced
//! write a conflict; ownership against the native API; delete; refusals naming the field; the
//! version gate; and restore.

use fedraft_core::command::{Command, LogEntry, MemberBinding};
use fedraft_core::door::{member_secret_credentials, PolicyKindTag, PolicyRef, ResourceKey};
use fedraft_core::model::{Credentials, Health};
use fedraft_core::policy::TaintEffect;
use fedraft_core::state::{Outcome, RejectCode, State};
use serde_json::{json, Value};

use crate::state_support::{cluster_spec, Harness};

fn karmada_cluster(name: &str, secret: &str) -> Value {
    json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "karmada-cluster", "labels": {"tier": "gold"}},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://10.0.0.1:6443",
            "secretRef": {"namespace": "karmada-cluster", "name": secret},
            "provider": "acme", "region": "eu-west", "zone": "eu-west-1a",
            "taints": [{"key": "gpu", "value": "none", "effect": "NoSchedule"}]}})
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "karmada-cluster"}, "type": "Opaque"})
}

fn sealed_for(cluster: &str) -> Credentials {
    // Core never opens credentials: any blob stands for "sealed for this cluster".
    Credentials::Kubeconfig(format!("sealed-for-{cluster}"))
}

fn put_cluster(doc: Value, binding: Option<MemberBinding>) -> Command {
    Command::PutMemberCluster {
        manifest: doc.to_string(),
        binding,
        expected_version: None,
    }
}

fn put_secret(doc: Value, bindings: Vec<MemberBinding>) -> Command {
    Command::PutMemberSecret {
        manifest: doc.to_string(),
        credentials: Credentials::Kubeconfig("sealed-for-the-secret".into()),
        bindings,
        expected_version: None,
    }
}

fn binding(cluster: &str, read_version: u64) -> MemberBinding {
    MemberBinding {
        cluster: cluster.into(),
        read_version,
        credentials: sealed_for(cluster),
    }
}

fn version_of(h: &Harness, kind: PolicyKindTag, ns: &str, name: &str) -> u64 {
    h.state.door().policies[&PolicyRef {
        kind,
        namespace: ns.into(),
        name: name.into(),
    }]
        .resource_version
}

#[test]
fn a_cluster_before_its_secret_waits_then_registers_with_the_edge_sealed_credentials() {
    let mut h = Harness::new();
    h.ok(put_cluster(karmada_cluster("member1", "member1"), None));
    assert!(h.state.cluster("member1").is_none(), "waits for its Secret");
    let doc_version = version_of(&h, PolicyKindTag::KarmadaCluster, "", "member1");
    // A Secret write that did not bind the waiting document raced it: a conflict.
    let raced = h.refused(put_secret(secret("member1"), vec![]));
    assert_eq!(raced.code, RejectCode::Conflict);
    h.ok(put_secret(
        secret("member1"),
        vec![binding("member1", doc_version)],
    ));
    let c = h.state.cluster("member1").expect("registered");
    assert_eq!(c.spec.api_endpoint, "https://10.0.0.1:6443");
    assert_eq!(c.spec.credentials, sealed_for("member1"));
    assert_eq!(c.spec.labels["provider"], "acme");
    assert_eq!(c.spec.labels["region"], "eu-west");
    assert_eq!(c.spec.labels["zone"], "eu-west-1a");
    assert_eq!(c.spec.labels["tier"], "gold");
    assert_eq!(c.spec.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(c.status.health, Health::Unknown);
    // The Secret is kept with the credentials the edge read, never as a template.
    let rec = &h.state.door().policies[&PolicyRef {
        kind: PolicyKindTag::MemberSecret,
        namespace: "karmada-cluster".into(),
        name: "member1".into(),
    }];
    assert_eq!(
        member_secret_credentials(rec),
        Some(Credentials::Kubeconfig("sealed-for-the-secret".into()))
    );
    assert!(h.state.door().templates.is_empty());
    // Deleting the document deregisters the cluster; the Secret stays.
    h.ok(Command::DeleteResource {
        key: ResourceKey {
            group: "cluster.karmada.io".into(),
            kind: "Cluster".into(),
            namespace: String::new(),
            name: "member1".into(),
        },
        expected_version: None,
    });
    assert!(h.state.cluster("member1").is_none());
    assert_eq!(h.state.door().policies.len(), 1);
}

#[test]
fn a_secret_before_its_cluster_registers_at_once_and_updates_keep_the_cluster() {
    let mut h = Harness::new();
    h.ok(put_secret(secret("s1"), vec![]));
    let sv = version_of(&h, PolicyKindTag::MemberSecret, "karmada-cluster", "s1");
    // A document that read no Secret while one exists raced it.
    let raced = h.refused(put_cluster(karmada_cluster("member1", "s1"), None));
    assert_eq!(raced.code, RejectCode::Conflict);
    assert_eq!(raced.field.as_deref(), Some("spec.secretRef"));
    h.ok(put_cluster(
        karmada_cluster("member1", "s1"),
        Some(binding("member1", sv)),
    ));
    assert!(h.state.cluster("member1").is_some());
    // A new Secret re-seals for every document naming it.
    let dv = version_of(&h, PolicyKindTag::KarmadaCluster, "", "member1");
    let mut rotated = binding("member1", dv);
    rotated.credentials = Credentials::Kubeconfig("rotated".into());
    let mut new_secret = put_secret(secret("s1"), vec![rotated]);
    if let Command::PutMemberSecret { credentials, .. } = &mut new_secret {
        *credentials = Credentials::Kubeconfig("a new token".into());
    }
    h.ok(new_secret);
    assert_eq!(
        h.state.cluster("member1").unwrap().spec.credentials,
        Credentials::Kubeconfig("rotated".into())
    );
    // Deleting the Secret keeps the registered cluster and its credentials.
    h.ok(Command::DeleteResource {
        key: ResourceKey {
            group: String::new(),
            kind: "Secret".into(),
            namespace: "karmada-cluster".into(),
            name: "s1".into(),
        },
        expected_version: None,
    });
    assert!(h.state.cluster("member1").is_some());
}

#[test]
fn a_kubefed_cluster_registers_from_its_namespace_secret() {
    let mut h = Harness::new();
    let mut s = secret("m2-token");
    s["metadata"]["namespace"] = json!("kube-federation-system");
    h.ok(put_secret(s, vec![]));
    let sv = version_of(
        &h,
        PolicyKindTag::MemberSecret,
        "kube-federation-system",
        "m2-token",
    );
    let doc = json!({"apiVersion": "core.kubefed.io/v1beta1", "kind": "KubeFedCluster",
        "metadata": {"name": "member2", "namespace": "kube-federation-system",
            "labels": {"region": "us"}},
        "spec": {"apiEndpoint": "https://10.0.0.2:6443", "caBundle": "Q0E=",
            "secretRef": {"name": "m2-token"}}});
    h.ok(put_cluster(doc.clone(), Some(binding("member2", sv))));
    let c = h.state.cluster("member2").expect("registered");
    assert_eq!(c.spec.labels["region"], "us");
    // One cluster, one document: a Karmada Cluster of the same name is refused.
    let other = h.refused(put_cluster(karmada_cluster("member2", "x"), None));
    assert_eq!(other.code, RejectCode::AlreadyExists);
}

#[test]
fn refusals_name_the_field_and_change_nothing() {
    let mut h = Harness::new();
    h.register("native", &[]);
    let taken = h.refused(put_cluster(karmada_cluster("native", "s"), None));
    assert_eq!(taken.code, RejectCode::AlreadyExists);
    let mut pull = karmada_cluster("m", "s");
    pull["spec"]["syncMode"] = json!("Pull");
    let r = h.refused(put_cluster(pull, None));
    assert_eq!(r.field.as_deref(), Some("spec.syncMode"));
    let mut elsewhere = karmada_cluster("m", "s");
    elsewhere["spec"]["secretRef"]["namespace"] = json!("default");
    let r = h.refused(put_cluster(elsewhere, None));
    assert_eq!(r.field.as_deref(), Some("spec.secretRef.namespace"));
    let mut proxy = karmada_cluster("m", "s");
    proxy["spec"]["proxyURL"] = json!("http://proxy");
    let r = h.refused(put_cluster(proxy, None));
    assert_eq!(r.field.as_deref(), Some("spec.proxyURL"));
    // A Secret's data never travels in the clear in the command.
    let mut with_data = secret("s");
    with_data["data"] = json!({"token": "dG9r"});
    let r = h.refused(put_secret(with_data, vec![]));
    assert_eq!(r.field.as_deref(), Some("data"));
    // Nor through PutResource, which would make it a template.
    let mut plain = secret("s");
    plain["stringData"] = json!({"token": "tok"});
    let r = h.refused(Command::PutResource {
        manifest: plain.to_string(),
        expected_version: None,
    });
    assert_eq!(r.field.as_deref(), Some("kind"));
    // Tenants do not register clusters.
    h.index += 1;
    let e = LogEntry::new(
        "",
        "tenant:acme/alice",
        h.now_ms,
        put_cluster(karmada_cluster("m", "s"), None),
    );
    let Outcome::Rejected(r) = h.state.apply(h.index, &e).outcome else {
        panic!("a tenant registered a cluster");
    };
    assert_eq!(r.code, RejectCode::Forbidden);
    assert!(h.state.door().policies.is_empty());
    assert_eq!(
        h.state.cluster("native").map(|c| c.spec.clone()),
        Some(cluster_spec("native", &[]))
    );
}

#[test]
fn before_version_6_a_credentials_namespace_secret_is_a_template_and_a_restore_keeps_members() {
    let mut h = Harness::new();
    let mut old = LogEntry::new(
        "",
        "test",
        h.now_ms,
        Command::PutResource {
            manifest: secret("legacy").to_string(),
            expected_version: None,
        },
    );
    old.version = 5;
    h.index += 1;
    assert!(h.state.apply(h.index, &old).outcome.is_accepted());
    assert_eq!(h.state.door().templates.len(), 1);
    h.ok(put_secret(secret("s1"), vec![]));
    let sv = version_of(&h, PolicyKindTag::MemberSecret, "karmada-cluster", "s1");
    h.ok(put_cluster(
        karmada_cluster("member1", "s1"),
        Some(binding("member1", sv)),
    ));
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.door(), h.state.door());
    assert_eq!(
        restored.cluster("member1").map(|c| &c.spec),
        h.state.cluster("member1").map(|c| &c.spec)
    );
}
