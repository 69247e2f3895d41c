//! statePreservation values: a door template whose Karmada policy preserves `{.replicas}` and
//! `{.readyReplicas}` of its status (the Deployment example of Karmada's proposal) runs on a
//! simulated member; the executor reads the paths on the live copy and the values reach the
//! log as `StatusValues`, once, and the state.

use std::time::Duration;

use crate::common::local::LocalNode;
use crate::common::*;
use fedraft_core::command::Command;
use fedraft_core::model::ObjectKey;
use fedraft_executors::ExecutorSet;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(30);

fn put_doc(doc: serde_json::Value) -> Command {
    Command::PutResource {
        manifest: doc.to_string(),
        expected_version: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rules_values_on_the_member_reach_the_log() {
    init_tracing();
    let m1 = start_sim("m1").await;
    let node = LocalNode::new();
    node.must(register(cluster_spec("m1", &m1, "east")));
    node.must(put_doc(json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "failover": {"cluster": {"purgeMode": "Directly", "statePreservation": {"rules": [
                {"aliasLabelName": "failover.karmada.io/replicas", "jsonPath": "{ .replicas }"},
                {"aliasLabelName": "failover.karmada.io/ready", "jsonPath": "{.readyReplicas}"},
                {"aliasLabelName": "failover.karmada.io/none", "jsonPath": "{.no.such.field}"}]}}},
            "placement": {"clusterAffinity": {"clusterNames": ["m1"]}}}
    })));
    let mut web = deployment("web", 3, "nginx:1");
    web["metadata"]["namespace"] = json!("default");
    node.must(put_doc(web));
    let key = ObjectKey::new("default", "deployment.apps:web");
    assert_eq!(
        node.read(|s| s.preserved_paths(&key).map(|p| p.len())),
        Some(3)
    );

    let _set = ExecutorSet::start(node.clone(), executor_config());
    let values = eventually(LIMIT, "the status values recorded", || {
        let v = node.read(|s| s.status_values(&key, "m1").cloned());
        async move { v.filter(|v| v.get("{.readyReplicas}").map(String::as_str) == Some("3")) }
    })
    .await;
    assert_eq!(values.get("{.replicas}").map(String::as_str), Some("3"));
    assert!(
        !values.contains_key("{.no.such.field}"),
        "a path that names nothing gives no value: {values:?}"
    );

    // Once recorded, the same values are not sent again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = node.executor_entries().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = node.executor_entries()[start..]
        .iter()
        .filter(|c| matches!(c, Command::StatusValues(_)))
        .count();
    assert_eq!(again, 0, "unchanged values were re-sent");
}

/// The live copy of an object in place is kept without its body once verified; a rule that
/// appears later (statePreservation added to the policy, the manifest unchanged) reads the
/// object again from the member and its values still reach the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_added_after_the_copy_settled_reads_the_object_again() {
    init_tracing();
    let m1 = start_sim("m1").await;
    let node = LocalNode::new();
    node.must(register(cluster_spec("m1", &m1, "east")));
    let policy = |failover: serde_json::Value| {
        json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
                "failover": failover,
                "placement": {"clusterAffinity": {"clusterNames": ["m1"]}}}
        })
    };
    node.must(put_doc(policy(
        json!({"cluster": {"purgeMode": "Directly"}}),
    )));
    let mut web = deployment("web", 3, "nginx:1");
    web["metadata"]["namespace"] = json!("default");
    node.must(put_doc(web));
    let key = ObjectKey::new("default", "deployment.apps:web");
    let _set = ExecutorSet::start(node.clone(), executor_config());
    eventually(LIMIT, "the workload ready", || {
        let ready = node.read(|s| {
            s.object(&key.namespace, &key.name)
                .map(|o| o.status.ready_replicas)
        });
        async move { (ready == Some(3)).then_some(()) }
    })
    .await;
    // Passes after the last status change settle the copy.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rules = json!({"rules": [
        {"aliasLabelName": "failover.karmada.io/ready", "jsonPath": "{.readyReplicas}"}]});
    node.must(put_doc(policy(
        json!({"cluster": {"purgeMode": "Directly", "statePreservation": rules}}),
    )));
    assert_eq!(
        node.read(|s| s.preserved_paths(&key).map(|p| p.len())),
        Some(1)
    );
    let values = eventually(LIMIT, "the status values recorded", || {
        let v = node.read(|s| s.status_values(&key, "m1").cloned());
        async move { v.filter(|v| !v.is_empty()) }
    })
    .await;
    assert_eq!(
        values.get("{.readyReplicas}").map(String::as_str),
        Some("3")
    );
}
