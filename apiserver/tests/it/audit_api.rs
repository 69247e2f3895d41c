//! `/v1/audit*` on a real three-node cluster: records with filters and paging, the state at an
//! index or time, diffs and explanations; tenants see only their namespaces; every malformed
//! parameter is a 400 naming it.

use std::sync::Mutex;

use crate::common::{send, Resp, TestCluster, ADMIN, CAROL};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};

fn assert_error(r: &Resp, status: u16, code: &str, field: Option<&str>) {
    assert_eq!(r.status, status, "{}", r.text);
    assert_eq!(r.json["error"]["code"], code, "{}", r.text);
    if let Some(f) = field {
        assert_eq!(r.json["error"]["field"], f, "{}", r.text);
    }
}

fn object(name: &str) -> Value {
    json!({"template": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": 2}}})
}

/// Builds the request now, so the future borrows only the cluster and the log of bodies.
fn call<'a>(
    c: &'a TestCluster,
    seen: &'a Mutex<Vec<String>>,
    m: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> impl std::future::Future<Output = Resp> + 'a {
    let mut rb = c.req(c.leader(), m, path, Some(token));
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    send(rb, seen)
}

fn indexes(r: &Resp) -> Vec<u64> {
    r.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["index"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn audit_endpoints_with_tenant_scope_and_errors() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let get = |path: &str, token: &str| call(&c, &seen, Method::GET, path, token, None);

    let r = call(
        &c,
        &seen,
        Method::PUT,
        "/v1/tenants/blue",
        ADMIN,
        Some(json!({"namespaces": ["blue"], "members": ["carol"]})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(
        &c,
        &seen,
        Method::POST,
        "/v1/clusters",
        ADMIN,
        Some(
            json!({"name": "dc1", "apiEndpoint": "https://10.0.0.1:6443",
                    "credentials": {"bearerToken": "never-shown"}}),
        ),
    )
    .await;
    assert!(r.status < 300, "{}", r.text);
    let before_objects = c.leader().node.read_stale(|s| s.applied_index());
    let r = call(
        &c,
        &seen,
        Method::PUT,
        "/v1/namespaces/blue/objects/web",
        ADMIN,
        Some(object("web")),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(
        &c,
        &seen,
        Method::PUT,
        "/v1/namespaces/default/objects/api",
        ADMIN,
        Some(object("api")),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(
        &c,
        &seen,
        Method::POST,
        "/v1/clusters/dc1/cordon",
        ADMIN,
        None,
    )
    .await;
    assert!(r.status < 300, "{}", r.text);
    let last = c.leader().node.read_stale(|s| s.applied_index());

    // Admin: everything, oldest first; paging with continue tokens covers it exactly.
    let all = get("/v1/audit", ADMIN).await;
    assert_eq!(all.status, 200, "{}", all.text);
    assert_eq!(indexes(&all), (1..=last).collect::<Vec<_>>());
    assert!(!all.text.contains("never-shown"));
    let mut paged = Vec::new();
    let mut cont: Option<String> = None;
    loop {
        let path = match &cont {
            Some(t) => format!("/v1/audit?limit=2&order=newest&continue={t}"),
            None => "/v1/audit?limit=2&order=newest".into(),
        };
        let r = get(&path, ADMIN).await;
        paged.extend(indexes(&r));
        match r.json["continue"].as_str() {
            Some(t) => cont = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, (1..=last).rev().collect::<Vec<_>>());
    let r = get("/v1/audit?object=blue/web", ADMIN).await;
    let cmds: Vec<&str> = r.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["command"].as_str().unwrap())
        .collect();
    assert_eq!(cmds, ["PutObject"]);
    let r = get("/v1/audit?cluster=dc1&actor=alice", ADMIN).await;
    let cmds: Vec<&str> = r.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["command"].as_str().unwrap())
        .collect();
    assert_eq!(cmds, ["RegisterCluster", "Cordon"]);
    let r = get(
        "/v1/audit?since=2000-01-01T00:00:00Z&until=2000-01-02T00:00:00Z",
        ADMIN,
    )
    .await;
    assert_eq!(indexes(&r), Vec::<u64>::new());

    // State and diff.
    let r = get(&format!("/v1/audit/state?at={last}"), ADMIN).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["index"], last);
    assert_eq!(r.json["stateHash"], c.leader().hash());
    assert_eq!(r.json["clusters"][0]["cordoned"], true);
    let r = get(&format!("/v1/audit/state?at={before_objects}"), ADMIN).await;
    assert_eq!(r.json["objects"], json!([]));
    let r = get(
        &format!("/v1/audit/diff?from={before_objects}&to={last}"),
        ADMIN,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let keys: Vec<(&str, &str)> = r.json["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["key"].as_str().unwrap(), o["op"].as_str().unwrap()))
        .collect();
    assert_eq!(keys, [("blue/web", "Added"), ("default/api", "Added")]);
    assert_eq!(r.json["clusters"][0]["fields"][0]["field"], "cordoned");
    let r = get("/v1/audit/explain/blue/web", ADMIN).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["object"], "blue/web");

    // Tenant carol: only blue's records, objects and changes; no clusters.
    let r = get("/v1/audit", CAROL).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let targets: Vec<&str> = r.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["blue/web"]);
    let r = get(&format!("/v1/audit/state?at={last}"), CAROL).await;
    assert_eq!(r.json["clusters"], json!([]));
    let objs: Vec<&str> = r.json["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(objs, ["web"]);
    let r = get(
        &format!("/v1/audit/diff?from={before_objects}&to={last}"),
        CAROL,
    )
    .await;
    assert_eq!(r.json["objects"].as_array().unwrap().len(), 1, "{}", r.text);
    assert_eq!(r.json["clusters"], json!([]));
    assert_error(
        &get("/v1/audit/explain/default/api", CAROL).await,
        403,
        "Forbidden",
        None,
    );
    assert_error(
        &get("/v1/audit?cluster=dc1", CAROL).await,
        403,
        "Forbidden",
        None,
    );
    assert_eq!(get("/v1/audit/explain/blue/web", CAROL).await.status, 200);

    // Bad parameters: 400 naming the field, nothing changes.
    let hash = c.settled_hash().await;
    for (path, field) in [
        ("/v1/audit?from=x", "from"),
        ("/v1/audit?to=-1", "to"),
        ("/v1/audit?limit=0", "limit"),
        ("/v1/audit?limit=1001", "limit"),
        ("/v1/audit?order=sideways", "order"),
        ("/v1/audit?since=yesterday", "since"),
        ("/v1/audit?until=2026-13-01T00:00:00Z", "until"),
        ("/v1/audit?continue=abc", "continue"),
        ("/v1/audit?object=nonamespace", "object"),
        ("/v1/audit/state?at=soon", "at"),
        ("/v1/audit/state?at=999999", "at"),
        ("/v1/audit/diff?from=3&to=2", "from"),
        ("/v1/audit/diff?from=1&to=x", "to"),
        ("/v1/audit/explain/blue/web?from=nope", "from"),
    ] {
        let r = get(path, ADMIN).await;
        assert_error(&r, 400, "InvalidField", Some(field));
    }
    assert_error(
        &get("/v1/audit/state", ADMIN).await,
        400,
        "MissingField",
        Some("at"),
    );
    assert_error(
        &get("/v1/audit/diff?from=1", ADMIN).await,
        400,
        "MissingField",
        Some("to"),
    );
    assert_error(&get("/v1/audit", "nope").await, 401, "Unauthorized", None);
    assert_eq!(c.settled_hash().await, hash);
    for text in seen.lock().unwrap().iter() {
        assert!(!text.contains("never-shown"), "credentials leaked: {text}");
    }
}
