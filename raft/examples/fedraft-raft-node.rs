//! A standalone fedraft raft member for process-level tests (`tests/crash.rs` kills and restarts
//! it) and manual experiments: opens the data dir, serves the authenticated peer router (which
//! also takes `/raft/propose` from clients and reports `GET /raft/status`), and optionally
//! bootstraps the cluster. An example, not a binary of the library, so that fedraft-raft's own
//! dependencies carry no argument parser or log formatter; `cargo test -p fedraft-raft` builds it.
//!
//! `cargo run -p fedraft-raft --example fedraft-raft-node -- --id 1 --data-dir /tmp/n1
//!   --peer-listen 127.0.0.1:7001 --peers 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003
//!   --secret s3cret --bootstrap`

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Parser;
use fedraft_raft::{FedNode, NodeConfig};

#[derive(Parser, Debug)]
#[command(about = "Run one fedraft raft node")]
struct Args {
    #[arg(long)]
    id: u64,
    #[arg(long)]
    data_dir: PathBuf,
    /// Address to bind and advertise for peers, e.g. 127.0.0.1:7001.
    #[arg(long)]
    peer_listen: String,
    /// Every voter as id=addr, comma separated (used with --bootstrap).
    #[arg(long, default_value = "")]
    peers: String,
    #[arg(long, env = "FEDRAFT_CLUSTER_SECRET")]
    secret: String,
    #[arg(long, default_value = "fedraft")]
    cluster_id: String,
    /// Initialise the cluster with --peers as voters (a no-op once initialised).
    #[arg(long)]
    bootstrap: bool,
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    #[arg(long)]
    election_min_ms: Option<u64>,
    #[arg(long)]
    election_max_ms: Option<u64>,
    #[arg(long)]
    propose_timeout_ms: Option<u64>,
    #[arg(long)]
    snapshot_every: Option<u64>,
}

fn parse_peers(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let Some((id, addr)) = part.split_once('=') else {
            bail!("peer {part:?} is not id=addr")
        };
        out.insert(
            id.trim()
                .parse()
                .with_context(|| format!("peer id {id:?}"))?,
            addr.trim().to_string(),
        );
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,fedraft=info".into()),
        )
        .init();
    let args = Args::parse();
    let defaults = NodeConfig::default();
    let cfg = NodeConfig {
        node_id: args.id,
        data_dir: args.data_dir.clone(),
        advertise_peer_addr: args.peer_listen.clone(),
        cluster_secret: args.secret.clone(),
        cluster_id: args.cluster_id.clone(),
        heartbeat_interval_ms: args.heartbeat_ms.unwrap_or(defaults.heartbeat_interval_ms),
        election_timeout_min_ms: args
            .election_min_ms
            .unwrap_or(defaults.election_timeout_min_ms),
        election_timeout_max_ms: args
            .election_max_ms
            .unwrap_or(defaults.election_timeout_max_ms),
        propose_timeout_ms: args
            .propose_timeout_ms
            .unwrap_or(defaults.propose_timeout_ms),
        snapshot_every_entries: args
            .snapshot_every
            .unwrap_or(defaults.snapshot_every_entries),
        ..defaults
    };
    let peers = parse_peers(&args.peers)?;
    let listener = tokio::net::TcpListener::bind(&args.peer_listen)
        .await
        .with_context(|| format!("bind {}", args.peer_listen))?;
    let node = FedNode::open(cfg).await.context("open node")?;
    let router = node.peer_router();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    if args.bootstrap {
        node.bootstrap(peers).await.context("bootstrap")?;
    }
    tokio::select! {
        r = server => { r.context("peer server task")?.context("peer server")?; }
        _ = tokio::signal::ctrl_c() => {}
    }
    node.shutdown().await.context("shutdown")?;
    Ok(())
}
