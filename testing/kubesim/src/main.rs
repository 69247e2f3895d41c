//! `fedraft-kubesim`: runs one simulated member cluster, or with `--fleet N` a fleet of N (see
//! `fedraft_kubesim::fleet`), until interrupted.
//!
//! Prints the API URL as the first line of stdout (and `admin <url>` next, with
//! `--admin-listen`), so scripts can read the bound address when they ask for port 0. A fleet
//! prints `fleet <admin url>` first, then `cluster <name> <region> <url>` per cluster.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use fedraft_kubesim::{DarkMode, FaultSettings, Fleet, FleetConfig, SimConfig, Simulator};

#[derive(Parser, Debug)]
#[command(
    name = "fedraft-kubesim",
    about = "A simulated Kubernetes member cluster for fedraft"
)]
struct Args {
    /// API listen address (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Admin-only listen address (`/_sim`), still reachable while the API is dark.
    #[arg(long)]
    admin_listen: Option<SocketAddr>,
    /// Cluster name (node names, load-balancer address range).
    #[arg(long, default_value = "kubesim")]
    name: String,
    #[arg(long, default_value_t = 3)]
    nodes: u32,
    #[arg(long, default_value = "8")]
    node_cpu: String,
    #[arg(long, default_value = "32Gi")]
    node_memory: String,
    #[arg(long, default_value_t = 110)]
    node_pods: u32,
    /// Further nodes with an extended resource: COUNTxAMOUNT[:RESOURCE] (default resource
    /// nvidia.com/gpu), repeatable, e.g. `--extended-nodes 2x4 --extended-nodes 8x1`.
    #[arg(long)]
    extended_nodes: Vec<fedraft_kubesim::extended::ExtendedNodes>,
    /// Delay before workload status converges to spec, in milliseconds.
    #[arg(long, default_value_t = 500)]
    status_delay_ms: u64,
    #[arg(long, default_value_t = 5000)]
    bookmark_interval_ms: u64,
    /// Watch events retained before older resourceVersions get 410 (default 10,000; 1,000 per
    /// cluster with --fleet).
    #[arg(long)]
    watch_history: Option<usize>,
    /// Require `Authorization: Bearer <token>` on API requests.
    #[arg(long, env = "KUBESIM_TOKEN")]
    token: Option<String>,
    /// Added latency per API request, in milliseconds.
    #[arg(long, default_value_t = 0)]
    latency_ms: u64,
    /// Fraction of API requests answered with --error-code.
    #[arg(long, default_value_t = 0.0)]
    error_rate: f64,
    #[arg(long, default_value_t = 500)]
    error_code: u16,
    /// Start dark in this mode.
    #[arg(long, value_enum)]
    dark: Option<DarkMode>,
    /// With --dark: come back after this many milliseconds.
    #[arg(long)]
    dark_for_ms: Option<u64>,
    /// First two octets of load-balancer addresses, e.g. 10.7.
    #[arg(long)]
    lb_ip_prefix: Option<String>,
    /// Seed for the error-rate dice.
    #[arg(long)]
    seed: Option<u64>,
    /// Serve this many clusters, each on its own port; the other flags apply to each of them
    /// (--listen gives the IP, --admin-listen the fleet's `/_fleet` endpoints).
    #[arg(long)]
    fleet: Option<u32>,
    /// With --fleet: contiguous regions the clusters are split into.
    #[arg(long, default_value_t = 10)]
    fleet_regions: u32,
    /// With --fleet: cluster names are this prefix and a four-digit index.
    #[arg(long, default_value = "m")]
    fleet_prefix: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "fedraft_kubesim=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let a = Args::parse();
    let config = SimConfig {
        name: a.name,
        listen: a.listen,
        admin_listen: a.admin_listen,
        nodes: a.nodes,
        node_cpu: a.node_cpu,
        node_memory: a.node_memory,
        node_pods: a.node_pods,
        extended_nodes: a.extended_nodes,
        status_delay: Duration::from_millis(a.status_delay_ms),
        bookmark_interval: Duration::from_millis(a.bookmark_interval_ms.max(1)),
        watch_history: a.watch_history.unwrap_or(if a.fleet.is_some() {
            FleetConfig::default().template.watch_history
        } else {
            SimConfig::default().watch_history
        }),
        token: a.token,
        faults: FaultSettings {
            latency_ms: a.latency_ms,
            error_rate: a.error_rate,
            error_code: a.error_code,
            ..FaultSettings::default()
        },
        lb_ip_prefix: a.lb_ip_prefix,
        seed: a.seed,
    };
    if let Some(clusters) = a.fleet {
        let admin_listen = a
            .admin_listen
            .unwrap_or_else(|| SocketAddr::new(config.listen.ip(), 0));
        let fleet = Fleet::start(FleetConfig {
            clusters,
            prefix: a.fleet_prefix,
            regions: a.fleet_regions,
            template: config,
            admin_listen: Some(admin_listen),
        })
        .await
        .context("starting the fleet")?;
        println!("fleet {}", fleet.admin_url().unwrap_or_default());
        for m in fleet.members() {
            println!("cluster {} {} {}", m.name, m.region, m.url());
        }
        tokio::signal::ctrl_c()
            .await
            .context("waiting for ctrl-c")?;
        drop(fleet);
        return Ok(());
    }
    let sim = Simulator::start(config)
        .await
        .context("starting the simulator")?;
    println!("{}", sim.url());
    if let Some(admin) = sim.admin_addr() {
        println!("admin http://{admin}");
    }
    match (a.dark, a.dark_for_ms) {
        (Some(mode), Some(ms)) => sim.admin().go_dark_for(mode, Duration::from_millis(ms)),
        (Some(mode), None) => sim.admin().go_dark(mode),
        _ => {}
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for ctrl-c")?;
    sim.shutdown().await;
    Ok(())
}
