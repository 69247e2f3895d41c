//! The system under test as processes: three `fedraft server` nodes whose peer traffic goes through a
//! [`Mesh`] (each node dials its peers through its own proxies, `[peer_dial]`), and simulated member
//! clusters (`fedraft-kubesim`) registered with the federation. This module starts, kills, restarts, pauses
//! and resumes them, replaces a node under a new id (`membership`), and writes their configs and logs under
//! the run's directory; it never decides when (that is `faults`) and never judges anything.

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use reqwest::Method;
use serde_json::{json, Value};

use super::api::{Api, Reply};
use super::procs::Proc;
use crate::mesh::Mesh;

/// Names of the simulated member clusters.
pub const CLUSTERS: [&str; 3] = ["dc1", "dc2", "dc3"];
/// Default: a member cluster is declared NotReady after this long without heartbeats (in log time). Longer
/// than any quorum loss the node nemeses cause on their own, so only a dark cluster (or a bug) fails over.
pub const FAILURE_THRESHOLD_S: u64 = 15;
pub const SUCCESS_THRESHOLD_S: u64 = 3;

/// Where the programs under test are.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub fedraft: PathBuf,
    pub kubesim: PathBuf,
    /// libfaketime (multi-threaded variant); nodes run under it when the clock nemesis is on.
    pub faketime: Option<PathBuf>,
}

impl Binaries {
    /// `explicit`, else `$env`, else `name` next to this executable (or one level up, for test binaries in
    /// `target/debug/deps`).
    pub fn locate(explicit: Option<PathBuf>, env: &str, name: &str) -> Result<PathBuf> {
        if let Some(p) = explicit.or_else(|| std::env::var_os(env).map(PathBuf::from)) {
            if p.is_file() {
                return Ok(p);
            }
            bail!("{} (from --flag or {env}) is not a file", p.display());
        }
        let me = std::env::current_exe().context("locating this executable")?;
        for dir in me.ancestors().skip(1).take(2) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        bail!(
            "cannot find {name} next to {}; build it (cargo build -p {}) or set {env}",
            me.display(),
            if name == "fedraft" {
                "fedraft"
            } else {
                "fedraft-kubesim"
            }
        )
    }

    /// The libfaketime library: `$FAKETIME_LIB`, else Debian's location.
    pub fn faketime_lib() -> Result<PathBuf> {
        let candidates = std::env::var_os("FAKETIME_LIB")
            .map(PathBuf::from)
            .into_iter()
            .chain([
                PathBuf::from("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"),
                PathBuf::from("/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1"),
                PathBuf::from("/usr/lib/faketime/libfaketimeMT.so.1"),
            ]);
        for c in candidates {
            if c.is_file() {
                return Ok(c);
            }
        }
        bail!("libfaketime not found (apt-get install faketime libfaketime, or set FAKETIME_LIB)")
    }
}

/// One fedraft node.
#[derive(Debug)]
pub struct Node {
    /// The raft node id this slot runs under now (a replacement gets a new one).
    pub id: u64,
    pub api: SocketAddr,
    /// The address peers reach it at (the same for every id the slot runs under).
    pub peer: SocketAddr,
    data: PathBuf,
    /// The `[peer_dial]` table routing its peer traffic through the mesh.
    dial: String,
    config: PathBuf,
    log: PathBuf,
    /// libfaketime's timestamp file for this node (`+0` when its clock is true).
    pub clock_file: Option<PathBuf>,
    pub proc: Option<Proc>,
}

/// One simulated member cluster.
#[derive(Debug)]
pub struct Sim {
    pub name: String,
    pub url: String,
    pub admin: String,
    _proc: Proc,
}

/// Everything the harness started. Dropping it kills every process and stops the mesh.
pub struct Env {
    pub dir: PathBuf,
    pub nodes: Vec<Node>,
    pub sims: Vec<Sim>,
    pub mesh: Mesh,
    pub api: Api,
    bins: Binaries,
    shared: Shared,
    /// The id the next replacement node gets (ids are never reused, as the runbook demands).
    next_id: u64,
}

/// Config settings every node shares.
struct Shared {
    secret: String,
    tokens: PathBuf,
    /// The `[peers]` table of the first three nodes, which initialise the cluster.
    peer_table: String,
}

