//! `fedraft server`: runs one node (raft + API + executors) from a config file, or a single-node development
//! cluster with `--dev`.
//!
//! Owns listener setup, token loading, bootstrap and shutdown on SIGINT/SIGTERM. The client
//! listener serves only the API router and the peer listener only the raft router, so a client
//! token is never accepted on the peer port and the cluster secret never on the API. Both are
//! served by `listen.rs` within `[listeners]` limits (timeouts, connection caps), which the
//! flags of the same names override.
//!
//! A node whose storage failed (a WAL fsync, a write, an audit or checkpoint write:
//! `FedNode::failed`) exits at once with code 4 and one error line naming the seam, flushing
//! nothing more: a restart recovers from what was synced. In a build with failpoints (tests
//! only), `FAILPOINTS` configures them at start (`store/src/failpoints.rs`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use fedraft_apiserver::{Api, ApiConfig, CredentialsAtRest, Principal, Role, TokenStore};
use fedraft_executors::{ExecutorConfig, ExecutorSet};
use fedraft_raft::{FedNode, NodeConfig};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::config::{ExecutorTiming, ListenerFile, ListenerSettings, NodeFile};
use crate::executor_lane::ExecutorLane;
use crate::listen;
use crate::tls::NodeTls;

#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Node configuration file (TOML); see examples/node.toml.
    #[arg(long, conflicts_with_all = ["dev", "data_dir", "listen"])]
    pub config: Option<PathBuf>,
    /// Single-node development cluster; admin token from FEDRAFT_DEV_TOKEN or generated.
    #[arg(long, requires_all = ["data_dir", "listen"])]
    pub dev: bool,
    /// Data directory for --dev.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// API listen address for --dev, e.g. 127.0.0.1:8080.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Serve service discovery DNS (UDP and TCP) here with --dev, zone `fed.internal`.
    #[arg(long, requires = "dev")]
    pub dns_listen: Option<SocketAddr>,
    /// Deadline in ms for a request's headers (and a connection's TLS handshake plus first
    /// request); overrides `[listeners] header_read_timeout_ms` (default 10000).
    #[arg(long)]
    pub header_read_timeout_ms: Option<u64>,
    /// Close a connection after this many ms without a byte either way; overrides
    /// `[listeners] idle_timeout_ms` (default 120000).
    #[arg(long)]
    pub idle_timeout_ms: Option<u64>,
    /// Most API connections at once, more are closed; overrides `[listeners] api_max_connections`
    /// (default 4096).
    #[arg(long)]
    pub api_max_connections: Option<usize>,
    /// Most peer connections at once, more are closed; overrides `[listeners] peer_max_connections`
    /// (default 64).
    #[arg(long)]
    pub peer_max_connections: Option<usize>,
}

