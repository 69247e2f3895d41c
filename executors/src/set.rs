//! Who runs executors: [`ExecutorSet`] runs on every fedraft node and starts the executors only
//! while that node is the raft leader (leader-only ownership). It checks leadership every
//! `leadership_poll` (well under the election timeout, so a new leader takes over within 2x the
//! election timeout, and a deposed one stops as soon as it notices). While leading it keeps one
//! [`ClusterRunner`] per registered cluster (a reconciler task and a probe task, each with its
//! own client, so a slow or dead cluster never delays the others) plus one reporter task, and
//! wakes every reconciler on each applied log entry.
//!
//! A handover cannot duplicate or lose objects: a new leader starts only once it has applied
//! its log up to the index it held when elected (so it never prunes what the previous leader
//! placed from a state that lags behind), names in member clusters are deterministic,
//! server-side apply is idempotent, and the skip rule reads what is live rather than what the
//! previous leader remembered.
//!
//! Deregistration: the runner of a deregistered cluster is retired, not dropped. It stops
//! probing and converging, then deletes every object fedraft placed in that cluster (what a
//! pass does when nothing is desired) until none is left, for at most
//! `deregister_cleanup_timeout`. Unmanaged objects and namespaces are left alone. Only the
//! leader at the time of deregistration does this; if it loses leadership meanwhile, or the
//! cluster is dark throughout, the leftovers keep fedraft's ownership label, so
//! `kubectl delete deploy,sts,ds,svc,cm,secret,sa,job,cronjob,ing -A -l fedraft.io/managed-by=fedraft`
//! removes them. For a removal without downtime, drain first and deregister once nothing is
//! placed there.
//!
//! Every node also runs its prober (`prober`), leader or not, when configured.
//!
//! Must not: run executors on a follower, or converge a deregistered cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fedraft_core::model::ClusterSpec;
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;

use crate::backoff::Backoff;
use crate::client::build_measured_client;
use crate::config::ExecutorConfig;
use crate::node::ControlPlane;
use crate::probe::run_probe;
use crate::prober::run_prober;
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
    retire: watch::Sender<bool>,
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
        let (retire, retire_rx) = watch::channel(false);
        let task = tokio::spawn(run_cluster(
            ctrl,
            spec.clone(),
            cfg,
            (obs, svc_obs),
            wake.clone(),
            retire_rx,
        ));
        ClusterRunner {
            spec,
            wake,
            retire,
            _tasks: Tasks(vec![task]),
        }
    }

    /// The cluster was deregistered: stop converging and remove fedraft's objects from it.
    fn retire(&self) {
        self.retire.send_replace(true);
        self.wake.notify_one();
    }

    fn finished(&self) -> bool {
        self._tasks.0.iter().all(JoinHandle::is_finished)
    }
}

