//! Who runs executors: [`ExecutorSet`] runs on every fedraft node. Two modes, chosen by the
//! applied state:
//! - spread ownership (some node holds an ownership lease, `fedraft_core::owners`): this node
//!   runs executors for the clusters the log assigns to it, each writing with its owner token
//!   and only while its own lease is fresh in local time (`fence.rs`, `lease.rs`): a node
//!   whose renewals stop committing stops writing before core hands its clusters over, and
//!   starts again, watches intact, with the next renewal that commits;
//! - leader-only ownership (no lease live: nodes without `owner_lease`, older logs, or the
//!   first lease of the book while it forms, `fedraft_core::owners`): the
//!   executors run while this node is the raft leader, checked every `leadership_poll` (well
//!   under the election timeout, so a new leader takes over within 2x the election timeout, and
//!   a deposed one stops as soon as it notices).
//!
//! While running it keeps one [`ClusterRunner`] per cluster it runs (a reconciler task and a
//! probe task, each with its own client, so a slow or dead cluster never delays the others)
//! plus one reporter task, whose reports go through the local node (forwarded to the leader),
//! and wakes every reconciler on each applied log entry.
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
//! cluster's runner at the time of deregistration does this; if it stops meanwhile, or the
//! cluster is dark throughout, the leftovers keep fedraft's ownership label, so
//! `kubectl delete deploy,sts,ds,svc,cm,secret,sa,job,cronjob,ing -A -l fedraft.io/managed-by=fedraft`
//! removes them. For a removal without downtime, drain first and deregister once nothing is
//! placed there.
//!
//! Every node also runs its prober (`prober`), leader or not, when configured.
//!
//! A new owner needs no more than the log: it learns of its clusters from the entry that moved
//! them, so its state holds every object placed before, and the previous owner stopped writing
//! half a lease before that entry (and is fenced by token if it did not).
//!
//! Must not: run executors for a cluster another node owns, run leader-only executors on a
//! follower, or converge a deregistered cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fedraft_core::model::ClusterSpec;
use fedraft_core::state::State;
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;

use crate::backoff::Backoff;
use crate::client::build_measured_client;
use crate::config::ExecutorConfig;
use crate::lease::{run_lease, LeaseClock};
use crate::node::ControlPlane;
use crate::probe::run_probe;
use crate::prober::run_prober;
use crate::reconciler::{ClusterCtx, Reconciler};
use crate::report::Observations;
use crate::reporter::run_reporter;
use crate::services::{run_endpoints_reporter, run_service_observer, ServiceObservations};
use crate::wake::{Interest, WakeScope};

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
    /// The owner token it writes with (`crate::fence`); None under leader-only ownership.
    token: Option<String>,
    wake: Arc<Notify>,
    /// The objects its reconciler last scanned as placed on the cluster.
    interest: Arc<Interest>,
    retire: watch::Sender<bool>,
    _tasks: Tasks,
}

