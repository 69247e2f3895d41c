//! End to end: a link cut between one fedraft node and one member cluster moves nothing. The
//! cluster's owner alone loses it (the simulator hangs every request naming that node in
//! `x-fedraft-node`, the header each node's member clients send), while the other nodes'
//! probers still reach it. Past the failure threshold the cluster stays Ready, its condition
//! names the broken path (`broken link: nodeX (...) -> dc1 unreachable`), and no replica moves;
//! restored, the condition clears.
//!
//! Must not: cut more than the one path (that is a dark cluster, `e2e_failover.rs`).

use std::time::{Duration, Instant};

use fedraft_executors::client::NODE_HEADER;
use fedraft_kubesim::faults::PEER_HEADER;
use serde_json::Value;

use crate::support::*;

const FAILURE_S: u64 = 4;
const GRACE_S: u64 = 2;
const WEIGHTS: [(&str, u64); 3] = [("dc1", 1), ("dc2", 1), ("dc3", 1)];

async fn condition(fed: &Fed, cluster: &str) -> (String, String) {
    let v = fed.get(&format!("/v1/clusters/{cluster}")).await;
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("/status/health"), s("/status/condition"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_between_one_node_and_one_cluster_moves_nothing() {
    assert_eq!(
        NODE_HEADER, PEER_HEADER,
        "the simulator reads the header fedraft sends"
    );
    let fed = Fed::start().await;
    fed.register_all(FAILURE_S, 1).await;
    fed.put(
        "shop",
        "web",
        divided("web", 6, "nginx:1", &WEIGHTS, GRACE_S, None),
    )
    .await;
    for c in CLUSTERS {
        fed.wait_deployment(c, "shop", "web", 2, "nginx:1").await;
    }
    let before = fed.placement("shop", "web").await;

    // The owner of dc1, once the ownership book formed.
    let owner = eventually(LIMIT, "dc1 owned", || async {
        let v = fed.get("/v1/clusters/dc1").await;
        v.pointer("/owner/node")?.as_str().map(str::to_string)
    })
    .await;
    // Every node's prober has looked at dc1 (they run every 10 s): without other vantage
    // points, one that cannot reach a cluster is all fedraft knows.
    eventually(LIMIT, "dc1 reachable from every node", || async {
        let v = fed.get("/v1/clusters/dc1").await;
        let views = v.pointer("/status/reachability")?.as_array()?.clone();
        let all = views.len() == 3 && views.iter().all(|r| r["reachable"] == Value::Bool(true));
        all.then_some(())
    })
    .await;
    fed.sim("dc1").admin().cut_peer(&owner);
    let cut_at = Instant::now();

    // The broken path shows, held Ready, once the owner's deadline passed: "broken link:
    // nodeX (timeout since T ms) -> dc1 unreachable; nodeY, nodeZ reach it (...held Ready)".
    let seen = std::sync::Mutex::new(String::new());
    let cond = eventually(LIMIT, "dc1 held on a broken link", || async {
        let (health, cond) = condition(&fed, "dc1").await;
        let line = format!("{health}: {cond}");
        let mut last = seen.lock().unwrap_or_else(|e| e.into_inner());
        if *last != line {
            eprintln!("dc1 {line}");
            *last = line;
        }
        let path = cond.starts_with(&format!("broken link: {owner} ("))
            && cond.contains("-> dc1 unreachable")
            && cond.contains("held Ready");
        (health == "Ready" && path).then_some(cond)
    })
    .await;
    eprintln!("after {:?}: dc1 {cond}", cut_at.elapsed());

    // Held for well past the failure threshold and the grace period: still Ready, same owner,
    // nothing re-placed, every member holds what it held.
    let hold = Duration::from_secs(FAILURE_S + GRACE_S + 4);
    while cut_at.elapsed() < hold {
        let (health, cond) = condition(&fed, "dc1").await;
        assert_eq!(health, "Ready", "dc1 during the cut: {cond}");
        assert_eq!(
            fed.placement("shop", "web").await,
            before,
            "a replica moved"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let v = fed.get("/v1/clusters/dc1").await;
    assert_eq!(
        v.pointer("/owner/node").and_then(Value::as_str),
        Some(owner.as_str()),
        "a cut link moves no ownership"
    );
    for c in CLUSTERS {
        let d = fed
            .deployment(c, "shop", "web")
            .await
            .expect("web is there");
        assert_eq!(replicas_of(&d), 2, "{c} during the cut");
    }

    // Restored: the owner reaches dc1 again and the broken link heals.
    fed.sim("dc1").admin().restore_peer(&owner);
    eventually(LIMIT, "dc1's broken link healed", || async {
        let (health, cond) = condition(&fed, "dc1").await;
        (health == "Ready" && !cond.contains("broken link")).then_some(())
    })
    .await;
    assert_eq!(fed.placement("shop", "web").await, before);
}
