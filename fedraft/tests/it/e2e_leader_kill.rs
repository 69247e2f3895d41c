//! End to end: SIGKILL the leader's `fedraft server` process while the member clusters are
//! converged. A new leader is elected; new puts and deletes acknowledged by it converge in
//! every member cluster, and afterwards every member cluster holds exactly the desired objects
//! (none duplicated, none missing) while the member writes are exactly one per changed object
//! per cluster: no executor rewrites what another had applied (a delete refused once as a
//! compare-and-swap on a stale version, and retried, changes nothing and is allowed).
//!
//! Executors run spread over the nodes (the harness runs ownership leases, `owner_lease_ms`),
//! so the bound on convergence is per cluster: the clusters the killed node owned
//! wait for its lease to lapse before another node takes them (lease + election + a margin),
//! while every other cluster's owner lives and keeps converging (2x the election timeout, the
//! bound the leader-only executors had for all of them).
use std::collections::{BTreeMap, BTreeSet};
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

/// What one member's counters said at some point.
struct Counts {
    mutating: u64,
    deletes: u64,
    /// Records in its write log (writes that changed state).
    logged: usize,
}

fn counts(fed: &Fed, cluster: &str) -> Counts {
    let admin = fed.sim(cluster).admin();
    let stats = admin.stats();
    Counts {
        mutating: stats.mutating_requests,
        deletes: stats.requests.get("delete").copied().unwrap_or(0),
        logged: admin.write_log().records.len(),
    }
}

/// The clusters node `id` owns, once every cluster has an owner (the harness's leases are in
/// force: the book formed).
async fn owned_by(fed: &Fed, id: u64) -> BTreeSet<&'static str> {
    let owners = eventually(LIMIT, "every cluster owned", || async {
        let mut out = BTreeMap::new();
        for c in CLUSTERS {
            let v = fed.get(&format!("/v1/clusters/{c}")).await;
            let node = v.pointer("/owner/node")?.as_str()?.to_string();
            out.insert(c, node);
        }
        Some(out)
    })
    .await;
    let name = format!("node{id}");
    owners
        .into_iter()
        .filter(|(_, n)| *n == name)
        .map(|(c, _)| c)
        .collect()
}

/// How long after `since` each member cluster first held exactly `want` (polled together, so
/// one slow cluster does not delay the others' figures).
async fn converge_times(
    fed: &Fed,
    want: &BTreeMap<String, u64>,
    since: Instant,
) -> BTreeMap<&'static str, Duration> {
    let mut done = BTreeMap::new();
    while done.len() < CLUSTERS.len() {
        for c in CLUSTERS {
            if !done.contains_key(c) && fed.managed(c).await.as_ref() == Some(want) {
                done.insert(c, since.elapsed());
            }
        }
        assert!(
            since.elapsed() < LIMIT,
            "not converged within {LIMIT:?}: only {done:?} hold {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    done
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
    let before: BTreeMap<&str, Counts> = CLUSTERS.iter().map(|c| (*c, counts(&fed, c))).collect();

    let old = fed.wait_leader(LIMIT).await;
    let owned = owned_by(&fed, old).await;
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
    let converged = converge_times(&fed, &want, acked_at).await;
    eprintln!(
        "E2E leader kill: node{old} (owner of {owned:?}) killed; node{new} leads after \
         {elected:?}; converged after the last acknowledgement: {converged:?}"
    );
    // A cluster whose owner lives never stops: the bound leader-only executors had. One the
    // killed node owned moves once its lease lapses (counted from its last renewal, before
    // the kill), then converges like any other.
    let live_budget = Duration::from_millis(2 * ELECTION_MAX_MS);
    let moved_budget = Duration::from_millis(OWNER_LEASE_MS + ELECTION_MAX_MS + 2000);
    for (c, took) in &converged {
        let budget = match owned.contains(*c) {
            true => moved_budget,
            false => live_budget,
        };
        assert!(
            *took <= budget,
            "{c} (owned by node{old}: {}) converged {took:?} after the ack, budget {budget:?}",
            owned.contains(*c)
        );
    }

    // Exactly one write per changed object per cluster (4 applies + 2 deletes), and no churn:
    // the member's log of writes that changed state holds those six and nothing else, and no
    // other apply reached it. Deletes are compare-and-swaps under spread ownership (the owner's
    // token is checked against the version it looked at): one may be refused once on a stale
    // version and retried after a fresh look, which changes nothing, so a delete request may
    // count twice.
    wait_quiet(&fed, Duration::from_secs(2)).await;
    for c in CLUSTERS {
        let now = counts(&fed, c);
        let was = &before[c];
        let log = fed.sim(c).admin().write_log();
        assert_eq!(log.dropped, 0, "{c}: write log cut");
        let changed: BTreeSet<(String, String)> = log.records[was.logged..]
            .iter()
            .map(|r| (r.verb.clone(), r.object.clone()))
            .collect();
        let expected: BTreeSet<(String, String)> = ["n0", "n1", "n2", "n3"]
            .iter()
            .map(|n| ("apply".to_string(), format!("deployments/shop/{n}")))
            .chain(
                ["o0", "o1"]
                    .iter()
                    .map(|n| ("delete".to_string(), format!("deployments/shop/{n}"))),
            )
            .collect();
        assert_eq!(
            (log.records.len() - was.logged, &changed),
            (6, &expected),
            "{c}: the writes that changed state after the handover"
        );
        let deletes = now.deletes - was.deletes;
        let others = (now.mutating - now.deletes) - (was.mutating - was.deletes);
        assert_eq!(others, 4, "{c}: applies after the handover");
        assert!(
            (2..=4).contains(&deletes),
            "{c}: {deletes} delete requests for 2 deletes"
        );
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
