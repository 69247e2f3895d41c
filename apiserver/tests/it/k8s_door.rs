//! The Kubernetes-compatible door over HTTP on a real three-node group: Status refusals worded
//! as kube-apiserver words them, paging that walks every item once, selectors, create/replace
//! preconditions, dry run, tenant isolation, one model with the native API, and watch with
//! resume and 410.

use std::sync::Mutex;

use crate::common::{read_watch, send, Resp, ADMIN, CAROL};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": name}})
}

fn status(r: &Resp, code: u16, reason: &str) {
    assert_eq!(r.status, code, "{}", r.text);
    assert_eq!(r.json["kind"], "Status", "{}", r.text);
    assert_eq!(r.json["reason"], reason, "{}", r.text);
}

fn names(r: &Resp) -> Vec<String> {
    r.json["items"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn templates_through_the_door() {
    let cfg = ApiConfig {
        watch_history_events: 16,
        ..ApiConfig::default()
    };
    let c = crate::common::start(cfg).await;
    let seen = Mutex::new(Vec::new());
    let (leader, follower) = (c.leader(), c.follower());
    let call = |node, m: Method, path: &str, token: &'static str, body: Option<Value>| {
        let mut rb = c.req(node, m, path, Some(token));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        send(rb, &seen)
    };
    let r = call(
        leader,
        Method::PUT,
        "/v1/tenants/blue",
        ADMIN,
        Some(json!({"namespaces": ["blue"], "members": ["carol"]})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);

    // Create through a follower (forwarded), five of them.
    let cms = "/api/v1/namespaces/blue/configmaps";
    for i in 0..5 {
        let labels = if i % 2 == 0 {
            json!({"even": "yes"})
        } else {
            json!({})
        };
        let r = call(
            follower,
            Method::POST,
            cms,
            ADMIN,
            Some(cm(&format!("c{i}"), labels)),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.json["metadata"]["namespace"], "blue");
        assert!(r.json["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36));
    }
    // One model: the native API lists the same templates as federated objects.
    let native = call(
        leader,
        Method::GET,
        "/v1/namespaces/blue/objects",
        ADMIN,
        None,
    )
    .await;
    let native: Vec<&str> = native.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    assert_eq!(
        native,
        [
            "configmap:c0",
            "configmap:c1",
            "configmap:c2",
            "configmap:c3",
            "configmap:c4"
        ]
    );

    // Refusals as kube-apiserver words them.
    let r = call(leader, Method::GET, &format!("{cms}/nope"), ADMIN, None).await;
    status(&r, 404, "NotFound");
    assert_eq!(r.json["message"], "configmaps \"nope\" not found");
    status(
        &call(leader, Method::POST, cms, ADMIN, Some(cm("c0", json!({})))).await,
        409,
        "AlreadyExists",
    );
    let r = call(
        leader,
        Method::POST,
        cms,
        ADMIN,
        Some(cm("Bad_Name", json!({}))),
    )
    .await;
    status(&r, 422, "Invalid");
    assert_eq!(
        r.json["details"]["causes"][0]["field"], "metadata.name",
        "{}",
        r.text
    );
    let r = call(
        leader,
        Method::POST,
        cms,
        ADMIN,
        Some(json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}})),
    )
    .await;
    status(&r, 400, "BadRequest");
    let r = call(
        leader,
        Method::GET,
        "/api/v1/namespaces/blue/widgets",
        ADMIN,
        None,
    )
    .await;
    status(&r, 404, "NotFound");
    let r = send(c.req(leader, Method::GET, cms, None), &seen).await;
    status(&r, 401, "Unauthorized");

    // Paging: limit 2 walks every item once, in order.
    let mut walked = Vec::new();
    let mut next = format!("{cms}?limit=2");
    loop {
        let r = call(leader, Method::GET, &next, ADMIN, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let page = names(&r);
        assert!(page.len() <= 2);
        walked.extend(page);
        match r.json["metadata"]["continue"].as_str() {
            Some(tok) => next = format!("{cms}?limit=2&continue={tok}"),
            None => break,
        }
    }
    assert_eq!(walked, ["c0", "c1", "c2", "c3", "c4"]);
    let r = call(
        leader,
        Method::GET,
        &format!("{cms}?labelSelector=even%3Dyes"),
        ADMIN,
        None,
    )
    .await;
    assert_eq!(names(&r), ["c0", "c2", "c4"]);
    let r = call(
        leader,
        Method::GET,
        "/api/v1/configmaps?fieldSelector=metadata.name%3Dc3",
        ADMIN,
        None,
    )
    .await;
    assert_eq!(names(&r), ["c3"]);
    let r = call(
        leader,
        Method::GET,
        "/api/v1/configmaps?fieldSelector=data.k%3Dc3",
        ADMIN,
        None,
    )
    .await;
    status(&r, 400, "BadRequest");

    // Replace with a stale resourceVersion: 409; with the current one: a new version.
    let cur = call(leader, Method::GET, &format!("{cms}/c1"), ADMIN, None).await;
    let rv = cur.json["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stale = cm("c1", json!({}));
    stale["metadata"]["resourceVersion"] = json!("1");
    status(
        &call(
            leader,
            Method::PUT,
            &format!("{cms}/c1"),
            ADMIN,
            Some(stale),
        )
        .await,
        409,
        "Conflict",
    );
    let mut fresh = cm("c1", json!({"v": "2"}));
    fresh["metadata"]["resourceVersion"] = json!(rv);
    let r = call(
        leader,
        Method::PUT,
        &format!("{cms}/c1"),
        ADMIN,
        Some(fresh),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_ne!(r.json["metadata"]["resourceVersion"], json!(rv));
    assert_eq!(r.json["metadata"]["labels"]["v"], "2");

    // Server-side apply creates, then updates.
    for (expect, value) in [(201, "one"), (200, "two")] {
        let apply = c
            .req(
                leader,
                Method::PATCH,
                &format!("{cms}/applied?fieldManager=t"),
                Some(ADMIN),
            )
            .header("content-type", "application/apply-patch+yaml")
            .body(format!(
                "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{{\"k\":\"{value}\"}}}}"
            ));
        let r = send(apply, &seen).await;
        assert_eq!(r.status, expect, "{}", r.text);
        assert_eq!(r.json["data"]["k"], value);
        assert_eq!(r.json["metadata"]["name"], "applied");
    }

    // Dry run: answered, nothing written.
    let r = call(
        leader,
        Method::POST,
        &format!("{cms}?dryRun=All"),
        ADMIN,
        Some(cm("dry", json!({}))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    status(
        &call(leader, Method::GET, &format!("{cms}/dry"), ADMIN, None).await,
        404,
        "NotFound",
    );

    // A tenant member: its namespaces only, reads and writes.
    status(
        &call(
            leader,
            Method::GET,
            "/api/v1/namespaces/red/configmaps",
            CAROL,
            None,
        )
        .await,
        403,
        "Forbidden",
    );
    status(
        &call(
            leader,
            Method::POST,
            "/api/v1/namespaces/red/configmaps",
            CAROL,
            Some(cm("x", json!({}))),
        )
        .await,
        403,
        "Forbidden",
    );
    let r = call(
        leader,
        Method::POST,
        cms,
        CAROL,
        Some(cm("carols", json!({}))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = call(
        leader,
        Method::GET,
        "/apis/fedraft.io/v1alpha1/clusters",
        CAROL,
        None,
    )
    .await;
    status(&r, 403, "Forbidden");

    // A template is one object with the native API: every read route reaches it by its stored
    // name, and a native write to it is refused naming the field.
    let native = "/v1/namespaces/blue/objects/configmap:carols";
    let r = call(leader, Method::GET, native, CAROL, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["name"], "configmap:carols", "{}", r.text);
    assert_eq!(r.json["template"]["data"]["k"], "carols", "{}", r.text);
    for sub in ["/rendered", "/rollout"] {
        let r = call(leader, Method::GET, &format!("{native}{sub}"), CAROL, None).await;
        assert_eq!(r.status, 200, "{sub}: {}", r.text);
    }
    let r = call(
        leader,
        Method::GET,
        "/v1/audit/explain/blue/configmap:carols",
        CAROL,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(leader, Method::DELETE, native, CAROL, None).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.json["error"]["field"], "name", "{}", r.text);
    let r = call(
        leader,
        Method::GET,
        "/v1/namespaces/blue/objects/bad:Name",
        CAROL,
        None,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let r = call(leader, Method::GET, &format!("{cms}/carols"), CAROL, None).await;
    assert_eq!(
        r.status, 200,
        "the refused native delete changed nothing: {}",
        r.text
    );

    // Watch: from a list's version, the next change; from a version long gone, 410.
    let list = call(leader, Method::GET, cms, ADMIN, None).await;
    let from = list.json["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let watch = c
        .req(
            leader,
            Method::GET,
            &format!("{cms}?watch=1&resourceVersion={from}"),
            Some(ADMIN),
        )
        .send()
        .await
        .unwrap();
    let patch = c
        .req(leader, Method::PATCH, &format!("{cms}/c2"), Some(ADMIN))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"data":{"k":"patched"}}"#);
    assert_eq!(send(patch, &seen).await.status, 200);
    let events = read_watch(watch, |e| !e.is_empty()).await;
    assert_eq!(events[0]["type"], "MODIFIED", "{events:?}");
    assert_eq!(events[0]["object"]["data"]["k"], "patched");
    // More than the ring holds, then a resume from the start of history.
    for i in 0..20 {
        let r = call(
            leader,
            Method::POST,
            cms,
            ADMIN,
            Some(cm(&format!("f{i}"), json!({}))),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let watch = c
        .req(
            leader,
            Method::GET,
            &format!("{cms}?watch=1&resourceVersion=2"),
            Some(ADMIN),
        )
        .send()
        .await
        .unwrap();
    let events = read_watch(watch, |e| !e.is_empty()).await;
    assert_eq!(events[0]["type"], "ERROR", "{events:?}");
    assert_eq!(events[0]["object"]["code"], 410);

    // A watch-list, as client-go's informers ask: every current object, the bookmark that
    // ends them, then the changes after it.
    let list = format!(
        "{cms}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    );
    let watch = c
        .req(leader, Method::GET, &list, Some(ADMIN))
        .send()
        .await
        .unwrap();
    let events = read_watch(watch, |e| e.iter().any(|e| e["type"] == "BOOKMARK")).await;
    let (end, added) = events.split_last().unwrap();
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
        "{end}"
    );
    let listed = call(leader, Method::GET, cms, ADMIN, None).await;
    let items = listed.json["items"].as_array().unwrap().len();
    assert_eq!(added.len(), items);
    assert!(added.iter().all(|e| e["type"] == "ADDED"), "{added:?}");
    // Its options must come together, as kube-apiserver requires.
    for (query, field) in [
        ("sendInitialEvents=true", "resourceVersionMatch"),
        (
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "allowWatchBookmarks",
        ),
        ("resourceVersionMatch=NotOlderThan", "resourceVersionMatch"),
    ] {
        let path = format!("{cms}?watch=1&{query}");
        let r = call(leader, Method::GET, &path, ADMIN, None).await;
        assert_eq!(r.status, 400, "{query}: {}", r.text);
        assert!(r.text.contains(field), "{query}: {}", r.text);
    }

    // Delete: gone from both doors. A watch selecting it by label sees the DELETED, with the
    // object as it last was (its labels and data) at the delete's version.
    let list = call(leader, Method::GET, cms, ADMIN, None).await;
    let from = list.json["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let selected = format!("{cms}?watch=1&labelSelector=even%3Dyes&resourceVersion={from}");
    let watch = c
        .req(leader, Method::GET, &selected, Some(ADMIN))
        .send()
        .await
        .unwrap();
    let r = call(leader, Method::DELETE, &format!("{cms}/c0"), ADMIN, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let events = read_watch(watch, |e| !e.is_empty()).await;
    assert_eq!(events[0]["type"], "DELETED", "{events:?}");
    let gone = &events[0]["object"];
    assert_eq!(gone["metadata"]["name"], "c0", "{gone}");
    assert_eq!(gone["metadata"]["labels"]["even"], "yes", "{gone}");
    assert_eq!(gone["data"]["k"], "c0", "{gone}");
    let rv: u64 = gone["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(rv > from.parse::<u64>().unwrap(), "{gone}");
    status(
        &call(leader, Method::GET, &format!("{cms}/c0"), ADMIN, None).await,
        404,
        "NotFound",
    );
    let native = call(
        leader,
        Method::GET,
        "/v1/namespaces/blue/objects",
        ADMIN,
        None,
    )
    .await;
    assert!(!native.text.contains("configmap:c0\""), "{}", native.text);
    status(
        &call(leader, Method::DELETE, &format!("{cms}/c0"), ADMIN, None).await,
        404,
        "NotFound",
    );
}
