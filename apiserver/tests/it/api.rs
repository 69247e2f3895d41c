//! HTTP-level tests of the API against a real three-node cluster on loopback. Each refusal is
//! checked for its status, its error body and for leaving the replicated state unchanged (the
//! state hash is identical on all nodes before and after).

use std::sync::Mutex;

use crate::common::{read_watch, send, Resp, TestCluster, ADMIN, CAROL, OPERATOR, SECRET};
use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_raft::Proposal;
use reqwest::Method;
use serde_json::{json, Value};

const CRED: &str = "SECRET-KUBE-TOKEN-do-not-leak-7f3a";

fn deployment(name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": replicas}})
}

fn assert_error(r: &Resp, status: u16, code: &str, field: Option<&str>) {
    assert_eq!(r.status, status, "{}", r.text);
    assert_eq!(r.json["error"]["code"], code, "{}", r.text);
    assert!(
        r.json["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        r.text
    );
    if let Some(f) = field {
        assert_eq!(r.json["error"]["field"], f, "{}", r.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_endpoint_and_every_error_on_three_nodes() {
    let logs = crate::common::capture_logs();
    let cfg = ApiConfig {
        watch_history_events: 16,
        bookmark_interval_ms: 200,
        ..ApiConfig::default()
    };
    let c = crate::common::start(cfg).await;
    let seen = Mutex::new(Vec::new());
    let (leader, follower) = (c.leader(), c.follower());
    let get = |n, p: &str, t| c.req(n, Method::GET, p, t);

    // --- public endpoints
    for n in &c.nodes {
        assert_eq!(send(get(n, "/healthz", None), &seen).await.status, 200);
        c.wait("readyz", || async {
            send(get(n, "/readyz", None), &seen).await.status == 200
        })
        .await;
    }
    let doc = send(get(leader, "/v1/openapi.json", None), &seen).await;
    assert_eq!(doc.json["openapi"], "3.0.3");
    assert!(doc.json["paths"]["/v1/watch"].is_object());

    // --- 401: no token, a wrong token, the cluster secret; and the peer port refuses client tokens
    let h0 = c.settled_hash().await;
    assert_error(
        &send(get(leader, "/v1/clusters", None), &seen).await,
        401,
        "Unauthorized",
        None,
    );
    assert_error(
        &send(get(leader, "/v1/clusters", Some("nope")), &seen).await,
        401,
        "Unauthorized",
        None,
    );
    assert_error(
        &send(get(leader, "/v1/clusters", Some(SECRET)), &seen).await,
        401,
        "Unauthorized",
        None,
    );
    let peer = c
        .http
        .get(format!("http://{}/raft/status", leader.addr))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(peer.status().as_u16(), 401);
    let peer_ok = c
        .http
        .get(format!("http://{}/raft/status", leader.addr))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(
        peer_ok.status().as_u16(),
        200,
        "the peer port accepts the cluster secret"
    );

    // --- register a cluster (operator) on a FOLLOWER: forwarded to the leader
    let dc1 = json!({"name": "dc1", "labels": {"region": "eu"}, "apiEndpoint": "https://10.0.0.1:6443",
                     "credentials": {"bearerToken": CRED}});
    let r = send(
        c.req(follower, Method::POST, "/v1/clusters", Some(OPERATOR))
            .json(&dc1),
        &seen,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["name"], "dc1");
    assert_eq!(r.json["apiEndpoint"], "https://10.0.0.1:6443");
    let dc1_rv = r.json["resourceVersion"].as_u64().unwrap();
    for name in ["dc2", "dc3"] {
        let body = json!({"name": name, "apiEndpoint": format!("https://{name}:6443"), "labels": {"region": name}});
        assert_eq!(
            send(
                c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
                    .json(&body),
                &seen
            )
            .await
            .status,
            201
        );
    }
    // Play the executors: one heartbeat makes the clusters Ready for scheduling.
    let beats = ["dc1", "dc2", "dc3"]
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
    // Readable on the other follower, linearizably, right away.
    let other = c
        .nodes
        .iter()
        .find(|n| n.id != leader.id && n.id != follower.id)
        .unwrap();
    let r = send(get(other, "/v1/clusters", Some(OPERATOR)), &seen).await;
    assert_eq!(r.json["items"].as_array().unwrap().len(), 3, "{}", r.text);
    let r = send(
        get(other, "/v1/clusters/dc1?stale=true", Some(OPERATOR)),
        &seen,
    )
    .await;
    assert!(r.status == 200 || r.status == 404);

    // --- 400s, each leaving the state unchanged
    let h1 = c.settled_hash().await;
    assert_ne!(h0, h1);
    let post = |n, t| c.req(n, Method::POST, "/v1/clusters", Some(t));
    let r = send(
        post(leader, ADMIN)
            .header("content-type", "application/json")
            .body("{\"name\": "),
        &seen,
    )
    .await;
    assert_error(&r, 400, "MalformedBody", None);
    let r = send(
        post(leader, ADMIN)
            .header("content-type", "application/yaml")
            .body("name: [unclosed"),
        &seen,
    )
    .await;
    assert_error(&r, 400, "MalformedBody", None);
    let r = send(
        post(leader, ADMIN).json(&json!({"kind": "Pod", "name": "x", "apiEndpoint": "https://x"})),
        &seen,
    )
    .await;
    assert_error(&r, 400, "UnknownKind", Some("kind"));
    let r = send(
        post(leader, ADMIN).json(&json!({"name": "Bad_Name", "apiEndpoint": "https://x"})),
        &seen,
    )
    .await;
    assert_error(&r, 400, "InvalidName", Some("name"));
    let r = send(
        c.req(leader, Method::GET, "/v1/clusters/Bad_Name", Some(ADMIN)),
        &seen,
    )
    .await;
    assert_error(&r, 400, "InvalidName", Some("name"));
    let r = send(post(leader, ADMIN).json(&json!({"name": "dc9"})), &seen).await;
    assert_error(&r, 400, "MissingField", Some("apiEndpoint"));
    let r = send(
        post(leader, ADMIN).json(&json!({"name": "dc9", "apiEndpoint": "https://x", "labels": 5})),
        &seen,
    )
    .await;
    assert_error(&r, 400, "InvalidField", Some("labels"));
    let r = send(
        post(leader, ADMIN).json(&json!({"name": "dc9", "apiEndpoint": "https://x", "bogus": 1})),
        &seen,
    )
    .await;
    assert_error(&r, 400, "InvalidField", Some("bogus"));
    let bad_obj = json!({"template": {"apiVersion": "v1", "metadata": {"name": "x"}}});
    let r = send(
        c.req(
            leader,
            Method::PUT,
            "/v1/namespaces/web/objects/x",
            Some(ADMIN),
        )
        .json(&bad_obj),
        &seen,
    )
    .await;
    assert_error(&r, 400, "InvalidField", Some("template.kind"));
    let missing = json!({"placement": {}});
    let r = send(
        c.req(
            leader,
            Method::PUT,
            "/v1/namespaces/web/objects/x",
            Some(ADMIN),
        )
        .json(&missing),
        &seen,
    )
    .await;
    assert_error(&r, 400, "MissingField", Some("template"));
    // 413: over the 2 MiB default.
    let big = format!(
        "{{\"name\":\"dc9\",\"apiEndpoint\":\"https://x\",\"labels\":{{\"a\":\"{}\"}}}}",
        "x".repeat(3 << 20)
    );
    // The server answers 413 from the Content-Length alone and closes the connection, so the
    // client may hit a broken pipe while still writing the body; retry until it reads the answer.
    let mut answered = None;
    for _ in 0..20 {
        let rb = post(leader, ADMIN)
            .header("content-type", "application/json")
            .body(big.clone());
        if let Ok(r) = rb.send().await {
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            answered = Some((status, text));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (status, text) = answered.expect("a 413 answer to an oversized body");
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("PayloadTooLarge"), "{text}");
    // 403: tenant members touch neither clusters nor other tenants' namespaces; operators write no objects.
    let r = send(
        post(leader, CAROL).json(&json!({"name": "dc9", "apiEndpoint": "https://x"})),
        &seen,
    )
    .await;
    assert_error(&r, 403, "Forbidden", None);
    assert_error(
        &send(get(leader, "/v1/clusters", Some(CAROL)), &seen).await,
        403,
        "Forbidden",
        None,
    );
    let obj = json!({"template": deployment("web", 3)});
    let r = send(
        c.req(
            leader,
            Method::PUT,
            "/v1/namespaces/red/objects/web",
            Some(CAROL),
        )
        .json(&obj),
        &seen,
    )
    .await;
    assert_error(&r, 403, "Forbidden", None);
    let r = send(
        c.req(
            leader,
            Method::PUT,
            "/v1/namespaces/blue/objects/web",
            Some(OPERATOR),
        )
        .json(&obj),
        &seen,
    )
    .await;
    assert_error(&r, 403, "Forbidden", None);
    // 404s
    assert_error(
        &send(get(leader, "/v1/clusters/nope", Some(ADMIN)), &seen).await,
        404,
        "NotFound",
        None,
    );
    assert_error(
        &send(
            c.req(leader, Method::DELETE, "/v1/clusters/nope", Some(ADMIN)),
            &seen,
        )
        .await,
        404,
        "NotFound",
        None,
    );
    assert_error(
        &send(
            c.req(
                leader,
                Method::POST,
                "/v1/clusters/nope/cordon",
                Some(ADMIN),
            ),
            &seen,
        )
        .await,
        404,
        "NotFound",
        None,
    );
    assert_error(
        &send(
            get(leader, "/v1/namespaces/web/objects/nope", Some(ADMIN)),
            &seen,
        )
        .await,
        404,
        "NotFound",
        None,
    );
    assert_error(
        &send(get(leader, "/v1/nothing-here", Some(ADMIN)), &seen).await,
        404,
        "NotFound",
        None,
    );
    // 409: create of an existing cluster; wrong expected versions in If-Match and in the body.
    let r = send(post(leader, ADMIN).json(&dc1), &seen).await;
    assert_error(&r, 409, "Conflict", None);
    let r = send(
        c.req(leader, Method::PUT, "/v1/clusters/dc1", Some(ADMIN))
            .header("If-Match", format!("\"{}\"", dc1_rv + 7))
            .json(&dc1),
        &seen,
    )
    .await;
    assert_error(&r, 409, "Conflict", None);
    let mut stale = dc1.clone();
    stale["metadata"] = json!({"resourceVersion": (dc1_rv + 1000).to_string()});
    let r = send(
        c.req(follower, Method::PUT, "/v1/clusters/dc1", Some(ADMIN))
            .json(&stale),
        &seen,
    )
    .await;
    assert_error(&r, 409, "Conflict", None);
    assert_eq!(
        c.settled_hash().await,
        h1,
        "refused requests changed the state"
    );

    // --- tenants, then a tenant member writes in its own namespace (YAML body)
    let tenant = json!({"namespaces": ["blue"], "members": ["carol"], "quota": {"cpuMillis": 100000, "memoryBytes": 0, "pods": 1000}});
    let r = send(
        c.req(leader, Method::PUT, "/v1/tenants/blue", Some(ADMIN))
            .json(&tenant),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["namespaces"], json!(["blue"]));
    let r = send(get(follower, "/v1/tenants/blue", Some(CAROL)), &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_error(
        &send(get(leader, "/v1/tenants/other", Some(CAROL)), &seen).await,
        403,
        "Forbidden",
        None,
    );
    let yaml = "template:\n  apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: web}\n  spec: {replicas: 4}\nplacement:\n  replicas: {mode: Divided}\n";
    let r = send(
        c.req(
            follower,
            Method::PUT,
            "/v1/namespaces/blue/objects/web",
            Some(CAROL),
        )
        .header("content-type", "application/yaml")
        .body(yaml),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let web_rv = r.json["resourceVersion"].as_u64().unwrap();
    let placed: u64 = r.json["status"]["placement"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(placed, 4, "{}", r.text);
    let r = send(
        get(leader, "/v1/namespaces/blue/objects/web", Some(CAROL)),
        &seen,
    )
    .await;
    assert_eq!(
        r.json["status"]["lastDecision"]["candidates"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "{}",
        r.text
    );
    let conds = r.json["status"]["conditions"].as_array().unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "Scheduled" && c["status"] == "True"),
        "{}",
        r.text
    );
    let r = send(get(leader, "/v1/objects", Some(CAROL)), &seen).await;
    assert_eq!(r.json["items"].as_array().unwrap().len(), 1);
    let r = send(
        get(leader, "/v1/namespaces/blue/objects", Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.json["items"][0]["name"], "web");

    // --- compare-and-swap: right version passes, the old one then fails
    let mut next = json!({"template": deployment("web", 6), "resourceVersion": web_rv});
    let r = send(
        c.req(
            leader,
            Method::PUT,
            "/v1/namespaces/blue/objects/web",
            Some(CAROL),
        )
        .json(&next),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let web_rv2 = r.json["resourceVersion"].as_u64().unwrap();
    assert!(web_rv2 > web_rv);
    let h2 = c.settled_hash().await;
    next["template"] = deployment("web", 7);
    let r = send(
        c.req(
            follower,
            Method::PUT,
            "/v1/namespaces/blue/objects/web",
            Some(CAROL),
        )
        .json(&next),
        &seen,
    )
    .await;
    assert_error(&r, 409, "Conflict", None);
    assert_eq!(c.settled_hash().await, h2);

    // --- idempotent retry: same key, first answer, nothing applied twice
    let put = |n, key: &str, body: &Value| {
        c.req(
            n,
            Method::PUT,
            "/v1/namespaces/blue/objects/api",
            Some(ADMIN),
        )
        .header("Idempotency-Key", key)
        .json(body)
    };
    let first = send(
        put(leader, "k-1", &json!({"template": deployment("api", 2)})),
        &seen,
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.text);
    let h3 = c.settled_hash().await;
    let again = send(
        put(follower, "k-1", &json!({"template": deployment("api", 2)})),
        &seen,
    )
    .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json["resourceVersion"], first.json["resourceVersion"]);
    assert_eq!(c.settled_hash().await, h3, "a retry was applied twice");

    // --- dry run writes nothing and explains
    let dry = json!({"namespace": "blue", "name": "batch", "template": deployment("batch", 3),
                     "placement": {"clusters": ["dc1", "dc2"]}});
    let r = send(
        c.req(follower, Method::POST, "/v1/schedule/dry-run", Some(CAROL))
            .json(&dry),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let d = &r.json["decision"];
    let placed: u64 = d["placement"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(placed, 3, "{}", r.text);
    assert!(d["placement"].get("dc3").is_none(), "{}", r.text);
    assert_eq!(d["candidates"], json!(["dc1", "dc2"]), "{}", r.text);
    assert_eq!(c.settled_hash().await, h3, "dry run changed the state");

    // --- watch: live events, resume from a version, 410 for trimmed history
    let now_rv = send(get(leader, "/v1/clusters", Some(ADMIN)), &seen)
        .await
        .json["resourceVersion"]
        .as_u64()
        .unwrap();
    let w = c
        .req(
            other,
            Method::GET,
            &format!("/v1/watch?resourceVersion={now_rv}"),
            Some(ADMIN),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(w.status().as_u16(), 200);
    let r = send(
        c.req(
            leader,
            Method::POST,
            "/v1/clusters/dc2/cordon",
            Some(OPERATOR),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["cordoned"], true);
    let events = read_watch(w, |ev| ev.iter().any(|e| e["name"] == "dc2")).await;
    let e = events.iter().find(|e| e["name"] == "dc2").unwrap();
    assert_eq!(e["type"], "MODIFIED");
    assert_eq!(e["kind"], "Cluster");
    assert_eq!(e["object"]["cordoned"], true);
    // Resume from before the cordon: replays it.
    let w = c
        .req(
            leader,
            Method::GET,
            &format!("/v1/watch?resourceVersion={now_rv}&kind=Cluster"),
            Some(ADMIN),
        )
        .send()
        .await
        .unwrap();
    let events = read_watch(w, |ev| ev.iter().any(|e| e["name"] == "dc2")).await;
    assert!(events
        .iter()
        .all(|e| e["kind"] == "Cluster" || e["type"] == "BOOKMARK"));
    // Tenant watchers see only their namespace, from a full list.
    let w = c
        .req(leader, Method::GET, "/v1/watch", Some(CAROL))
        .send()
        .await
        .unwrap();
    let events = read_watch(w, |ev| ev.iter().any(|e| e["type"] == "BOOKMARK")).await;
    assert!(events
        .iter()
        .any(|e| e["name"] == "web" && e["type"] == "ADDED"));
    assert!(events.iter().all(|e| e["kind"] != "Cluster"), "{events:?}");
    // Each cordon/uncordon changes dc3: 40 events overflow the 16 retained.
    for i in 0..40 {
        let action = if i % 2 == 0 { "cordon" } else { "uncordon" };
        let r = send(
            c.req(
                leader,
                Method::POST,
                &format!("/v1/clusters/dc3/{action}"),
                Some(OPERATOR),
            ),
            &seen,
        )
        .await;
        assert_eq!(r.status, 200);
    }
    let r = send(
        c.req(
            leader,
            Method::GET,
            "/v1/watch?resourceVersion=1",
            Some(ADMIN),
        ),
        &seen,
    )
    .await;
    assert_error(&r, 410, "Gone", None);

    // --- drain, uncordon, delete with If-Match, credentials kept across a PUT without them
    assert_eq!(
        send(
            c.req(
                leader,
                Method::POST,
                "/v1/clusters/dc3/drain",
                Some(OPERATOR)
            ),
            &seen
        )
        .await
        .json["drained"],
        true
    );
    assert_eq!(
        send(
            c.req(
                leader,
                Method::POST,
                "/v1/clusters/dc3/uncordon",
                Some(OPERATOR)
            ),
            &seen
        )
        .await
        .json["drained"],
        false
    );
    let r = send(
        c.req(leader, Method::PUT, "/v1/clusters/dc1", Some(OPERATOR))
            .json(&json!({"apiEndpoint": "https://10.0.0.2:6443"})),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let kept = leader.node.read_stale(|s| {
        s.cluster("dc1")
            .map(|c| format!("{:?}", c.spec.credentials))
    });
    assert_eq!(kept.as_deref(), Some("BearerToken(<redacted>)"));
    let rv = send(
        get(leader, "/v1/namespaces/blue/objects/api", Some(ADMIN)),
        &seen,
    )
    .await
    .json["resourceVersion"]
        .as_u64()
        .unwrap();
    let del = |n, v: u64| {
        c.req(
            n,
            Method::DELETE,
            "/v1/namespaces/blue/objects/api",
            Some(ADMIN),
        )
        .header("If-Match", format!("\"{v}\""))
    };
    assert_error(
        &send(del(leader, rv + 1), &seen).await,
        409,
        "Conflict",
        None,
    );
    assert_eq!(send(del(follower, rv), &seen).await.status, 200);
    assert_error(
        &send(
            get(other, "/v1/namespaces/blue/objects/api", Some(ADMIN)),
            &seen,
        )
        .await,
        404,
        "NotFound",
        None,
    );

    // --- metrics count requests by route and code and expose raft progress
    let m = send(get(leader, "/metrics", None), &seen).await.text;
    assert!(
        m.contains(
            "fedraft_http_requests_total{route=\"/v1/clusters\",method=\"POST\",code=\"201\"}"
        ),
        "{m}"
    );
    assert!(
        m.contains("fedraft_http_request_duration_seconds_bucket{route=\"/v1/clusters\""),
        "{m}"
    );
    assert!(m.contains("fedraft_raft_commit_index"), "{m}");
    assert!(m.contains("fedraft_raft_apply_lag"), "{m}");
    // Memory held outside the state: the log's cache of the newest entries and RocksDB's.
    let cached = m.lines().find_map(|l| {
        l.strip_prefix("fedraft_raft_log_cache_bytes ")?
            .parse::<u64>()
            .ok()
    });
    assert!(cached.is_some_and(|bytes| bytes > 0), "{m}");
    assert!(m.contains("fedraft_store_memtable_bytes"), "{m}");

    // --- /v1/system/state: every node, once at the same state index, reports the same hash
    c.wait("equal state hashes", || async {
        let mut states = Vec::new();
        for n in &c.nodes {
            let r = send(get(n, "/v1/system/state", None), &seen).await;
            assert_eq!(r.status, 200, "{}", r.text);
            assert!(r.json["logTimeMs"].as_u64().unwrap() > 0);
            states.push((r.json["stateIndex"].as_u64(), r.json["stateHash"].clone()));
        }
        states.windows(2).all(|w| w[0] == w[1])
    })
    .await;

    // --- the cluster's credentials appear in no response and no log line
    let bodies = seen.lock().unwrap().join("\n");
    assert!(bodies.contains("dc1"));
    assert!(!bodies.contains(CRED), "credentials leaked into a response");
    let log_text = logs.text();
    assert!(
        log_text.contains("proposal applied"),
        "the log capture works"
    );
    assert!(!log_text.contains(CRED), "credentials leaked into the logs");
    assert!(!log_text.contains(ADMIN), "a token leaked into the logs");
    for n in c.nodes {
        n.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_quorum_writes_get_503_and_change_nothing() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let body = json!({"name": "dc1", "apiEndpoint": "https://x:6443"});
    let r = send(
        c.req(c.follower(), Method::POST, "/v1/clusters", Some(ADMIN))
            .json(&body),
        &seen,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    c.settled_hash().await;
    let TestCluster {
        root: _root,
        mut nodes,
        http,
    } = c;
    let survivor = nodes.remove(0);
    for n in nodes {
        n.stop().await;
    }
    let before = survivor.hash();
    let body = json!({"name": "dc2", "apiEndpoint": "https://y:6443"});
    let r = send(
        http.post(format!("{}/v1/clusters/dc1/cordon", survivor.api_url()))
            .bearer_auth(ADMIN),
        &seen,
    )
    .await;
    assert_error(&r, 503, "Unavailable", None);
    assert_eq!(
        r.headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let r = send(
        http.put(format!("{}/v1/clusters/dc2", survivor.api_url()))
            .bearer_auth(ADMIN)
            .json(&body),
        &seen,
    )
    .await;
    assert_error(&r, 503, "Unavailable", None);
    assert_eq!(survivor.hash(), before);
    // Stale reads still answer from local state.
    let r = send(
        http.get(format!("{}/v1/clusters?stale=true", survivor.api_url()))
            .bearer_auth(ADMIN),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["items"][0]["name"], "dc1");
    survivor.stop().await;
}
