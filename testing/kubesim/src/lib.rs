//! fedraft-kubesim: a member-cluster simulator that speaks the subset of the Kubernetes REST API
//! a federation needs, so fedraft's executors, tests and demo exercise the same kube-rs code
//! paths they use against real clusters. Test and demo infrastructure only: one process, state
//! in memory, plain HTTP (TLS is not served), optional bearer token.
//!
//! # Using it as a library
//!
//! ```no_run
//! # async fn demo() -> Result<(), fedraft_kubesim::SimError> {
//! use fedraft_kubesim::{DarkMode, SimConfig, Simulator};
//! let sim = Simulator::start(SimConfig { name: "dc1".into(), nodes: 3, ..SimConfig::default() }).await?;
//! let url = sim.url(); // "http://127.0.0.1:PORT": kube::Config::new(url.parse()?) talks to it
//! sim.admin().go_dark(DarkMode::Refuse); // connections refused...
//! sim.admin().come_back(); // ...and served again on the same address
//! let writes = sim.admin().stats().total_changes; // writes that changed stored state
//! sim.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # What it serves
//! - `/version`, `/healthz`, `/livez`, `/readyz`; discovery at `/api`, `/api/v1`, `/apis`,
//!   `/apis/{group}`, `/apis/{group}/{version}` (see [`discovery::CATALOG`]); a minimal
//!   `/openapi/v3` (PATCH parameters only: kubectl's apply refuses to run when it cannot learn
//!   that the server validates fields); anything else, `/openapi/v2` included, is a 404 Status.
//! - get and list answer as a `Table` (kube-apiserver's columns, so `kubectl get` prints what it
//!   prints against a real cluster) or as partial metadata when `Accept` asks.
//! - get, list (label/field selectors, `limit` + `continue`), watch (from a resourceVersion,
//!   bookmarks, 410 ERROR event when too old), create, update, patch (server-side apply with
//!   managedFields and conflicts, merge, strategic merge with list merge keys and directives,
//!   JSON patch), delete, deletecollection; `status` subresource for kinds that have one;
//!   `dryRun=All`.
//! - One global resourceVersion counter; writes that change nothing are not stored
//!   (no resourceVersion or generation bump), which is what makes repeated applies free.
//! - Nodes generated at start; deployment/statefulset status converging after `status_delay`,
//!   limited by node capacity; LoadBalancer services get `10.x` ingress addresses; Services with
//!   a selector get an EndpointSlice whose ready endpoints follow the matching workloads' ready
//!   replicas (see [`endpoints`]).
//! - Faults and counters through [`Admin`] and `/_sim/...` (see [`admin`]).
//! - Many clusters in one process, each on its own port, with group faults: [`fleet`].
//!
//! Start reading at [`Simulator::start`], then `routes` (HTTP surface), `writes` and `apply`
//! (write semantics), `store` (versions and history), `controller` (status).
//!
//! The Kubernetes semantics themselves (apply and managed fields, patches, selectors, Status,
//! discovery documents) are `fedraft_kubeapi`'s; this crate is the server, the store, the
//! controllers and the faults around them.
//!
//! Must not: depend on fedraft crates other than `fedraft-kubeapi`, persist anything, or
//! contact the addresses it hands out (they are only strings in status).

pub mod admin;
mod call;
pub mod controller;
pub mod discovery;
pub mod endpoints;
pub mod extended;
pub mod faults;
pub mod fleet;
mod meta;
mod routes;
mod server;
pub mod stats;
pub mod status;
mod store;
mod validate;
mod watch;
pub mod writelog;
mod writes;

// Kubernetes semantics shared with fedraft's door; the modules here use them by these names.
use fedraft_kubeapi::{apply, fields, patch, selector};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

pub use admin::Admin;
pub use controller::CapacityReport;
pub use faults::{DarkMode, FaultSettings};
pub use fleet::{Fleet, FleetConfig, FleetFault, FleetSelector};
pub use stats::StatsSnapshot;
pub use status::ApiError;
pub use writelog::{WriteLogSnapshot, WriteRecord};

use store::{Change, Store};

