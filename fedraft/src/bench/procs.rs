//! The clusters the bench starts for itself: three `fedraft server` processes and three etcd
//! members, all on 127.0.0.1 with ephemeral ports, data, configs and logs in one temporary
//! directory.
//!
//! Owns every process it starts and nothing else: [`Procs::stop`] kills and reaps exactly those
//! children (by handle, never by name) and removes the directory; `kill_on_drop` is the backstop
//! if the bench itself fails before that.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::Value;
use tokio::process::{Child, Command};

use super::Via;

/// How long a started cluster may take to elect a leader (debug builds on a busy box are slow).
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// One started process.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

/// Everything the bench started, and the directory they live in.
pub struct Procs {
    dir: Option<tempfile::TempDir>,
    keep: bool,
    procs: Vec<Proc>,
    http: reqwest::Client,
}

/// A fedraft cluster the bench started: node id -> API URL, and the admin token.
pub struct FedraftCluster {
    pub apis: Vec<(u64, String)>,
    pub token: String,
}

fn free_ports(n: usize) -> anyhow::Result<Vec<u16>> {
    // Hold every listener until all are chosen, so no port is handed out twice.
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .context("choosing free ports")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

impl Procs {
    pub fn new(keep: bool) -> anyhow::Result<Procs> {
        let dir = tempfile::Builder::new()
            .prefix("fedraft-bench-")
            .tempdir()
            .context("creating the bench's temporary directory")?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()?;
        Ok(Procs {
            dir: Some(dir),
            keep,
            procs: Vec::new(),
            http,
        })
    }

    pub fn path(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    pub async fn spawn(&mut self, name: &str, mut cmd: Command) -> anyhow::Result<()> {
        let log = self.path().join(format!("{name}.log"));
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .kill_on_drop(true);
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        println!("started {name} (pid {})", child.id().unwrap_or(0));
        self.procs.push(Proc {
            name: name.to_string(),
            child,
            log,
        });
        Ok(())
    }

    /// The process ids of the started processes whose name starts with `prefix` (`fedraft`,
    /// `etcd`), for CPU accounting.
    pub fn pids(&self, prefix: &str) -> Vec<u32> {
        self.procs
            .iter()
            .filter(|p| p.name.starts_with(prefix))
            .filter_map(|p| p.child.id())
            .collect()
    }

    /// Fails with the tail of a child's log if any started process has exited.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for p in &mut self.procs {
            if let Some(status) = p.child.try_wait()? {
                let text = std::fs::read_to_string(&p.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(10).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                bail!(
                    "{} exited ({status}); last log lines:\n{}",
                    p.name,
                    tail.join("\n")
                );
            }
        }
        Ok(())
    }

    /// Starts three fedraft nodes (fsync on, as always) and waits for a leader. `executors` is
    /// the body of their `[executors]` section (`enabled = false` for a log-only run).
    pub async fn start_fedraft(
        &mut self,
        bin: &Path,
        executors: &str,
    ) -> anyhow::Result<FedraftCluster> {
        let ports = free_ports(6)?;
        let token = format!("bench-{}", random_hex(16));
        let tokens = self.path().join("tokens");
        std::fs::write(&tokens, format!("{token} bench admin\n"))?;
        // The server refuses a token file that group or others may read.
        std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        let secret = random_hex(24);
        let peers: String = (1..=3)
            .map(|id| format!("{id} = \"127.0.0.1:{}\"\n", ports[id + 2]))
            .collect();
        let mut apis = Vec::new();
        for id in 1..=3u64 {
            let (api, peer) = (ports[id as usize - 1], ports[id as usize + 2]);
            let data = self.path().join(format!("fedraft{id}"));
            // Election timeouts like etcd's defaults (heartbeat 100 ms, election 1 s), so a
            // loaded two-core machine does not turn the measurement into a string of elections.
            let config = format!(
                "node_id = {id}\ncluster_id = \"fedraft-bench\"\napi_listen = \"127.0.0.1:{api}\"\n\
                 peer_listen = \"127.0.0.1:{peer}\"\ndata_dir = {data:?}\ncluster_secret = \"{secret}\"\n\
                 token_file = {tokens:?}\n\n[peers]\n{peers}\n[raft]\nheartbeat_interval_ms = 100\n\
                 election_timeout_min_ms = 1000\nelection_timeout_max_ms = 2000\n\n\
                 [executors]\n{executors}\n"
            );
            let path = self.path().join(format!("fedraft{id}.toml"));
            std::fs::write(&path, config)?;
            // The server's own default log filter (RUST_LOG, when set, is inherited).
            let mut cmd = Command::new(bin);
            cmd.arg("server").arg("--config").arg(&path);
            self.spawn(&format!("fedraft{id}"), cmd).await?;
            apis.push((id, format!("http://127.0.0.1:{api}")));
        }
        let cluster = FedraftCluster { apis, token };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.check_alive()?;
            if fedraft_target(&self.http, &cluster.apis, Via::Leader)
                .await
                .is_ok()
            {
                return Ok(cluster);
            }
            if Instant::now() > deadline {
                bail!("fedraft elected no leader within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Starts three etcd members as `/work/shared/bench/etcd3.sh` does and waits for a leader.
    pub async fn start_etcd(&mut self, bin: &str) -> anyhow::Result<Vec<String>> {
        let ports = free_ports(6)?;
        let cluster: Vec<String> = (1..=3)
            .map(|i| format!("infra{i}=http://127.0.0.1:{}", ports[i + 2]))
            .collect();
        let cluster = cluster.join(",");
        let mut urls = Vec::new();
        for i in 1..=3usize {
            let client = format!("http://127.0.0.1:{}", ports[i - 1]);
            let peer = format!("http://127.0.0.1:{}", ports[i + 2]);
            let mut cmd = Command::new(bin);
            // An operator's ETCD_* variables must not change the flags below.
            for (k, _) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("ETCD") {
                    cmd.env_remove(&k);
                }
            }
            cmd.arg("--name")
                .arg(format!("infra{i}"))
                .arg("--data-dir")
                .arg(self.path().join(format!("etcd{i}")))
                .args([
                    "--listen-client-urls",
                    &client,
                    "--advertise-client-urls",
                    &client,
                ])
                .args([
                    "--listen-peer-urls",
                    &peer,
                    "--initial-advertise-peer-urls",
                    &peer,
                ])
                .args(["--initial-cluster", &cluster])
                .args(["--initial-cluster-token", "fedraft-bench"])
                .args(["--initial-cluster-state", "new", "--logger", "zap"])
                .args(["--log-outputs", "stderr"]);
            self.spawn(&format!("etcd{i}"), cmd).await?;
            urls.push(client);
        }
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.check_alive()?;
            if etcd_target(&self.http, &urls, Via::Leader).await.is_ok() {
                return Ok(urls);
            }
            if Instant::now() > deadline {
                bail!("etcd elected no leader within {START_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Kills and reaps every started process, then removes the directory (unless `keep`).
    pub async fn stop(mut self) {
        for p in &mut self.procs {
            let _ = p.child.start_kill();
        }
        let n = self.procs.len();
        for p in &mut self.procs {
            if let Err(e) = p.child.wait().await {
                eprintln!("waiting for {}: {e}", p.name);
            }
        }
        if let Some(dir) = self.dir.take() {
            let path = dir.path().display().to_string();
            if self.keep {
                let kept = dir.keep();
                println!("stopped {n} processes; kept {}", kept.display());
            } else if let Err(e) = dir.close() {
                eprintln!("removing {path}: {e}");
            } else {
                println!("stopped {n} processes; removed {path}");
            }
        }
    }
}

/// The fedraft API URL to load: the node that `/readyz` names leader, or one that is not.
pub async fn fedraft_target(
    http: &reqwest::Client,
    apis: &[(u64, String)],
    via: Via,
) -> anyhow::Result<String> {
    let mut leader = None;
    for (_, url) in apis {
        let body: Value = http
            .get(format!("{url}/readyz"))
            .send()
            .await?
            .json()
            .await?;
        if let Some(l) = body["leaderId"].as_u64() {
            leader = Some(l);
        }
    }
    let leader = leader.context("no fedraft node knows a leader")?;
    let pick = apis
        .iter()
        .find(|(id, _)| (*id == leader) == (via == Via::Leader))
        .context("no node in the wanted role")?;
    Ok(pick.1.clone())
}

/// The etcd client URL to load: the member whose status says it leads, or one that does not.
pub async fn etcd_target(
    http: &reqwest::Client,
    urls: &[String],
    via: Via,
) -> anyhow::Result<String> {
    let mut found = Vec::new();
    for url in urls {
        let st: Value = http
            .post(format!("{url}/v3/maintenance/status"))
            .body("{}")
            .send()
            .await?
            .json()
            .await?;
        let me = st["header"]["member_id"]
            .as_str()
            .context("member_id")?
            .to_string();
        let leader = st["leader"].as_str().context("no leader yet")?.to_string();
        found.push((url.clone(), me == leader));
    }
    found
        .into_iter()
        .find(|(_, is_leader)| *is_leader == (via == Via::Leader))
        .map(|(u, _)| u)
        .context("no member in the wanted role")
}

/// The HTTP client used for discovery (not for load).
pub fn discovery_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()?)
}
