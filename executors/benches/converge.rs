//! Benchmark (a plain program, not a test; `cargo bench` builds it in release): API ack -> applied in the member cluster, p50/p99, for 1,000
//! objects over 10 simulated clusters, through a real single-node raft group. Also counts member
//! API writes per converge (1 per changed object, 0 when nothing changed).
//!
//! Run: `cargo bench -p fedraft-executors --bench converge`

// The integration tests' helpers, shared rather than copied; a bench uses only some of them.
#[allow(dead_code, unused_imports)]
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::raft::{must, start_group};
use common::*;
use fedraft_core::model::Health;
use fedraft_executors::ExecutorSet;
use fedraft_testkit::members::start_sim_with_nodes;
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;

const CLUSTERS: usize = 10;
const OBJECTS: usize = 1000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    init_tracing();
    let root = tempfile::tempdir().unwrap();
    let mut sims = Vec::new();
    for i in 0..CLUSTERS {
        // 100 objects x 2 replicas x 100m per cluster: 4 nodes of 8 cpu leave room, so
        // capacity never limits placement here.
        sims.push(start_sim_with_nodes(&format!("dc{i}"), 4).await);
    }
    let nodes = start_group(&root, 1).await;
    let node = nodes[0].node.clone();
    let mut cfg = executor_config();
    cfg.probe_interval = Duration::from_secs(1);
    cfg.status_flush_interval = Duration::from_millis(500);
    let set = ExecutorSet::start(node.clone(), cfg);
    for (i, sim) in sims.iter().enumerate() {
        let mut spec = cluster_spec(&format!("dc{i}"), sim, "r");
        spec.failure_threshold_seconds = 60;
        must(&node, register(spec)).await;
    }
    for i in 0..CLUSTERS {
        let c = format!("dc{i}");
        eventually(Duration::from_secs(60), "cluster Ready", || {
            let h = node.read_stale(|s| s.cluster(&c).map(|x| x.status.health));
            async move { (h == Some(Health::Ready)).then_some(()) }
        })
        .await;
    }

    // First sighting of each object in each cluster, from independent watches.
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    for sim in &sims {
        let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
            kube::Api::all(kube_client(sim));
        let seen = seen.clone();
        tokio::spawn(async move {
            let cfg = watcher::Config::default().labels("fedraft.io/managed-by=fedraft");
            // Transient watch errors (a timeout on a loaded machine) must not end the count.
            let mut s = watcher::watcher(api, cfg).default_backoff().boxed();
            while let Some(ev) = s.next().await {
                if let Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) = ev {
                    let name = d.metadata.name.unwrap_or_default();
                    seen.lock()
                        .unwrap()
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes_before: u64 = sims
        .iter()
        .map(|s| s.admin().stats().mutating_requests)
        .sum();

    let mut acked = Vec::with_capacity(OBJECTS);
    let started = Instant::now();
    for i in 0..OBJECTS {
        let name = format!("obj{i}");
        let mut spec = weighted_spec(&deployment(&name, 2, "nginx:1"), &[], None);
        spec.placement =
            serde_json::from_value(json!({ "clusters": [format!("dc{}", i % CLUSTERS)] })).unwrap();
        must(&node, put("bench", &name, spec)).await;
        acked.push((name, Instant::now()));
    }
    let submit = started.elapsed();
    let mut last_report = Instant::now();
    eventually(Duration::from_secs(300), "all objects applied", || {
        let n = seen.lock().unwrap().len();
        if last_report.elapsed() > Duration::from_secs(10) {
            last_report = Instant::now();
            eprintln!("BENCH progress: {n}/{OBJECTS} objects seen in member clusters");
        }
        async move { (n >= OBJECTS).then_some(()) }
    })
    .await;
    let seen = seen.lock().unwrap().clone();
    let mut lat: Vec<Duration> = acked
        .iter()
        .map(|(n, t)| seen[n].saturating_duration_since(*t))
        .collect();
    lat.sort();
    let pct = |p: f64| {
        lat[((lat.len() as f64 * p).ceil() as usize)
            .saturating_sub(1)
            .min(lat.len() - 1)]
    };
    let writes: u64 = sims
        .iter()
        .map(|s| s.admin().stats().mutating_requests)
        .sum::<u64>()
        - writes_before;
    eprintln!(
        "BENCH {OBJECTS} objects over {CLUSTERS} clusters: submit {submit:?} ({:.0}/s); ack->applied p50 {:?} p99 {:?} max {:?}; member writes {writes} (namespaces: {CLUSTERS})",
        OBJECTS as f64 / submit.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        lat[lat.len() - 1],
    );

    // Nothing changed: a resync writes nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let idle_before: u64 = sims
        .iter()
        .map(|s| s.admin().stats().mutating_requests)
        .sum();
    tokio::time::sleep(executor_config().resync_period + Duration::from_secs(1)).await;
    let idle: u64 = sims
        .iter()
        .map(|s| s.admin().stats().mutating_requests)
        .sum::<u64>()
        - idle_before;
    eprintln!("BENCH member writes during an idle resync: {idle}");
    assert_eq!(idle, 0);
    set.shutdown().await;
    for n in nodes {
        n.stop().await;
    }
}