impl ClusterRunner {
    fn start<C: ControlPlane>(
        ctrl: C,
        (spec, token): (ClusterSpec, Option<String>),
        (cfg, clock): (ExecutorConfig, Arc<LeaseClock>),
        obs: Arc<Observations>,
        svc_obs: Arc<ServiceObservations>,
    ) -> Self {
        let wake = Arc::new(Notify::new());
        let interest = Arc::new(Interest::default());
        let (retire, retire_rx) = watch::channel(false);
        let task = tokio::spawn(run_cluster(
            ctrl,
            (spec.clone(), token.clone()),
            (cfg, clock),
            (obs, svc_obs),
            (wake.clone(), interest.clone()),
            retire_rx,
        ));
        ClusterRunner {
            spec,
            token,
            wake,
            interest,
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
    (spec, token): (ClusterSpec, Option<String>),
    (cfg, clock): (ExecutorConfig, Arc<LeaseClock>),
    (obs, svc_obs): (Arc<Observations>, Arc<ServiceObservations>),
    (wake, interest): (Arc<Notify>, Arc<Interest>),
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
            Some(fedraft_core::health::vantage_name(&cfg.actor)),
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
    let ctx = ClusterCtx::new(spec.name.clone(), client, cfg, wake.clone()).with_interest(interest);
    let ctx = Arc::new(ctx.with_token(token, Some(clock)));
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

/// Everything that runs while this node runs executors: as the leader (leader-only ownership)
/// or as the owner of some clusters with a fresh lease (spread ownership).
struct Running {
    obs: Arc<Observations>,
    svc_obs: Arc<ServiceObservations>,
    clusters: BTreeMap<String, ClusterRunner>,
    /// Runners of deregistered clusters, cleaning up; dropped once done.
    retiring: BTreeMap<String, ClusterRunner>,
    /// This node's lease, which every runner's writes wait on under spread ownership.
    clock: Arc<LeaseClock>,
    _reporter: Tasks,
}

impl Running {
    fn start<C: ControlPlane>(ctrl: &C, cfg: &ExecutorConfig, clock: Arc<LeaseClock>) -> Self {
        let obs = Arc::new(Observations::default());
        let svc_obs = Arc::new(ServiceObservations::default());
        let reporter = tokio::spawn(run_reporter(ctrl.clone(), obs.clone(), cfg.clone()));
        let endpoints = tokio::spawn(run_endpoints_reporter(
            ctrl.clone(),
            svc_obs.clone(),
            cfg.clone(),
        ));
        Running {
            obs,
            svc_obs,
            clusters: BTreeMap::new(),
            retiring: BTreeMap::new(),
            clock,
            _reporter: Tasks(vec![reporter, endpoints]),
        }
    }

    /// Starts, restarts (changed endpoint, credentials or owner token) and stops runners to
    /// match the state: every cluster under leader-only ownership, the owned ones otherwise.
    /// A cluster that moved to another node stops here (no cleanup: it is still registered).
    fn sync<C: ControlPlane>(&mut self, ctrl: &C, cfg: &ExecutorConfig) {
        let plan =
            ctrl.read_state(|s| SyncPlan::read(s, &cfg.actor, &self.clusters, &self.retiring));
        for name in plan.gone {
            if let Some(runner) = self.clusters.remove(&name) {
                tracing::info!(cluster = %name, "cluster deregistered: retiring its executor");
                cfg.metrics.forget(&name);
                self.obs.forget(&name);
                self.svc_obs.forget(&name);
                runner.retire();
                self.retiring.insert(name, runner);
            }
        }
        for name in plan.moved {
            tracing::info!(cluster = %name, "another node owns this cluster now: stopping");
            self.stop(&name);
        }
        for name in &plan.changed {
            tracing::info!(cluster = %name, "registration or owner changed: restarting executor");
            self.stop(name);
        }
        // A retired cluster registered again is converged afresh, not emptied.
        self.retiring
            .retain(|name, r| !r.finished() && !plan.back.contains(name));
        for (spec, token) in plan.start {
            if self.clusters.contains_key(&spec.name) {
                continue;
            }
            tracing::info!(cluster = %spec.name, ?token, "starting executor");
            let name = spec.name.clone();
            let runner = ClusterRunner::start(
                ctrl.clone(),
                (spec, token),
                (cfg.clone(), self.clock.clone()),
                self.obs.clone(),
                self.svc_obs.clone(),
            );
            self.clusters.insert(name, runner);
        }
    }

    /// Stops a cluster's runner without cleanup (it is still registered).
    fn stop(&mut self, name: &str) {
        self.obs.forget(name);
        self.svc_obs.forget(name);
        self.clusters.remove(name);
    }

    /// Wakes the reconcilers `scope` concerns: those of the clusters it names, and for object
    /// changes those of the clusters the objects are placed on now and of those that held them
    /// at their last scan.
    fn wake<C: ControlPlane>(&self, ctrl: &C, scope: &WakeScope) {
        if scope.all {
            for r in self.clusters.values() {
                r.wake.notify_one();
            }
            return;
        }
        if scope.objects.is_empty() && scope.clusters.is_empty() {
            return;
        }
        let mut placed = ctrl.read_state(|s| clusters_of(s, &scope.objects));
        placed.extend(scope.clusters.iter().cloned());
        for (name, r) in &self.clusters {
            if placed.contains(name) || r.interest.any(&scope.objects) {
                r.wake.notify_one();
            }
        }
    }
}

/// The clusters the objects (`namespace/name`) are placed on.
fn clusters_of(s: &State, objects: &BTreeSet<String>) -> BTreeSet<String> {
    objects
        .iter()
        .filter_map(|key| key.split_once('/'))
        .filter_map(|(namespace, name)| s.object(namespace, name))
        .flat_map(|o| o.status.clusters.iter().map(|c| String::from(&*c.cluster)))
        .collect()
}

/// What one sync changes, read under the state's lock. Only the registrations that start a
/// runner are cloned: sync runs after every round of applied entries, and cloning all of a
/// thousand clusters' registrations each time cost the leader a seventh of its CPU.
#[derive(Default)]
struct SyncPlan {
    /// Running, and no longer registered: retired (their objects are removed).
    gone: Vec<String>,
    /// Running, and owned by another node now.
    moved: Vec<String>,
    /// Running, with another endpoint, credentials or owner token now: restarted.
    changed: BTreeSet<String>,
    /// To run and not running (the changed ones included), with the owner token to write with.
    start: Vec<(ClusterSpec, Option<String>)>,
    /// Retiring, and registered again.
    back: BTreeSet<String>,
}

impl SyncPlan {
    fn read(
        s: &State,
        actor: &str,
        running: &BTreeMap<String, ClusterRunner>,
        retiring: &BTreeMap<String, ClusterRunner>,
    ) -> SyncPlan {
        let owners = s.owners();
        let spread = owners.in_force();
        // None under leader-only ownership; Some(None) for another node's cluster.
        let token_of = |name: &str| -> Option<Option<String>> {
            spread.then(|| {
                owners
                    .clusters
                    .get(name)
                    .filter(|o| o.node == actor)
                    .map(|o| o.token())
            })
        };
        let mut plan = SyncPlan::default();
        for (name, runner) in running {
            let Some(c) = s.cluster(name) else {
                plan.gone.push(name.clone());
                continue;
            };
            let token = token_of(name);
            if token.as_ref().is_some_and(Option::is_none) {
                plan.moved.push(name.clone());
                continue;
            }
            let same = c.spec.api_endpoint == runner.spec.api_endpoint
                && c.spec.credentials == runner.spec.credentials
                && runner.token == token.flatten();
            if !same {
                plan.changed.insert(name.clone());
            }
        }
        for c in s.clusters() {
            let name = &c.spec.name;
            if running.contains_key(name) && !plan.changed.contains(name) {
                continue;
            }
            match token_of(name) {
                None => plan.start.push((c.spec.clone(), None)),
                Some(Some(token)) => plan.start.push((c.spec.clone(), Some(token))),
                Some(None) => {}
            }
        }
        plan.back = retiring
            .keys()
            .filter(|name| s.cluster(name).is_some())
            .cloned()
            .collect();
        plan
    }
}

/// Handle to the executors of one fedraft node.
pub struct ExecutorSet {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    running: Arc<Mutex<BTreeSet<String>>>,
    /// This node's prober (every node, leading or not) and ownership lease, when configured.
    _prober: Tasks,
}

impl ExecutorSet {
    /// Starts the supervisor. Executors run while `node` leads (leader-only ownership), or,
    /// once some node holds an ownership lease, for the clusters the log assigns to this node
    /// while its own lease is fresh (`lease.rs`).
    pub fn start<C: ControlPlane>(node: C, cfg: ExecutorConfig) -> ExecutorSet {
        crate::client::install_crypto_provider();
        let (stop, stop_rx) = watch::channel(false);
        let running = Arc::new(Mutex::new(BTreeSet::new()));
        let clock = Arc::new(LeaseClock::default());
        let mut side: Vec<JoinHandle<()>> = cfg
            .prober_interval
            .map(|every| tokio::spawn(run_prober(node.clone(), cfg.clone(), every)))
            .into_iter()
            .collect();
        if let Some(lease) = cfg.owner_lease {
            side.push(tokio::spawn(run_lease(
                node.clone(),
                cfg.actor.clone(),
                lease,
                cfg.locality.clone(),
                clock.clone(),
            )));
        }
        let task = tokio::spawn(supervise(node, cfg, stop_rx, running.clone(), clock));
        ExecutorSet {
            stop,
            task: Some(task),
            running,
            _prober: Tasks(side),
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

/// Folds one applied entry (None: some were lost, so anything may have changed) into the round.
fn fold<C: ControlPlane>(round: &mut Option<WakeScope>, applied: Option<&C::Applied>) {
    let scope = applied.map_or_else(WakeScope::everything, C::wake_scope);
    round.get_or_insert_default().merge(scope);
}

/// How often cluster membership is re-read even without applied entries.
const MEMBERSHIP_RESYNC: Duration = Duration::from_secs(5);

async fn supervise<C: ControlPlane>(
    ctrl: C,
    cfg: ExecutorConfig,
    mut stop: watch::Receiver<bool>,
    running: Arc<Mutex<BTreeSet<String>>>,
    clock: Arc<LeaseClock>,
) {
    let mut applied = ctrl.subscribe();
    let mut active: Option<Running> = None;
    // Log index this node must have applied before its executors start (see `log_position`).
    let mut catch_up: Option<u64> = None;
    let mut last_sync = tokio::time::Instant::now();
    loop {
        // This round's applied entries, as one wake-up (None: none arrived).
        let mut round: Option<WakeScope> = None;
        tokio::select! {
            _ = stop.changed() => break,
            r = applied.recv() => match r {
                Ok(a) => fold::<C>(&mut round, Some(&a)),
                Err(broadcast::error::RecvError::Lagged(_)) => fold::<C>(&mut round, None),
                Err(broadcast::error::RecvError::Closed) => {
                    tracing::info!("node stopped publishing applied entries; executors stop");
                    break;
                }
            },
            _ = tokio::time::sleep(cfg.leadership_poll) => {}
        }
        // Whatever else was applied meanwhile is handled in this round: one sync and one wake
        // per burst, not per entry.
        loop {
            match applied.try_recv() {
                Ok(a) => fold::<C>(&mut round, Some(&a)),
                Err(broadcast::error::TryRecvError::Lagged(_)) => fold::<C>(&mut round, None),
                Err(_) => break,
            }
        }
        if *stop.borrow() {
            break;
        }
        // Spread ownership once leases are in force: run the owned clusters' runners always,
        // each writing only while this node's lease is fresh (self-fencing in the fence, so a
        // late renewal pauses writes without dropping watches). Leader-only otherwise (also
        // while the book forms), as before.
        let spread = ctrl.read_state(|s| s.owners().in_force());
        let should_run = spread || ctrl.is_leader();
        match (&mut active, should_run) {
            (None, true) => {
                let (last, applied) = ctrl.log_position();
                let mark = *catch_up.get_or_insert(last);
                if applied < mark {
                    tracing::debug!(applied, mark, "applying the log before starting executors");
                    continue;
                }
                catch_up = None;
                tracing::info!(spread, "starting executors");
                let mut l = Running::start(&ctrl, &cfg, clock.clone());
                l.sync(&ctrl, &cfg);
                last_sync = tokio::time::Instant::now();
                active = Some(l);
            }
            (Some(_), false) => {
                tracing::info!("this node no longer leads: stopping executors");
                active = None;
            }
            (Some(l), true) => {
                // Any entry but an observation that changed nothing may have moved ownership
                // (it moves as log time passes, on whichever entry crosses a lease), and a runner
                // the book took away must stop before this round wakes it for an object.
                let news = round.as_ref().is_some_and(|r| !r.is_nothing());
                if news || last_sync.elapsed() >= MEMBERSHIP_RESYNC {
                    l.sync(&ctrl, &cfg);
                    last_sync = tokio::time::Instant::now();
                }
                if let Some(scope) = &round {
                    l.wake(&ctrl, scope);
                }
            }
            (None, false) => catch_up = None,
        }
        let now_running: BTreeSet<String> = active
            .as_ref()
            .map(|l| {
                l.clusters
                    .iter()
                    .filter(|(_, r)| !r.finished())
                    .map(|(c, _)| c.clone())
                    .collect()
            })
            .unwrap_or_default();
        *running.lock().unwrap_or_else(PoisonError::into_inner) = now_running;
    }
    drop(active);
    running
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}
