//! Cluster health through the API of a real three-node group: a cluster's status names each
//! node's view (reachable or not, with the probe error), and the failover brake's policy is read
//! by anyone who may read clusters, set by admins only, refused field by field when out of range,
//! and every refusal leaves the replicated state as it was.

use std::sync::Mutex;

use crate::common::{send, ADMIN, CAROL, OPERATOR};
use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat, ReachabilityReport};
use fedraft_core::health::{FailureKind, ProbeFailure};
use fedraft_raft::{FedNode, Proposal};
use reqwest::Method;
use serde_json::json;

async fn propose(node: &FedNode, id: &str, actor: &str, command: Command) {
    let p = Proposal {
        request_id: id.into(),
        actor: actor.into(),
        command,
    };
    let applied = node.propose(p).await.expect("committed");
    assert!(applied.outcome.is_accepted(), "{:?}", applied.outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_names_each_nodes_view_and_the_brake_policy_is_admin_set() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    let body = json!({"name": "m1", "apiEndpoint": "https://m1:6443"});
    let r = send(
        c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
            .json(&body),
        &seen,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);

    // node1's executors own m1 (they heartbeat it) but cannot reach it; node2's prober can.
    let beat = Command::Heartbeats(vec![Heartbeat {
        cluster: "m1".into(),
        capacity: None,
    }]);
    propose(&leader.node, "hb-1", "system:executor:node1", beat).await;
    let lost = ReachabilityReport {
        cluster: "m1".into(),
        failure: Some(ProbeFailure::new(
            FailureKind::Error,
            "connection refused (os error 111)",
        )),
    };
    let seen_ok = ReachabilityReport {
        cluster: "m1".into(),
        failure: None,
    };
    let n1 = Command::Reachability(vec![lost]);
    propose(&leader.node, "r-1", "system:executor:node1", n1).await;
    let n2 = Command::Reachability(vec![seen_ok]);
    propose(&leader.node, "r-2", "system:executor:node2", n2).await;

    let r = send(
        c.req(c.follower(), Method::GET, "/v1/clusters/m1", Some(OPERATOR)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let reach = r.json["status"]["reachability"]
        .as_array()
        .unwrap_or_else(|| panic!("no reachability: {}", r.text));
    let view = |node: &str| {
        reach
            .iter()
            .find(|v| v["node"] == node)
            .unwrap_or_else(|| panic!("no view from {node}: {}", r.text))
    };
    assert_eq!(view("system:executor:node1")["reachable"], false);
    assert_eq!(view("system:executor:node1")["failure"], "Error");
    assert!(view("system:executor:node1")["error"]
        .as_str()
        .is_some_and(|e| e.contains("connection refused")));
    assert_eq!(view("system:executor:node2")["reachable"], true);
    assert!(
        r.json["status"]["condition"].is_string(),
        "a sentence says what the views mean: {}",
        r.text
    );

    // The policy: defaults first, with where the brake holds (nowhere).
    let path = "/v1/admin/health-policy";
    let r = send(c.req(leader, Method::GET, path, Some(OPERATOR)), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["fleetPercent"], 55, "{}", r.text);
    assert_eq!(
        r.json["brake"]["fleet"],
        serde_json::Value::Null,
        "{}",
        r.text
    );
    assert!(
        r.json.get("lastLogStall").is_some(),
        "the latest log stall (none here, or when one happened) is shown: {}",
        r.text
    );
    let mut policy = r.json.clone();
    policy["fleetPercent"] = json!(40);
    policy["windowSeconds"] = json!(60);

    let before = c.settled_hash().await;
    let put = |token: &'static str, body: serde_json::Value| {
        send(
            c.req(c.follower(), Method::PUT, path, Some(token))
                .json(&body),
            &seen,
        )
    };
    let r = put(CAROL, policy.clone()).await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = put(OPERATOR, policy.clone()).await;
    assert_eq!(r.status, 403, "{}", r.text);
    for (field, value) in [
        ("fleetPercent", json!(140)),
        ("regionPercent", json!(101)),
        ("windowSeconds", json!(0)),
        ("regionLabel", json!("")),
    ] {
        let mut bad = policy.clone();
        bad[field] = value;
        let r = put(ADMIN, bad).await;
        assert_eq!(r.status, 400, "{field}: {}", r.text);
        assert_eq!(r.json["error"]["field"], field, "{}", r.text);
    }
    let mut unknown = policy.clone();
    unknown["fleetPercnt"] = json!(10);
    let r = put(ADMIN, unknown).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("fleetPercnt"), "{}", r.text);
    assert_eq!(c.settled_hash().await, before, "refusals change nothing");

    // What GET printed goes back as it is, with the new values; every node then serves them.
    let r = put(ADMIN, policy).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["fleetPercent"], 40, "{}", r.text);
    for n in &c.nodes {
        let r = send(c.req(n, Method::GET, path, Some(ADMIN)), &seen).await;
        assert_eq!(r.json["fleetPercent"], 40, "{}", r.text);
        assert_eq!(r.json["windowSeconds"], 60, "{}", r.text);
    }
    assert_ne!(c.settled_hash().await, before);
}