/// Everything the simulator can be told at start.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Cluster name: prefixes node names, seeds the load-balancer address range.
    pub name: String,
    /// Address of the Kubernetes API; port 0 picks one.
    pub listen: SocketAddr,
    /// Optional second listener serving only `/_sim`, reachable while the API is dark.
    pub admin_listen: Option<SocketAddr>,
    pub nodes: u32,
    /// Per-node cpu and memory capacity (= allocatable), as Kubernetes quantities.
    pub node_cpu: String,
    pub node_memory: String,
    pub node_pods: u32,
    /// Further nodes with extended resources (GPUs), after the `nodes` plain ones.
    pub extended_nodes: Vec<extended::ExtendedNodes>,
    /// How long after a workload's generation changes its status converges.
    pub status_delay: Duration,
    /// How often an idle watch with bookmarks gets one (kube-apiserver: about a minute).
    pub bookmark_interval: Duration,
    /// Watch events retained; a watch from an older resourceVersion gets 410.
    pub watch_history: usize,
    /// If set, every API request but health/version needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    pub faults: FaultSettings,
    /// First two octets of load-balancer addresses, e.g. "10.7"; default derived from `name`.
    pub lb_ip_prefix: Option<String>,
    /// Seed of the error-rate dice; random (and logged) if unset.
    pub seed: Option<u64>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            name: "kubesim".into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_listen: None,
            nodes: 3,
            node_cpu: "8".into(),
            node_memory: "32Gi".into(),
            node_pods: 110,
            extended_nodes: Vec::new(),
            status_delay: Duration::from_millis(500),
            bookmark_interval: Duration::from_secs(5),
            watch_history: 10_000,
            token: None,
            faults: FaultSettings::default(),
            lb_ip_prefix: None,
            seed: None,
        }
    }
}

/// Errors of starting and administering the simulator. API refusals are [`ApiError`].
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Boxed: a refusal carries its Status details and would bloat every `Result`.
    #[error(transparent)]
    Api(Box<ApiError>),
}

impl From<ApiError> for SimError {
    fn from(e: ApiError) -> Self {
        SimError::Api(Box::new(e))
    }
}

/// State shared by the routes, the controller and the admin API.
pub(crate) struct Shared {
    pub config: SimConfig,
    pub store: Store,
    pub stats: stats::Stats,
    pub writes: writelog::WriteLog,
    pub faults: faults::Faults,
    pub capacity: Mutex<CapacityReport>,
    pub lb_prefix: String,
    pub dark_epoch: AtomicU64,
    cluster_ips: AtomicU32,
    addr: OnceLock<SocketAddr>,
}

impl Shared {
    pub fn next_cluster_ip(&self) -> u32 {
        self.cluster_ips.fetch_add(1, Ordering::Relaxed)
    }

    pub fn addr_string(&self) -> String {
        self.addr.get().map(ToString::to_string).unwrap_or_default()
    }

    /// A simulated cluster's state: its store seeded with the namespaces and nodes it starts
    /// with, before anything serves it.
    pub(crate) fn new(config: SimConfig) -> Result<Arc<Shared>, SimError> {
        config.faults.validate().map_err(SimError::Config)?;
        let seed = config.seed.unwrap_or_else(rand::random);
        tracing::info!(cluster = %config.name, seed, "starting kubesim");
        let lb_prefix = config.lb_ip_prefix.clone().unwrap_or_else(|| {
            // FNV-1a of the name: stable across runs, different for dc1/dc2/dc3.
            let h = config.name.bytes().fold(0xcbf29ce484222325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100000001b3)
            });
            format!("10.{}", 1 + h % 250)
        });
        let shared = Arc::new(Shared {
            store: Store::new(config.watch_history),
            stats: stats::Stats::default(),
            writes: writelog::WriteLog::default(),
            faults: faults::Faults::new(config.faults.clone(), seed),
            capacity: Mutex::new(CapacityReport::default()),
            lb_prefix,
            dark_epoch: AtomicU64::new(0),
            cluster_ips: AtomicU32::new(1),
            addr: OnceLock::new(),
            config,
        });
        seed_objects(&shared)?;
        Ok(shared)
    }
}

/// Starts simulators; see [`Simulator::start`].
pub struct Simulator;

