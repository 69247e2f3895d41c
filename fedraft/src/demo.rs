//! `fedraft demo`: three raft nodes, an API server and three simulated member clusters in one
//! process, driven through a failover scenario (converge, dc2 goes dark, replicas move, dc2
//! comes back). With `--once` every step is checked with a bounded wait and the exit code says
//! whether all held; without it the API stays up until Ctrl-C.
//!
//! Owns only the wiring and the narration. Placement, health and failover are decided by the
//! state machine and carried out by the executors; this module must not decide anything itself,
//! only observe the replicated state and what the simulators hold.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use fedraft_apiserver::{Api, ApiConfig, Principal, Role, TokenStore};
use fedraft_core::command::Command;
use fedraft_core::state::{Outcome, State};
use fedraft_executors::{ExecutorConfig, ExecutorSet};
use fedraft_kubesim::{SimConfig, SimHandle, Simulator};
use fedraft_raft::{FedNode, NodeConfig, Proposal};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

mod kubectl;
mod scenario;

const CLUSTERS: [&str; 3] = ["dc1", "dc2", "dc3"];

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Run the scenario once, check every step, exit 0 only if all held.
    #[arg(long)]
    pub once: bool,
    /// Keep the nodes' data directories under this (empty) directory: node1, node2, node3.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// Everything the demo started, so it can be stopped in order.
struct Demo {
    sims: Vec<SimHandle>,
    nodes: Vec<FedNode>,
    peer_tasks: Vec<JoinHandle<()>>,
    sets: Vec<ExecutorSet>,
    /// One service discovery DNS server per node, zone `fed.internal`.
    dns: Vec<fedraft_dns::DnsServer>,
    api_task: JoinHandle<()>,
    api_url: String,
    /// The same API over TLS, with a kubeconfig for it.
    kubectl: kubectl::KubectlDoor,
    token: String,
    http: reqwest::Client,
    /// Holds the temporary data directories alive until the demo ends.
    _tmp: Option<tempfile::TempDir>,
}

pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    init_tracing();
    let demo = start(args.data_dir.clone()).await?;
    println!("fedraft demo: 3 nodes, 3 simulated clusters, all on 127.0.0.1");
    println!("  API:         {}", demo.api_url);
    println!("  admin token: {}", demo.token);
    // The token rides in the fragment, which the browser never sends to a server.
    println!(
        "  console:     {}/ui/#token={}   (a sign-in link; or open {}/ui/ and paste the token)",
        demo.api_url, demo.token, demo.api_url
    );
    println!(
        "  kubectl:     export KUBECONFIG={}   (TLS at {}; then: kubectl get clusters)",
        demo.kubectl.kubeconfig.display(),
        demo.kubectl.url
    );
    for (name, sim) in CLUSTERS.iter().zip(&demo.sims) {
        println!("  cluster {name}: {} (region={name})", sim.url());
    }
    for (i, d) in demo.dns.iter().enumerate() {
        println!("  DNS node{}:   udp+tcp {}", i + 1, d.udp_addr());
    }
    if let Some(d) = &args.data_dir {
        println!("  data dirs:   {}/node1..node3", d.display());
    }
    println!();

    let results = scenario::run(&demo).await;
    println!();
    println!("summary:");
    for (step, ok) in &results {
        println!("  {} {step}", if *ok { "PASS" } else { "FAIL" });
    }
    let all = results.iter().all(|(_, ok)| *ok);

    if !args.once {
        println!();
        println!("the API stays up; try:");
        println!(
            "  fedraft --server {} --token {} get objects",
            demo.api_url, demo.token
        );
        println!(
            "  KUBECONFIG={} kubectl get clusters",
            demo.kubectl.kubeconfig.display()
        );
        println!("press Ctrl-C to stop");
        let _ = tokio::signal::ctrl_c().await;
    }
    demo.stop().await;
    Ok(if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn init_tracing() {
    // Quiet by default: the narration on stdout is the point, and a dark cluster's refused
    // connections (kube, raft) are expected. RUST_LOG opens it up.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("error,kube_client=off,openraft=off")
    });
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

/// Executor timings shortened so the failover happens in seconds, not minutes.
fn executor_config() -> ExecutorConfig {
    ExecutorConfig {
        probe_interval: Duration::from_millis(500),
        probe_timeout: Duration::from_millis(1000),
        capacity_interval: Duration::from_secs(2),
        resync_period: Duration::from_secs(5),
        leadership_poll: Duration::from_millis(100),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        status_flush_interval: Duration::from_millis(200),
        request_timeout: Duration::from_secs(3),
        ..ExecutorConfig::default()
    }
}

