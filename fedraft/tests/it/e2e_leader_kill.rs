//! End to end: SIGKILL the leader's `fedraft server` process while the member clusters are
//! converged. A new leader is elected, convergence of new puts and deletes continues on it
//! within 2x the election timeout of their acknowledgement, and afterwards every member
//! cluster holds exactly the desired objects (none duplicated, none missing) while the member
//! writes are exactly one per changed object per cluster: the new leader rewrites nothing the
//! old one had applied.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::*;

const WEIGHTS: [(&str, u64); 3] = [("dc1", 1), ("dc2", 1), ("dc3", 1)];

fn one_each(name: &str) -> serde_json::Value {
    divided(name, 3, "app:1", &WEIGHTS, 30, None)
}

async fn wait_exactly(fed: &Fed, want: &BTreeMap<String, u64>) {
    for c in CLUSTERS {
        eventually(LIMIT, &format!("{c} holds exactly {want:?}"), || async {
            fed.managed(c).await.filter(|m| m == want).map(|_| ())
        })
        .await;
    }
}

fn total_writes(fed: &Fed) -> u64 {
    CLUSTERS.iter().map(|c| fed.writes(c)).sum()
}

/// Waits until no member cluster has received a write for `quiet`.
async fn wait_quiet(fed: &Fed, quiet: Duration) {
    let mut last = total_writes(fed);
    let mut since = Instant::now();
    eventually(LIMIT, "member writes to settle", || {
        let now = total_writes(fed);
        if now != last {
            last = now;
            since = Instant::now();
        }
        let settled = since.elapsed() >= quiet;
        async move { settled.then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_leader_convergence_continues_exactly_once() {
    let mut fed = Fed::start().await;
    fed.register_all(10, 1).await;
    let mut want = BTreeMap::new();
    for i in 0..12 {
        let name = format!("o{i}");
        fed.put("shop", &name, one_each(&name)).await;
        want.insert(format!("shop/{name}"), 1u64);
    }
    wait_exactly(&fed, &want).await;
    wait_quiet(&fed, Duration::from_secs(2)).await;
    let before: BTreeMap<&str, u64> = CLUSTERS.iter().map(|c| (*c, fed.writes(c))).collect();

    let old = fed.wait_leader(LIMIT).await;
    let killed_at = Instant::now();
    fed.kill(old);
    let new = fed.wait_leader(Duration::from_secs(30)).await;
    let elected = killed_at.elapsed();
    assert_ne!(new, old);

    // Changes acknowledged by the new leader: 4 puts and 2 deletes.
    for i in 0..4 {
        let name = format!("n{i}");
        fed.put("shop", &name, one_each(&name)).await;
        want.insert(format!("shop/{name}"), 1);
    }
    for name in ["o0", "o1"] {
        fed.delete("shop", name).await;
        want.remove(&format!("shop/{name}"));
    }
    let acked_at = Instant::now();
    wait_exactly(&fed, &want).await;
    let converged = acked_at.elapsed();
    eprintln!(
        "E2E leader kill: node{old} killed; node{new} leads after {elected:?}; \
         converged {converged:?} after the last acknowledgement"
    );
    let budget = Duration::from_millis(2 * ELECTION_MAX_MS);
    assert!(
        converged <= budget,
        "converged {converged:?} after the ack, budget {budget:?}"
    );

    // Exactly one write per changed object per cluster (4 applies + 2 deletes), and no churn.
    wait_quiet(&fed, Duration::from_secs(2)).await;
    for c in CLUSTERS {
        let delta = fed.writes(c) - before[c];
        assert_eq!(delta, 6, "member writes to {c} after the handover");
    }
    wait_exactly(&fed, &want).await;
    for name in want.keys() {
        let (_, n) = name.split_once('/').unwrap();
        eventually(
            LIMIT,
            &format!("{name} reported applied everywhere"),
            || async {
                let v = fed.get(&format!("/v1/namespaces/shop/objects/{n}")).await;
                let clusters = v.pointer("/status/clusters")?.as_object()?.clone();
                (clusters.len() == 3
                    && clusters
                        .values()
                        .all(|c| c.get("applied") == Some(&serde_json::json!(true))))
                .then_some(())
            },
        )
        .await;
    }
}
