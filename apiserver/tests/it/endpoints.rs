//! `GET /v1/namespaces/{ns}/services/{name}/endpoints` (+ watch) and the `discovery` section of
//! object writes, against a real three-node cluster on loopback.

use std::sync::Mutex;
use std::time::Duration;

use crate::common::{send, ADMIN};
use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_core::discovery::{EndpointsReport, PortProtocol, ServicePort};
use fedraft_core::model::ClusterSpec;
use fedraft_raft::Proposal;
use reqwest::Method;
use serde_json::{json, Value};

fn service(discovery: Value) -> Value {
    json!({"template": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}},
           "placement": {"clusters": ["dc1"], "replicas": {"mode": "Duplicated"}},
           "discovery": discovery})
}

async fn propose(node: &fedraft_raft::FedNode, command: Command) {
    node.propose(Proposal {
        request_id: format!("t-{}", rand::random::<u64>()),
        actor: "admin".into(),
        command,
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn endpoints_view_watch_and_discovery_validation() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let (leader, follower) = (c.leader(), c.follower());
    let path = "/v1/namespaces/default/objects/web";
    let put = |body: Value| {
        c.req(follower, Method::PUT, path, Some(ADMIN))
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    let before = c.settled_hash().await;
    let r = send(put(service(json!({"ttlSeconds": 0}))), &seen).await;
    assert!(r.status == 400 || r.status == 422, "{}", r.text);
    assert_eq!(
        r.json["error"]["field"], "discovery.ttlSeconds",
        "{}",
        r.text
    );
    let mut not_svc = service(json!({}));
    not_svc["template"] =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
    let r = send(put(not_svc), &seen).await;
    assert!(r.status == 400 || r.status == 422, "{}", r.text);
    assert_eq!(r.json["error"]["field"], "discovery", "{}", r.text);
    assert_eq!(c.settled_hash().await, before, "refusals change nothing");

    let r = send(put(service(json!({"ttlSeconds": 9}))), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = send(c.req(leader, Method::GET, path, Some(ADMIN)), &seen).await;
    assert_eq!(r.json["discovery"]["ttlSeconds"], 9, "{}", r.text);
    assert_eq!(r.json["discovery"]["failOpen"], true, "{}", r.text);

    let ep = "/v1/namespaces/default/services/web/endpoints";
    let r = send(c.req(leader, Method::GET, ep, Some(ADMIN)), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["kind"], "ServiceEndpoints");
    assert_eq!(r.json["mode"], "NoData", "{}", r.text);
    let r = send(
        c.req(
            leader,
            Method::GET,
            "/v1/namespaces/default/services/nope/endpoints",
            Some(ADMIN),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = send(c.req(leader, Method::GET, ep, None), &seen).await;
    assert_eq!(r.status, 401, "{}", r.text);

    // Watch: the current view, then a line when a cluster becomes eligible.
    let resp = c
        .req(
            follower,
            Method::GET,
            &format!("{ep}?watch=true"),
            Some(ADMIN),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let node = leader.node.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        propose(
            &node,
            Command::RegisterCluster(ClusterSpec::new("dc1", "http://dc1")),
        )
        .await;
        propose(
            &node,
            Command::Heartbeats(vec![Heartbeat {
                cluster: "dc1".into(),
                capacity: None,
            }]),
        )
        .await;
        propose(
            &node,
            Command::RevokePlacement {
                namespace: "default".into(),
                name: "web".into(),
            },
        )
        .await;
        propose(
            &node,
            Command::ServiceEndpoints(vec![EndpointsReport {
                namespace: "default".into(),
                name: "web".into(),
                cluster: "dc1".into(),
                addresses: vec!["10.1.0.1".into()],
                ports: vec![ServicePort {
                    name: "http".into(),
                    protocol: PortProtocol::Tcp,
                    port: 80,
                }],
                ready_endpoints: 2,
            }]),
        )
        .await;
    });
    use futures::StreamExt;
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    let mut events: Vec<Value> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !events.iter().any(|e| e["object"]["mode"] == "Eligible") {
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("watch timed out")
            .expect("stream ended")
            .unwrap();
        buf.extend_from_slice(&chunk);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            events.push(serde_json::from_slice(&line).unwrap());
        }
    }
    assert_eq!(events[0]["type"], "ADDED");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "MODIFIED");
    assert_eq!(last["object"]["answering"], json!(["dc1"]));
    assert_eq!(last["object"]["clusters"][0]["weight"], 2);
    assert_eq!(
        last["object"]["clusters"][0]["addresses"],
        json!(["10.1.0.1"])
    );
    for n in c.nodes {
        n.stop().await;
    }
}
