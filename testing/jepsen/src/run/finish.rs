//! The end of a run, after every fault is undone: poll until the member clusters hold what placement says
//! (or a bound passes) and sample every node's state until all three are seen at one common state index.
//! It only gathers; `check::convergence` and `check::agreement` judge.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::api::Api;
use super::monitor::sample_states;
use super::rollout::ROLLOUT_NS;
use super::workload::{object_value, REGISTER_NS, SET_NS};
use crate::check::agreement::StateSample;
use crate::check::convergence::{diff, Holdings, Workload};

/// What placement wants: read linearizably from the first node that answers.
async fn wanted(api: &Api, clusters: &[String]) -> Option<(Holdings, usize)> {
    for node in 0..api.nodes() {
        let reply = api.call(node, Method::GET, "/v1/objects", None, &[]).await;
        let Some(items) = reply
            .ok_body()
            .and_then(|b| b.get("items")?.as_array().cloned())
        else {
            continue;
        };
        let mut want = Holdings::new();
        for c in clusters {
            want.insert(c.clone(), BTreeMap::new());
        }
        let mut objects = 0;
        for o in &items {
            let (Some(ns), Some(name)) = (
                o.get("namespace").and_then(Value::as_str),
                o.get("name").and_then(Value::as_str),
            ) else {
                continue;
            };
            if ![REGISTER_NS, SET_NS, ROLLOUT_NS].contains(&ns) {
                continue;
            }
            objects += 1;
            let value = object_value(o);
            for c in clusters {
                let replicas = o
                    .pointer("/status/placement")
                    .and_then(|p| p.get(c))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                if let Some(m) = want.get_mut(c) {
                    m.insert(
                        (ns.to_string(), name.to_string()),
                        Workload { replicas, value },
                    );
                }
            }
        }
        return Some((want, objects));
    }
    None
}

/// What the member clusters hold: fedraft-managed Deployments in the harness's namespaces.
async fn held(api: &Api, sims: &[(String, String)]) -> Result<Holdings, String> {
    let mut have = Holdings::new();
    for (name, url) in sims {
        let mut m = BTreeMap::new();
        for ns in [REGISTER_NS, SET_NS, ROLLOUT_NS] {
            let reply = api
                .plain(
                    Method::GET,
                    &format!("{url}/apis/apps/v1/namespaces/{ns}/deployments"),
                    None,
                )
                .await;
            let items = match &reply {
                super::api::Reply::Answered { status: 404, .. } => Vec::new(),
                r => match r
                    .ok_body()
                    .and_then(|b| b.get("items")?.as_array().cloned())
                {
                    Some(items) => items,
                    None => {
                        return Err(format!("{name}: cannot list deployments: {}", r.describe()))
                    }
                },
            };
            for d in items {
                let managed = d
                    .pointer("/metadata/labels/fedraft.io~1managed-by")
                    .and_then(Value::as_str)
                    == Some("fedraft");
                let Some(dname) = d.pointer("/metadata/name").and_then(Value::as_str) else {
                    continue;
                };
                if !managed {
                    continue;
                }
                let value = d
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(super::workload::VALUE_ANNOTATION))
                    .and_then(Value::as_str)
                    .and_then(|v| v.parse().ok());
                let replicas = d
                    .pointer("/spec/replicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(1);
                m.insert(
                    (ns.to_string(), dname.to_string()),
                    Workload { replicas, value },
                );
            }
        }
        have.insert(name.clone(), m);
    }
    Ok(have)
}

/// Polls until the clusters hold what placement wants or `limit` passes; returns the last differences, how
/// long it waited and how many objects placement had.
pub async fn converge(
    api: &Api,
    sims: &[(String, String)],
    limit: Duration,
) -> (Vec<String>, u64, usize) {
    let began = Instant::now();
    let clusters: Vec<String> = sims.iter().map(|(n, _)| n.clone()).collect();
    loop {
        let (last, objects) = match wanted(api, &clusters).await {
            None => (
                vec!["no node answered a linearizable list of objects".to_string()],
                0,
            ),
            Some((want, objects)) => match held(api, sims).await {
                Ok(have) => (diff(&want, &have), objects),
                Err(e) => (vec![e], objects),
            },
        };
        let waited = began.elapsed().as_millis() as u64;
        if last.is_empty() || began.elapsed() >= limit {
            return (last, waited, objects);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Samples every node's state until one index has been seen on all of them or `limit` passes.
pub async fn settle_states(
    api: &Api,
    now_ns: impl Fn() -> u64 + Clone,
    limit: Duration,
) -> Vec<StateSample> {
    let began = Instant::now();
    let mut all = Vec::new();
    loop {
        all.extend(sample_states(api, now_ns.clone()).await);
        let mut seen: BTreeMap<u64, std::collections::BTreeSet<usize>> = BTreeMap::new();
        for s in &all {
            seen.entry(s.state_index).or_default().insert(s.node);
        }
        if seen.values().any(|n| n.len() == api.nodes()) || began.elapsed() >= limit {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
