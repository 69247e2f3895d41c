//! End-to-end harness: three real `fedraft server` processes (the binary under test, one Raft
//! group on loopback, executors on) and three simulated member clusters (fedraft-kubesim in
//! the test process, labels region=dc1/dc2/dc3), driven only through the HTTP API and the
//! simulators' own Kubernetes API and fault switches.
//!
//! Timings are shortened in the node configs (probe 300 ms, election 1-2 s) and every wait
//! polls a condition with a generous deadline, so a loaded machine slows the tests down
//! instead of failing them. On a failure the last lines of each node's log are printed.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fedraft_kubesim::{DarkMode, SimConfig, SimHandle, Simulator};
use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
pub const TOKEN: &str = "e2e-admin-token-0123456789";
pub const CLUSTERS: [&str; 3] = ["dc1", "dc2", "dc3"];
pub const HEARTBEAT_MS: u64 = 200;
pub const ELECTION_MIN_MS: u64 = 1000;
pub const ELECTION_MAX_MS: u64 = 2000;
pub const PROBE_MS: u64 = 300;
/// How long any single condition may take on a loaded machine before the test fails.
pub const LIMIT: Duration = Duration::from_secs(40);
pub const MANAGED: &str = "fedraft.io/managed-by=fedraft";

/// One `fedraft server` process.
pub struct Node {
    pub id: u64,
    pub api: String,
    child: Option<Child>,
    log: PathBuf,
}

/// Three fedraft nodes and three member clusters.
pub struct Fed {
    pub nodes: Vec<Node>,
    pub sims: Vec<SimHandle>,
    pub http: reqwest::Client,
    dir: tempfile::TempDir,
    seq: std::sync::atomic::AtomicU64,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `check` until it returns Some, or panics with `what` after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn node_config(fed_dir: &std::path::Path, id: u64, api: u16, peers: &[u16]) -> String {
    let peer_lines: String = peers
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{} = \"127.0.0.1:{p}\"\n", i + 1))
        .collect();
    format!(
        r#"node_id = {id}
cluster_id = "fedraft-e2e"
api_listen = "127.0.0.1:{api}"
peer_listen = "127.0.0.1:{peer}"
data_dir = "{data}"
cluster_secret = "e2e-cluster-secret-0123456789"
token_file = "{tokens}"

[peers]
{peer_lines}
[raft]
heartbeat_interval_ms = {HEARTBEAT_MS}
election_timeout_min_ms = {ELECTION_MIN_MS}
election_timeout_max_ms = {ELECTION_MAX_MS}
tick_interval_ms = 500
propose_timeout_ms = 10000

[executors]
probe_interval_ms = {PROBE_MS}
probe_timeout_ms = 1000
capacity_interval_ms = 1000
resync_period_ms = 3000
status_flush_interval_ms = 200
backoff_max_ms = 1000
"#,
        peer = peers[(id - 1) as usize],
        data = fed_dir.join(format!("node{id}")).display(),
        tokens = fed_dir.join("tokens").display(),
    )
}

