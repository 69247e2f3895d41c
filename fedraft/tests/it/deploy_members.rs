//! The "replace a failed node" runbook on real processes: node 3 dies for good, a new node 4
//! (empty `[peers]`: it joins, it does not initialise) is added as a learner through the
//! leader's admin API (`fedraft members add`), the voters become {1, 2, 4}
//! (`fedraft members voters`), and node 4 serves every earlier write and every later one.
//! Membership changes are admin-only and refused by followers (they name the leader).

use std::time::{Duration, Instant};

use crate::deploy_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_a_failed_node_with_a_new_id() {
    let root = tempfile::tempdir().unwrap();
    let mut c = Cluster::layout(
        root.path(),
        "c",
        &Layout {
            nodes: 3,
            joiners: 1,
            ..layout()
        },
    );
    for i in 0..3 {
        c.start(i);
    }
    for i in 0..3 {
        c.wait_ready(i, Duration::from_secs(60)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..5 {
        put_object_retrying(&c, i % 3, "apps", &format!("before-{i}"), deadline)
            .await
            .unwrap();
    }

    c.kill(2);
    c.start(3);
    let leader = loop {
        match c.leader().await {
            Some(l) if l != 2 => break l,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let follower = if leader == 0 { 1 } else { 0 };
    let peer4 = c.nodes[3].peer.clone();

    let r = c
        .http
        .get(c.url(leader, "/v1/admin/members"))
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let (code, _, err) = c.cli(
        follower,
        &["members", "add", "--id", "4", "--peer-addr", &peer4],
        &[],
    );
    assert_eq!(code, 1, "a follower must refuse: {err}");
    assert!(err.contains("not the leader"), "{err}");

    let (code, out, err) = c.cli(
        leader,
        &["members", "add", "--id", "4", "--peer-addr", &peer4],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"learners\""), "{out}");
    let (code, out, err) = c.cli(leader, &["members", "voters", "1,2,4"], &[]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["voters"], serde_json::json!([1, 2, 4]), "{out}");

    c.wait_ready(3, Duration::from_secs(60)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    put_object_retrying(&c, 3, "apps", "after", deadline)
        .await
        .unwrap();
    let list = c.get(3, "/v1/namespaces/apps/objects").await.unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    for want in ["before-0", "before-4", "after"] {
        assert!(names.contains(&want), "{want} missing on node 4: {names:?}");
    }
    let st = c.get(3, "/v1/status").await.unwrap();
    assert_eq!(st["voters"], serde_json::json!([1, 2, 4]));
}
