//! `fedraft server` processes on loopback: one TOML file, data directory and log file per node
//! under a directory the test owns, started, killed (SIGKILL), stopped (SIGTERM) and restarted
//! by index, driven over the HTTP API and the CLI. Owns exactly the children it spawns (reaped
//! on drop, by handle); on a failing test the drop prints each node's last log lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::net::free_ports;
use crate::wait::eventually;

/// TLS files of one cluster, as `fedraft certs` writes them.
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

/// How to lay out a cluster of server processes.
#[derive(Clone)]
pub struct Layout {
    /// The fedraft binary (`env!("CARGO_BIN_EXE_fedraft")` in fedraft's own tests).
    pub bin: PathBuf,
    pub nodes: u64,
    /// Extra nodes laid out (ids after `nodes`) with an empty `[peers]` table: they join an
    /// existing cluster when an admin adds them.
    pub joiners: u64,
    pub cluster_id: String,
    /// At least 32 bytes, or the server refuses to start.
    pub secret: String,
    /// Lines of the token file (`TOKEN NAME ROLE`; tokens of at least 32 bytes, each once, or
    /// the server refuses to start); the first one's token is used for requests.
    pub tokens: Vec<String>,
    pub tls: Option<TlsDir>,
    /// `[raft]` lines, e.g. `tick_interval_ms = 3600000`.
    pub raft: Vec<String>,
    /// `[executors]` lines; empty turns the executors off (`enabled = false`).
    pub executors: Vec<String>,
    /// Per node: advertised peer address -> address to dial (proxies).
    pub peer_dial: BTreeMap<u64, BTreeMap<String, String>>,
    /// `RUST_LOG` of every node.
    pub log_filter: String,
    /// The HTTP client's per-request timeout.
    pub http_timeout: Duration,
}

impl Layout {
    /// Three nodes, executors off, one admin token, plain HTTP.
    pub fn new(bin: impl Into<PathBuf>, admin_token: &str) -> Layout {
        Layout {
            bin: bin.into(),
            nodes: 3,
            joiners: 0,
            cluster_id: "fedraft".into(),
            secret: "test-cluster-secret-0123456789abcdef".into(),
            tokens: vec![format!("{admin_token} admin admin")],
            tls: None,
            raft: Vec::new(),
            executors: Vec::new(),
            peer_dial: BTreeMap::new(),
            log_filter: "info,openraft=warn".into(),
            http_timeout: Duration::from_secs(15),
        }
    }

    fn admin_token(&self) -> String {
        self.tokens
            .first()
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default()
            .to_string()
    }
}

/// One server process (running or not).
pub struct Node {
    pub id: u64,
    /// `127.0.0.1:port` of the API.
    pub api: String,
    /// `127.0.0.1:port` of the peer listener.
    pub peer: String,
    pub config: PathBuf,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Node {
    pub fn running(&self) -> bool {
        self.child.is_some()
    }
}

/// The laid-out cluster: nodes by index (node id = index + 1).
pub struct Cluster {
    pub root: PathBuf,
    pub nodes: Vec<Node>,
    pub http: reqwest::Client,
    pub scheme: &'static str,
    pub token: String,
    bin: PathBuf,
    log_filter: String,
    // Dropped after the processes (fields drop in order): the next federation starts only
    // once this one is gone.
    _slot: crate::serial::HeavySlot,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        for i in 0..self.nodes.len() {
            self.kill(i);
            if failed {
                eprintln!(
                    "---- node{} log (last lines) ----\n{}",
                    self.nodes[i].id,
                    self.log_tail(i)
                );
            }
        }
    }
}

