//! Watch history keeps resources as they were and renders them only when a watcher asks: a watcher
//! that connects after the writes still gets every retained event from its resourceVersion, in
//! order, each object consistent with its own version, on the leader and on a follower.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::common::{read_watch, send, ADMIN};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};

fn object(name: &str, replicas: u32) -> Value {
    json!({"template": {"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name}, "spec": {"replicas": replicas}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_watcher_replays_retained_history_from_its_version() {
    let c = crate::common::start(ApiConfig {
        watch_history_events: 12,
        bookmark_interval_ms: 100,
        ..ApiConfig::default()
    })
    .await;
    let seen = Mutex::new(Vec::new());
    let (leader, follower) = (c.leader(), c.follower());
    let path = |n: &str| format!("/v1/namespaces/team/objects/{n}");

    // A first write, then the version to resume from; nobody watches while the writes happen.
    let r = send(
        c.req(leader, Method::PUT, &path("a"), Some(ADMIN))
            .json(&object("a", 1)),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let from = r.json["resourceVersion"].as_u64().unwrap();

    // (name, replicas written; None = deleted), alternating the node that takes the write.
    let writes: [(&str, Option<u32>); 6] = [
        ("a", Some(2)),
        ("b", Some(1)),
        ("a", Some(3)),
        ("a", None),
        ("b", Some(5)),
        ("a", Some(7)),
    ];
    // What each object looked like at each of its versions: name -> version -> replicas.
    let mut at_version: BTreeMap<String, BTreeMap<u64, u32>> = BTreeMap::new();
    let mut expected = Vec::new();
    let mut exists = BTreeMap::from([("a", true)]);
    for (i, (name, replicas)) in writes.iter().enumerate() {
        let node = if i % 2 == 0 { leader } else { follower };
        let r = match replicas {
            Some(n) => c
                .req(node, Method::PUT, &path(name), Some(ADMIN))
                .json(&object(name, *n)),
            None => c.req(node, Method::DELETE, &path(name), Some(ADMIN)),
        };
        let r = send(r, &seen).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let rv = r.json["resourceVersion"].as_u64().unwrap();
        let was = exists.insert(*name, replicas.is_some()).unwrap_or(false);
        let kind = match (was, replicas) {
            (_, None) => "DELETED",
            (true, Some(_)) => "MODIFIED",
            (false, Some(_)) => "ADDED",
        };
        if let Some(n) = replicas {
            at_version
                .entry(name.to_string())
                .or_default()
                .insert(rv, *n);
        }
        expected.push((kind, name.to_string(), rv));
    }
    let last_rv = expected.last().unwrap().2;
    c.settled_hash().await;

    for node in [leader, follower] {
        let w = c
            .req(
                node,
                Method::GET,
                &format!("/v1/watch?resourceVersion={from}"),
                Some(ADMIN),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(w.status().as_u16(), 200);
        let events = read_watch(w, |ev| {
            ev.iter()
                .any(|e| e["resourceVersion"].as_u64() == Some(last_rv))
        })
        .await;
        let got: Vec<(String, String, u64)> = events
            .iter()
            .filter(|e| e["type"] != "BOOKMARK")
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_string(),
                    e["name"].as_str().unwrap().to_string(),
                    e["resourceVersion"].as_u64().unwrap(),
                )
            })
            .collect();
        let want: Vec<(String, String, u64)> = expected
            .iter()
            .map(|(k, n, rv)| (k.to_string(), n.clone(), *rv))
            .collect();
        assert_eq!(got, want, "node {}: {events:?}", node.id);
        for e in events.iter().filter(|e| e["type"] != "BOOKMARK") {
            let rv = e["resourceVersion"].as_u64().unwrap();
            if e["type"] == "DELETED" {
                assert!(e.get("object").is_none(), "{e}");
                continue;
            }
            // Never older than the event; and exactly the object written at its own version.
            let o = &e["object"];
            let ov = o["resourceVersion"].as_u64().unwrap();
            assert!(ov >= rv, "object {ov} older than its event {rv}: {e}");
            let name = e["name"].as_str().unwrap();
            assert_eq!(
                o["template"]["spec"]["replicas"].as_u64(),
                at_version[name].get(&ov).map(|n| u64::from(*n)),
                "node {}: {e}",
                node.id
            );
            assert_eq!(o["namespace"], "team");
            assert_eq!(o["kind"], "FederatedObject");
        }
    }

    // Twelve retained events: more writes push `from` out of the history, and resuming there is
    // 410 Gone while a recent version still resumes.
    for i in 0..14u32 {
        let r = send(
            c.req(leader, Method::PUT, &path("b"), Some(ADMIN))
                .json(&object("b", 10 + i)),
            &seen,
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let r = send(
        c.req(
            follower,
            Method::GET,
            &format!("/v1/watch?resourceVersion={from}"),
            Some(ADMIN),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 410, "{}", r.text);
    assert_eq!(r.json["error"]["code"], "Gone", "{}", r.text);
    let now = send(c.req(leader, Method::GET, &path("b"), Some(ADMIN)), &seen).await;
    let now_rv = now.json["resourceVersion"].as_u64().unwrap();
    let w = c
        .req(
            leader,
            Method::GET,
            &format!("/v1/watch?resourceVersion={}", now_rv - 1),
            Some(ADMIN),
        )
        .send()
        .await
        .unwrap();
    let events = read_watch(w, |ev| {
        ev.iter()
            .any(|e| e["resourceVersion"].as_u64() == Some(now_rv))
    })
    .await;
    let first = &events[0];
    assert_eq!(first["type"], "MODIFIED", "{events:?}");
    assert_eq!(first["resourceVersion"].as_u64(), Some(now_rv));
    assert_eq!(first["object"]["template"]["spec"]["replicas"], 23);
    for n in c.nodes {
        n.stop().await;
    }
}