/// The exit code of a node that stopped because its storage failed.
pub const EXIT_STORAGE_FAILED: i32 = 4;

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    init_tracing();
    fedraft_raft::failpoints::configure_from_env().context("configuring FAILPOINTS")?;
    let flags = ListenerFile {
        header_read_timeout_ms: args.header_read_timeout_ms,
        idle_timeout_ms: args.idle_timeout_ms,
        api_max_connections: args.api_max_connections,
        peer_max_connections: args.peer_max_connections,
    };
    match (args.config, args.dev, args.data_dir, args.listen) {
        (Some(path), false, None, None) => {
            let f = NodeFile::load(&path)?;
            let limits = f.listeners.overridden_by(&flags).settings()?;
            run_config(f, limits).await
        }
        (None, true, Some(dir), Some(listen)) => {
            let limits = ListenerFile::default().overridden_by(&flags).settings()?;
            run_dev(dir, listen, args.dns_listen, limits).await
        }
        _ => bail!("use `fedraft server --config node.toml` or `fedraft server --dev --data-dir D --listen ADDR`"),
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

async fn run_config(f: NodeFile, limits: ListenerSettings) -> anyhow::Result<()> {
    let tls = f.tls.as_ref().map(NodeTls::load).transpose()?;
    let secret = f.secret()?;
    let tokens = TokenStore::load(&f.token_file, Some(secret.clone()))
        .with_context(|| format!("loading token file {}", f.token_file.display()))?;
    let mut nc = NodeConfig {
        node_id: f.node_id,
        data_dir: f.data_dir.clone(),
        advertise_peer_addr: f.advertise(),
        cluster_secret: secret,
        cluster_id: f.cluster_id.clone(),
        peer_tls: tls.as_ref().map(|t| t.peer.clone()),
        peer_dial: f.peer_dial.clone(),
        ..NodeConfig::default()
    };
    let t = &f.raft;
    let set = |slot: &mut u64, v: Option<u64>| {
        if let Some(v) = v {
            *slot = v;
        }
    };
    set(&mut nc.heartbeat_interval_ms, t.heartbeat_interval_ms);
    set(&mut nc.election_timeout_min_ms, t.election_timeout_min_ms);
    set(&mut nc.election_timeout_max_ms, t.election_timeout_max_ms);
    set(&mut nc.tick_interval_ms, t.tick_interval_ms);
    if nc.tick_interval_ms > fedraft_core::health::MAX_TICK_INTERVAL_MS {
        // Allowed (tests turn ticks off), but an idle log then looks stalled to the health rules.
        tracing::warn!(
            tick_interval_ms = nc.tick_interval_ms,
            max = fedraft_core::health::MAX_TICK_INTERVAL_MS,
            "raft.tick_interval_ms is above the maximum: a gap of more than {} ms between entries \
             counts as a stalled log, so member clusters' failure thresholds wait for other entries",
            fedraft_core::health::LOG_STALL_MS
        );
    }
    set(&mut nc.snapshot_every_entries, t.snapshot_every_entries);
    set(
        &mut nc.max_in_snapshot_log_to_keep,
        t.max_in_snapshot_log_to_keep,
    );
    set(&mut nc.propose_timeout_ms, t.propose_timeout_ms);
    set(
        &mut nc.audit.checkpoint_every_commands,
        f.audit.checkpoint_every_commands,
    );
    nc.audit.retention.max_age_ms = f.audit.max_age_seconds.map(|s| s.saturating_mul(1000));
    nc.audit.retention.max_bytes = f.audit.max_bytes;
    let peer = TcpListener::bind(f.peer_listen)
        .await
        .with_context(|| format!("binding peer port {}", f.peer_listen))?;
    let api = TcpListener::bind(f.api_listen)
        .await
        .with_context(|| format!("binding API port {}", f.api_listen))?;
    let credentials = credentials_at_rest(&f)?;
    let cfg = ApiConfig {
        body_limit_bytes: f.body_limit_bytes,
        watch_history_events: f.watch_history_events,
        credentials: credentials.clone(),
        kubeconfig_exec_allow: f.executors.kubeconfig_exec_plugins.clone(),
        ..ApiConfig::default()
    };
    let api_tls = tls.map(|t| t.api);
    let executors = f.executors.enabled.then(|| ExecutorConfig {
        credentials_keys: credentials.keyring().cloned(),
        ..f.executors.to_config(f.node_id)
    });
    serve(
        nc,
        Listeners {
            peer,
            api,
            api_tls,
            limits,
        },
        tokens,
        cfg,
        f.peers.clone(),
        Extras {
            executors,
            dns: f.dns.clone(),
        },
    )
    .await
}

/// Sealed with the configured keys; without `[credentials]`, credentials are refused (never
/// stored in the clear outside `--dev`).
fn credentials_at_rest(f: &NodeFile) -> anyhow::Result<CredentialsAtRest> {
    match &f.credentials {
        Some(c) => {
            let keyring = c.load().context("loading the [credentials] keys")?;
            tracing::info!(
                current_key = keyring.current_id(),
                "member credentials are sealed at rest"
            );
            Ok(CredentialsAtRest::Sealed(Arc::new(keyring)))
        }
        None => {
            tracing::warn!(
                "no [credentials] keys configured: requests carrying member-cluster credentials \
                 are refused, and sealed credentials cannot be used by this node's executors"
            );
            Ok(CredentialsAtRest::Refused)
        }
    }
}

async fn run_dev(
    data_dir: PathBuf,
    listen: SocketAddr,
    dns_listen: Option<SocketAddr>,
    limits: ListenerSettings,
) -> anyhow::Result<()> {
    let token = match std::env::var("FEDRAFT_DEV_TOKEN") {
        Ok(t) if !t.is_empty() => {
            println!("admin token: taken from FEDRAFT_DEV_TOKEN");
            t
        }
        _ => {
            let t = random_hex(16);
            println!("admin token: {t}");
            t
        }
    };
    let secret = random_hex(32);
    let principal = Principal {
        name: "dev-admin".into(),
        role: Role::Admin,
    };
    let tokens = TokenStore::new([(token, principal)], Some(secret.clone()))?;
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let peer = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the peer port")?;
    let advertise = peer.local_addr()?.to_string();
    let api = TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let nc = NodeConfig {
        node_id: 1,
        data_dir,
        advertise_peer_addr: advertise.clone(),
        cluster_secret: secret,
        cluster_id: "fedraft-dev".into(),
        ..NodeConfig::default()
    };
    println!("fedraft dev server: API on http://{}", api.local_addr()?);
    // Development only: member credentials go into the log as given.
    eprintln!(
        "WARNING: --dev stores member-cluster credentials IN THE CLEAR in the raft log, snapshots, \
         the audit archive and backups; use a config with [credentials] keys for real clusters"
    );
    tracing::warn!("--dev: member credentials are stored in the clear");
    let listeners = Listeners {
        peer,
        api,
        api_tls: None,
        limits,
    };
    let extras = Extras {
        executors: Some(ExecutorTiming::default().to_config(1)),
        dns: dns_listen.map(|listen| fedraft_dns::DnsConfig {
            listen,
            ..fedraft_dns::DnsConfig::default()
        }),
    };
    serve(
        nc,
        listeners,
        tokens,
        ApiConfig {
            credentials: CredentialsAtRest::Plaintext,
            ..ApiConfig::default()
        },
        BTreeMap::from([(1, advertise)]),
        extras,
    )
    .await
}

/// The bound listeners of one node.
struct Listeners {
    peer: TcpListener,
    api: TcpListener,
    api_tls: Option<Arc<rustls::ServerConfig>>,
    limits: ListenerSettings,
}

/// What runs beside raft and the API; `None` leaves it off.
struct Extras {
    executors: Option<ExecutorConfig>,
    dns: Option<fedraft_dns::DnsConfig>,
}

async fn serve(
    nc: NodeConfig,
    listeners: Listeners,
    tokens: TokenStore,
    cfg: ApiConfig,
    members: BTreeMap<u64, String>,
    extras: Extras,
) -> anyhow::Result<()> {
    let Listeners {
        peer,
        api,
        api_tls,
        limits,
    } = listeners;
    let Extras { executors, dns } = extras;
    let peer_tls = nc.peer_tls.as_ref().map(|t| t.server.clone());
    let node = FedNode::open(nc).await.context("opening the raft node")?;
    let peer_app = node.peer_router();
    let peer_task = tokio::spawn(listen::serve(
        peer,
        peer_app,
        peer_tls,
        limits.peer,
        std::future::pending(),
    ));
    if !members.is_empty() {
        node.bootstrap(members)
            .await
            .context("bootstrapping the cluster")?;
    }
    // One registry for everything this process measures; the API serves it on /metrics.
    let mut registry = Registry::default();
    node.register_metrics(&mut registry);
    registry.register_collector(Box::new(crate::heap::HeapCollector));
    // Executors start and stop with this node's leadership, so every node runs the set.
    let lane = executors
        .as_ref()
        .map(|_| ExecutorLane::start())
        .transpose()?;
    let executors = executors.zip(lane.as_ref()).map(|(cfg, lane)| {
        cfg.metrics.register(&mut registry);
        lane.enter(|| ExecutorSet::start(node.clone(), cfg))
    });
    let dns = match dns {
        Some(d) => {
            let server = fedraft_dns::DnsServer::start(node.clone(), d)
                .await
                .context("starting the DNS server")?;
            println!("fedraft DNS: udp+tcp {}", server.udp_addr());
            server.metrics().register(&mut registry);
            Some(server)
        }
        None => None,
    };
    let router = Api::with_registry(node.clone(), tokens, cfg, registry).router();
    tracing::info!(addr = %api.local_addr()?, tls = api_tls.is_some(), "API listening");
    let served = tokio::select! {
        served = listen::serve(api, router, api_tls, limits.api, shutdown_signal()) => served,
        why = node.failed() => stop_now(&why),
    };
    tracing::info!("shutting down");
    if let Some(set) = executors {
        set.shutdown().await;
    }
    drop(lane);
    if let Some(d) = dns {
        d.shutdown().await;
    }
    peer_task.abort();
    node.shutdown().await.context("stopping the raft node")?;
    served
}

/// Ends the process at once. Nothing may run after a failed fsync that could write or sync
/// again (a graceful close flushes RocksDB's memtables); `_exit` also skips the C++ static
/// destructors, which abort when RocksDB's threads are still running.
fn stop_now(why: &str) -> ! {
    tracing::error!(
        exit_code = EXIT_STORAGE_FAILED,
        "node stopped: {why}; restart it to recover from what was synced"
    );
    eprintln!("error: node stopped: {why}");
    // SAFETY: `_exit` takes no pointers; it ends the process without running anything else.
    unsafe { libc::_exit(EXIT_STORAGE_FAILED) }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
