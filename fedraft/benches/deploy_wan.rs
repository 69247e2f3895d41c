//! Cross-data-center benchmark (a plain program, not a test; run it on an idle machine):
//!
//! ```sh
//! cargo bench -p fedraft --bench deploy_wan
//! ```
//!
//! Three real `fedraft server` processes, each node's peer traffic routed through fedraft-jepsen's
//! delaying proxies: `BENCH_RTT_MS` (default 30) of round trip between every pair of "data
//! centers" (half of it added in each direction). It reports
//! - write latency p50 / p99 of sequential PUTs from a client next to the leader (expected: one
//!   round trip to the nearest follower plus an fsync), and with 16 concurrent clients;
//! - time from losing the leader's data center (SIGKILL of the leader plus every link to it cut)
//!   to the first write accepted by the survivors, over several rounds.

// The deploy tests' harness, shared rather than copied.
#[path = "../tests/it/deploy_common/mod.rs"]
mod deploy_common;

use std::time::{Duration, Instant};

use deploy_common::*;
use fedraft_jepsen::Mesh;

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn put(c: &Cluster, node: usize, name: &str, timeout: Duration) -> bool {
    let body = serde_json::json!({"template": deployment(name, 1)});
    matches!(
        c.req(node, reqwest::Method::PUT, &format!("/v1/namespaces/bench/objects/{name}"))
            .header("Idempotency-Key", format!("bench-{name}"))
            .timeout(timeout)
            .json(&body)
            .send()
            .await,
        Ok(r) if r.status().is_success()
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let rtt_ms: u64 = std::env::var("BENCH_RTT_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let writes: usize = std::env::var("BENCH_WRITES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let rounds: usize = std::env::var("BENCH_FAILOVERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let root = tempfile::tempdir().unwrap();
    let mut c = Cluster::layout(
        root.path(),
        "wan",
        &Layout {
            nodes: 3,
            ..layout()
        },
    );
    let upstreams: Vec<std::net::SocketAddr> =
        c.nodes.iter().map(|n| n.peer.parse().unwrap()).collect();
    let mesh = Mesh::start(&upstreams).await.unwrap();
    mesh.set_delay_all(Duration::from_millis(rtt_ms / 2));
    c.route_peers(|from, to| mesh.addr(from, to).unwrap().to_string());
    c.start_all();
    c.wait_all_ready(Duration::from_secs(60)).await;
    let leader = c.leader().await.expect("a leader");
    for i in 0..20 {
        assert!(put(&c, leader, &format!("warm-{i}"), Duration::from_secs(10)).await);
    }

    let mut lat = Vec::with_capacity(writes);
    for i in 0..writes {
        let t = Instant::now();
        assert!(put(&c, leader, &format!("seq-{i}"), Duration::from_secs(10)).await);
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "RTT {rtt_ms} ms, sequential writes at the leader: n={writes} p50={:?} p99={:?} max={:?}",
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        lat[lat.len() - 1]
    );

    let concurrent = 16usize;
    let per = writes / concurrent + 1;
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrent)
        .map(|w| {
            let http = c.http.clone();
            let url = c.url(leader, "");
            tokio::spawn(async move {
                let mut out = Vec::new();
                for i in 0..per {
                    let name = format!("par-{w}-{i}");
                    let body = serde_json::json!({"template": deployment(&name, 1)});
                    let t = Instant::now();
                    let r = http
                        .put(format!("{url}/v1/namespaces/bench/objects/{name}"))
                        .bearer_auth(ADMIN)
                        .json(&body)
                        .send()
                        .await
                        .unwrap();
                    assert!(r.status().is_success());
                    out.push(t.elapsed());
                }
                out
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    lat.sort();
    println!(
        "RTT {rtt_ms} ms, {concurrent} concurrent clients at the leader: n={} {:.0} writes/s p50={:?} p99={:?}",
        lat.len(),
        lat.len() as f64 / secs,
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );

    let mut failovers = Vec::new();
    for round in 0..rounds {
        let leader = loop {
            if let Some(l) = c.leader().await {
                break l;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // Lose the leader's data center: the process dies and its links go dark.
        mesh.isolate(leader).unwrap();
        c.kill(leader);
        let lost = Instant::now();
        let survivors: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
        let mut k = 0usize;
        let took = loop {
            let node = survivors[k % 2];
            k += 1;
            if put(
                &c,
                node,
                &format!("failover-{round}-{k}"),
                Duration::from_millis(1500),
            )
            .await
            {
                break lost.elapsed();
            }
            assert!(
                lost.elapsed() < Duration::from_secs(60),
                "no write accepted after losing a DC"
            );
        };
        println!(
            "round {round}: leader node {} lost; first accepted write after {took:?}",
            leader + 1
        );
        failovers.push(took);
        // Bring the data center back before the next round.
        mesh.heal_all();
        c.start(leader);
        c.wait_all_ready(Duration::from_secs(60)).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    failovers.sort();
    println!(
        "RTT {rtt_ms} ms, leader DC lost -> first accepted write: min={:?} median={:?} max={:?}",
        failovers[0],
        failovers[failovers.len() / 2],
        failovers[failovers.len() - 1]
    );
}