impl Cluster {
    /// Writes configs and the token file under `root/<name>/`; starts nothing.
    pub fn layout(root: &Path, name: &str, l: &Layout) -> Cluster {
        let slot = crate::serial::heavy_slot();
        fedraft_raft::install_crypto_provider();
        let base = root.join(name);
        std::fs::create_dir_all(&base).expect("creating the cluster directory");
        let tokens = base.join("tokens");
        let token_lines: String = l.tokens.iter().map(|t| format!("{t}\n")).collect();
        std::fs::write(&tokens, token_lines).expect("writing the token file");
        // The server refuses a token file that group or others may read, as ssh does its keys.
        std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("making the token file private");
        let ids: Vec<u64> = (1..=l.nodes + l.joiners).collect();
        let ports = free_ports(ids.len() * 2);
        let port = |id: u64| {
            (
                ports[(id as usize - 1) * 2],
                ports[(id as usize - 1) * 2 + 1],
            )
        };
        let peers: String = (1..=l.nodes)
            .map(|i| format!("{i} = \"127.0.0.1:{}\"\n", port(i).1))
            .collect();
        let mut nodes = Vec::new();
        for id in ids {
            let (api, peer) = port(id);
            let data_dir = base.join(format!("data{id}"));
            let config = base.join(format!("node{id}.toml"));
            let mut text = format!(
                "node_id = {id}\ncluster_id = \"{}\"\napi_listen = \"127.0.0.1:{api}\"\n\
                 peer_listen = \"127.0.0.1:{peer}\"\ndata_dir = \"{}\"\n\
                 cluster_secret = \"{}\"\ntoken_file = \"{}\"\n",
                l.cluster_id,
                data_dir.display(),
                l.secret,
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
            text.push_str("[executors]\n");
            if l.executors.is_empty() {
                text.push_str("enabled = false\n");
            }
            for line in &l.executors {
                text.push_str(line);
                text.push('\n');
            }
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
            std::fs::write(&config, text).expect("writing a node config");
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
        let builder = reqwest::Client::builder().timeout(l.http_timeout);
        let (http, scheme) = match &l.tls {
            Some(t) => {
                let ca = std::fs::read(t.ca()).expect("reading the CA certificate");
                let cfg = fedraft_raft::network::tls::client_config(&ca, None)
                    .expect("a TLS client config");
                (builder.tls_backend_preconfigured(cfg), "https")
            }
            None => (builder, "http"),
        };
        Cluster {
            _slot: slot,
            root: base,
            nodes,
            http: http.build().expect("an HTTP client"),
            scheme,
            token: l.admin_token(),
            bin: l.bin.clone(),
            log_filter: l.log_filter.clone(),
        }
    }

    /// Adds each node's own route to its peers (`[peer_dial]`), e.g. through delaying proxies:
    /// `dial(from, to)` is the address node `from` dials to reach node `to`.
    pub fn route_peers(&mut self, dial: impl Fn(usize, usize) -> String) {
        let advertised: Vec<String> = self.nodes.iter().map(|n| n.peer.clone()).collect();
        for (from, n) in self.nodes.iter().enumerate() {
            let mut text = std::fs::read_to_string(&n.config).expect("reading a node config");
            text.push_str("[peer_dial]\n");
            for (to, adv) in advertised.iter().enumerate() {
                if to != from {
                    text.push_str(&format!("\"{adv}\" = \"{}\"\n", dial(from, to)));
                }
            }
            std::fs::write(&n.config, text).expect("writing a node config");
        }
    }

    /// The index of node `id`.
    pub fn index(&self, id: u64) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .expect("no node with that id")
    }

    /// Starts node `i`'s process, appending to its log.
    pub fn start(&mut self, i: usize) {
        self.start_with_env(i, &[]);
    }

    /// [`Cluster::start`] with extra environment variables for this start only (e.g.
    /// `FAILPOINTS`).
    pub fn start_with_env(&mut self, i: usize, env: &[(&str, &str)]) {
        let n = &mut self.nodes[i];
        assert!(n.child.is_none(), "node {} already running", n.id);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&n.log)
            .expect("opening a node log");
        let child = Command::new(&self.bin)
            .args(["server", "--config"])
            .arg(&n.config)
            .env("RUST_LOG", &self.log_filter)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawning fedraft server");
        n.child = Some(child);
    }

    pub fn start_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.start(i);
        }
    }

    /// How node `i`'s process ended, if it has (reaped: the node can be started again).
    pub fn exited(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        let c = self.nodes[i].child.as_mut()?;
        let status = c.try_wait().ok()??;
        self.nodes[i].child = None;
        Some(status)
    }

    /// SIGKILL and reap: a crash, no shutdown path runs.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait (30 s at most) for a clean exit: what a service manager does.
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

    /// A request to node `i` with the admin token.
    pub fn req(&self, i: usize, m: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(m, self.url(i, path))
            .bearer_auth(&self.token)
    }

    /// GET as admin; None on any transport error or non-2xx.
    pub async fn get(&self, i: usize, path: &str) -> Option<Value> {
        let r = self.req(i, reqwest::Method::GET, path).send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    }

    /// The index of the node that says it leads (`/v1/status`), if one answers.
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

    /// The leader id every running node names in `/readyz`, if they agree and it is running.
    pub async fn agreed_leader(&self) -> Option<u64> {
        let mut seen = None;
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.running() {
                continue;
            }
            let r = self.http.get(self.url(i, "/readyz")).send().await.ok()?;
            let v: Value = r.json().await.ok()?;
            let l = v.get("leaderId").and_then(Value::as_u64)?;
            if seen.is_some_and(|s| s != l) {
                return None;
            }
            seen = Some(l);
        }
        seen.filter(|l| self.nodes.iter().any(|n| n.id == *l && n.running()))
    }

    /// Waits for [`Cluster::agreed_leader`] and returns its id.
    pub async fn wait_agreed_leader(&self, limit: Duration) -> u64 {
        eventually(limit, "a leader all running nodes agree on", || {
            self.agreed_leader()
        })
        .await
    }

    /// Waits until node `i` answers /readyz with a leader.
    pub async fn wait_ready(&self, i: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(r) = self.http.get(self.url(i, "/readyz")).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "node {} not ready within {limit:?}; log:\n{}",
                self.nodes[i].id,
                self.log_tail(i)
            );
            tokio::time::sleep(crate::wait::POLL).await;
        }
    }

    pub async fn wait_all_ready(&self, limit: Duration) {
        for i in 0..self.nodes.len() {
            self.wait_ready(i, limit).await;
        }
    }

    /// The last 30 lines of node `i`'s log.
    pub fn log_tail(&self, i: usize) -> String {
        let text = std::fs::read_to_string(&self.nodes[i].log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Runs the CLI against node `i` as admin; returns (exit code, stdout, stderr).
    pub fn cli(
        &self,
        i: usize,
        args: &[&str],
        extra_env: &[(&str, &str)],
    ) -> (i32, String, String) {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .env("FEDRAFT_SERVER", self.url(i, ""))
            .env("FEDRAFT_TOKEN", &self.token)
            .env("HOME", "/nonexistent");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let o = cmd.output().expect("running the fedraft CLI");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }
}