impl Simulator {
    /// Binds the API (and admin) listener, creates the default namespaces and the nodes, and
    /// starts serving and the status controller. Returns once the address accepts connections.
    pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
        for (what, q) in [
            ("node cpu", &config.node_cpu),
            ("node memory", &config.node_memory),
        ] {
            if controller::parse_quantity_milli(q).is_none() {
                return Err(SimError::Config(format!("{what} {q:?} is not a quantity")));
            }
        }
        let shared = Shared::new(config)?;

        let listen = shared.config.listen;
        let listener = server::bind(listen).map_err(|source| SimError::Bind {
            addr: listen,
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: listen,
            source,
        })?;
        let _ = shared.addr.set(addr);
        let (shutdown_tx, shutdown_rx) = tokio_watch::channel(false);
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(server::run(
            listener,
            routes::router(shared.clone()),
            shared.faults.subscribe_dark(),
            shutdown_rx.clone(),
        )));
        let tick = (shared.config.status_delay / 4)
            .clamp(Duration::from_millis(10), Duration::from_millis(100));
        tasks.push(tokio::spawn(
            controller::Controller::new(shared.clone()).run(tick, shutdown_rx.clone()),
        ));
        let mut admin_addr = None;
        if let Some(a) = shared.config.admin_listen {
            let l = server::bind(a).map_err(|source| SimError::Bind { addr: a, source })?;
            admin_addr = Some(
                l.local_addr()
                    .map_err(|source| SimError::Bind { addr: a, source })?,
            );
            let app = axum::Router::new()
                .nest("/_sim", admin::router())
                .with_state(shared.clone());
            let mut rx = shutdown_rx.clone();
            tasks.push(tokio::spawn(async move {
                let stop = async move {
                    let _ = rx.wait_for(|s| *s).await;
                };
                if let Err(e) = axum::serve(l, app).with_graceful_shutdown(stop).await {
                    tracing::error!(error = %e, "admin listener failed");
                }
            }));
        }
        tracing::info!(%addr, ?admin_addr, "kubesim serving");
        Ok(SimHandle {
            addr,
            admin_addr,
            admin: Admin { shared },
            shutdown: shutdown_tx,
            tasks,
        })
    }
}

/// The default namespaces and the generated nodes.
fn seed_objects(shared: &Arc<Shared>) -> Result<(), SimError> {
    let ns_res = discovery::find("", "v1", "namespaces")
        .ok_or_else(|| SimError::Config("catalog lacks namespaces".into()))?;
    let node_res = discovery::find("", "v1", "nodes")
        .ok_or_else(|| SimError::Config("catalog lacks nodes".into()))?;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let mut obj = serde_json::json!({ "metadata": { "name": ns } });
        controller::defaults_on_create(shared, ns_res, &mut obj);
        shared
            .store
            .write(ns_res, "", ns, false, |_| Ok(Change::Create(obj)))?;
    }
    let c = &shared.config;
    for i in 0..c.nodes {
        let obj = controller::node_object(&c.name, i, &c.node_cpu, &c.node_memory, c.node_pods);
        let name = meta::name(&obj).to_string();
        shared
            .store
            .write(node_res, "", &name, false, |_| Ok(Change::Create(obj)))?;
    }
    let mut index = c.nodes;
    for group in &c.extended_nodes {
        for _ in 0..group.count {
            let plain =
                controller::node_object(&c.name, index, &c.node_cpu, &c.node_memory, c.node_pods);
            let obj = extended::with_extended(plain, group);
            let name = meta::name(&obj).to_string();
            shared
                .store
                .write(node_res, "", &name, false, |_| Ok(Change::Create(obj)))?;
            index += 1;
        }
    }
    Ok(())
}

/// A running simulator. Dropping it stops it too (without waiting).
pub struct SimHandle {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    admin: Admin,
    shutdown: tokio_watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl SimHandle {
    /// The API address; stays the same across going dark and coming back.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://{addr}`, for `kube::Config::new` or `kubectl --server`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The admin-only listener, if one was configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    pub fn admin(&self) -> &Admin {
        &self.admin
    }

    /// Stops serving, cuts open connections and waits for the tasks to end.
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown.send_replace(true);
    }
}
