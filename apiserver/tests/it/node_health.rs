//! `/v1/status/node` and `/v1/status/nodes` on a real three-node cluster: every member answers
//! for itself over the peer transport, the state hashes are compared at one index (members ahead
//! replay their audit archive to it), disk figures are real, tenants are refused, and a stopped
//! member shows as unreachable without holding up the answer.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::{send, ADMIN, CAROL, OPERATOR};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_member_answers_for_itself_and_the_hashes_agree_at_one_index() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let register = |name: String| {
        c.req(c.leader(), Method::POST, "/v1/clusters", Some(ADMIN))
            .json(&json!({"name": name, "apiEndpoint": "https://x:6443"}))
    };
    let r = send(register("dc0".into()), &seen).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let first_hash = c.settled_hash().await;
    let first_index = c.leader().node.read_stale(|s| s.applied_index());
    for i in 1..5 {
        let r = send(register(format!("dc{i}")), &seen).await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    c.settled_hash().await;

    // One node about itself, with the hash at an older index replayed from its archive.
    let r = send(
        c.req(
            c.follower(),
            Method::GET,
            &format!("/v1/status/node?at={first_index}"),
            Some(OPERATOR),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["hashAt"]["index"], first_index);
    assert_eq!(r.json["hashAt"]["stateHash"], first_hash.as_str());
    assert!(r.json["stateIndex"].as_u64().unwrap() > first_index);
    let disk = &r.json["disk"];
    assert!(disk["walBytes"].as_u64().unwrap() > 0, "{disk}");
    assert!(disk["totalBytes"].as_u64().unwrap() >= disk["walBytes"].as_u64().unwrap());
    for k in [
        "logBytes",
        "archiveBytes",
        "snapshotBytes",
        "freeBytes",
        "capacityBytes",
    ] {
        assert!(disk[k].is_u64(), "{k} in {disk}");
    }

    // All members, from a follower.
    let r = send(
        c.req(
            c.follower(),
            Method::GET,
            "/v1/status/nodes",
            Some(OPERATOR),
        ),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let members = r.json["members"].as_array().unwrap();
    assert_eq!(members.len(), 3, "{}", r.text);
    for m in members {
        assert_eq!(m["reachable"], true, "{m}");
        assert!(m["peerAddr"].is_string(), "{m}");
        assert!(m["disk"]["walBytes"].as_u64().unwrap() > 0, "{m}");
    }
    assert_eq!(
        members.iter().filter(|m| m["isLeader"] == true).count(),
        1,
        "{}",
        r.text
    );
    let compared = &r.json["compared"];
    assert_eq!(compared["agree"], true, "{compared}");
    assert_eq!(
        compared["hashes"].as_object().unwrap().len(),
        3,
        "{compared}"
    );
    assert_eq!(compared["unknown"], json!({}), "{compared}");

    // Tenants may not see fedraft's own health.
    for path in ["/v1/status/node", "/v1/status/nodes"] {
        let r = send(c.req(c.leader(), Method::GET, path, Some(CAROL)), &seen).await;
        assert_eq!(r.status, 403, "{path}: {}", r.text);
        let r = send(c.req(c.leader(), Method::GET, path, None), &seen).await;
        assert_eq!(r.status, 401, "{path}: {}", r.text);
    }

    // A stopped member is reported, not waited for.
    let crate::common::TestCluster {
        root: _root,
        mut nodes,
        http,
    } = c;
    let leader_id = nodes[0].node.status().leader_id.unwrap();
    let at = nodes.iter().position(|n| n.id != leader_id).unwrap();
    let gone = nodes.remove(at);
    let gone_id = gone.id;
    gone.stop().await;
    let asked = nodes.iter().find(|n| n.id == leader_id).unwrap();
    let started = Instant::now();
    let r = send(
        http.get(format!("{}/v1/status/nodes", asked.api_url()))
            .bearer_auth(ADMIN),
        &seen,
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let members = r.json["members"].as_array().unwrap();
    let down = members.iter().find(|m| m["nodeId"] == gone_id).unwrap();
    assert_eq!(down["reachable"], false, "{down}");
    assert!(
        down["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{down}"
    );
    assert_eq!(r.json["compared"]["agree"], true, "{}", r.text);
    assert_eq!(
        r.json["compared"]["hashes"].as_object().unwrap().len(),
        2,
        "{}",
        r.text
    );
    for n in nodes {
        n.stop().await;
    }
}
