//! Server-side filtering and paging of `/v1/clusters` and `/v1/objects` on a real cluster:
//! pages chain through `metadata.continue` without repeats or gaps, filters narrow on the
//! server, a tenant's pages hold only its namespaces, and a list without `limit` is unchanged.

use std::sync::Mutex;

use crate::common::{send, ADMIN, CAROL};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};

fn names(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| match i["namespace"].as_str() {
            Some(ns) => format!("{ns}/{}", i["name"].as_str().unwrap()),
            None => i["name"].as_str().unwrap().to_string(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_page_through_continue_tokens_and_filter_on_the_server() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    for i in 0..7 {
        let body = json!({"name": format!("dc{i}"), "labels": {"region": if i % 2 == 0 { "eu" } else { "us" }},
            "apiEndpoint": "https://x:6443"});
        let r = send(
            c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
                .json(&body),
            &seen,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let r = send(
        c.req(leader, Method::PUT, "/v1/tenants/blue", Some(ADMIN))
            .json(&json!({"namespaces": ["blue-a"], "members": ["carol"]})),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    // Namespaces `a` and `a-b` order differently as pairs and as "ns/name" strings.
    for (ns, name) in [
        ("a", "x"),
        ("a", "y"),
        ("a-b", "a"),
        ("blue-a", "web"),
        ("blue-a", "db"),
    ] {
        let body = json!({"template": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": 1}}});
        let r = send(
            c.req(
                leader,
                Method::PUT,
                &format!("/v1/namespaces/{ns}/objects/{name}"),
                Some(ADMIN),
            )
            .json(&body),
            &seen,
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    c.settled_hash().await;
    let node = c.follower();
    let get = |path: String, token: &'static str| {
        let rb = c.req(node, Method::GET, &path, Some(token));
        let seen = &seen;
        async move { send(rb, seen).await }
    };

    let all = get("/v1/objects?stale=true".into(), ADMIN).await;
    assert!(
        all.json["metadata"].is_null(),
        "no limit, no metadata: {}",
        all.text
    );
    let everything = names(&all.json);
    assert_eq!(everything.len(), 5);
    let mut paged = Vec::new();
    let mut token = String::new();
    loop {
        let r = get(
            format!("/v1/objects?stale=true&limit=2&continue={token}"),
            ADMIN,
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(names(&r.json).len() <= 2);
        paged.extend(names(&r.json));
        match r.json["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => break,
        }
    }
    assert_eq!(paged, everything, "pages chain without repeats or gaps");

    let r = get("/v1/clusters?q=REGION=eu&limit=3".into(), ADMIN).await;
    assert_eq!(names(&r.json), ["dc0", "dc2", "dc4"]);
    assert_eq!(r.json["metadata"]["remainingItemCount"], 1);
    let r = get(
        format!(
            "/v1/clusters?q=region=eu&limit=3&continue={}",
            r.json["metadata"]["continue"].as_str().unwrap()
        ),
        ADMIN,
    )
    .await;
    assert_eq!(names(&r.json), ["dc6"]);
    assert!(r.json["metadata"]["continue"].is_null());
    let r = get("/v1/clusters?health=Unknown&q=dc3".into(), ADMIN).await;
    assert_eq!(names(&r.json), ["dc3"]);
    let r = get("/v1/clusters?health=Ready".into(), ADMIN).await;
    assert_eq!(names(&r.json), Vec::<String>::new());
    let r = get("/v1/namespaces/a/objects?q=Y".into(), ADMIN).await;
    assert_eq!(names(&r.json), ["a/y"]);

    let r = get("/v1/objects?limit=1".into(), CAROL).await;
    assert_eq!(names(&r.json), ["blue-a/db"]);
    let next = r.json["metadata"]["continue"].as_str().unwrap().to_string();
    let r = get(format!("/v1/objects?limit=1&continue={next}"), CAROL).await;
    assert_eq!(names(&r.json), ["blue-a/web"]);
    assert!(r.json["metadata"]["continue"].is_null());

    for bad in ["limit=0", "limit=10001", "continue=not-a-token"] {
        let r = get(format!("/v1/objects?{bad}"), ADMIN).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.text);
    }
}
