//! `POST /v1/namespaces/{ns}/objects/{name}/reschedule` and the rollout endpoints against a real
//! three-node cluster on loopback: a reschedule spreads an object over a cluster that joined
//! after it was placed (the explicit fail-back), a rollout strategy put with the object reads
//! back with its revision and the moves on it are checked by core, and the refusals name what
//! was wrong.

use std::sync::Mutex;

use crate::common::{send, TestCluster, ADMIN, CAROL};
use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_raft::Proposal;
use reqwest::Method;
use serde_json::{json, Value};

async fn register_ready(c: &TestCluster, names: &[&str], seen: &Mutex<Vec<String>>) {
    let leader = c.leader();
    for name in names {
        let body = json!({"name": name, "apiEndpoint": format!("https://{name}:6443")});
        let r = send(
            c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
                .json(&body),
            seen,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let beats = names
        .iter()
        .map(|n| Heartbeat {
            cluster: n.to_string(),
            capacity: None,
        })
        .collect();
    let p = Proposal {
        request_id: format!("hb-{}", names.join("-")),
        actor: "executor".into(),
        command: Command::Heartbeats(beats),
    };
    assert!(leader.node.propose(p).await.unwrap().outcome.is_accepted());
}

fn placement(doc: &Value) -> Value {
    doc["status"]["placement"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reschedule_spreads_onto_a_new_cluster_and_rollouts_read_back() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    register_ready(&c, &["dc1"], &seen).await;

    let web = json!({
        "template": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                     "spec": {"replicas": 4, "template": {"spec": {"containers": [
                         {"name": "web", "image": "nginx:1.25"}]}}}},
        "placement": {"replicas": {"mode": "Divided"}},
        "rollout": {"type": "Progressive", "grouping": "clusterOrder",
                    "maxConcurrency": {"count": 1}, "minSuccessSeconds": 5,
                    "healthRule": {"path": "/status/phase", "value": "Ready"}},
    });
    let path = "/v1/namespaces/default/objects/web";
    let r = send(
        c.req(leader, Method::PUT, path, Some(ADMIN)).json(&web),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(placement(&r.json), json!({"dc1": 4}), "{}", r.text);

    // dc2 joins: the placement stays where it is until someone asks.
    register_ready(&c, &["dc2"], &seen).await;
    let r = send(c.req(leader, Method::GET, path, Some(ADMIN)), &seen).await;
    assert_eq!(placement(&r.json), json!({"dc1": 4}), "{}", r.text);
    let resched = format!("{path}/reschedule");
    let r = send(
        c.req(c.follower(), Method::POST, &resched, Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        placement(&r.json),
        json!({"dc1": 2, "dc2": 2}),
        "{}",
        r.text
    );
    assert!(r.json["resourceVersion"].as_u64().is_some(), "{}", r.text);

    // The rollout document: the strategy as put, one revision, complete.
    let r = send(
        c.req(leader, Method::GET, &format!("{path}/rollout"), Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let rollout = &r.json["rollout"];
    assert_eq!(rollout["phase"], "Complete", "{}", r.text);
    assert_eq!(rollout["strategy"]["healthRule"]["path"], "/status/phase");
    assert_eq!(r.json["clusters"].as_array().map(Vec::len), Some(2));
    // A new template starts wave 1 (dc1 alone); a pause holds it, a second pause is refused.
    let mut v2 = web.clone();
    v2["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.27");
    let r = send(
        c.req(leader, Method::PUT, path, Some(ADMIN)).json(&v2),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let act = |a: &str| format!("{path}/rollout/{a}");
    let r = send(
        c.req(leader, Method::POST, &act("pause"), Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["rollout"]["phase"], "Paused", "{}", r.text);
    assert_eq!(r.json["rollout"]["targetRevision"], 2, "{}", r.text);
    let r = send(
        c.req(leader, Method::POST, &act("pause"), Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text);
    assert_eq!(r.json["error"]["field"], "action", "{}", r.text);
    let r = send(
        c.req(leader, Method::POST, &act("promote"), Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["rollout"]["phase"], "Complete", "{}", r.text);

    // Refusals: a bad health rule names its field and changes nothing; unknown moves and
    // objects, and a tenant outside the namespace, are refused.
    let before = send(c.req(leader, Method::GET, path, Some(ADMIN)), &seen).await;
    let mut bad = web.clone();
    bad["rollout"]["healthRule"]["path"] = json!("status.phase");
    let r = send(
        c.req(leader, Method::PUT, path, Some(ADMIN)).json(&bad),
        &seen,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("healthRule.path"), "{}", r.text);
    let after = send(c.req(leader, Method::GET, path, Some(ADMIN)), &seen).await;
    assert_eq!(
        before.json["resourceVersion"], after.json["resourceVersion"],
        "{}",
        after.text
    );
    let r = send(
        c.req(leader, Method::POST, &act("rewind"), Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let missing = "/v1/namespaces/default/objects/nope/reschedule";
    let r = send(c.req(leader, Method::POST, missing, Some(ADMIN)), &seen).await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = send(c.req(leader, Method::POST, &resched, Some(CAROL)), &seen).await;
    assert_eq!(r.status, 403, "{}", r.text);
}