/// Writes node `node`'s config: with the `[peers]` table when it initialises the cluster (`initial`),
/// with an empty one when it joins as a replacement and waits to be added.
fn write_config(node: &Node, shared: &Shared, initial: bool) -> Result<()> {
    let peer_table = if initial {
        shared.peer_table.as_str()
    } else {
        ""
    };
    let config = format!(
        "node_id = {id}\ncluster_id = \"jepsen\"\napi_listen = \"{api}\"\npeer_listen = \"{peer}\"\n\
         data_dir = {data:?}\ncluster_secret = {secret:?}\n\
         token_file = {tokens:?}\n\n[peers]\n{peer_table}\n[peer_dial]\n{dial}\n[raft]\nheartbeat_interval_ms = 200\n\
         election_timeout_min_ms = 1000\nelection_timeout_max_ms = 2000\ntick_interval_ms = 500\n\
         propose_timeout_ms = 3000\nsnapshot_every_entries = 1000\n\n[executors]\n\
         probe_interval_ms = 500\nprobe_timeout_ms = 1000\ncapacity_interval_ms = 2000\n\
         resync_period_ms = 5000\nstatus_flush_interval_ms = 300\nbackoff_max_ms = 1000\n",
        id = node.id,
        api = node.api,
        peer = node.peer,
        data = node.data.display().to_string(),
        secret = shared.secret,
        tokens = shared.tokens.display().to_string(),
        dial = node.dial,
    );
    std::fs::write(&node.config, config).context("writing a node config")
}

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

impl Env {
    /// Starts simulators and nodes, waits for a leader, registers the clusters and waits until all are
    /// Ready. Everything lives under `dir` (configs, data, logs).
    pub async fn start(
        dir: &Path,
        bins: Binaries,
        request_timeout: Duration,
        failure_threshold_s: u64,
    ) -> Result<Env> {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs).context("creating the logs directory")?;
        let mut sims = Vec::new();
        for name in CLUSTERS {
            sims.push(start_sim(&bins.kubesim, name, &logs).await?);
        }

