//! Shared harness of the `deploy_*` tests: real `fedraft server --config` processes on loopback,
//! each with its own TOML file, data directory and log file, driven over the HTTP API.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
pub const ADMIN: &str = "deploy-test-admin-token";
pub const OPERATOR: &str = "deploy-test-operator-token";
pub const SECRET: &str = "deploy-test-cluster-secret-0123456789";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// TLS files of one cluster (from `fedraft certs`).
#[derive(Clone)]
pub struct TlsDir {
    pub dir: PathBuf,
}

impl TlsDir {
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
    pub fn cert(&self, id: u64) -> PathBuf {
        self.dir.join(format!("node{id}.crt"))
    }
    pub fn key(&self, id: u64) -> PathBuf {
        self.dir.join(format!("node{id}.key"))
    }
}

/// How to lay out a cluster.
#[derive(Clone, Default)]
pub struct Layout {
    pub nodes: u64,
    /// Extra nodes laid out (ids after `nodes`) with an empty `[peers]` table: they join an
    /// existing cluster when an admin adds them.
    pub joiners: u64,
    pub cluster_id: Option<String>,
    pub tls: Option<TlsDir>,
    /// Extra `[raft]` lines, e.g. `tick_interval_ms = 3600000`.
    pub raft: Vec<String>,
    /// Per node: advertised peer address -> address to dial (proxies).
    pub peer_dial: BTreeMap<u64, BTreeMap<String, String>>,
}

pub struct Node {
    pub id: u64,
    pub api: String,
    pub peer: String,
    pub config: PathBuf,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

pub struct Cluster {
    pub root: PathBuf,
    pub nodes: Vec<Node>,
    pub http: reqwest::Client,
    pub scheme: &'static str,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl Cluster {
    /// Writes configs and the token file under `root/<name>/`; starts nothing.
    pub fn layout(root: &Path, name: &str, l: &Layout) -> Cluster {
        fedraft_raft::install_crypto_provider();
        let base = root.join(name);
        std::fs::create_dir_all(&base).unwrap();
        let tokens = base.join("tokens");
        std::fs::write(
            &tokens,
            format!("{ADMIN} admin admin\n{OPERATOR} ops operator\n"),
        )
        .unwrap();
        let ids: Vec<u64> = (1..=l.nodes + l.joiners).collect();
        let ports: BTreeMap<u64, (u16, u16)> = ids
            .iter()
            .map(|i| (*i, (free_port(), free_port())))
            .collect();
        let peers: String = ports
            .iter()
            .filter(|(i, _)| **i <= l.nodes)
            .map(|(i, (_, p))| format!("{i} = \"127.0.0.1:{p}\"\n"))
            .collect();
        let mut nodes = Vec::new();
        for id in ids {
            let (api, peer) = ports[&id];
            let data_dir = base.join(format!("data{id}"));
            let config = base.join(format!("node{id}.toml"));
            let mut text = format!(
                "node_id = {id}\ncluster_id = \"{}\"\napi_listen = \"127.0.0.1:{api}\"\n\
                 peer_listen = \"127.0.0.1:{peer}\"\ndata_dir = \"{}\"\n\
                 cluster_secret = \"{SECRET}\"\ntoken_file = \"{}\"\n",
                l.cluster_id.as_deref().unwrap_or("fedraft"),
                data_dir.display(),
                tokens.display()
            );
            if id <= l.nodes {
                text.push_str(&format!("[peers]\n{peers}"));
            }
            if let Some(dial) = l.peer_dial.get(&id) {
                text.push_str("[peer_dial]\n");
                for (from, to) in dial {
                    text.push_str(&format!("\"{from}\" = \"{to}\"\n"));
                }
            }
            // These clusters register member clusters that do not exist: executors would turn
            // them NotReady and change the state the tests compare across nodes and restores.
            text.push_str("[executors]\nenabled = false\n");
            text.push_str("[raft]\n");
            for line in &l.raft {
                text.push_str(line);
                text.push('\n');
            }
            if let Some(t) = &l.tls {
                text.push_str(&format!(
                    "[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\nca_file = \"{}\"\n",
                    t.cert(id).display(),
                    t.key(id).display(),
                    t.ca().display()
                ));
            }
            std::fs::write(&config, text).unwrap();
            nodes.push(Node {
                id,
                api: format!("127.0.0.1:{api}"),
                peer: format!("127.0.0.1:{peer}"),
                config,
                data_dir,
                log: base.join(format!("node{id}.log")),
                child: None,
            });
        }
        let (http, scheme) = match &l.tls {
            Some(t) => {
                let ca = std::fs::read(t.ca()).unwrap();
                let cfg = fedraft_raft::network::tls::client_config(&ca, None).unwrap();
                let c = reqwest::Client::builder()
                    .tls_backend_preconfigured(cfg)
                    .timeout(Duration::from_secs(15))
                    .build()
                    .unwrap();
                (c, "https")
            }
            None => (
                reqwest::Client::builder()
                    .timeout(Duration::from_secs(15))
                    .build()
                    .unwrap(),
                "http",
            ),
        };
        Cluster {
            root: base,
            nodes,
            http,
            scheme,
        }
    }

