//! `propagateDeps` through the door: the ConfigMaps and Secrets a workload's pod template names
//! go exactly where the workload runs, move when it moves (a policy update, a drain), leave when
//! it stops naming them or is deleted, and stay when its policy is deleted (the workload keeps
//! its last placement then too). A restored state derives the same.

use std::collections::BTreeSet;

use fedraft_core::command::Command;
use fedraft_core::door::ResourceKey;
use fedraft_core::model::ObjectKey;
use fedraft_core::state::State;
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

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "app"}, "data": {"k": "v"}})
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "app"}, "data": {"k": "dg=="}})
}

/// A Deployment whose container reads `settings` through envFrom and, if `with_secret`, mounts
/// the Secret `creds`.
fn web(replicas: u32, with_secret: bool) -> Value {
    let mut pod = json!({"containers": [{"name": "web", "image": "nginx:1.25",
        "envFrom": [{"configMapRef": {"name": "settings"}}]}]});
    if with_secret {
        pod["volumes"] = json!([{"name": "c", "secret": {"secretName": "creds"}}]);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod}}})
}

fn policy(placement: Value, deps: bool) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"propagateDeps": deps,
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": placement}})
}

fn clusters(h: &Harness, name: &str) -> BTreeSet<String> {
    h.placement("app", name).into_keys().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2", "member3"]);
    h
}

#[test]
fn dependencies_go_where_the_workload_goes_and_follow_a_policy_update() {
    let mut h = fleet();
    h.ok(put(config_map("settings")));
    h.ok(put(secret("creds")));
    h.ok(put(config_map("unrelated")));
    h.ok(put(web(2, true)));
    h.ok(put(policy(
        json!({"clusterAffinity": {"clusterNames": ["member1", "member2"]}}),
        true,
    )));
    let at = set(&["member1", "member2"]);
    assert_eq!(clusters(&h, "deployment.apps:web"), at);
    assert_eq!(clusters(&h, "configmap:settings"), at);
    assert_eq!(clusters(&h, "secret:creds"), at);
    assert!(clusters(&h, "configmap:unrelated").is_empty());
    // The audit's explain gives this as the reason for each move of the ConfigMap.
    assert_eq!(
        h.state
            .dependency_cause(&ObjectKey::new("app", "configmap:settings"))
            .as_deref(),
        Some("follows Deployment.apps app/web (propagateDeps of PropagationPolicy app/web)")
    );
    assert_eq!(
        h.state
            .dependency_cause(&ObjectKey::new("app", "configmap:unrelated")),
        None
    );
    // And for the workload, the policy and its replica rule.
    assert_eq!(
        h.state
            .policy_cause(&ObjectKey::new("app", "deployment.apps:web"))
            .as_deref(),
        Some("PropagationPolicy app/web (priority 0; Duplicated)")
    );
    // Duplicated: each cluster gets the whole ConfigMap.
    assert_eq!(h.obj("app", "configmap:settings").replicas_on("member1"), 1);

    // The policy moves the workload: what it names moves with it, in the same entry.
    h.ok(put(policy(
        json!({"clusterAffinity": {"clusterNames": ["member3"]}}),
        true,
    )));
    assert_eq!(clusters(&h, "deployment.apps:web"), set(&["member3"]));
    assert_eq!(clusters(&h, "configmap:settings"), set(&["member3"]));
    assert_eq!(clusters(&h, "secret:creds"), set(&["member3"]));

    // The workload stops naming the Secret: it leaves every member; the ConfigMap stays.
    h.ok(put(web(2, false)));
    assert!(clusters(&h, "secret:creds").is_empty());
    assert_eq!(clusters(&h, "configmap:settings"), set(&["member3"]));

    // A restored state holds the same placements and goes on deriving the same.
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.state_hash(), h.state.state_hash());

    // Deleted, the workload takes what it named along.
    h.ok(delete("apps", "Deployment", "web"));
    assert!(clusters(&h, "configmap:settings").is_empty());
}

#[test]
fn a_divided_workload_takes_its_dependencies_only_where_it_has_replicas_and_through_a_drain() {
    let mut h = fleet();
    h.ok(put(web(2, true)));
    h.ok(put(policy(
        json!({"replicaScheduling": {"replicaSchedulingType": "Divided",
            "replicaDivisionPreference": "Weighted"}}),
        true,
    )));
    // Written after the workload was placed: a dependency is placed when it is written.
    h.ok(put(config_map("settings")));
    h.ok(put(secret("creds")));
    let running = clusters(&h, "deployment.apps:web");
    assert_eq!(running.len(), 2, "2 replicas over 3 clusters: {running:?}");
    assert_eq!(
        h.state
            .policy_cause(&ObjectKey::new("app", "deployment.apps:web"))
            .as_deref(),
        Some("PropagationPolicy app/web (priority 0; Divided, equal weights)")
    );
    assert_eq!(clusters(&h, "configmap:settings"), running);
    assert_eq!(clusters(&h, "secret:creds"), running);

    let drained = running.iter().next().cloned().unwrap_or_default();
    h.ok(Command::Drain {
        name: drained.clone(),
    });
    h.tick(1_000);
    let now = clusters(&h, "deployment.apps:web");
    assert!(!now.contains(&drained), "{now:?}");
    assert_eq!(now.len(), 2);
    assert_eq!(clusters(&h, "configmap:settings"), now);
    assert_eq!(clusters(&h, "secret:creds"), now);
}

#[test]
fn without_the_flag_nothing_follows_and_a_deleted_policy_leaves_everything_in_place() {
    let mut h = fleet();
    h.ok(put(config_map("settings")));
    h.ok(put(web(2, false)));
    h.ok(put(policy(
        json!({"clusterAffinity": {"clusterNames": ["member1"]}}),
        false,
    )));
    assert_eq!(clusters(&h, "deployment.apps:web"), set(&["member1"]));
    assert!(clusters(&h, "configmap:settings").is_empty());

    h.ok(put(policy(
        json!({"clusterAffinity": {"clusterNames": ["member1"]}}),
        true,
    )));
    assert_eq!(clusters(&h, "configmap:settings"), set(&["member1"]));
    h.ok(delete("policy.karmada.io", "PropagationPolicy", "web"));
    assert_eq!(clusters(&h, "deployment.apps:web"), set(&["member1"]));
    assert_eq!(clusters(&h, "configmap:settings"), set(&["member1"]));
}

#[test]
fn turning_the_flag_off_removes_what_followed() {
    let mut h = fleet();
    h.ok(put(config_map("settings")));
    h.ok(put(web(2, false)));
    h.ok(put(policy(
        json!({"clusterAffinity": {"clusterNames": ["member2"]}}),
        true,
    )));
    assert_eq!(clusters(&h, "configmap:settings"), set(&["member2"]));
    h.ok(put(policy(
        json!({"clusterAffinity": {"clusterNames": ["member2"]}}),
        false,
    )));
    assert!(clusters(&h, "configmap:settings").is_empty());
    assert_eq!(clusters(&h, "deployment.apps:web"), set(&["member2"]));
}
