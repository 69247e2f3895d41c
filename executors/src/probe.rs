//! Observing one member cluster: a health probe (`GET /readyz`) every probe interval, bounded by
//! the probe timeout, and after a successful probe a capacity scan when one is due (nodes, and
//! pods to see what fedraft does not manage; see `capacity`).
//!
//! Results go to [`Observations`]; the reporter turns them into log entries. A failed probe is
//! only an observation: the state machine decides from missing heartbeats whether the cluster is
//! NotReady.
//!
//! Must not: decide health, or delay another cluster (each probe loop is its own task).

use std::sync::Arc;
use std::time::Duration;

use fedraft_core::model::Capacity;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use tokio::time::Instant;

use crate::capacity;
use crate::error::ExecError;
use crate::reconciler::ClusterCtx;
use crate::report::Observations;

/// Pods are listed in pages of this many, as kubectl does.
const POD_PAGE: u32 = 500;
/// Stop after this many pages (500k pods): a bound, not an expected size.
const MAX_POD_PAGES: usize = 1000;

/// `GET /readyz` within `timeout`.
pub async fn probe(client: &kube::Client, timeout: Duration) -> Result<(), ExecError> {
    let request = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| ExecError::Manifest(format!("probe request: {e}")))?;
    match tokio::time::timeout(timeout, client.request_text(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ExecError::kube("GET /readyz", e)),
        Err(_) => Err(ExecError::Timeout {
            action: "GET /readyz".into(),
            waited_ms: timeout.as_millis() as u64,
        }),
    }
}

/// Lists nodes and pods and computes the capacity fedraft reports.
pub async fn scan_capacity(ctx: &ClusterCtx) -> Result<Capacity, ExecError> {
    let limit = ctx.cfg.request_timeout;
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let listed = tokio::time::timeout(limit, nodes.list(&ListParams::default()))
        .await
        .map_err(|_| ExecError::Timeout {
            action: "listing nodes".into(),
            waited_ms: limit.as_millis() as u64,
        })?
        .map_err(|e| ExecError::kube("listing nodes", e))?;
    let pods = match list_pods(ctx).await {
        Ok(p) => Some(p),
        Err(e) => {
            // Without pods the foreign usage is invisible; report allocatable as available.
            tracing::debug!(cluster = %ctx.cluster, error = %e, "pods not visible for the capacity scan");
            None
        }
    };
    let managed = ctx.live.managed_names();
    Ok(capacity::capacity(&listed.items, pods.as_deref(), &managed))
}

async fn list_pods(ctx: &ClusterCtx) -> Result<Vec<Pod>, ExecError> {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let limit = ctx.cfg.request_timeout;
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_POD_PAGES {
        let mut lp = ListParams::default().limit(POD_PAGE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = tokio::time::timeout(limit, api.list(&lp))
            .await
            .map_err(|_| ExecError::Timeout {
                action: "listing pods".into(),
                waited_ms: limit.as_millis() as u64,
            })?
            .map_err(|e| ExecError::kube("listing pods", e))?;
        out.extend(page.items);
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    Ok(out)
}

/// The probe loop of one cluster.
pub async fn run_probe(ctx: Arc<ClusterCtx>, obs: Arc<Observations>) {
    let cfg = &ctx.cfg;
    let mut next_scan = Instant::now();
    loop {
        let started = Instant::now();
        match probe(&ctx.client, cfg.probe_timeout).await {
            Ok(()) => {
                let mut capacity = None;
                if started >= next_scan {
                    match scan_capacity(&ctx).await {
                        Ok(c) => {
                            capacity = Some(c);
                            next_scan = started + cfg.capacity_interval;
                        }
                        Err(e) => {
                            tracing::warn!(cluster = %ctx.cluster, error = %e, "capacity scan failed")
                        }
                    }
                }
                obs.probe_ok(&ctx.cluster, capacity);
            }
            Err(e) => {
                tracing::info!(cluster = %ctx.cluster, error = %e, "health probe failed");
                obs.probe_failed(&ctx.cluster);
            }
        }
        tokio::time::sleep_until(started + cfg.probe_interval).await;
    }
}
