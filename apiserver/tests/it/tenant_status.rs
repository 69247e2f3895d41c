//! A tenant's `status.used` through the API counts what its quota check counts: a Duplicated
//! object's replicas once per cluster it runs in, so the figure a tenant reads is the one a
//! refusal will quote. Owns no quota rule (core's `tenant_quota` tests do).

use std::sync::Mutex;

use crate::common::{send, ADMIN, CAROL};
use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_raft::Proposal;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn duplicated_copies_count_once_per_cluster_in_the_tenant_status() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    for name in ["dc1", "dc2"] {
        let body = json!({"name": name, "apiEndpoint": format!("https://{name}:6443")});
        let r = send(
            c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
                .json(&body),
            &seen,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    // Play the executors: one heartbeat makes both clusters Ready for scheduling.
    let beats = ["dc1", "dc2"]
        .map(|n| Heartbeat {
            cluster: n.into(),
            capacity: None,
        })
        .to_vec();
    let p = Proposal {
        request_id: "hb-1".into(),
        actor: "executor".into(),
        command: Command::Heartbeats(beats),
    };
    assert!(leader.node.propose(p).await.unwrap().outcome.is_accepted());

    let tenant = json!({"namespaces": ["blue"], "members": ["carol"], "quota": {"cpu": "2"}});
    let r = send(
        c.req(leader, Method::PUT, "/v1/tenants/blue", Some(ADMIN))
            .json(&tenant),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let dup = json!({
        "template": {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{
                "name": "web", "image": "nginx:1",
                "resources": {"requests": {"cpu": "100m"}}
            }]}}}
        },
        "placement": {"replicas": {"mode": "Duplicated"}}
    });
    let r = send(
        c.req(
            leader,
            Method::PUT,
            "/v1/namespaces/blue/objects/web",
            Some(CAROL),
        )
        .json(&dup),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let placed = r.json["status"]["placement"].clone();
    assert_eq!(placed, json!({"dc1": 2, "dc2": 2}), "{}", r.text);

    // Two replicas of 100m on each of two clusters: 400m and four pods, on the tenant's own read
    // and in the list alike.
    let r = send(
        c.req(c.follower(), Method::GET, "/v1/tenants/blue", Some(CAROL)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["status"]["used"]["cpuMillis"], 400, "{}", r.text);
    assert_eq!(r.json["status"]["used"]["pods"], 4, "{}", r.text);
    let r = send(
        c.req(leader, Method::GET, "/v1/tenants", Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(
        r.json["items"][0]["status"]["used"]["cpuMillis"], 400,
        "{}",
        r.text
    );
}
