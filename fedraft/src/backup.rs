//! `fedraft backup` (online, through the API) and `fedraft restore` (offline: seeds the data
//! directories of a NEW cluster from a backup file).
//!
//! A seeded data directory looks exactly like a freshly initialised node whose first entry (the
//! membership of the new cluster, at log id 0) has been applied and compacted into a snapshot;
//! `fedraft_raft::restore::seed_data_dir` writes it, in raft's own encodings. Here: reading the
//! backup, and naming the nodes to seed. Must not: touch a directory that already holds data (a
//! restore never merges), or seed nodes with different membership tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use fedraft_apiserver::backup::{self, BackupHeader};

use crate::client::{Client, ClientError};
use crate::config::NodeFile;

#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// Where to write the backup (written to a temporary file, checked, then renamed).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The backup file (from `fedraft backup`).
    #[arg(long = "from")]
    pub from: PathBuf,
    /// Node configuration(s) of the new cluster: seeds each one's data_dir with its cluster_id
    /// and peers. Repeat for several nodes on this machine.
    #[arg(long = "config", conflicts_with_all = ["data_dir", "cluster_id", "peers"])]
    pub configs: Vec<PathBuf>,
    /// Data directory to seed (must be absent or empty); with --peers.
    #[arg(long, requires = "peers")]
    pub data_dir: Option<PathBuf>,
    /// Cluster id of the new cluster (its nodes' `cluster_id`).
    #[arg(long, default_value = "fedraft")]
    pub cluster_id: String,
    /// Every voter of the new cluster as ID=PEER_ADDR, comma separated (its nodes' `peers`).
    #[arg(long)]
    pub peers: Option<String>,
}

pub async fn run_backup(c: &Client, args: &BackupArgs) -> anyhow::Result<ExitCode> {
    let resp = c
        .request(reqwest::Method::GET, "/v1/admin/backup")
        .send()
        .await
        .map_err(|e| c.unreachable(e))?;
    if !resp.status().is_success() {
        return Err(c.api_error(resp).await.into());
    }
    let bytes = resp.bytes().await.map_err(|e| c.unreachable(e))?;
    // Check before writing: a damaged transfer never becomes a backup file.
    let (h, _, _) = backup::decode(&bytes).context("the server sent an unusable backup")?;
    write_atomically(&args.output, &bytes)?;
    println!(
        "backup {}: cluster {}, applied index {}, state hash {}, {} bytes",
        args.output.display(),
        h.cluster_id,
        h.applied_index,
        h.state_hash,
        bytes.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".fedraft-backup")
        .tempfile_in(dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// One data directory to seed.
struct Target {
    data_dir: PathBuf,
    cluster_id: String,
    peers: BTreeMap<u64, String>,
}

pub fn run_restore(args: &RestoreArgs) -> anyhow::Result<ExitCode> {
    let targets = targets(args)?;
    let bytes =
        std::fs::read(&args.from).with_context(|| format!("reading {}", args.from.display()))?;
    let (h, _state, snapshot) =
        backup::decode(&bytes).with_context(|| format!("in {}", args.from.display()))?;
    for t in &targets {
        seed(t, &h, snapshot.clone())?;
        println!(
            "seeded {} (cluster {}, voters {:?}) from backup at applied index {}, state hash {}",
            t.data_dir.display(),
            t.cluster_id,
            t.peers.keys().collect::<Vec<_>>(),
            h.applied_index,
            h.state_hash
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn targets(args: &RestoreArgs) -> anyhow::Result<Vec<Target>> {
    let mut out = Vec::new();
    for path in &args.configs {
        let f = NodeFile::load(path)?;
        if f.peers.is_empty() {
            bail!(
                "{}: `peers` must list every voter of the new cluster",
                path.display()
            );
        }
        out.push(Target {
            data_dir: f.data_dir,
            cluster_id: f.cluster_id,
            peers: f.peers,
        });
    }
    if let Some(dir) = &args.data_dir {
        out.push(Target {
            data_dir: dir.clone(),
            cluster_id: args.cluster_id.clone(),
            peers: parse_peers(args.peers.as_deref().unwrap_or(""))?,
        });
    }
    let Some(first) = out.first() else {
        bail!("name the new cluster's nodes: --config node.toml (repeatable), or --data-dir D --peers 1=ADDR,2=ADDR,3=ADDR");
    };
    if out
        .iter()
        .any(|t| t.peers != first.peers || t.cluster_id != first.cluster_id)
    {
        bail!("every seeded node must have the same cluster_id and peers table");
    }
    Ok(out)
}

/// Parses `1=host:port,2=host:port`.
fn parse_peers(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut out = BTreeMap::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((id, addr)) = part.split_once('=') else {
            bail!("peer {part:?} is not ID=ADDR");
        };
        let id: u64 = id
            .trim()
            .parse()
            .with_context(|| format!("peer id {id:?}"))?;
        out.insert(id, addr.trim().to_string());
    }
    Ok(out)
}

/// Writes the seed into an absent or empty data directory (fedraft-raft owns its layout).
fn seed(t: &Target, h: &BackupHeader, snapshot: Vec<u8>) -> anyhow::Result<()> {
    fedraft_raft::restore::seed_data_dir(
        &t.data_dir,
        &t.cluster_id,
        &t.peers,
        snapshot,
        h.applied_index,
    )
    .with_context(|| format!("seeding {}", t.data_dir.display()))
}

impl Client {
    /// Turns a non-2xx response into the API error it carries.
    pub async fn api_error(&self, resp: reqwest::Response) -> ClientError {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        let e = &v["error"];
        ClientError::Api {
            status: status.as_u16(),
            code: e["code"]
                .as_str()
                .unwrap_or(status.canonical_reason().unwrap_or("Error"))
                .to_string(),
            message: e["message"].as_str().map(str::to_string).unwrap_or(text),
            field: e["field"].as_str().map(str::to_string),
        }
    }
}
