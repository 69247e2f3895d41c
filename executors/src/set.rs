//! Who runs executors: [`ExecutorSet`] runs on every fedraft node and starts the executors only
//! while that node is the raft leader (leader-only ownership). It checks leadership every
//! `leadership_poll` (well under the election timeout, so a new leader takes over within 2x the
//! election timeout, and a deposed one stops as soon as it notices). While leading it keeps one
//! [`ClusterRunner`] per registered cluster (a reconciler task and a probe task, each with its
//! own client, so a slow or dead cluster never delays the others) plus one reporter task, and
//! wakes every reconciler on each applied log entry.
//!
//! A handover cannot duplicate or lose objects: names in member clusters are deterministic,
//! server-side apply is idempotent, and the skip rule reads what is live rather than what the
//! previous leader remembered.
//!
//! Must not: run executors on a follower, or keep a runner for a deregistered cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fedraft_core::model::ClusterSpec;
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;

use crate::backoff::Backoff;
use crate::client::build_client;
use crate::config::ExecutorConfig;
use crate::node::ControlPlane;
use crate::probe::run_probe;
use crate::reconciler::{ClusterCtx, Reconciler};
use crate::report::{run_reporter, Observations};
use crate::services::{run_endpoints_reporter, run_service_observer, ServiceObservations};

/// Aborts its tasks when dropped.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// The executor tasks of one member cluster.
struct ClusterRunner {
    spec: ClusterSpec,
    wake: Arc<Notify>,
    _tasks: Tasks,
}

impl ClusterRunner {
    fn start<C: ControlPlane>(
        ctrl: C,
        spec: ClusterSpec,
        cfg: ExecutorConfig,
        obs: Arc<Observations>,
        svc_obs: Arc<ServiceObservations>,
    ) -> Self {
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(run_cluster(
            ctrl,
            spec.clone(),
            cfg,
            (obs, svc_obs),
            wake.clone(),
        ));
        ClusterRunner {
            spec,
            wake,
            _tasks: Tasks(vec![task]),
        }
    }
}

/// Builds the client (retrying with backoff while the registration is unusable), then runs the
/// reconciler and the probe of one cluster until aborted.
async fn run_cluster<C: ControlPlane>(
    ctrl: C,
    spec: ClusterSpec,
    cfg: ExecutorConfig,
    (obs, svc_obs): (Arc<Observations>, Arc<ServiceObservations>),
    wake: Arc<Notify>,
) {
    let backoff = Backoff::new(cfg.backoff_min, cfg.backoff_max);
    let mut attempt = 0u32;
    let client = loop {
        match build_client(&spec, cfg.probe_timeout).await {
            Ok(c) => break c,
            Err(e) => {
                attempt = attempt.saturating_add(1);
                tracing::warn!(cluster = %spec.name, error = %e, "cannot build a client");
                obs.probe_failed(&spec.name);
                tokio::time::sleep(backoff.delay_random(attempt)).await;
            }
        }
    };
    let ctx = Arc::new(ClusterCtx::new(
        spec.name.clone(),
        client,
        cfg,
        wake.clone(),
    ));
    let probe = Tasks(vec![
        tokio::spawn(run_probe(ctx.clone(), obs.clone())),
        tokio::spawn(run_service_observer(ctrl.clone(), ctx.clone(), svc_obs)),
    ]);
    Reconciler::new(ctrl, ctx, obs, wake).run().await;
    drop(probe);
}

/// Everything that runs while this node leads.
struct Leading {
    obs: Arc<Observations>,
    svc_obs: Arc<ServiceObservations>,
    clusters: BTreeMap<String, ClusterRunner>,
    _reporter: Tasks,
}

impl Leading {
    fn start<C: ControlPlane>(ctrl: &C, cfg: &ExecutorConfig) -> Self {
        let obs = Arc::new(Observations::default());
        let svc_obs = Arc::new(ServiceObservations::default());
        let reporter = tokio::spawn(run_reporter(ctrl.clone(), obs.clone(), cfg.clone()));
        let endpoints = tokio::spawn(run_endpoints_reporter(
            ctrl.clone(),
            svc_obs.clone(),
            cfg.clone(),
        ));
        Leading {
            obs,
            svc_obs,
            clusters: BTreeMap::new(),
            _reporter: Tasks(vec![reporter, endpoints]),
        }
    }

