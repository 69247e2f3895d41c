//! End to end, three `fedraft server` processes and three member clusters: a dark spell shorter
//! than the failure threshold moves nothing; a cluster that stays dark turns NotReady after the
//! threshold and its replicas are re-placed after the grace period; a drained cluster is
//! emptied of everything fedraft placed, make-before-break (the workload's ready replicas,
//! sampled in the members throughout, never drop below its desired count while the new ones
//! come up slowly); an uncordoned one is used by placement again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::*;

const FAILURE_S: u64 = 4;
const GRACE_S: u64 = 3;

/// Ready replicas of shop/web summed over the member clusters, as their status says.
async fn ready_web(fed: &Fed) -> u64 {
    let mut sum = 0;
    for c in CLUSTERS {
        if let Some(d) = fed.deployment(c, "shop", "web").await {
            sum += d["status"]["readyReplicas"].as_u64().unwrap_or(0);
        }
    }
    sum
}

/// Replicas of shop/web per cluster as the member clusters hold them (absent = 0).
async fn live_web(fed: &Fed, clusters: &[&str]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for c in clusters {
        let n = fed
            .deployment(c, "shop", "web")
            .await
            .map_or(0, |d| replicas_of(&d));
        out.insert(c.to_string(), n);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dark_spells_drain_and_uncordon() {
    let fed = Fed::start().await;
    fed.register_all(FAILURE_S, 1).await;
    let weights = [("dc1", 1), ("dc2", 1), ("dc3", 1)];
    fed.put(
        "shop",
        "web",
        divided("web", 6, "nginx:1", &weights, GRACE_S, None),
    )
    .await;
    fed.put(
        "shop",
        "pinned",
        divided("pinned", 1, "pinned:1", &[("dc1", 1)], GRACE_S, None),
    )
    .await;
    for c in CLUSTERS {
        fed.wait_deployment(c, "shop", "web", 2, "nginx:1").await;
    }
    fed.wait_deployment("dc1", "shop", "pinned", 1, "pinned:1")
        .await;
    let before = fed.placement("shop", "web").await;

    // A 1 s dark spell (threshold 4 s): dc2 never turns NotReady and nothing moves.
    fed.go_dark("dc2", Some(Duration::from_secs(1)));
    let watch_until = Instant::now() + Duration::from_secs(FAILURE_S + GRACE_S);
    while Instant::now() < watch_until {
        assert_ne!(fed.health("dc2").await, "NotReady", "short dark spell");
        assert_eq!(fed.placement("shop", "web").await, before);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        live_web(&fed, &CLUSTERS)
            .await
            .values()
            .copied()
            .collect::<Vec<_>>(),
        vec![2, 2, 2]
    );

    // Dark for good: NotReady after the threshold, replicas re-placed after the grace period.
    let dark_at = Instant::now();
    fed.go_dark("dc2", None);
    fed.wait_health("dc2", "NotReady").await;
    let not_ready = dark_at.elapsed();
    assert!(
        not_ready >= Duration::from_secs(FAILURE_S - 1),
        "NotReady after {not_ready:?}, threshold {FAILURE_S} s"
    );
    let not_ready_at = Instant::now();
    eventually(LIMIT, "web's 6 replicas on dc1 and dc3", || async {
        let p = fed.placement("shop", "web").await;
        let live = live_web(&fed, &["dc1", "dc3"]).await;
        (!p.contains_key("dc2") && live.values().sum::<u64>() == 6).then_some(())
    })
    .await;
    let moved = not_ready_at.elapsed();
    assert!(
        moved >= Duration::from_secs(GRACE_S - 1),
        "replicas moved {moved:?} after NotReady, grace {GRACE_S} s"
    );
    eprintln!("E2E dark: NotReady after {not_ready:?}; replicas moved {moved:?} later");

    // dc2 comes back and is Ready again.
    fed.come_back("dc2");
    fed.wait_health("dc2", "Ready").await;

    // Drain dc1: everything fedraft placed there leaves; web keeps its 6 replicas elsewhere.
    // New replicas turn ready one every 300 ms on dc2 and dc3, and dc1 keeps its own until
    // they have: the ready count, sampled throughout, never drops below 6.
    for c in ["dc2", "dc3"] {
        fed.sim(c)
            .admin()
            .set_faults(fedraft_kubesim::FaultSettings {
                rollout_step_ms: 300,
                ..Default::default()
            })
            .unwrap();
    }
    eventually(LIMIT, "web's 6 replicas ready before the drain", || async {
        (ready_web(&fed).await == 6).then_some(())
    })
    .await;
    fed.call(reqwest::Method::POST, "/v1/clusters/dc1/drain", None)
        .await;
    let drained_by = Instant::now() + LIMIT;
    let mut samples = 0;
    loop {
        let ready = ready_web(&fed).await;
        samples += 1;
        assert!(
            ready >= 6,
            "ready replicas fell to {ready} during the drain"
        );
        let empty = fed.managed("dc1").await.is_some_and(|m| m.is_empty());
        if empty {
            break;
        }
        assert!(
            Instant::now() < drained_by,
            "dc1 not emptied of fedraft's objects"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("E2E drain: ready replicas sampled {samples} times, never below 6");
    eventually(LIMIT, "web's 6 replicas on dc2 and dc3", || async {
        let live = live_web(&fed, &["dc2", "dc3"]).await;
        let p = fed.placement("shop", "web").await;
        (!p.contains_key("dc1") && live.values().sum::<u64>() == 6).then_some(())
    })
    .await;

    // Uncordon: placement may use dc1 again.
    fed.call(reqwest::Method::POST, "/v1/clusters/dc1/uncordon", None)
        .await;
    fed.put(
        "shop",
        "later",
        divided("later", 2, "later:1", &[("dc1", 1)], GRACE_S, None),
    )
    .await;
    fed.wait_deployment("dc1", "shop", "later", 2, "later:1")
        .await;
}
