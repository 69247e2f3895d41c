//! Service discovery observations: what each placed Service with a discovery section looks
//! like in each member cluster (external addresses, ports, ready endpoints), reported back into
//! the log as `ServiceEndpoints` only when it changed.
//!
//! Per member cluster, [`run_service_observer`] runs every probe interval: for each namespace
//! holding such a Service it lists fedraft's Services (for `status.loadBalancer.ingress` and
//! `spec.ports`) and the EndpointSlices labelled `kubernetes.io/service-name` (counting
//! endpoints whose `ready` condition is not false, as kube-proxy does), and stores the result in
//! [`ServiceObservations`]. [`run_endpoints_reporter`] (one per leading node) diffs the latest
//! observations against the state every status flush interval and proposes at most one entry
//! for all clusters. As in `report.rs`, a report already proposed is not sent again until
//! `RESEND_AFTER` passes without the state reflecting it, and diffing against the state means a
//! new leader re-sends nothing the old one already reported.
//!
//! Must not: decide eligibility or weights (core's `discovery` does), or propose more than one
//! entry per flush.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use fedraft_core::command::Command;
use fedraft_core::discovery::{EndpointsReport, PortProtocol, ServicePort};
use fedraft_core::render::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use fedraft_core::state::{State, MAX_BATCH_ITEMS};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};

use crate::config::ExecutorConfig;
use crate::error::ExecError;
use crate::node::ControlPlane;
use crate::reconciler::ClusterCtx;

/// A proposed observation not reflected by the state after this long is proposed again.
const RESEND_AFTER: Duration = Duration::from_secs(5);
/// Label EndpointSlices carry to name their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Latest observations per cluster, shared by the observers and the reporter.
#[derive(Default)]
pub struct ServiceObservations {
    inner: Mutex<BTreeMap<String, Vec<EndpointsReport>>>,
}

/// Reports proposed and not yet seen in the state.
#[derive(Default)]
pub struct SentEndpoints {
    sent: HashMap<(String, String, String), (EndpointsReport, Instant)>,
}

impl ServiceObservations {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<EndpointsReport>>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the cluster's observations with those of the latest pass.
    pub fn set(&self, cluster: &str, reports: Vec<EndpointsReport>) {
        self.lock().insert(cluster.to_string(), reports);
    }

    pub fn forget(&self, cluster: &str) {
        self.lock().remove(cluster);
    }

    /// Observations that differ from the state, at most [`MAX_BATCH_ITEMS`].
    pub fn take_changed(
        &self,
        state: &State,
        sent: &mut SentEndpoints,
        now: Instant,
    ) -> Vec<EndpointsReport> {
        let g = self.lock();
        let mut out = Vec::new();
        for r in g.values().flatten() {
            let key = (r.namespace.clone(), r.name.clone(), r.cluster.clone());
            let recorded = state
                .observed_endpoints(&r.namespace, &r.name)
                .and_then(|m| m.get(&r.cluster));
            let same = recorded.is_some_and(|o| {
                o.addresses == r.addresses
                    && o.ports == r.ports
                    && o.ready_endpoints == r.ready_endpoints
            });
            if same {
                sent.sent.remove(&key);
                continue;
            }
            if sent
                .sent
                .get(&key)
                .is_some_and(|(s, t)| s == r && now.saturating_duration_since(*t) < RESEND_AFTER)
            {
                continue;
            }
            sent.sent.insert(key, (r.clone(), now));
            out.push(r.clone());
            if out.len() == MAX_BATCH_ITEMS {
                break;
            }
        }
        out
    }
}

/// Services with an enabled discovery section placed on `cluster`, by namespace.
pub fn discovery_services_on(state: &State, cluster: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (key, spec) in state.discovery_keys() {
        let placed = state
            .object(&key.namespace, &key.name)
            .is_some_and(|o| o.replicas_on(cluster) > 0);
        if spec.enabled && placed {
            out.entry(key.namespace.clone())
                .or_default()
                .insert(key.name.clone());
        }
    }
    out
}