    /// Starts, restarts (changed endpoint or credentials) and stops runners to match the state.
    fn sync<C: ControlPlane>(&mut self, ctrl: &C, cfg: &ExecutorConfig) {
        let specs: BTreeMap<String, ClusterSpec> = ctrl.read_state(|s| {
            s.clusters()
                .map(|c| (c.spec.name.clone(), c.spec.clone()))
                .collect()
        });
        self.clusters.retain(|name, runner| {
            let keep = specs.get(name).is_some_and(|s| {
                s.api_endpoint == runner.spec.api_endpoint
                    && s.credentials == runner.spec.credentials
            });
            if !keep {
                tracing::info!(cluster = %name, "stopping executor");
                self.obs.forget(name);
                self.svc_obs.forget(name);
            }
            keep
        });
        for (name, spec) in specs {
            if !self.clusters.contains_key(&name) {
                tracing::info!(cluster = %name, "starting executor");
                let runner = ClusterRunner::start(
                    ctrl.clone(),
                    spec,
                    cfg.clone(),
                    self.obs.clone(),
                    self.svc_obs.clone(),
                );
                self.clusters.insert(name, runner);
            }
        }
    }

    fn wake_all(&self) {
        for r in self.clusters.values() {
            r.wake.notify_one();
        }
    }
}

/// Handle to the executors of one fedraft node.
pub struct ExecutorSet {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    running: Arc<Mutex<BTreeSet<String>>>,
}

impl ExecutorSet {
    /// Starts the supervisor. Executors run only while `node` is the leader.
    pub fn start<C: ControlPlane>(node: C, cfg: ExecutorConfig) -> ExecutorSet {
        crate::client::install_crypto_provider();
        let (stop, stop_rx) = watch::channel(false);
        let running = Arc::new(Mutex::new(BTreeSet::new()));
        let task = tokio::spawn(supervise(node, cfg, stop_rx, running.clone()));
        ExecutorSet {
            stop,
            task: Some(task),
            running,
        }
    }

    /// Clusters this node's executors are converging now (empty unless leading).
    pub fn running_clusters(&self) -> BTreeSet<String> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops every executor and waits for the supervisor to end.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for ExecutorSet {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// How often cluster membership is re-read even without applied entries.
const MEMBERSHIP_RESYNC: Duration = Duration::from_secs(5);

async fn supervise<C: ControlPlane>(
    ctrl: C,
    cfg: ExecutorConfig,
    mut stop: watch::Receiver<bool>,
    running: Arc<Mutex<BTreeSet<String>>>,
) {
    let mut applied = ctrl.subscribe();
    let mut leading: Option<Leading> = None;
    let mut last_sync = tokio::time::Instant::now();
    loop {
        let mut entries = false;
        tokio::select! {
            _ = stop.changed() => break,
            r = applied.recv() => match r {
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => entries = true,
                Err(broadcast::error::RecvError::Closed) => {
                    tracing::info!("node stopped publishing applied entries; executors stop");
                    break;
                }
            },
            _ = tokio::time::sleep(cfg.leadership_poll) => {}
        }
        if *stop.borrow() {
            break;
        }
        let is_leader = ctrl.is_leader();
        match (&mut leading, is_leader) {
            (None, true) => {
                tracing::info!("this node leads: starting executors");
                let mut l = Leading::start(&ctrl, &cfg);
                l.sync(&ctrl, &cfg);
                last_sync = tokio::time::Instant::now();
                leading = Some(l);
            }
            (Some(_), false) => {
                tracing::info!("this node no longer leads: stopping executors");
                leading = None;
            }
            (Some(l), true) => {
                if entries || last_sync.elapsed() >= MEMBERSHIP_RESYNC {
                    l.sync(&ctrl, &cfg);
                    last_sync = tokio::time::Instant::now();
                }
                if entries {
                    l.wake_all();
                }
            }
            (None, false) => {}
        }
        let now_running: BTreeSet<String> = leading
            .as_ref()
            .map(|l| l.clusters.keys().cloned().collect())
            .unwrap_or_default();
        *running.lock().unwrap_or_else(PoisonError::into_inner) = now_running;
    }
    drop(leading);
    running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}