    /// Adds each node's own route to its peers (`[peer_dial]`), e.g. through delaying proxies:
    /// `dial(from, to)` is the address node `from` dials to reach node `to`.
    pub fn route_peers(&mut self, dial: impl Fn(usize, usize) -> String) {
        let advertised: Vec<String> = self.nodes.iter().map(|n| n.peer.clone()).collect();
        for (from, n) in self.nodes.iter().enumerate() {
            let mut text = std::fs::read_to_string(&n.config).unwrap();
            text.push_str("[peer_dial]\n");
            for (to, adv) in advertised.iter().enumerate() {
                if to != from {
                    text.push_str(&format!("\"{adv}\" = \"{}\"\n", dial(from, to)));
                }
            }
            std::fs::write(&n.config, text).unwrap();
        }
    }

    /// The index of the node that currently leads, if one answers.
    pub async fn leader(&self) -> Option<usize> {
        for i in 0..self.nodes.len() {
            if let Some(s) = self.get(i, "/v1/status?stale=true").await {
                if s["isLeader"] == true {
                    return Some(i);
                }
            }
        }
        None
    }

    pub fn start(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        assert!(n.child.is_none(), "node {} already running", n.id);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&n.log)
            .unwrap();
        let child = Command::new(BIN)
            .args(["server", "--config"])
            .arg(&n.config)
            .env("RUST_LOG", "info,openraft=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        n.child = Some(child);
    }

    pub fn start_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.start(i);
        }
    }

    /// SIGKILL: a crash.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit: what a service manager does on upgrade.
    pub fn stop(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn url(&self, i: usize, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.nodes[i].api)
    }

    pub fn req(&self, i: usize, m: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(m, self.url(i, path)).bearer_auth(ADMIN)
    }

    /// GET as admin; None on any transport error or non-2xx.
    pub async fn get(&self, i: usize, path: &str) -> Option<Value> {
        let r = self.req(i, reqwest::Method::GET, path).send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    }

    /// Waits until node `i` answers /readyz with a leader.
    pub async fn wait_ready(&self, i: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = self.http.get(self.url(i, "/readyz")).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "node {} not ready within {timeout:?}; log:\n{}",
                self.nodes[i].id,
                self.log_tail(i)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn wait_all_ready(&self, timeout: Duration) {
        for i in 0..self.nodes.len() {
            self.wait_ready(i, timeout).await;
        }
    }

    pub fn log_tail(&self, i: usize) -> String {
        let text = std::fs::read_to_string(&self.nodes[i].log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Runs the CLI against node `i` (as admin) and returns (exit code, stdout, stderr).
    pub fn cli(
        &self,
        i: usize,
        args: &[&str],
        extra_env: &[(&str, &str)],
    ) -> (i32, String, String) {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("FEDRAFT_SERVER", self.url(i, ""))
            .env("FEDRAFT_TOKEN", ADMIN)
            .env("HOME", "/nonexistent");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let o = cmd.output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}

pub fn deployment(name: &str, replicas: u32) -> Value {
    serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": replicas}})
}

/// PUTs an object with an idempotency key, retrying (same key) until `deadline`: what a
/// well-behaved client does across a leader change. Returns the resource version.
pub async fn put_object_retrying(
    c: &Cluster,
    node: usize,
    ns: &str,
    name: &str,
    deadline: Instant,
) -> Result<u64, String> {
    let body = serde_json::json!({"template": deployment(name, 1)});
    let key = format!("put-{ns}-{name}");
    let mut last = String::new();
    let mut attempt = 0usize;
    while Instant::now() < deadline {
        // Spread retries over the nodes, as a client behind a load balancer would.
        let i = (node + attempt) % c.nodes.len();
        attempt += 1;
        let r = c
            .req(
                i,
                reqwest::Method::PUT,
                &format!("/v1/namespaces/{ns}/objects/{name}"),
            )
            .header("Idempotency-Key", &key)
            .json(&body)
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => {
                let v: Value = r.json().await.map_err(|e| e.to_string())?;
                return Ok(resource_version(&v));
            }
            Ok(r) => last = format!("HTTP {} {}", r.status(), r.text().await.unwrap_or_default()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last)
}

pub fn resource_version(v: &Value) -> u64 {
    let rv = &v["metadata"]["resourceVersion"];
    rv.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| rv.as_u64())
        .or_else(|| v["resourceVersion"].as_u64())
        .unwrap_or(0)
}

/// Registers one member cluster so objects have somewhere to go.
pub async fn register_cluster(c: &Cluster, node: usize, name: &str) {
    let body = serde_json::json!({"name": name, "apiEndpoint": format!("https://{name}.example:6443"),
        "labels": {"region": name}});
    let r = c
        .req(node, reqwest::Method::POST, "/v1/clusters")
        .header("Idempotency-Key", format!("reg-{name}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}
