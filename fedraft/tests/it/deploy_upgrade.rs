//! The rolling-upgrade runbook on real processes: under a steady write load from clients that
//! retry (same idempotency key, next node), each of the three nodes in turn is stopped with
//! SIGTERM, kept down briefly (the binary swap), started again and waited for until it is ready
//! and caught up. Every write must eventually be acknowledged (no lasting error), every
//! acknowledged write must be present on every node afterwards, and the nodes must agree on
//! the state hash at the same applied index.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::deploy_common::*;

/// How long one write may keep failing before it counts as a lasting error.
const WRITE_RETRY_BUDGET: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_under_load_loses_nothing() {
    let root = tempfile::tempdir().unwrap();
    let mut c = Cluster::layout(
        root.path(),
        "c",
        &Layout {
            nodes: 3,
            ..layout()
        },
    );
    c.start_all();
    c.wait_all_ready(Duration::from_secs(60)).await;
    register_cluster(&c, 0, "dc1").await;

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<(String, u64)>::new()));
    let failed = Arc::new(Mutex::new(Vec::<String>::new()));
    let worst = Arc::new(Mutex::new(Duration::ZERO));
    // Writers get their own client and the API addresses; the test keeps the cluster handle to
    // stop and start nodes.
    let http = c.http.clone();
    let addrs: Vec<String> = c.nodes.iter().map(|n| n.api.clone()).collect();
    let mut writers = Vec::new();
    for w in 0..3usize {
        let (stop, acked, failed, worst, addrs) = (
            stop.clone(),
            acked.clone(),
            failed.clone(),
            worst.clone(),
            addrs.clone(),
        );
        let http = http.clone();
        writers.push(tokio::spawn(async move {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                let name = format!("w{w}-{seq}");
                let started = Instant::now();
                match put_retrying(&http, &addrs, w, &name, started + WRITE_RETRY_BUDGET).await {
                    Ok(rv) => acked.lock().unwrap().push((name, rv)),
                    Err(e) => failed.lock().unwrap().push(format!("{name}: {e}")),
                }
                let took = started.elapsed();
                {
                    let mut g = worst.lock().unwrap();
                    *g = (*g).max(took);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }));
    }

    tokio::time::sleep(Duration::from_secs(1)).await;
    for i in 0..3 {
        let before = acked.lock().unwrap().len();
        c.stop(i);
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.start(i);
        c.wait_ready(i, Duration::from_secs(60)).await;
        // Caught up: a linearizable status read on the restarted node has applied the cluster's
        // read index.
        let deadline = Instant::now() + Duration::from_secs(60);
        while c.get(i, "/v1/status").await.is_none() {
            assert!(Instant::now() < deadline, "node {} never caught up", i + 1);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Load must have continued across the restart.
        let deadline = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < before + 10 {
            assert!(
                Instant::now() < deadline,
                "writes stalled after restarting node {}",
                i + 1
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }

    let failed = failed.lock().unwrap().clone();
    assert!(failed.is_empty(), "writes that never succeeded: {failed:?}");
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= 30,
        "only {} writes acknowledged",
        acked.len()
    );
    eprintln!(
        "rolling upgrade: {} writes acknowledged, slowest write (with retries) {:?}",
        acked.len(),
        *worst.lock().unwrap()
    );

    for i in 0..3 {
        let list = c.get(i, "/v1/namespaces/load/objects").await.unwrap();
        let items = list["items"].as_array().unwrap();
        let names: std::collections::BTreeMap<String, u64> = items
            .iter()
            .map(|o| {
                (
                    o["name"].as_str().unwrap_or_default().to_string(),
                    resource_version(o),
                )
            })
            .collect();
        for (name, rv) in &acked {
            let found = names.get(name);
            assert!(
                found.is_some(),
                "node {}: acknowledged {name} is missing",
                i + 1
            );
            assert!(
                found.unwrap() >= rv,
                "node {}: {name} went back in time",
                i + 1
            );
        }
    }

    // Same applied index -> same state hash, on every node.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut seen = Vec::new();
        for i in 0..3 {
            if let Some(s) = c.get(i, "/v1/status?stale=true").await {
                seen.push((s["appliedIndex"].as_u64().unwrap(), s["stateHash"].clone()));
            }
        }
        if seen.len() == 3 && seen.iter().all(|s| s.0 == seen[0].0) {
            assert!(
                seen.iter().all(|s| s.1 == seen[0].1),
                "hashes differ: {seen:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "nodes never agreed: {seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn put_retrying(
    http: &reqwest::Client,
    addrs: &[String],
    first: usize,
    name: &str,
    deadline: Instant,
) -> Result<u64, String> {
    let body = serde_json::json!({"template": deployment(name, 1)});
    let mut last = String::new();
    let mut attempt = 0;
    while Instant::now() < deadline {
        let addr = &addrs[(first + attempt) % addrs.len()];
        attempt += 1;
        let r = http
            .put(format!("http://{addr}/v1/namespaces/load/objects/{name}"))
            .bearer_auth(ADMIN)
            .header("Idempotency-Key", format!("load-{name}"))
            .timeout(Duration::from_secs(10))
            .json(&body)
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => {
                let v: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
                return Ok(resource_version(&v));
            }
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last)
}
