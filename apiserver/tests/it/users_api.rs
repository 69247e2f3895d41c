//! The replicated user database through the API of a real three-node group: admins create users
//! and issue tokens, the token works on every node, a revoked one is 401 on every node once
//! applied there, roles hold (operators and auditors write nothing here, auditors read the audit
//! log), bad input names its field, and the token's text is in no listing and no data directory.

use std::sync::Mutex;

use crate::common::{send, Resp, TestCluster, ADMIN, CAROL, OPERATOR};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::json;

async fn on_every_node(c: &TestCluster, token: &str, path: &str, want: u16) {
    let seen = Mutex::new(Vec::new());
    for n in &c.nodes {
        let r = send(c.req(n, Method::GET, path, Some(token)), &seen).await;
        assert_eq!(r.status, want, "node {}: {}", n.id, r.text);
    }
}

fn field(r: &Resp) -> &str {
    r.json["error"]["field"].as_str().unwrap_or_default()
}

/// Every byte string of every file under `dir` that contains `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    hits.push(p.display().to_string());
                }
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn users_and_tokens_work_on_every_node_and_revocation_holds() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    let post = |path: &str, token: &str, body: serde_json::Value| {
        send(
            c.req(leader, Method::POST, path, Some(token)).json(&body),
            &seen,
        )
    };

    // Bad input names the field; non-admins may not write users, tenants may not read them.
    let r = post("/v1/users", ADMIN, json!({"name": "eve", "role": "wizard"})).await;
    assert_eq!((r.status, field(&r)), (400, "role"), "{}", r.text);
    let r = post("/v1/users", ADMIN, json!({"name": "Eve!", "role": "admin"})).await;
    assert_eq!((r.status, field(&r)), (400, "name"), "{}", r.text);
    let r = post(
        "/v1/users",
        ADMIN,
        json!({"name": "alice", "role": "admin"}),
    )
    .await;
    assert_eq!(r.status, 409, "a token-file name: {}", r.text);
    let r = post(
        "/v1/users",
        OPERATOR,
        json!({"name": "eve", "role": "admin"}),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = send(c.req(leader, Method::GET, "/v1/users", Some(CAROL)), &seen).await;
    assert_eq!(r.status, 403, "{}", r.text);

    let r = post(
        "/v1/users",
        ADMIN,
        json!({"name": "eve", "role": "operator"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["role"], "operator");
    let r = post(
        "/v1/users",
        ADMIN,
        json!({"name": "dora", "role": "auditor"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = post("/v1/users/eve/tokens", ADMIN, json!({"ttlSeconds": 0})).await;
    assert_eq!((r.status, field(&r)), (400, "ttlSeconds"), "{}", r.text);

    let r = post("/v1/users/eve/tokens", ADMIN, json!({"ttlSeconds": 3600})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(
        r.headers.get("cache-control").map(|v| v.to_str().unwrap()),
        Some("no-store")
    );
    let first = r.json["token"].as_str().unwrap().to_string();
    let first_id = r.json["id"].as_str().unwrap().to_string();
    let r = post("/v1/users/dora/tokens", ADMIN, json!({})).await;
    let dora = r.json["token"].as_str().unwrap().to_string();
    c.settled_hash().await;

    on_every_node(&c, &first, "/v1/clusters", 200).await;
    // An operator user: no user management, checked by the node and again at apply.
    let r = post(
        "/v1/users",
        &first,
        json!({"name": "mallory", "role": "admin"}),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text);
    // An auditor reads everything, the audit log included, and writes nothing.
    on_every_node(&c, &dora, "/v1/audit?limit=5", 200).await;
    on_every_node(&c, &dora, "/v1/users/eve/tokens", 200).await;
    let r = send(
        c.req(leader, Method::PUT, "/v1/tenants/blue", Some(&dora))
            .json(&json!({"namespaces": ["blue"]})),
        &seen,
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text);

    // Rotate: a second token, then revoke the first.
    let r = post("/v1/users/eve/tokens", ADMIN, json!({})).await;
    let second = r.json["token"].as_str().unwrap().to_string();
    let path = format!("/v1/users/eve/tokens/{first_id}");
    let r = send(c.req(leader, Method::DELETE, &path, Some(ADMIN)), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    c.settled_hash().await;
    on_every_node(&c, &first, "/v1/clusters", 401).await;
    on_every_node(&c, &second, "/v1/clusters", 200).await;

    // Listings carry metadata only.
    let r = send(
        c.req(leader, Method::GET, "/v1/users/eve/tokens", Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(
        r.json["items"].as_array().map(Vec::len),
        Some(2),
        "{}",
        r.text
    );
    let revoked: Vec<_> = r.json["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["live"] == false && t["revokedMs"].is_u64())
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(revoked, vec![json!(first_id)], "{}", r.text);
    let hash = fedraft_core::users::token_hash_hex(&first);
    assert!(
        !r.text.contains(&first) && !r.text.contains(&hash),
        "{}",
        r.text
    );

    // Deleting the user ends its tokens everywhere.
    let r = send(
        c.req(leader, Method::DELETE, "/v1/users/eve", Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    c.settled_hash().await;
    on_every_node(&c, &second, "/v1/clusters", 401).await;

    for t in [&first, &second, &dora] {
        let secret = t.rsplit('_').next().unwrap();
        let hits = files_containing(c.root.path(), secret.as_bytes());
        assert!(hits.is_empty(), "a token's secret is stored in {hits:?}");
    }
}