/// External addresses and ports of a live Service, sorted.
pub fn service_facts(svc: &Service) -> (Vec<String>, Vec<ServicePort>) {
    let mut addresses: Vec<String> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|ing| {
            ing.iter()
                .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
                .collect()
        })
        .unwrap_or_default();
    addresses.sort();
    addresses.dedup();
    let mut ports: Vec<ServicePort> = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| {
                    let protocol = PortProtocol::parse(p.protocol.as_deref().unwrap_or("TCP"))?;
                    let port = u16::try_from(p.port).ok().filter(|p| *p > 0)?;
                    Some(ServicePort {
                        name: p.name.clone().unwrap_or_default(),
                        protocol,
                        port,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    ports.sort();
    ports.dedup();
    (addresses, ports)
}

/// Ready endpoints of a Service's slices: `ready` unset counts as ready (the API's meaning).
pub fn ready_endpoints<'a>(slices: impl Iterator<Item = &'a EndpointSlice>) -> u32 {
    let n = slices
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One observation pass over the cluster's discovery Services.
pub async fn observe(
    ctx: &ClusterCtx,
    wanted: &BTreeMap<String, BTreeSet<String>>,
) -> Result<Vec<EndpointsReport>, ExecError> {
    let mut out = Vec::new();
    let limit = ctx.cfg.request_timeout;
    for (ns, names) in wanted {
        let svcs: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
        let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), ns);
        let managed =
            ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"));
        let by_service = ListParams::default().labels(SERVICE_NAME_LABEL);
        let svc_list = bounded(limit, "list services", svcs.list(&managed)).await?;
        let slice_list = bounded(limit, "list endpointslices", slices.list(&by_service)).await?;
        let mut slices_of: BTreeMap<&str, Vec<&EndpointSlice>> = BTreeMap::new();
        for s in &slice_list.items {
            if let Some(svc) = s
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
            {
                slices_of.entry(svc.as_str()).or_default().push(s);
            }
        }
        for svc in &svc_list.items {
            let Some(name) = svc.metadata.name.as_deref() else {
                continue;
            };
            if !names.contains(name) {
                continue;
            }
            let (addresses, ports) = service_facts(svc);
            let ready = ready_endpoints(
                slices_of
                    .get(name)
                    .map(|v| v.as_slice())
                    .unwrap_or_default()
                    .iter()
                    .copied(),
            );
            out.push(EndpointsReport {
                namespace: ns.clone(),
                name: name.to_string(),
                cluster: ctx.cluster.clone(),
                addresses,
                ports,
                ready_endpoints: ready,
            });
        }
    }
    Ok(out)
}

async fn bounded<T>(
    limit: Duration,
    action: &str,
    fut: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, ExecError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(|e| ExecError::kube(action.to_string(), e)),
        Err(_) => Err(ExecError::Timeout {
            action: action.to_string(),
            waited_ms: limit.as_millis() as u64,
        }),
    }
}

/// Observes the cluster's discovery Services every probe interval until aborted. A failed pass
/// keeps the previous observations out of the next flush (a dark cluster's last report stays in
/// the state as its last known addresses; health decides whether it is answered).
pub async fn run_service_observer<C: ControlPlane>(
    ctrl: C,
    ctx: Arc<ClusterCtx>,
    obs: Arc<ServiceObservations>,
) {
    let mut every = tokio::time::interval(ctx.cfg.probe_interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let wanted = ctrl.read_state(|s| discovery_services_on(s, &ctx.cluster));
        if wanted.is_empty() {
            obs.set(&ctx.cluster, Vec::new());
            continue;
        }
        match observe(&ctx, &wanted).await {
            Ok(reports) => obs.set(&ctx.cluster, reports),
            Err(e) => {
                tracing::debug!(cluster = %ctx.cluster, error = %e, "service observation failed");
                obs.set(&ctx.cluster, Vec::new());
            }
        }
    }
}

/// Flushes changed observations every status flush interval, one entry for all clusters.
pub async fn run_endpoints_reporter<C: ControlPlane>(
    ctrl: C,
    obs: Arc<ServiceObservations>,
    cfg: ExecutorConfig,
) {
    let mut sent = SentEndpoints::default();
    let mut every = tokio::time::interval(cfg.status_flush_interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let tag: u64 = rand::random();
    let mut seq: u64 = 0;
    loop {
        every.tick().await;
        let batch = ctrl.read_state(|s| obs.take_changed(s, &mut sent, Instant::now()));
        if batch.is_empty() {
            continue;
        }
        seq += 1;
        let id = format!("endpoints-{tag:016x}-{seq}");
        if let Err(e) = ctrl
            .propose(id, cfg.actor.clone(), Command::ServiceEndpoints(batch))
            .await
        {
            // The next flush sends fresh observations once RESEND_AFTER passes.
            tracing::warn!(error = %e, "proposing service endpoints failed");
        }
    }
}