        let token = random_hex(16);
        let secret = random_hex(24);
        let tokens = dir.join("tokens");
        std::fs::write(&tokens, format!("{token} jepsen admin\n")).context("writing tokens")?;
        // fedraft refuses a token file that group or others may read.
        std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .context("making the token file private")?;
        // The nodes' ports stay bound until the mesh's proxies have taken their own ephemeral
        // ports: a port chosen and released first could be handed to a proxy, and a node would
        // then fail to bind it while the proxy answered on its behalf.
        let reserved = (0..6)
            .map(|_| std::net::TcpListener::bind(("127.0.0.1", 0)))
            .collect::<std::io::Result<Vec<_>>>()
            .context("choosing free ports")?;
        let ports = reserved
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<std::io::Result<Vec<_>>>()
            .context("choosing free ports")?;
        let loopback = |p: &u16| SocketAddr::from(([127, 0, 0, 1], *p));
        let peers: Vec<SocketAddr> = ports[..3].iter().map(loopback).collect();
        let apis: Vec<SocketAddr> = ports[3..].iter().map(loopback).collect();
        let mesh = Mesh::start(&peers).await?;
        drop(reserved);
        let peer_table: String = (0..3)
            .map(|n| format!("{} = \"{}\"\n", n + 1, peers[n]))
            .collect();
        let mut nodes = Vec::new();
        for i in 0..3 {
            let id = i as u64 + 1;
            let data = dir.join("data").join(format!("node{id}"));
            // Membership carries the real peer addresses; each node reaches every other one
            // through the proxy of that ordered pair, so a cut link is exactly one direction.
            let dial: String = mesh
                .peer_addrs(i)
                .into_iter()
                .map(|(to, via)| format!("\"{}\" = \"{via}\"\n", peers[to]))
                .collect();
            let clock_file = match bins.faketime {
                Some(_) => {
                    let f = dir.join(format!("clock-node{id}"));
                    std::fs::write(&f, "+0\n").context("writing a clock file")?;
                    Some(f)
                }
                None => None,
            };
            nodes.push(Node {
                id,
                api: apis[i],
                peer: peers[i],
                data,
                dial,
                // Node numbers in file names stay those of the slot, whatever id it runs under.
                config: dir.join(format!("node{id}.toml")),
                log: logs.join(format!("node{id}.log")),
                clock_file,
                proc: None,
            });
        }
        let shared = Shared {
            secret,
            tokens,
            peer_table,
        };
        for node in &nodes {
            std::fs::create_dir_all(&node.data).context("creating a data directory")?;
            write_config(node, &shared, true)?;
        }
        let api = Api::new(
            apis.iter().map(|a| format!("http://{a}")).collect(),
            token,
            request_timeout,
        )?;
        let mut env = Env {
            dir: dir.to_path_buf(),
            nodes,
            sims,
            mesh,
            api,
            bins,
            shared,
            next_id: 4,
        };
        for i in 0..3 {
            env.start_node(i)?;
        }
        env.wait_leader(Duration::from_secs(60))
            .await
            .context("no leader elected after start")?;
        env.register_clusters(failure_threshold_s).await?;
        env.wait_clusters_ready(Duration::from_secs(60)).await?;
        Ok(env)
    }

    /// Starts (or restarts) node `i`.
    pub fn start_node(&mut self, i: usize) -> Result<()> {
        let node = &mut self.nodes[i];
        if node.proc.as_mut().is_some_and(Proc::alive) {
            return Ok(());
        }
        let mut cmd = Command::new(&self.bins.fedraft);
        cmd.arg("server").arg("--config").arg(&node.config);
        cmd.env(
            "RUST_LOG",
            std::env::var("JEPSEN_NODE_LOG")
                .unwrap_or_else(|_| "info,openraft=warn,kube_client=warn,hyper=warn".into()),
        );
        if let (Some(lib), Some(file)) = (&self.bins.faketime, &node.clock_file) {
            // Only the wall clock moves: timers run on CLOCK_MONOTONIC, as they do when NTP steps a clock.
            cmd.env("LD_PRELOAD", lib)
                .env("FAKETIME_TIMESTAMP_FILE", file)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                .env("FAKETIME_CACHE_DURATION", "1");
        }
        let proc = Proc::spawn(&format!("node{}", node.id), cmd, &node.log, false)?;
        node.proc = Some(proc);
        Ok(())
    }

    /// Kills node `i`, wipes its data directory and starts it again under a new id with an empty
    /// `[peers]` table: a new host at the old one's addresses, which waits until it is added. Returns the
    /// new id.
    pub fn rejoin_fresh(&mut self, i: usize) -> Result<u64> {
        self.kill_node(i);
        let id = self.next_id;
        self.next_id += 1;
        let node = &mut self.nodes[i];
        if node.data.exists() {
            std::fs::remove_dir_all(&node.data)
                .with_context(|| format!("wiping {}", node.data.display()))?;
        }
        std::fs::create_dir_all(&node.data).context("creating a data directory")?;
        node.id = id;
        write_config(node, &self.shared, false)?;
        self.start_node(i)?;
        Ok(id)
    }

    /// True once any node was replaced (so the membership may need restoring at the end).
    pub fn membership_changed(&self) -> bool {
        self.next_id > 4
    }

    /// SIGKILL node `i`.
    pub fn kill_node(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].proc.take() {
            p.kill();
        }
    }

    pub fn pause_node(&mut self, i: usize) -> Result<()> {
        match self.nodes[i].proc.as_mut() {
            Some(p) => p.pause(),
            None => Ok(()),
        }
    }

    pub fn resume_node(&mut self, i: usize) -> Result<()> {
        match self.nodes[i].proc.as_mut() {
            Some(p) => p.resume(),
            None => Ok(()),
        }
    }

    /// Sets node `i`'s wall-clock offset (libfaketime re-reads the file within a second).
    pub fn set_clock(&self, i: usize, offset_s: i64) -> Result<()> {
        let Some(file) = &self.nodes[i].clock_file else {
            bail!("node {} does not run under libfaketime", i + 1)
        };
        std::fs::write(file, format!("{offset_s:+}s\n")).context("writing a clock file")
    }

    /// Node ids (0-based) that are running and not paused.
    pub fn live(&mut self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i]
                    .proc
                    .as_mut()
                    .is_some_and(|p| !p.paused() && p.alive())
            })
            .collect()
    }

    /// The slot (0-based) running raft node `id`.
    pub fn slot_of(&self, id: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The leader (0-based) as most answering nodes report it.
    pub async fn leader(&self) -> Option<usize> {
        let mut votes = vec![0usize; self.nodes.len()];
        let calls =
            (0..self.nodes.len()).map(|i| self.api.call(i, Method::GET, "/readyz", None, &[]));
        for reply in futures::future::join_all(calls).await {
            if let Reply::Answered { body, .. } = reply {
                if let Some(slot) = body
                    .get("leaderId")
                    .and_then(Value::as_u64)
                    .and_then(|l| self.slot_of(l))
                {
                    votes[slot] += 1;
                }
            }
        }
        let (best, n) = votes.iter().enumerate().max_by_key(|(_, n)| **n)?;
        (*n > 0).then_some(best)
    }

    /// Waits until every running node reports the same leader.
    pub async fn wait_leader(&mut self, limit: Duration) -> Result<usize> {
        let deadline = Instant::now() + limit;
        loop {
            let live = self.live();
            let mut seen = Vec::new();
            for &i in &live {
                if let Reply::Answered { status: 200, body } =
                    self.api.call(i, Method::GET, "/readyz", None, &[]).await
                {
                    seen.push(body.get("leaderId").and_then(Value::as_u64));
                }
            }
            if !live.is_empty() && seen.len() == live.len() {
                if let Some(Some(l)) = seen.first().copied() {
                    if let Some(slot) = self.slot_of(l) {
                        if seen.iter().all(|s| *s == Some(l)) {
                            return Ok(slot);
                        }
                    }
                }
            }
            if Instant::now() >= deadline {
                bail!("nodes did not agree on a leader within {limit:?} (saw {seen:?})");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn register_clusters(&self, failure_threshold_s: u64) -> Result<()> {
        for sim in &self.sims {
            let body = json!({
                "name": sim.name,
                "apiEndpoint": sim.url,
                "labels": {"region": sim.name},
                "failureThresholdSeconds": failure_threshold_s,
                "successThresholdSeconds": SUCCESS_THRESHOLD_S,
            });
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let reply = self
                    .api
                    .call(0, Method::POST, "/v1/clusters", Some(&body), &[])
                    .await;
                match reply {
                    Reply::Answered { status, .. }
                        if (200..300).contains(&status) || status == 409 =>
                    {
                        break
                    }
                    other if Instant::now() >= deadline => {
                        bail!("registering {}: {}", sim.name, other.describe())
                    }
                    _ => tokio::time::sleep(Duration::from_millis(300)).await,
                }
            }
        }
        Ok(())
    }

    /// Cluster name -> health as node `from` sees it (stale read), if it answers.
    pub async fn cluster_health(&self, from: usize) -> Option<Vec<(String, String)>> {
        let reply = self
            .api
            .call(from, Method::GET, "/v1/clusters?stale=true", None, &[])
            .await;
        let items = reply.ok_body()?.get("items")?.as_array()?.clone();
        Some(
            items
                .iter()
                .filter_map(|c| {
                    Some((
                        c.get("name")?.as_str()?.to_string(),
                        c.pointer("/status/health")?.as_str()?.to_string(),
                    ))
                })
                .collect(),
        )
    }

    /// Waits until every member cluster is Ready (as the leader's state says).
    pub async fn wait_clusters_ready(&mut self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let leader = self.leader().await.unwrap_or(0);
            if let Some(h) = self.cluster_health(leader).await {
                if h.len() == self.sims.len() && h.iter().all(|(_, s)| s == "Ready") {
                    return Ok(());
                }
                if Instant::now() >= deadline {
                    bail!("member clusters not all Ready within {limit:?}: {h:?}");
                }
            } else if Instant::now() >= deadline {
                bail!("no node answered for cluster health within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Makes member cluster `c` refuse connections (`dark`) or serve again.
    pub async fn set_dark(&self, c: usize, dark: bool) -> Result<()> {
        let sim = &self.sims[c];
        let (path, body) = if dark {
            ("/_sim/dark", Some(json!({"mode": "refuse"})))
        } else {
            ("/_sim/light", None)
        };
        let reply = self
            .api
            .plain(Method::POST, &format!("{}{path}", sim.admin), body.as_ref())
            .await;
        if reply.ok_body().is_none() {
            bail!("{} {path}: {}", sim.name, reply.describe());
        }
        Ok(())
    }

    /// Kills every process now (the drop would too); used on the way out so logs are complete.
    pub fn stop_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill_node(i);
        }
        self.sims.clear();
    }
}

async fn start_sim(bin: &Path, name: &str, logs: &Path) -> Result<Sim> {
    let mut cmd = Command::new(bin);
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--name",
        name,
        "--nodes",
        "3",
        "--status-delay-ms",
        "200",
        "--bookmark-interval-ms",
        "1000",
    ]);
    cmd.env("RUST_LOG", "warn");
    let mut proc = Proc::spawn(name, cmd, &logs.join(format!("{name}.log")), true)?;
    let stdout = proc
        .take_stdout()
        .context("simulator stdout was not captured")?;
    // The simulator prints its API URL, then `admin <url>`; read both off a blocking thread with a bound.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let url = lines.next().and_then(Result::ok);
        let admin = lines.next().and_then(Result::ok);
        let _ = tx.send((url, admin));
        // Keep draining so the simulator never blocks on a full pipe.
        for _ in lines {}
    });
    let (url, admin) = tokio::time::timeout(Duration::from_secs(30), rx)
        .await
        .with_context(|| format!("simulator {name} did not print its address"))?
        .with_context(|| format!("simulator {name} exited"))?;
    let url = url.with_context(|| format!("simulator {name} printed nothing"))?;
    let admin = admin
        .and_then(|a| a.strip_prefix("admin ").map(str::to_string))
        .with_context(|| format!("simulator {name} printed no admin address"))?;
    Ok(Sim {
        name: name.to_string(),
        url: url.trim().to_string(),
        admin: admin.trim().to_string(),
        _proc: proc,
    })
}
