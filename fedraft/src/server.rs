//! `fedraft server`: runs one node (raft + API + executors) from a config file, or a single-node development
//! cluster with `--dev`.
//!
//! Owns listener setup, token loading, bootstrap and shutdown on SIGINT/SIGTERM. The client
//! listener serves only the API router and the peer listener only the raft router, so a client
//! token is never accepted on the peer port and the cluster secret never on the API.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use fedraft_apiserver::{Api, ApiConfig, Principal, Role, TokenStore};
use fedraft_executors::{ExecutorConfig, ExecutorSet};
use fedraft_raft::{FedNode, NodeConfig};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::config::{ExecutorTiming, NodeFile};
use crate::tls::{self, NodeTls};

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
}

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    init_tracing();
    match (args.config, args.dev, args.data_dir, args.listen) {
        (Some(path), false, None, None) => run_config(NodeFile::load(&path)?).await,
        (None, true, Some(dir), Some(listen)) => run_dev(dir, listen, args.dns_listen).await,
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

async fn run_config(f: NodeFile) -> anyhow::Result<()> {
    let tls = f.tls.as_ref().map(NodeTls::load).transpose()?;
    let secret = f.secret()?;
    let tokens = TokenStore::load(&f.token_file, Some(secret.clone()))?;
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
    set(&mut nc.snapshot_every_entries, t.snapshot_every_entries);
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
    let cfg = ApiConfig {
        body_limit_bytes: f.body_limit_bytes,
        watch_history_events: f.watch_history_events,
        kubeconfig_exec_allow: f.executors.kubeconfig_exec_plugins.clone(),
        ..ApiConfig::default()
    };
    let api_tls = tls.map(|t| t.api);
    let executors = f
        .executors
        .enabled
        .then(|| f.executors.to_config(f.node_id));
    serve(
        nc,
        Listeners { peer, api, api_tls },
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

async fn run_dev(
    data_dir: PathBuf,
    listen: SocketAddr,
    dns_listen: Option<SocketAddr>,
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
    let listeners = Listeners {
        peer,
        api,
        api_tls: None,
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
        ApiConfig::default(),
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
    let Listeners { peer, api, api_tls } = listeners;
    let Extras { executors, dns } = extras;
    let peer_tls = nc.peer_tls.as_ref().map(|t| t.server.clone());
    let node = FedNode::open(nc).await.context("opening the raft node")?;
    let peer_app = node.peer_router();
    let peer_task = tokio::spawn(tls::serve(peer, peer_app, peer_tls, std::future::pending()));
    if !members.is_empty() {
        node.bootstrap(members)
            .await
            .context("bootstrapping the cluster")?;
    }
    // One registry for everything this process measures; the API serves it on /metrics.
    let mut registry = Registry::default();
    node.register_metrics(&mut registry);
    // Executors start and stop with this node's leadership, so every node runs the set.
    let executors = executors.map(|cfg| {
        cfg.metrics.register(&mut registry);
        ExecutorSet::start(node.clone(), cfg)
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
    let served = tls::serve(api, router, api_tls, shutdown_signal()).await;
    tracing::info!("shutting down");
    if let Some(set) = executors {
        set.shutdown().await;
    }
    if let Some(d) = dns {
        d.shutdown().await;
    }
    peer_task.abort();
    node.shutdown().await.context("stopping the raft node")?;
    served
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
