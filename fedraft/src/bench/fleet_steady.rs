//! The distribution-latency phase of `fedraft bench fleet`: ConfigMaps written at a steady rate,
//! each placed on one of a few watched members; latency is the member's watch event minus the
//! API's acknowledgement, overall and by the node owning the member. Must not: write anything
//! but its own `fleet-lat` objects.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

use super::fleet::{lock, Shared};
use super::fleet_args::FleetArgs;
use super::fleet_report as report;
use super::fleet_work::{self as work, FedApi, Members};

/// The distribution-latency phase; returns (samples, objects never seen in their member).
pub async fn steady(
    api: &FedApi,
    members: &Members,
    watched: &[String],
    args: &FleetArgs,
    into: &Shared,
) -> anyhow::Result<report::Distribution> {
    let seen: Arc<Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let mut watches = Vec::new();
    for c in watched {
        let url = members.clusters[c].1.clone();
        watches.push(tokio::spawn(watch_configmaps(url, seen.clone())));
    }
    // Let the watches connect before the first write.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let period = Duration::from_secs_f64(1.0 / args.steady_rate.max(0.1));
    let total = (args.steady_secs as f64 * args.steady_rate).round() as u64;
    // Name -> (acknowledged, the member it was placed on).
    let acks: Arc<Mutex<BTreeMap<String, (Instant, String)>>> = Arc::default();
    let mut tick = tokio::time::interval(period);
    let mut inflight = tokio::task::JoinSet::new();
    for j in 0..total {
        tick.tick().await;
        let name = format!("lat{j:06}");
        let cluster = watched[j as usize % watched.len()].clone();
        let body = json!({
            "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"j": j.to_string()}},
            "placement": {"clusters": [cluster]},
        });
        let (api, acks, into) = (api.clone(), acks.clone(), into.clone());
        inflight.spawn(async move {
            match api
                .send(
                    reqwest::Method::PUT,
                    &format!("/v1/namespaces/fleet-lat/objects/{name}"),
                    &body,
                )
                .await
            {
                Ok(took) => {
                    lock(&acks).insert(name, (Instant::now(), cluster));
                    lock(&into).writes.push(took);
                }
                Err(e) => {
                    // Each one is an error of the run: say which call and why.
                    eprintln!("steady write failed: {e:#}");
                    lock(&into).errors += 1;
                }
            }
        });
    }
    while inflight.join_next().await.is_some() {}
    // Stragglers: up to 10 s more.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let missing = {
            let acks = lock(&acks);
            let seen = lock(&seen);
            acks.keys().filter(|k| !seen.contains_key(*k)).count()
        };
        if missing == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for w in watches {
        w.abort();
    }
    let owners = work::cluster_owners(api).await.unwrap_or_default();
    let acks = lock(&acks);
    let seen = lock(&seen);
    let mut lat = Vec::new();
    let mut by_owner: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let mut missing = 0;
    for (name, (ack, cluster)) in acks.iter() {
        match seen.get(name) {
            Some(s) => {
                let took = s.saturating_duration_since(*ack);
                lat.push(took);
                let owner = owners.get(cluster).map_or("unknown", String::as_str);
                by_owner.entry(owner.to_string()).or_default().push(took);
            }
            None => missing += 1,
        }
    }
    let d = report::Distribution {
        rate: args.steady_rate,
        writes: acks.len() as u64,
        p50_ms: work::percentile(&lat, 0.50),
        p99_ms: work::percentile(&lat, 0.99),
        missing,
        by_owner: by_owner
            .into_iter()
            .map(|(o, l)| {
                let n = l.len() as u64;
                (
                    o,
                    (n, work::percentile(&l, 0.50), work::percentile(&l, 0.99)),
                )
            })
            .collect(),
    };
    println!(
        "distribution at {}/s: p50 {:.0} ms, p99 {:.0} ms, {} of {} never seen",
        d.rate, d.p50_ms, d.p99_ms, d.missing, d.writes
    );
    Ok(d)
}

/// Watches one member's managed ConfigMaps from now, recording when each name first appears.
async fn watch_configmaps(url: String, seen: Arc<Mutex<BTreeMap<String, Instant>>>) {
    let Ok(http) = reqwest::Client::builder().build() else {
        return;
    };
    loop {
        let list = async {
            let v: Value = http
                .get(format!(
                    "{url}/api/v1/configmaps?labelSelector={}&limit=1",
                    work::MANAGED
                ))
                .send()
                .await?
                .json()
                .await?;
            anyhow::Ok(
                v.pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("0")
                    .to_string(),
            )
        };
        let Ok(rv) = list.await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let path = format!(
            "{url}/api/v1/configmaps?watch=true&labelSelector={}&resourceVersion={rv}",
            work::MANAGED
        );
        let Ok(resp) = http.get(path).send().await else {
            continue;
        };
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            let now = Instant::now();
            buf.extend_from_slice(&chunk);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                    continue;
                };
                if let Some(name) = ev.pointer("/object/metadata/name").and_then(Value::as_str) {
                    lock(&seen).entry(name.to_string()).or_insert(now);
                }
            }
        }
    }
}
