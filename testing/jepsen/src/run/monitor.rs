//! Samples what the checkers need besides the history, while the run goes on: every node's state index,
//! state hash and log time (`GET /v1/system/state`) against the harness's wall clock, and each node's view
//! of member-cluster health and its raft term (`/readyz`). Read-only; a node that does not answer is simply
//! not sampled.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::api::Api;
use crate::check::agreement::StateSample;
use crate::check::clock::HealthSample;
use crate::check::leadership::TermSample;

/// Samples gathered so far.
#[derive(Default)]
pub struct Samples {
    pub states: Vec<StateSample>,
    pub health: Vec<HealthSample>,
    pub terms: Vec<TermSample>,
}

pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Bounds one sampling request, so a paused node delays nothing but its own samples.
const SAMPLE_TIMEOUT: Duration = Duration::from_millis(1500);

fn parse_state(node: usize, t_ns: u64, b: &Value) -> Option<StateSample> {
    Some(StateSample {
        t_ns,
        wall_ms: wall_ms(),
        node,
        state_index: b.get("stateIndex")?.as_u64()?,
        state_hash: b.get("stateHash")?.as_str()?.to_string(),
        log_time_ms: b.get("logTimeMs")?.as_u64()?,
    })
}

/// Samples one node's state.
pub async fn sample_state(api: &Api, node: usize, now_ns: impl Fn() -> u64) -> Option<StateSample> {
    let reply = api
        .get_quick(node, "/v1/system/state", SAMPLE_TIMEOUT)
        .await;
    parse_state(node, now_ns(), reply.ok_body()?)
}

/// Samples each node's state once, concurrently.
pub async fn sample_states(api: &Api, now_ns: impl Fn() -> u64 + Clone) -> Vec<StateSample> {
    let calls = (0..api.nodes()).map(|n| sample_state(api, n, now_ns.clone()));
    futures::future::join_all(calls)
        .await
        .into_iter()
        .flatten()
        .collect()
}

async fn sample_term(api: &Api, node: usize, now_ns: impl Fn() -> u64) -> Option<TermSample> {
    let reply = api.get_quick(node, "/readyz", SAMPLE_TIMEOUT).await;
    let t_ns = now_ns();
    // A node without a leader answers 503 with its term all the same.
    let term = match &reply {
        super::api::Reply::Answered { body, .. } => body.get("term")?.as_u64()?,
        _ => return None,
    };
    Some(TermSample { t_ns, node, term })
}

async fn sample_health(api: &Api, node: usize, now_ns: impl Fn() -> u64) -> Vec<HealthSample> {
    let reply = api
        .get_quick(node, "/v1/clusters?stale=true", SAMPLE_TIMEOUT)
        .await;
    let t_ns = now_ns();
    let Some(items) = reply
        .ok_body()
        .and_then(|b| b.get("items")?.as_array().cloned())
    else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|c| {
            Some(HealthSample {
                t_ns,
                node,
                cluster: c.get("name")?.as_str()?.to_string(),
                health: c.pointer("/status/health")?.as_str()?.to_string(),
            })
        })
        .collect()
}

/// Samples every node every `period`, each node on its own, until `stop` flips.
pub async fn run(
    api: Api,
    samples: Arc<Mutex<Samples>>,
    now_ns: impl Fn() -> u64 + Clone + Send + Sync + 'static,
    period: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let loops = (0..api.nodes()).map(|node| {
        let (api, samples, now_ns, mut stop) =
            (api.clone(), samples.clone(), now_ns.clone(), stop.clone());
        async move {
            loop {
                let (state, health, term) = tokio::join!(
                    sample_state(&api, node, now_ns.clone()),
                    sample_health(&api, node, now_ns.clone()),
                    sample_term(&api, node, now_ns.clone())
                );
                if let Ok(mut s) = samples.lock() {
                    s.states.extend(state);
                    s.health.extend(health);
                    s.terms.extend(term);
                }
                tokio::select! {
                    _ = tokio::time::sleep(period) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        }
    });
    futures::future::join_all(loops).await;
}
