//! Raft ceiling benchmark: three in-process nodes on loopback (real RocksDB with fsync, real
//! HTTP between them), N concurrent proposers submitting ~256-byte commands to the leader.
//! Reports committed proposals/s and p50/p99 latency for each concurrency level.
//!
//! `cargo bench -p fedraft-raft --bench commits -- [--seconds 10] [--levels 1,16,64] [--via-follower]`
//!
//! A benchmark, not part of the library: it lives here so that fedraft-raft's own dependencies
//! carry no argument parser, log formatter or temp-dir crate (they are dev-dependencies).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use fedraft_core::command::{Command, LogEntry};
use fedraft_raft::{FedNode, NodeConfig, Proposal};

#[derive(Parser, Debug)]
struct Args {
    /// Measured seconds per concurrency level (after a 1 s warm-up).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value = "1,16,64")]
    levels: String,
    /// Propose through a follower (measures forwarding) instead of the leader.
    #[arg(long)]
    via_follower: bool,
    /// Passed by `cargo bench` to every bench binary; nothing to do with it here.
    #[arg(long, hide = true)]
    bench: bool,
}

fn command(tag: &str) -> Command {
    let mut name = format!("bench-{tag}-");
    while name.len() < 200 {
        name.push('x');
    }
    Command::Cordon { name }
}

struct Started {
    nodes: Vec<FedNode>,
    _dir: tempfile::TempDir,
}

async fn start() -> anyhow::Result<Started> {
    let dir = tempfile::tempdir()?;
    let mut nodes = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let cfg = NodeConfig {
            node_id: id,
            data_dir: dir.path().join(format!("n{id}")),
            advertise_peer_addr: addr.clone(),
            cluster_secret: "bench-secret".into(),
            cluster_id: "bench".into(),
            // A loaded two-core box: keep elections out of the measurement.
            heartbeat_interval_ms: 200,
            election_timeout_min_ms: 1500,
            election_timeout_max_ms: 3000,
            propose_timeout_ms: 30_000,
            ..NodeConfig::default()
        };
        let node = FedNode::open(cfg).await?;
        let router = node.peer_router();
        tokio::spawn(async move { axum::serve(listener, router).await });
        members.insert(id, addr);
        nodes.push(node);
    }
    nodes[0].bootstrap(members).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !nodes.iter().any(|n| n.status().is_leader) {
        anyhow::ensure!(Instant::now() < deadline, "no leader after 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Started { nodes, _dir: dir })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn run_level(
    node: FedNode,
    concurrency: usize,
    secs: u64,
) -> anyhow::Result<(f64, Duration, Duration, usize)> {
    let warmup_end = Instant::now() + Duration::from_secs(1);
    let end = warmup_end + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for w in 0..concurrency {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut n = 0u64;
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let tag = format!("{concurrency}-{w}-{n}");
                let p = Proposal {
                    request_id: format!("b-{tag}"),
                    actor: "bench".into(),
                    command: command(&tag),
                };
                let t = Instant::now();
                node.propose(p).await.context("propose")?;
                if t >= warmup_end {
                    lat.push(t.elapsed());
                }
                n += 1;
            }
            anyhow::Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    all.sort();
    let ops = all.len();
    Ok((
        ops as f64 / secs as f64,
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        ops,
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "error".into()),
        )
        .init();
    let args = Args::parse();
    let levels: Vec<usize> = args
        .levels
        .split(',')
        .map(|s| s.trim().parse())
        .collect::<Result<_, _>>()
        .context("--levels")?;
    let sample = LogEntry::new(
        "b-64-63-100000",
        "bench",
        1_800_000_000_000,
        command("64-63-100000"),
    );
    println!(
        "entry size: {} bytes encoded (LogEntry envelope + command)",
        sample.encode().len()
    );
    let started = start().await?;
    let leader = started
        .nodes
        .iter()
        .find(|n| n.status().is_leader)
        .context("leader")?
        .clone();
    let target = if args.via_follower {
        started
            .nodes
            .iter()
            .find(|n| !n.status().is_leader)
            .context("follower")?
            .clone()
    } else {
        leader.clone()
    };
    println!(
        "three nodes on loopback, fsync on; proposing via {}",
        if args.via_follower {
            "a follower"
        } else {
            "the leader"
        }
    );
    println!(
        "{:>11} {:>12} {:>10} {:>10} {:>10}",
        "proposers", "commits/s", "p50 ms", "p99 ms", "ops"
    );
    for c in levels {
        let (rate, p50, p99, ops) = run_level(target.clone(), c, args.seconds).await?;
        println!(
            "{:>11} {:>12.0} {:>10.2} {:>10.2} {:>10}",
            c,
            rate,
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            ops
        );
    }
    for n in &started.nodes {
        let _ = n.shutdown().await;
    }
    Ok(())
}