impl Fed {
    /// Starts the simulators and the three nodes, and waits for a leader all nodes agree on.
    pub async fn start() -> Fed {
        let mut sims = Vec::new();
        for name in CLUSTERS {
            let sim = Simulator::start(SimConfig {
                name: name.into(),
                nodes: 2,
                status_delay: Duration::from_millis(100),
                bookmark_interval: Duration::from_millis(500),
                ..SimConfig::default()
            })
            .await
            .unwrap();
            sims.push(sim);
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tokens"),
            format!("{TOKEN} e2e-admin admin\n"),
        )
        .unwrap();
        let apis: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let peers: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut nodes = Vec::new();
        for id in 1..=3u64 {
            let cfg = dir.path().join(format!("node{id}.toml"));
            std::fs::write(
                &cfg,
                node_config(dir.path(), id, apis[(id - 1) as usize], &peers),
            )
            .unwrap();
            let log = dir.path().join(format!("node{id}.log"));
            let child = Command::new(BIN)
                .args(["server", "--config"])
                .arg(&cfg)
                .env(
                    "RUST_LOG",
                    "info,openraft=warn,fedraft_apiserver=warn,kube_client=warn",
                )
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            nodes.push(Node {
                id,
                api: format!("http://127.0.0.1:{}", apis[(id - 1) as usize]),
                child: Some(child),
                log,
            });
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let fed = Fed {
            nodes,
            sims,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            dir,
            seq: Default::default(),
        };
        fed.wait_leader(Duration::from_secs(60)).await;
        fed
    }

    pub fn sim(&self, cluster: &str) -> &SimHandle {
        let i = CLUSTERS.iter().position(|c| *c == cluster).unwrap();
        &self.sims[i]
    }

    fn live_nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.child.is_some())
    }

    /// The leader every live node agrees on, if any.
    pub async fn leader(&self) -> Option<u64> {
        let mut seen = None;
        for n in self.live_nodes() {
            let r = self
                .http
                .get(format!("{}/readyz", n.api))
                .send()
                .await
                .ok()?;
            let v: Value = r.json().await.ok()?;
            let l = v.get("leaderId").and_then(Value::as_u64)?;
            if seen.is_some_and(|s| s != l) {
                return None;
            }
            seen = Some(l);
        }
        // The agreed leader must be one of the live processes.
        seen.filter(|l| self.live_nodes().any(|n| n.id == *l))
    }

    pub async fn wait_leader(&self, limit: Duration) -> u64 {
        eventually(limit, "a leader all live nodes agree on", || self.leader()).await
    }

    /// SIGKILL (no shutdown path runs) and reap the node's process.
    pub fn kill(&mut self, id: u64) {
        let n = self.nodes.iter_mut().find(|n| n.id == id).unwrap();
        if let Some(mut c) = n.child.take() {
            c.kill().unwrap();
            let _ = c.wait();
        }
    }

    /// One API request, sent to the live nodes in turn until one answers other than 503 or a
    /// connection error (followers forward writes; during an election nobody can). An
    /// idempotency key makes a retried write apply once.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let key = format!(
            "e2e-{}-{}",
            std::process::id(),
            self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let what = format!("{method} {path}");
        eventually(LIMIT, &what, || {
            let (method, key, body) = (method.clone(), key.clone(), body.clone());
            async move {
                for n in self.live_nodes() {
                    let mut req = self
                        .http
                        .request(method.clone(), format!("{}{path}", n.api))
                        .bearer_auth(TOKEN)
                        .header("idempotency-key", &key);
                    if let Some(b) = &body {
                        req = req.json(b);
                    }
                    let Ok(resp) = req.send().await else { continue };
                    let status = resp.status();
                    let v: Value = resp.json().await.unwrap_or(Value::Null);
                    if status.is_success() {
                        return Some(v);
                    }
                    if status.is_server_error() {
                        continue;
                    }
                    panic!("{method} {path} answered {status}: {v}");
                }
                None
            }
        })
        .await
    }

    pub async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// Registers dc1..dc3 (label region=<name>) with the given health thresholds.
    pub async fn register_all(&self, failure_s: u64, success_s: u64) {
        for c in CLUSTERS {
            self.register(c, failure_s, success_s).await;
        }
        for c in CLUSTERS {
            self.wait_health(c, "Ready").await;
        }
    }

    pub async fn register(&self, cluster: &str, failure_s: u64, success_s: u64) {
        let body = json!({
            "name": cluster,
            "labels": { "region": cluster },
            "apiEndpoint": self.sim(cluster).url(),
            "failureThresholdSeconds": failure_s,
            "successThresholdSeconds": success_s,
        });
        self.call(reqwest::Method::POST, "/v1/clusters", Some(body))
            .await;
    }

    pub async fn health(&self, cluster: &str) -> String {
        let v = self.get(&format!("/v1/clusters/{cluster}")).await;
        v.pointer("/status/health")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    pub async fn wait_health(&self, cluster: &str, want: &str) {
        eventually(LIMIT, &format!("{cluster} {want}"), || async {
            (self.health(cluster).await == want).then_some(())
        })
        .await;
    }

    pub async fn put(&self, ns: &str, name: &str, spec: Value) {
        self.call(
            reqwest::Method::PUT,
            &format!("/v1/namespaces/{ns}/objects/{name}"),
            Some(spec),
        )
        .await;
    }

    pub async fn delete(&self, ns: &str, name: &str) {
        self.call(
            reqwest::Method::DELETE,
            &format!("/v1/namespaces/{ns}/objects/{name}"),
            None,
        )
        .await;
    }

    /// Replicas per cluster as the replicated placement has them (clusters with 0 omitted).
    pub async fn placement(&self, ns: &str, name: &str) -> BTreeMap<String, u64> {
        let v = self
            .get(&format!("/v1/namespaces/{ns}/objects/{name}"))
            .await;
        v.pointer("/status/placement")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                    .filter(|(_, n)| *n > 0)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The Deployment as the member cluster holds it.
    pub async fn deployment(&self, cluster: &str, ns: &str, name: &str) -> Option<Value> {
        let url = format!(
            "{}/apis/apps/v1/namespaces/{ns}/deployments/{name}",
            self.sim(cluster).url()
        );
        let resp = self.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.json().await.ok()
    }

    /// Every Deployment carrying fedraft's ownership label in the member cluster, as
    /// "namespace/name" -> replicas. None while the cluster does not answer.
    pub async fn managed(&self, cluster: &str) -> Option<BTreeMap<String, u64>> {
        let url = format!(
            "{}/apis/apps/v1/deployments?labelSelector={MANAGED}",
            self.sim(cluster).url()
        );
        let resp = self.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let v: Value = resp.json().await.ok()?;
        Some(
            v.get("items")?
                .as_array()?
                .iter()
                .map(|d| {
                    let ns = d.pointer("/metadata/namespace").and_then(Value::as_str);
                    let name = d.pointer("/metadata/name").and_then(Value::as_str);
                    (
                        format!("{}/{}", ns.unwrap_or(""), name.unwrap_or("")),
                        replicas(d),
                    )
                })
                .collect(),
        )
    }

    /// Creates a Deployment fedraft does not manage, straight in the member cluster.
    pub async fn create_unmanaged(&self, cluster: &str, ns: &str, name: &str) {
        let url = format!(
            "{}/apis/apps/v1/namespaces/{ns}/deployments",
            self.sim(cluster).url()
        );
        let mut body = deployment(name, 1, "busybox:1");
        body["metadata"]["namespace"] = json!(ns);
        let resp = self.http.post(url).json(&body).send().await.unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
    }

    /// Mutating requests the member cluster has received so far (fedraft's writes: the test
    /// itself writes only through `create_unmanaged` and the simulator's drift switch).
    pub fn writes(&self, cluster: &str) -> u64 {
        self.sim(cluster).admin().stats().mutating_requests
    }

    pub fn go_dark(&self, cluster: &str, for_: Option<Duration>) {
        let admin = self.sim(cluster).admin();
        match for_ {
            Some(d) => admin.go_dark_for(DarkMode::Refuse, d),
            None => admin.go_dark(DarkMode::Refuse),
        }
    }

    pub fn come_back(&self, cluster: &str) {
        self.sim(cluster).admin().come_back();
    }

    /// Waits until `cluster` holds `name` with `want` replicas and `image`.
    pub async fn wait_deployment(
        &self,
        cluster: &str,
        ns: &str,
        name: &str,
        want: u64,
        image: &str,
    ) {
        eventually(
            LIMIT,
            &format!("{cluster}: {ns}/{name} with {want} replicas of {image}"),
            || async {
                let d = self.deployment(cluster, ns, name).await?;
                (replicas(&d) == want && self::image(&d) == image).then_some(())
            },
        )
        .await;
    }

    pub async fn wait_absent(&self, cluster: &str, ns: &str, name: &str) {
        eventually(
            LIMIT,
            &format!("{ns}/{name} gone from {cluster}"),
            || async {
                self.managed(cluster)
                    .await
                    .filter(|m| !m.contains_key(&format!("{ns}/{name}")))
                    .map(|_| ())
            },
        )
        .await;
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            if failed {
                let text = std::fs::read_to_string(&n.log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(40)..];
                eprintln!(
                    "---- node{} log (last lines) ----\n{}",
                    n.id,
                    tail.join("\n")
                );
            }
        }
    }
}

