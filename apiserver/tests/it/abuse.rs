//! Adversarial requests against a real three-node cluster: each attack on the API's edge is
//! refused, the node that received it keeps serving (a normal write succeeds right after), and
//! a refused request leaves the replicated state as it was (the state hash `/v1/system/state`
//! reports on every node is unchanged).
//!
//! One test runs them all on one cluster (starting a cluster costs seconds). Must not: weaken a
//! refusal to a "some 4xx" check: each asserts the status, the code and what it names.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_raft::Proposal;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{send, Resp, TestCluster, ADMIN, CAROL};

fn deployment(name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": replicas}})
}

fn refused(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.text);
    assert_eq!(r.json["error"]["code"], code, "{}", r.text);
}

/// The state hash every node reports on `/v1/system/state`, once they agree.
async fn system_hash(c: &TestCluster) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut hashes = Vec::new();
        for n in &c.nodes {
            let r = c.req(n, Method::GET, "/v1/system/state", None).send().await;
            let v = match r {
                Ok(r) => r.json::<Value>().await.unwrap_or(Value::Null),
                Err(_) => Value::Null,
            };
            hashes.push(v["stateHash"].as_str().unwrap_or("").to_string());
        }
        if hashes.iter().all(|h| *h == hashes[0] && !h.is_empty()) {
            return hashes.swap_remove(0);
        }
        assert!(Instant::now() < deadline, "nodes disagree: {hashes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A normal write still succeeds (the node is alive and the log accepts entries).
async fn still_writes(c: &TestCluster, seen: &Mutex<Vec<String>>, name: &str) {
    let r = send(
        c.req(
            c.leader(),
            Method::PUT,
            &format!("/v1/namespaces/blue/objects/{name}"),
            Some(ADMIN),
        )
        .json(&json!({"template": deployment(name, 1)})),
        seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// Every page of `GET /v1/audit?FILTER`, following continue tokens to the end.
async fn audit_pages(c: &TestCluster, seen: &Mutex<Vec<String>>, filter: &str) -> Vec<Vec<Value>> {
    audit_pages_as(c, seen, filter, ADMIN).await
}

/// [`audit_pages`] with `token`'s principal.
async fn audit_pages_as(
    c: &TestCluster,
    seen: &Mutex<Vec<String>>,
    filter: &str,
    token: &str,
) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let path = match &next {
            Some(t) => format!("/v1/audit?{filter}&continue={t}"),
            None => format!("/v1/audit?{filter}"),
        };
        let r = send(c.req(c.leader(), Method::GET, &path, Some(token)), seen).await;
        assert_eq!(r.status, 200, "{}", r.text);
        next = r.json["continue"].as_str().map(str::to_string);
        pages.push(r.json["items"].as_array().cloned().unwrap_or_default());
        assert!(pages.len() < 1000, "continue tokens never end");
        if next.is_none() {
            return pages;
        }
    }
}

/// A YAML body of ~150 KB: one anchored list aliased thousands of times, ~10^8 values expanded.
fn yaml_bomb() -> String {
    let width = 10_000;
    let refs = 10_000;
    let mut doc = format!(
        "template: &t [{}]\nplacement: {{clusters: [*t",
        vec!["lol"; width].join(", ")
    );
    doc.push_str(&", *t".repeat(refs - 1));
    doc.push_str("]}\n");
    doc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attacks_on_the_edge_are_refused_and_change_nothing() {
    // A tiny audit scan budget, so that paging by budget shows on a short archive.
    let c = crate::common::start(ApiConfig {
        audit_scan_budget_records: 3,
        ..ApiConfig::default()
    })
    .await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    let put_obj = |name: &str, token: &str| {
        c.req(
            leader,
            Method::PUT,
            &format!("/v1/namespaces/blue/objects/{name}"),
            Some(token),
        )
    };
    still_writes(&c, &seen, "warmup").await;

    // --- bodies are never read before authorisation: garbage that would be a 400 if parsed is
    // 401 without a token and 403 for a tenant owning no namespace (carol's tenant does not
    // exist yet). 256 KiB: a body the server leaves unread must still fit the socket buffers,
    // or the client sees its write fail instead of the answer.
    let before = system_hash(&c).await;
    let garbage = vec![b'{'; 256 * 1024];
    for path in ["/v1/schedule/dry-run", "/v1/clusters"] {
        let r = send(
            c.req(leader, Method::POST, path, None)
                .header("content-type", "application/json")
                // The server answers without reading the body, then closes the connection:
                // the client must not reuse it.
                .header("connection", "close")
                .body(garbage.clone()),
            &seen,
        )
        .await;
        refused(&r, 401, "Unauthorized");
    }
    let r = send(
        c.req(leader, Method::POST, "/v1/schedule/dry-run", Some(CAROL))
            .header("content-type", "application/json")
            .header("connection", "close")
            .body("{not json"),
        &seen,
    )
    .await;
    refused(&r, 403, "Forbidden");
    let r = send(
        put_obj("x", CAROL)
            .header("content-type", "application/json")
            .header("connection", "close")
            .body("{not json"),
        &seen,
    )
    .await;
    refused(&r, 403, "Forbidden");
    // A client that did not ask for it is told to close too, so it never reuses a connection
    // whose request body the server left unread.
    let r = send(
        c.req(leader, Method::POST, "/v1/schedule/dry-run", None)
            .header("content-type", "application/json")
            .body("{\"spec\": {}}"),
        &seen,
    )
    .await;
    refused(&r, 401, "Unauthorized");
    assert_eq!(r.headers["connection"], "close");
    assert_eq!(system_hash(&c).await, before);
    still_writes(&c, &seen, "after-auth").await;

    // --- billion laughs: refused quickly with 413 naming aliases; the node is fine after
    let before = system_hash(&c).await;
    let bomb = yaml_bomb();
    assert!(bomb.len() < 200_000, "{} bytes", bomb.len());
    let start = Instant::now();
    let r = send(
        put_obj("bomb", ADMIN)
            .header("content-type", "application/yaml")
            .body(bomb),
        &seen,
    )
    .await;
    let took = start.elapsed();
    refused(&r, 413, "PayloadTooLarge");
    assert!(r.text.contains("aliases"), "{}", r.text);
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // Deep nesting, in JSON and YAML, is a 400 and not a crashed node.
    let deep_json = format!(
        "{{\"template\":{}1{}}}",
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    let deep_yaml = format!("template: {}1{}\n", "[".repeat(5_000), "]".repeat(5_000));
    for (body, kind) in [
        (deep_json, "application/json"),
        (deep_yaml, "application/yaml"),
    ] {
        let r = send(
            put_obj("deep", ADMIN)
                .header("content-type", kind)
                .body(body),
            &seen,
        )
        .await;
        refused(&r, 400, "MalformedBody");
    }
    assert_eq!(system_hash(&c).await, before);
    still_writes(&c, &seen, "after-bomb").await;

    // --- kubeconfigs that run commands or read the node's files: 400 naming the field
    let before = system_hash(&c).await;
    let kc = |user: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://k:6443'}}\nusers:\n- name: u\n  user: {user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        )
    };
    for (user, field) in [
        (
            "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'touch /tmp/pwned']}}",
            "credentials.kubeconfig.users[0].user.exec",
        ),
        ("{tokenFile: /etc/shadow}", "credentials.kubeconfig.users[0].user.tokenFile"),
        (
            "{client-key: /var/lib/fedraft/peer.key}",
            "credentials.kubeconfig.users[0].user.client-key",
        ),
    ] {
        let body = json!({"name": "evil", "apiEndpoint": "https://k:6443",
                          "credentials": {"kubeconfig": kc(user)}});
        let r = send(
            c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN)).json(&body),
            &seen,
        )
        .await;
        refused(&r, 400, "InvalidField");
        assert_eq!(r.json["error"]["field"], field, "{}", r.text);
    }
    assert_eq!(system_hash(&c).await, before);
    let ok = json!({"name": "good", "apiEndpoint": "https://k:6443",
                    "credentials": {"kubeconfig": kc("{token: t0ken}")}});
    let r = send(
        c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
            .json(&ok),
        &seen,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);

    // --- idempotency keys are per principal and per request
    let tenant = json!({"namespaces": ["blue"], "members": ["carol"],
                        "quota": {"cpuMillis": 100000, "memoryBytes": 0, "pods": 1000}});
    let r = send(
        c.req(leader, Method::PUT, "/v1/tenants/blue", Some(ADMIN))
            .json(&tenant),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let keyed = |name: &str, token: &str, replicas: u32| {
        put_obj(name, token)
            .header("Idempotency-Key", "shared-key")
            .json(&json!({"template": deployment(name, replicas)}))
    };
    let first = send(keyed("alices", ADMIN, 1), &seen).await;
    assert_eq!(first.status, 200, "{}", first.text);
    // Another principal with the same key: its own write happens.
    let other = send(keyed("carols", CAROL, 1), &seen).await;
    assert_eq!(other.status, 200, "{}", other.text);
    assert_eq!(other.json["name"], "carols", "{}", other.text);
    let r = send(
        c.req(
            leader,
            Method::GET,
            "/v1/namespaces/blue/objects/carols",
            Some(ADMIN),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "carol's write was dropped: {}", r.text);
    // A true retry still gets the first answer; the same key for another body is 422.
    let before = system_hash(&c).await;
    let retry = send(keyed("alices", ADMIN, 1), &seen).await;
    assert_eq!(retry.status, 200, "{}", retry.text);
    assert_eq!(retry.json["resourceVersion"], first.json["resourceVersion"]);
    let reused = send(keyed("alices", ADMIN, 5), &seen).await;
    refused(&reused, 422, "Unprocessable");
    assert!(reused.text.contains("different request"), "{}", reused.text);
    assert_eq!(system_hash(&c).await, before);
    still_writes(&c, &seen, "after-keys").await;

    // --- a tenant learns nothing of clusters its objects cannot use: another team's cluster,
    // tainted, is named with its taint to an admin and not at all to the tenant.
    for (name, taints) in [
        ("dc1", json!([])),
        (
            "secret-gpu",
            json!([{"key": "team-red-only", "effect": "NoSchedule"}]),
        ),
    ] {
        let body =
            json!({"name": name, "apiEndpoint": format!("https://{name}:6443"), "taints": taints});
        let r = send(
            c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
                .json(&body),
            &seen,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let beats = ["dc1", "secret-gpu"]
        .map(|n| Heartbeat {
            cluster: n.into(),
            capacity: None,
        })
        .to_vec();
    let hb = Proposal {
        request_id: "abuse-hb".into(),
        actor: "executor".into(),
        command: Command::Heartbeats(beats),
    };
    assert!(leader.node.propose(hb).await.unwrap().outcome.is_accepted());
    let obj = json!({"template": deployment("web", 2)});
    let r = send(put_obj("web", CAROL).json(&obj), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let path = "/v1/namespaces/blue/objects/web";
    let admin_view = send(c.req(leader, Method::GET, path, Some(ADMIN)), &seen).await;
    assert!(
        admin_view.text.contains("team-red-only"),
        "{}",
        admin_view.text
    );
    let dry = json!({"namespace": "blue", "name": "web2", "template": deployment("web2", 2)});
    let tenant_views = [
        send(c.req(leader, Method::GET, path, Some(CAROL)), &seen).await,
        send(
            c.req(leader, Method::POST, "/v1/schedule/dry-run", Some(CAROL))
                .json(&dry),
            &seen,
        )
        .await,
    ];
    for r in &tenant_views {
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(!r.text.contains("secret-gpu"), "{}", r.text);
        assert!(!r.text.contains("team-red-only"), "{}", r.text);
    }
    assert!(
        tenant_views[0].text.contains("dc1"),
        "{}",
        tenant_views[0].text
    );

    // --- an audit filter that rarely matches reads a bounded slice of the archive per request:
    // partial (even empty) pages with a continue token, which lead to every match.
    let nobody = audit_pages(&c, &seen, "actor=nobody").await;
    assert!(nobody.len() > 2, "{} pages", nobody.len());
    assert!(nobody.iter().all(Vec::is_empty));
    let carol: Vec<Value> = audit_pages(&c, &seen, "actor=carol").await.concat();
    // Her own reading of her records: decisions name her clusters only, as her object's own
    // view does.
    let own = audit_pages_as(&c, &seen, "limit=1000", CAROL)
        .await
        .concat();
    assert!(own.len() >= 2, "{own:?}");
    let text = serde_json::to_string(&own).unwrap();
    assert!(!text.contains("secret-gpu"), "{text}");
    assert!(!text.contains("team-red-only"), "{text}");
    assert!(carol.len() >= 2, "{carol:?}");
    assert!(
        carol.iter().all(|r| r["actor"] == "tenant:blue/carol"),
        "{carol:?}"
    );
    // --- an explain without a range replays at most the budget per request, in pages that
    // together tell the whole history.
    let mut from: Option<String> = None;
    let mut pages = 0;
    let mut changes: Vec<Value> = Vec::new();
    loop {
        let path = match &from {
            Some(f) => format!("/v1/audit/explain/blue/warmup?from={f}"),
            None => "/v1/audit/explain/blue/warmup".to_string(),
        };
        let r = send(c.req(c.leader(), Method::GET, &path, Some(ADMIN)), &seen).await;
        assert_eq!(r.status, 200, "{}", r.text);
        pages += 1;
        changes.extend(r.json["changes"].as_array().cloned().unwrap_or_default());
        from = r.json["continue"].as_str().map(str::to_string);
        assert!(pages < 1000, "explain pages never end");
        if from.is_none() {
            break;
        }
    }
    assert!(pages > 2, "{pages} pages");
    let at: Vec<u64> = changes
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert!(!at.is_empty(), "the object's placement is in its history");
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
    still_writes(&c, &seen, "the-end").await;

    // No answer carried a credential from the kubeconfigs above.
    for text in seen.lock().unwrap().iter() {
        assert!(!text.contains("t0ken"), "{text}");
    }
}
