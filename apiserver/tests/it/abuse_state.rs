//! `GET /v1/system/state` is unauthenticated: repeated calls between applies are served from
//! the hash cached for the applied index (no state encoding per call) and stay correct: the
//! hash is the node's own hash at the index reported, and it moves with the next apply.

use std::sync::Mutex;
use std::time::Instant;

use crate::common::*;
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::json;

const CALLS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_state_calls_are_served_from_the_cached_hash_and_stay_correct() {
    let c = start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    let r = send(
        c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
            .json(&json!({"name": "dc1", "apiEndpoint": "https://dc1:6443"})),
        &seen,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let before = c.settled_hash().await;

    // No ticks in this cluster: nothing is applied between these calls.
    let node = c.follower();
    let start = Instant::now();
    let mut answers = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let r = send(c.req(node, Method::GET, "/v1/system/state", None), &seen).await;
        assert_eq!(r.status, 200, "{}", r.text);
        answers.push((r.json["stateIndex"].as_u64(), r.json["stateHash"].clone()));
    }
    println!("{CALLS} calls in {:?}", start.elapsed());
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
    let (index, hash) = &answers[0];
    assert_eq!(hash.as_str(), Some(before.as_str()));
    assert_eq!(*index, Some(node.node.read_stale(|s| s.applied_index())));

    // The next apply moves the hash: the cache is keyed by index, never stale.
    let r = send(
        c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
            .json(&json!({"name": "dc2", "apiEndpoint": "https://dc2:6443"})),
        &seen,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let after = c.settled_hash().await;
    assert_ne!(after, before);
    let r = send(c.req(node, Method::GET, "/v1/system/state", None), &seen).await;
    assert_eq!(r.json["stateHash"].as_str(), Some(after.as_str()));
    assert!(r.json["stateIndex"].as_u64() > *index);
    assert_eq!(r.json["stateHash"].as_str(), Some(node.hash().as_str()));

    for n in c.nodes {
        n.stop().await;
    }
}