/// Builds the client (retrying with backoff while the registration is unusable), then runs the
/// reconciler and the probe of one cluster until aborted or retired. Retired (the cluster was
/// deregistered), it stops probing and deletes every managed object from the cluster, for at
/// most `deregister_cleanup_timeout`.
async fn run_cluster<C: ControlPlane>(
    ctrl: C,
    spec: ClusterSpec,
    cfg: ExecutorConfig,
    (obs, svc_obs): (Arc<Observations>, Arc<ServiceObservations>),
    wake: Arc<Notify>,
    mut retire: watch::Receiver<bool>,
) {
    let backoff = Backoff::new(cfg.backoff_min, cfg.backoff_max);
    let mut attempt = 0u32;
    let client = loop {
        if *retire.borrow() {
            return;
        }
        let metrics = cfg.metrics.cluster(&spec.name);
        let keyring = cfg.credentials_keys.as_deref();
        match build_measured_client(
            &spec,
            cfg.probe_timeout,
            &cfg.kubeconfig_exec_allow,
            &metrics,
            keyring,
            &cfg.member_calls,
        )
        .await
        {
            Ok(c) => break c,
            Err(e) => {
                attempt = attempt.saturating_add(1);
                tracing::warn!(cluster = %spec.name, error = %e, "cannot build a client");
                let failure = fedraft_core::health::ProbeFailure::new(
                    fedraft_core::health::FailureKind::Error,
                    &e.to_string(),
                );
                obs.probe_failed(&spec.name, failure);
                tokio::time::sleep(backoff.delay_random(attempt)).await;
            }
        }
    };
    let limit = cfg.deregister_cleanup_timeout;
    let ctx = Arc::new(ClusterCtx::new(
        spec.name.clone(),
        client,
        cfg,
        wake.clone(),
    ));
    let probe = Tasks(vec![
        tokio::spawn(run_probe(ctx.clone(), obs.clone())),
        tokio::spawn(run_service_observer(
            ctrl.clone(),
            ctx.clone(),
            svc_obs.clone(),
        )),
    ]);
    let mut reconciler = Reconciler::new(ctrl, ctx, obs.clone(), wake);
    tokio::select! {
        _ = reconciler.run() => return,
        r = retire.wait_for(|r| *r) => {
            // A dropped sender means the runner is being aborted, not retired.
            if r.is_err() {
                return;
            }
        }
    }
    drop(probe);
    obs.forget(&spec.name);
    tracing::info!(cluster = %spec.name, "deregistered: removing fedraft's objects");
    match tokio::time::timeout(limit, reconciler.farewell()).await {
        Ok(()) => {
            tracing::info!(cluster = %spec.name, "deregistered cluster holds no fedraft objects")
        }
        Err(_) => tracing::warn!(
            cluster = %spec.name,
            waited_s = limit.as_secs(),
            "deregistered cluster still holds objects fedraft placed (label fedraft.io/managed-by=fedraft)"
        ),
    }
    obs.forget(&spec.name);
}

/// Everything that runs while this node leads.
struct Leading {
    obs: Arc<Observations>,
    svc_obs: Arc<ServiceObservations>,
    clusters: BTreeMap<String, ClusterRunner>,
    /// Runners of deregistered clusters, cleaning up; dropped once done.
    retiring: BTreeMap<String, ClusterRunner>,
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
            retiring: BTreeMap::new(),
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
        let names: Vec<String> = self.clusters.keys().cloned().collect();
        for name in names {
            let Some(spec) = specs.get(&name) else {
                if let Some(runner) = self.clusters.remove(&name) {
                    tracing::info!(cluster = %name, "cluster deregistered: retiring its executor");
                    cfg.metrics.forget(&name);
                    self.obs.forget(&name);
                    self.svc_obs.forget(&name);
                    runner.retire();
                    self.retiring.insert(name, runner);
                }
                continue;
            };
            let same = self.clusters.get(&name).is_some_and(|r| {
                spec.api_endpoint == r.spec.api_endpoint && spec.credentials == r.spec.credentials
            });
            if !same {
                tracing::info!(cluster = %name, "registration changed: restarting executor");
                self.obs.forget(&name);
                self.svc_obs.forget(&name);
                self.clusters.remove(&name);
            }
        }
        // A retired cluster registered again is converged afresh, not emptied.
        self.retiring
            .retain(|name, r| !r.finished() && !specs.contains_key(name));
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
    /// This node's prober (every node, leading or not), when configured.
    _prober: Tasks,
}

impl ExecutorSet {
    /// Starts the supervisor. Executors run only while `node` is the leader.
    pub fn start<C: ControlPlane>(node: C, cfg: ExecutorConfig) -> ExecutorSet {
        crate::client::install_crypto_provider();
        let (stop, stop_rx) = watch::channel(false);
        let running = Arc::new(Mutex::new(BTreeSet::new()));
        let prober = cfg
            .prober_interval
            .map(|every| tokio::spawn(run_prober(node.clone(), cfg.clone(), every)));
        let task = tokio::spawn(supervise(node, cfg, stop_rx, running.clone()));
        ExecutorSet {
            stop,
            task: Some(task),
            running,
            _prober: Tasks(prober.into_iter().collect()),
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
    // Log index this node must have applied before its executors start (see `log_position`).
    let mut catch_up: Option<u64> = None;
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
                let (last, applied) = ctrl.log_position();
                let mark = *catch_up.get_or_insert(last);
                if applied < mark {
                    tracing::debug!(
                        applied,
                        mark,
                        "leading; applying the log before starting executors"
                    );
                    continue;
                }
                catch_up = None;
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
            (None, false) => catch_up = None,
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