pub fn replicas(d: &Value) -> u64 {
    d.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

pub fn image(d: &Value) -> String {
    d.pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// A Deployment template with `replicas` and one container requesting 100m / 64Mi.
pub fn deployment(name: &str, replicas: u64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{
                    "name": "app", "image": image,
                    "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                }]},
            },
        },
    })
}

/// A Divided FederatedObject body: static weights (rebalanced when they change), failover after
/// `grace_s`, and optionally an image-tag override for one cluster.
pub fn divided(
    name: &str,
    replicas: u64,
    image: &str,
    weights: &[(&str, u64)],
    grace_s: u64,
    override_tag: Option<(&str, &str)>,
) -> Value {
    let weights: serde_json::Map<String, Value> = weights
        .iter()
        .map(|(c, w)| (c.to_string(), json!({ "weight": w })))
        .collect();
    let overrides = match override_tag {
        Some((cluster, tag)) => json!([{ "clusterName": cluster, "image": { "tag": tag } }]),
        None => json!([]),
    };
    json!({
        "template": deployment(name, replicas, image),
        "placement": {
            "replicas": { "mode": "Divided", "division": { "staticWeights": { "weights": weights, "rebalance": true } } },
            "failover": { "enabled": true, "gracePeriodSeconds": grace_s },
        },
        "overrides": overrides,
    })
}
