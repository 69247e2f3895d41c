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
use fedraft_core::model::{ClusterSpec, Health, ObjectSpec};
use fedraft_core::state::{Outcome, State};
use fedraft_executors::{ExecutorConfig, ExecutorSet};
use fedraft_kubesim::{DarkMode, SimConfig, SimHandle, Simulator};
use fedraft_raft::{FedNode, NodeConfig, Proposal};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::output::table;

const CLUSTERS: [&str; 3] = ["dc1", "dc2", "dc3"];
const NAMESPACE: &str = "demo";
const WORKLOAD: &str = "web";
const REPLICAS: u64 = 6;
const IMAGE: &str = "nginx:1.27";
const DC3_TAG: &str = "1.27-alpine";
/// How long any one step may take before it counts as failed; generous for a loaded machine.
const STEP_LIMIT: Duration = Duration::from_secs(45);

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Run the scenario once, check every step, exit 0 only if all held.
    #[arg(long)]
    pub once: bool,
    /// Keep the nodes' data directories under this directory (node1, node2, node3).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// Everything the demo started, so it can be stopped in order.
struct Demo {
    sims: Vec<SimHandle>,
    nodes: Vec<FedNode>,
    peer_tasks: Vec<JoinHandle<()>>,
    sets: Vec<ExecutorSet>,
    api_task: JoinHandle<()>,
    api_url: String,
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
    for (name, sim) in CLUSTERS.iter().zip(&demo.sims) {
        println!("  cluster {name}: {} (region={name})", sim.url());
    }
    if let Some(d) = &args.data_dir {
        println!("  data dirs:   {}/node1..node3", d.display());
    }
    println!();

