//! `GET /v1/namespaces/{ns}/objects/{name}/rendered` against a real three-node cluster on
//! loopback: one manifest per placed cluster with that cluster's overrides and replica share,
//! Secret values redacted, the same rights as reading the object.

use std::sync::Mutex;

use crate::common::{send, ADMIN, CAROL};
use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_raft::Proposal;
use reqwest::Method;
use serde_json::{json, Value};

fn deployment(replicas: u32) -> Value {
    json!({
        "template": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                     "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                              "template": {"metadata": {"labels": {"app": "web"}},
                                           "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}}},
        "placement": {"clusters": ["dc1", "dc2"], "replicas": {"mode": "Divided"}},
        "overrides": [{"clusterName": "dc2", "image": {"tag": "1.27"}}],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rendered_shows_each_clusters_manifest_and_never_secret_values() {
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
    let beats = ["dc1", "dc2"]
        .map(|n| Heartbeat {
            cluster: n.into(),
            capacity: None,
        })
        .to_vec();
    let p = Proposal {
        request_id: "hb-rendered".into(),
        actor: "executor".into(),
        command: Command::Heartbeats(beats),
    };
    assert!(leader.node.propose(p).await.unwrap().outcome.is_accepted());

    let put = |name: &str, body: Value| {
        c.req(
            leader,
            Method::PUT,
            &format!("/v1/namespaces/default/objects/{name}"),
            Some(ADMIN),
        )
        .json(&body)
    };
    let r = send(put("web", deployment(4)), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let path = "/v1/namespaces/default/objects/web/rendered";
    let r = send(c.req(c.follower(), Method::GET, path, Some(ADMIN)), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let clusters = r.json["clusters"].as_array().expect("a clusters list");
    let by_name = |n: &str| {
        clusters
            .iter()
            .find(|c| c["cluster"] == n)
            .unwrap_or_else(|| panic!("{n} missing from {}", r.text))
    };
    let (one, two) = (by_name("dc1"), by_name("dc2"));
    let image =
        |c: &Value| c["manifest"]["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(image(one), "nginx:1.25", "{}", r.text);
    assert_eq!(
        image(two),
        "nginx:1.27",
        "the override targets dc2 only: {}",
        r.text
    );
    let shares: Vec<u64> = [one, two]
        .iter()
        .map(|c| c["manifest"]["spec"]["replicas"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(shares.iter().sum::<u64>(), 4, "{}", r.text);
    for c in [one, two] {
        assert_eq!(
            c["manifest"]["spec"]["replicas"], c["replicas"],
            "{}",
            r.text
        );
    }

    let secret = json!({
        "template": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                     "data": {"password": "aHVudGVyMg=="}},
        "placement": {"clusters": ["dc1"], "replicas": {"mode": "Duplicated"}},
    });
    let r = send(put("db", secret), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = send(
        c.req(
            leader,
            Method::GET,
            "/v1/namespaces/default/objects/db/rendered",
            Some(ADMIN),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(!r.text.contains("aHVudGVyMg=="), "{}", r.text);
    assert_eq!(
        r.json["clusters"][0]["manifest"]["data"]["password"], "<redacted: 12 bytes>",
        "{}",
        r.text
    );

    let r = send(c.req(leader, Method::GET, path, Some(CAROL)), &seen).await;
    assert_eq!(r.status, 403, "a tenant outside the namespace: {}", r.text);
    let r = send(
        c.req(
            leader,
            Method::GET,
            "/v1/namespaces/default/objects/nope/rendered",
            Some(ADMIN),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text);
    assert!(r.json["error"]["message"].is_string(), "{}", r.text);
    let r = send(
        c.req(
            leader,
            Method::GET,
            "/v1/namespaces/Bad_NS/objects/web/rendered",
            Some(ADMIN),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.json["error"]["field"], "namespace", "{}", r.text);
}