/// Refuses a data directory that already holds a demo: its raft membership names peer ports
/// of a previous run, so the nodes could never reach each other again.
fn check_fresh(root: &std::path::Path) -> anyhow::Result<()> {
    for id in 1..=3 {
        let dir = root.join(format!("node{id}"));
        let used = std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some());
        if used {
            anyhow::bail!(
                "{} already holds data from an earlier demo; the demo needs an empty --data-dir",
                dir.display()
            );
        }
    }
    Ok(())
}

async fn start(data_dir: Option<PathBuf>) -> anyhow::Result<Demo> {
    if let Some(d) = &data_dir {
        check_fresh(d)?;
    }
    let mut sims = Vec::new();
    for name in CLUSTERS {
        let sim = Simulator::start(SimConfig {
            name: name.into(),
            nodes: 2,
            status_delay: Duration::from_millis(200),
            bookmark_interval: Duration::from_secs(1),
            ..SimConfig::default()
        })
        .await
        .with_context(|| format!("starting simulated cluster {name}"))?;
        sims.push(sim);
    }

    let (root, tmp) = match data_dir {
        Some(d) => (d, None),
        None => {
            let t = tempfile::Builder::new()
                .prefix("fedraft-demo-")
                .tempdir()
                .context("creating a temporary data directory")?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let secret = random_hex(32);
    let mut nodes = Vec::new();
    let mut peer_tasks = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let dir = root.join(format!("node{id}"));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a peer port")?;
        let addr = listener.local_addr()?.to_string();
        let node = FedNode::open(NodeConfig {
            node_id: id,
            data_dir: dir,
            advertise_peer_addr: addr.clone(),
            cluster_secret: secret.clone(),
            cluster_id: "fedraft-demo".into(),
            heartbeat_interval_ms: 200,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            tick_interval_ms: 500,
            propose_timeout_ms: 10_000,
            ..NodeConfig::default()
        })
        .await
        .with_context(|| format!("opening raft node {id}"))?;
        let router = node.peer_router();
        peer_tasks.push(tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        }));
        members.insert(id, addr);
        nodes.push(node);
    }
    nodes[0]
        .bootstrap(members)
        .await
        .context("bootstrapping the raft group")?;
    wait_for(Duration::from_secs(30), || {
        nodes.iter().any(|n| n.status().is_leader).then_some(())
    })
    .await
    .context("no raft leader was elected")?;

    let token = random_hex(16);
    let tokens = TokenStore::new(
        [(
            token.clone(),
            Principal {
                name: "demo-admin".into(),
                role: Role::Admin,
            },
        )],
        Some(secret),
    )?;
    let api_listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the API port")?;
    let api_url = format!("http://{}", api_listener.local_addr()?);
    let router = Api::new(nodes[0].clone(), tokens, ApiConfig::default()).router();
    let kubectl = kubectl::start(router.clone(), &token, &root.join("kubectl")).await?;
    let api_task = tokio::spawn(async move {
        let _ = axum::serve(api_listener, router).await;
    });

    // Every node runs executors; only the leader's act, so a leader change hands them over.
    let sets = nodes
        .iter()
        .map(|n| ExecutorSet::start(n.clone(), executor_config()))
        .collect();
    let mut dns = Vec::new();
    for n in &nodes {
        let cfg = fedraft_dns::DnsConfig {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ..fedraft_dns::DnsConfig::default()
        };
        dns.push(
            fedraft_dns::DnsServer::start(n.clone(), cfg)
                .await
                .context("starting a DNS server")?,
        );
    }
    Ok(Demo {
        sims,
        nodes,
        peer_tasks,
        sets,
        dns,
        api_task,
        api_url,
        kubectl,
        token,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?,
        _tmp: tmp,
    })
}

impl Demo {
    async fn stop(self) {
        for s in self.sets {
            s.shutdown().await;
        }
        for d in self.dns {
            d.shutdown().await;
        }
        self.api_task.abort();
        self.kubectl.stop();
        for n in &self.nodes {
            if let Err(e) = n.shutdown().await {
                tracing::warn!(error = %e, "stopping a raft node");
            }
        }
        for t in self.peer_tasks {
            t.abort();
        }
        for s in self.sims {
            s.shutdown().await;
        }
    }

    fn sim(&self, cluster: &str) -> &SimHandle {
        let i = CLUSTERS.iter().position(|c| *c == cluster).unwrap_or(0);
        &self.sims[i]
    }

    fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        self.nodes[0].read_stale(f)
    }

    async fn propose(&self, command: Command) -> anyhow::Result<()> {
        let applied = self.nodes[0]
            .propose(Proposal {
                request_id: format!("demo-{}", random_hex(8)),
                actor: "admin".into(),
                command,
            })
            .await
            .context("proposing to the raft group")?;
        match applied.outcome {
            Outcome::Accepted { .. } => Ok(()),
            Outcome::Rejected(r) => anyhow::bail!("rejected: {r:?}"),
        }
    }
}

/// Polls a synchronous condition every 100 ms until it holds or `limit` passes.
async fn wait_for<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