    let results = scenario(&demo).await;
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
    // connections are expected. RUST_LOG opens it up.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,kube_client=off"));
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

async fn start(data_dir: Option<PathBuf>) -> anyhow::Result<Demo> {
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
    // A kept data directory may already hold a cluster: bootstrapping again is then refused,
    // which is fine as long as a leader emerges.
    if let Err(e) = nodes[0].bootstrap(members).await {
        tracing::info!(error = %e, "bootstrap skipped");
    }
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
    let api_task = tokio::spawn(async move {
        let _ = axum::serve(api_listener, router).await;
    });

    // Every node runs executors; only the leader's act, so a leader change hands them over.
    let sets = nodes
        .iter()
        .map(|n| ExecutorSet::start(n.clone(), executor_config()))
        .collect();
    Ok(Demo {
        sims,
        nodes,
        peer_tasks,
        sets,
        api_task,
        api_url,
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
        self.api_task.abort();
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

    fn health(&self, cluster: &str) -> Option<Health> {
        self.read(|s| s.cluster(cluster).map(|c| c.status.health))
    }

    /// The workload's Deployment as the member cluster holds it (None if absent or dark).
    async fn live(&self, cluster: &str) -> Option<Value> {
        let url = format!(
            "{}/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{WORKLOAD}",
            self.sim(cluster).url()
        );
        let resp = self.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.json().await.ok()
    }

    /// Desired replicas per cluster from the replicated placement.
    fn placement(&self) -> BTreeMap<String, u64> {
        self.read(|s| {
            s.object(NAMESPACE, WORKLOAD)
                .map(|o| {
                    o.status
                        .clusters
                        .iter()
                        .map(|c| (c.cluster.clone(), u64::from(c.replicas)))
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// Checks that every cluster holds exactly what placement wants (absent where it wants 0)
    /// with the right image and all replicas ready, that the status reported through the log
    /// agrees, and that `check` accepts the placement.
    async fn converged(&self, check: impl Fn(&BTreeMap<String, u64>) -> bool) -> bool {
        let want = self.placement();
        if want.values().sum::<u64>() != REPLICAS || !check(&want) {
            return false;
        }
        // What the executors reported back through the log must agree with the clusters.
        let reported = self.read(|s| {
            s.object(NAMESPACE, WORKLOAD).is_some_and(|o| {
                u64::from(o.status.ready_replicas) == REPLICAS
                    && o.status
                        .clusters
                        .iter()
                        .all(|c| c.replicas == 0 || c.applied)
            })
        });
        if !reported {
            return false;
        }
        for c in CLUSTERS {
            let n = want.get(c).copied().unwrap_or(0);
            if self.health(c) != Some(Health::Ready) {
                // A dark cluster cannot be inspected; placement must keep nothing there.
                if n != 0 {
                    return false;
                }
                continue;
            }
            let live = self.live(c).await;
            match (n, live) {
                (0, None) => {}
                (0, Some(d)) => {
                    if replicas(&d) != 0 {
                        return false;
                    }
                }
                (n, Some(d)) => {
                    let ready = d
                        .pointer("/status/readyReplicas")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    if replicas(&d) != n || ready != n || image(&d) != expected_image(c) {
                        return false;
                    }
                }
                (_, None) => return false,
            }
        }
        true
    }

    async fn print_table(&self) {
        let mut rows = Vec::new();
        let want = self.placement();
        let (objects, ready) = self.read(|s| {
            let o = s.object(NAMESPACE, WORKLOAD);
            let per: BTreeMap<String, (bool, u32)> = o
                .map(|o| {
                    o.status
                        .clusters
                        .iter()
                        .map(|c| (c.cluster.clone(), (c.applied, c.ready_replicas)))
                        .collect()
                })
                .unwrap_or_default();
            (per, o.map(|o| o.status.ready_replicas).unwrap_or(0))
        });
        for c in CLUSTERS {
            let health = self
                .health(c)
                .map(|h| format!("{h:?}"))
                .unwrap_or_else(|| "-".into());
            let (applied, rep_ready) = objects.get(c).copied().unwrap_or((false, 0));
            let (live_n, live_img) = match self.live(c).await {
                Some(d) => (replicas(&d).to_string(), image(&d)),
                None => ("-".into(), "-".into()),
            };
            rows.push(vec![
                c.to_string(),
                health,
                want.get(c).copied().unwrap_or(0).to_string(),
                if applied { "yes" } else { "no" }.to_string(),
                rep_ready.to_string(),
                live_n,
                live_img,
            ]);
        }
        let headers = [
            "CLUSTER",
            "HEALTH",
            "DESIRED",
            "APPLIED",
            "READY",
            "IN-CLUSTER",
            "IMAGE",
        ];
        for line in table(&headers, &rows).lines() {
            println!("    {line}");
        }
        println!("    aggregated ready replicas: {ready}/{REPLICAS}");
    }
}

fn replicas(d: &Value) -> u64 {
    d.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn image(d: &Value) -> String {
    d.pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn expected_image(cluster: &str) -> String {
    if cluster == "dc3" {
        format!("nginx:{DC3_TAG}")
    } else {
        IMAGE.to_string()
    }
}

fn cluster_spec(name: &str, sim: &SimHandle) -> ClusterSpec {
    let mut spec = ClusterSpec::new(name, sim.url());
    spec.labels.insert("region".into(), name.into());
    spec.failure_threshold_seconds = 3;
    spec.success_threshold_seconds = 3;
    spec
}

fn workload() -> anyhow::Result<ObjectSpec> {
    let template = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": WORKLOAD, "labels": { "app": WORKLOAD } },
        "spec": {
            "replicas": REPLICAS,
            "selector": { "matchLabels": { "app": WORKLOAD } },
            "template": {
                "metadata": { "labels": { "app": WORKLOAD } },
                "spec": { "containers": [{
                    "name": "web", "image": IMAGE,
                    "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                }]},
            },
        },
    });
    let weights: serde_json::Map<String, Value> = CLUSTERS
        .iter()
        .map(|c| (c.to_string(), json!({ "weight": 1 })))
        .collect();
    serde_json::from_value(json!({
        "template": template.to_string(),
        "placement": {
            "replicas": { "mode": "Divided", "division": { "staticWeights": { "weights": weights } } },
            "failover": { "enabled": true, "gracePeriodSeconds": 3 },
        },
        "overrides": [{ "clusterName": "dc3", "image": { "tag": DC3_TAG } }],
    }))
    .context("building the sample workload")
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

/// Runs the scenario, narrating; returns each step with whether it held. Stops at the first
/// failure because every later step builds on the earlier ones.
async fn scenario(demo: &Demo) -> Vec<(String, bool)> {
    let mut results = Vec::new();
    macro_rules! step {
        ($name:expr, $ok:expr) => {{
            let ok: bool = $ok;
            let name: String = $name.into();
            println!("  {} {name}", if ok { "PASS" } else { "FAIL" });
            results.push((name, ok));
            if !ok {
                return results;
            }
        }};
    }

    println!("1. registering dc1, dc2, dc3 (failure threshold 3 s, success threshold 3 s)");
    let mut registered = true;
    for name in CLUSTERS {
        if let Err(e) = demo
            .propose(Command::RegisterCluster(cluster_spec(name, demo.sim(name))))
            .await
        {
            println!("    registering {name}: {e:#}");
            registered = false;
        }
    }
    let ready = registered
        && wait_for(STEP_LIMIT, || {
            CLUSTERS
                .iter()
                .all(|c| demo.health(c) == Some(Health::Ready))
                .then_some(())
        })
        .await
        .is_some();
    step!("all three clusters registered and Ready", ready);

    println!("2. applying {NAMESPACE}/{WORKLOAD}: Deployment, {REPLICAS} replicas Divided 1:1:1, image tag {DC3_TAG} on dc3, failover grace 3 s");
    let put = match workload() {
        Ok(spec) => demo
            .propose(Command::PutObject {
                namespace: NAMESPACE.into(),
                name: WORKLOAD.into(),
                spec,
                expected_version: None,
            })
            .await
            .map_err(|e| println!("    {e:#}"))
            .is_ok(),
        Err(e) => {
            println!("    {e:#}");
            false
        }
    };
    let started = Instant::now();
    let converged = put
        && poll_async(STEP_LIMIT, || {
            demo.converged(|w| CLUSTERS.iter().all(|c| w.get(*c) == Some(&2)))
        })
        .await;
    demo.print_table().await;
    step!(
        format!(
            "workload converged: 2 replicas ready in each cluster, override on dc3 ({:.1} s)",
            started.elapsed().as_secs_f64()
        ),
        converged
    );

    println!("3. dc2 goes dark (connections refused)");
    demo.sim("dc2").admin().go_dark(DarkMode::Refuse);
    let dark_at = Instant::now();
    let not_ready = wait_for(STEP_LIMIT, || {
        (demo.health("dc2") == Some(Health::NotReady)).then_some(())
    })
    .await
    .is_some();
    step!(
        format!(
            "dc2 NotReady after {:.1} s",
            dark_at.elapsed().as_secs_f64()
        ),
        not_ready
    );

    println!("4. waiting for the failover grace period (3 s) to move dc2's replicas");
    let moved = poll_async(STEP_LIMIT, || {
        demo.converged(|w| {
            w.get("dc2").copied().unwrap_or(0) == 0
                && w.get("dc1").copied().unwrap_or(0) > 0
                && w.get("dc3").copied().unwrap_or(0) > 0
        })
    })
    .await;
    demo.print_table().await;
    step!(
        format!(
            "replicas moved off dc2 to dc1 and dc3, all {REPLICAS} ready ({:.1} s after dark)",
            dark_at.elapsed().as_secs_f64()
        ),
        moved
    );

    println!("5. dc2 comes back");
    demo.sim("dc2").admin().come_back();
    let back_at = Instant::now();
    let ready_again = wait_for(STEP_LIMIT, || {
        (demo.health("dc2") == Some(Health::Ready)).then_some(())
    })
    .await
    .is_some();
    let still_ok = ready_again && poll_async(STEP_LIMIT, || demo.converged(|_| true)).await;
    demo.print_table().await;
    step!(
        format!(
            "dc2 Ready again after {:.1} s, workload still fully ready",
            back_at.elapsed().as_secs_f64()
        ),
        still_ok
    );
    results
}

/// Polls an async condition every 200 ms until it holds or `limit` passes.
async fn poll_async<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
