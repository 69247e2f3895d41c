//! The node configuration file (`fedraft server --config node.toml`).
//!
//! Every field is documented here with its default; `examples/node.toml` is a commented example.
//! Parsing only: turning it into a running node is `server.rs`'s job.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use fedraft_apiserver::auth::{read_private_file, MIN_TOKEN_BYTES};
use serde::Deserialize;

mod executors;
pub use executors::ExecutorTiming;

/// Shortest cluster secret accepted: as long as an API token ([`MIN_TOKEN_BYTES`]), since it
/// opens every peer route (the log itself).
pub const MIN_CLUSTER_SECRET_BYTES: usize = MIN_TOKEN_BYTES;

/// One node's configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeFile {
    /// This node's raft id; unique in the cluster, never reused. Required.
    pub node_id: u64,
    /// Identifies the cluster; written into the data dir at first start, and a data dir of another
    /// cluster refuses to open. Default `"fedraft"`.
    #[serde(default = "default_cluster_id")]
    pub cluster_id: String,
    /// Where the client API listens. Default `"127.0.0.1:8080"`.
    #[serde(default = "default_api_listen")]
    pub api_listen: SocketAddr,
    /// Where the peer (raft) API listens. Default `"127.0.0.1:7001"`.
    #[serde(default = "default_peer_listen")]
    pub peer_listen: SocketAddr,
    /// The peer address other nodes use to reach this one. Default: `peer_listen`.
    #[serde(default)]
    pub peer_advertise: Option<String>,
    /// Every voter of the initial cluster, this node included: id -> advertised peer address.
    /// The cluster is initialised with exactly these voters on first start (idempotent later).
    /// Default: empty (join an existing cluster as a learner added by an admin).
    #[serde(default)]
    pub peers: BTreeMap<u64, String>,
    /// This node's own route to peers: advertised peer address -> address to dial instead (for
    /// example a local relay or the delaying proxies of `deploy/local-3dc.sh`). The `peers`
    /// table must stay the same on every node (it becomes the replicated membership); this one
    /// may differ per node. With TLS the dialled host must be in the peer's certificate.
    /// Default: empty (dial the advertised addresses).
    #[serde(default)]
    pub peer_dial: BTreeMap<String, String>,
    /// The node's data directory (RocksDB). Required.
    pub data_dir: PathBuf,
    /// The secret every peer request carries; the same on all nodes, at least 32 bytes. Either
    /// this or `cluster_secret_file` is required. Never accepted by the client API.
    #[serde(default)]
    pub cluster_secret: Option<String>,
    /// A file holding the cluster secret (trailing whitespace trimmed); it must be mode 0600 or
    /// stricter, or the node refuses to start. Default: none.
    #[serde(default)]
    pub cluster_secret_file: Option<PathBuf>,
    /// The API token file (`TOKEN NAME ROLE` per line; roles admin, operator, tenant:NAME). Required.
    /// Mode 0600 or stricter, tokens of at least 32 bytes, no token twice; else the node refuses
    /// to start.
    pub token_file: PathBuf,
    /// Maximum request body size in bytes. Default 2097152 (2 MiB).
    #[serde(default = "default_body_limit")]
    pub body_limit_bytes: usize,
    /// Watch events retained for resumption. Default 8192.
    #[serde(default = "default_watch_history")]
    pub watch_history_events: usize,
    /// Raft timing; defaults suit three data centers at <= 50 ms round trip.
    #[serde(default)]
    pub raft: RaftTiming,
    /// The executors: on the leader, or with `owner_lease_ms` for the clusters this node owns.
    #[serde(default)]
    pub executors: ExecutorTiming,
    /// Audit archive: checkpoint interval and retention. Default: a checkpoint every 10,000
    /// commands, keep everything.
    #[serde(default)]
    pub audit: AuditFile,
    /// TLS for both listeners: server TLS on the API, mutual TLS between peers. Default: none
    /// (plain HTTP; loopback and development only). `fedraft certs` creates the files. A node
    /// whose TLS files are missing or invalid refuses to start rather than run without TLS.
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// Service discovery DNS (`[dns]`: `listen`, default `"127.0.0.1:5353"`, UDP and TCP;
    /// `zone`, default `"fed.internal"`; `max_answers`, default 8; `leader_contact_bound_ms`,
    /// default 10000; `[dns.locality]` cluster = ["CIDR", ...]; `[dns.rate_limit]`: `enabled`
    /// true, `responses_per_second` 100 per source /24 or /56, `slip` 2, `exempt` = ["CIDR"]).
    /// Default: no DNS server.
    #[serde(default)]
    pub dns: Option<fedraft_dns::DnsConfig>,
    /// Member credentials at rest (`[credentials]`: `current`, the key id new credentials are
    /// sealed with, and `keys = [{ id, file }, { id, env }]`, files mode 0600 holding 32 random
    /// bytes or their base64; see `fedraft_secrets::KeyringConfig`). Every node lists the same
    /// keys. Default: none, and the node refuses requests carrying credentials rather than put
    /// them in the clear into the log, snapshots and backups.
    #[serde(default)]
    pub credentials: Option<fedraft_secrets::KeyringConfig>,
    /// Limits of the API and peer listeners against slow or hostile clients (`[listeners]`;
    /// `fedraft server` flags of the same names override them).
    #[serde(default)]
    pub listeners: ListenerFile,
}

/// Default deadline for a request head (and for a connection's TLS handshake plus first head):
/// a client trickling its headers is cut off after this long. It also bounds how long an
/// HTTP/1 keep-alive connection waits idle for its next request.
pub const DEFAULT_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// Default time without a byte either way after which a connection is closed, unless a
/// response is still being streamed (a watch with nothing to say is not idle).
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 120_000;
/// Default connections the API serves at once; more are closed at once. Each costs a
/// file descriptor, which RocksDB needs too (the systemd unit allows 65536).
pub const DEFAULT_API_MAX_CONNECTIONS: usize = 4096;
/// Default peer connections at once: two peers with a few pooled connections each, a node
/// joining, and room for a restart's reconnects.
pub const DEFAULT_PEER_MAX_CONNECTIONS: usize = 64;

/// `[listeners]`: each absent field keeps its default (the constants above).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerFile {
    /// Default 10000.
    pub header_read_timeout_ms: Option<u64>,
    /// Default 120000.
    pub idle_timeout_ms: Option<u64>,
    /// Default 4096.
    pub api_max_connections: Option<usize>,
    /// Default 64.
    pub peer_max_connections: Option<usize>,
}

/// The limits both listeners run with, after defaults and overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerSettings {
    pub api: crate::listen::ListenerLimits,
    pub peer: crate::listen::ListenerLimits,
}

impl ListenerFile {
    /// `self` with every field `over` sets replaced (flags over the file).
    pub fn overridden_by(&self, over: &ListenerFile) -> ListenerFile {
        ListenerFile {
            header_read_timeout_ms: over.header_read_timeout_ms.or(self.header_read_timeout_ms),
            idle_timeout_ms: over.idle_timeout_ms.or(self.idle_timeout_ms),
            api_max_connections: over.api_max_connections.or(self.api_max_connections),
            peer_max_connections: over.peer_max_connections.or(self.peer_max_connections),
        }
    }

    /// The limits with defaults filled in, refusing values that would disable a listener.
    pub fn settings(&self) -> anyhow::Result<ListenerSettings> {
        let header = self
            .header_read_timeout_ms
            .unwrap_or(DEFAULT_HEADER_READ_TIMEOUT_MS);
        let idle = self.idle_timeout_ms.unwrap_or(DEFAULT_IDLE_TIMEOUT_MS);
        let api = self
            .api_max_connections
            .unwrap_or(DEFAULT_API_MAX_CONNECTIONS);
        let peer = self
            .peer_max_connections
            .unwrap_or(DEFAULT_PEER_MAX_CONNECTIONS);
        for (name, ms) in [
            ("header_read_timeout_ms", header),
            ("idle_timeout_ms", idle),
        ] {
            if ms == 0 || ms > 86_400_000 {
                bail!("listeners.{name} = {ms} is outside 1..=86400000");
            }
        }
        // Tokio's semaphore holds at most usize::MAX >> 3 permits; a million connections is
        // far past any file descriptor limit anyway.
        for (name, n) in [("api_max_connections", api), ("peer_max_connections", peer)] {
            if n == 0 || n > 1_000_000 {
                bail!("listeners.{name} = {n} is outside 1..=1000000");
            }
        }
        let limits = |max_connections| crate::listen::ListenerLimits {
            header_read_timeout: std::time::Duration::from_millis(header),
            idle_timeout: std::time::Duration::from_millis(idle),
            max_connections,
        };
        Ok(ListenerSettings {
            api: limits(api),
            peer: limits(peer),
        })
    }
}

/// Raft timing overrides; each absent field keeps fedraft-raft's default (`NodeConfig::default()`).
///
/// The defaults are safe for three data centers at <= 50 ms round-trip time (RTT). For other
/// links keep `election_timeout_min_ms >= 8 x RTT` (and above a hundred fsyncs),
/// `heartbeat_interval_ms ~= 2 x RTT` and `election_timeout_max_ms ~= 1.75 x min`; every node
/// of a cluster should use the same values. A dead leader is replaced after about
/// `max + rand[min, max)` plus one vote round trip.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RaftTiming {
    /// Leader heartbeat interval. Default 100 (two round trips at 50 ms).
    pub heartbeat_interval_ms: Option<u64>,
    /// Lower bound of the randomized election timeout. Default 400 (8 round trips at 50 ms).
    pub election_timeout_min_ms: Option<u64>,
    /// Upper bound of the randomized election timeout. Default 700.
    pub election_timeout_max_ms: Option<u64>,
    /// How often the leader advances log time with a tick entry. Default 1000; at most 2500
    /// (a longer gap between entries counts as a stalled log, in which member clusters'
    /// failure thresholds do not run).
    pub tick_interval_ms: Option<u64>,
    /// Entries between state machine snapshots. Default 10000.
    pub snapshot_every_entries: Option<u64>,
    /// Log entries kept behind a snapshot when the log is purged, for followers a little behind.
    /// Default 1000.
    pub max_in_snapshot_log_to_keep: Option<u64>,
    /// How long a proposal may wait for a quorum before failing with 503. Default 5000.
    pub propose_timeout_ms: Option<u64>,
}

/// `[audit]`: each absent field keeps fedraft-raft's default.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditFile {
    /// Commands between state checkpoints (0 = none). Default 10000. A large state stretches it
    /// to the last checkpoint's bytes / 256, at most ten times this.
    pub checkpoint_every_commands: Option<u64>,
    /// Remove records older than this many seconds of log time. Default: keep.
    pub max_age_seconds: Option<u64>,
    /// Keep about this many bytes of records, newest first. Default: keep everything.
    pub max_bytes: Option<u64>,
}

/// PEM files for TLS. With this section every peer address is reached over `https://`, so all
/// nodes of a cluster must have it (a mixed cluster cannot talk).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// This node's certificate chain (PEM), served on both listeners and presented to peers.
    /// Its SANs must cover the host part of `peer_advertise` and of the API address clients use.
    /// Required.
    pub cert_file: PathBuf,
    /// This node's private key (PEM). Mode 0600 or stricter, or the node refuses to start.
    /// Required.
    pub key_file: PathBuf,
    /// CA bundle (PEM; several certificates during a CA rotation). Peers must present a
    /// certificate from it (mutual TLS), and this node verifies the peers it calls against it.
    /// Required.
    pub ca_file: PathBuf,
    /// API clients must present a certificate from `ca_file` as well as a bearer token.
    /// Default false (the token alone authenticates).
    #[serde(default)]
    pub require_client_cert: bool,
}

fn default_cluster_id() -> String {
    "fedraft".into()
}
fn default_api_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}
fn default_peer_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 7001))
}
fn default_body_limit() -> usize {
    2 * 1024 * 1024
}
fn default_watch_history() -> usize {
    8192
}

impl NodeFile {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let cfg = Self::parse(&text).with_context(|| format!("in {}", path.display()))?;
        if cfg.cluster_secret.is_some() {
            // Only warned: configurations are commonly group-readable, and refusing them would
            // break every node written with an inline secret. The fix is cluster_secret_file.
            warn_if_shared(path);
        }
        Ok(cfg)
    }

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let cfg: NodeFile = toml::from_str(text)?;
        if cfg.cluster_secret.is_some() == cfg.cluster_secret_file.is_some() {
            bail!("set exactly one of cluster_secret and cluster_secret_file");
        }
        if !cfg.peers.is_empty() && !cfg.peers.contains_key(&cfg.node_id) {
            bail!("peers must include this node (node_id {})", cfg.node_id);
        }
        Ok(cfg)
    }

    /// The cluster secret, from the file or inline. A secret file must be private to its owner
    /// (mode & 0o077 == 0, as ssh wants its keys), and the secret at least
    /// [`MIN_CLUSTER_SECRET_BYTES`] long.
    pub fn secret(&self) -> anyhow::Result<String> {
        let secret = match (&self.cluster_secret, &self.cluster_secret_file) {
            (Some(s), _) => s.clone(),
            (None, Some(p)) => {
                let bytes = read_private_file(p, "cluster secret file")?;
                String::from_utf8(bytes)
                    .with_context(|| format!("cluster secret file {} is not UTF-8", p.display()))?
                    .trim_end()
                    .to_string()
            }
            (None, None) => bail!("no cluster secret configured"),
        };
        if secret.len() < MIN_CLUSTER_SECRET_BYTES {
            let source = match &self.cluster_secret_file {
                Some(p) if self.cluster_secret.is_none() => format!(" in {}", p.display()),
                _ => String::new(),
            };
            bail!(
                "the cluster secret{source} is {} bytes; it must be at least \
                 {MIN_CLUSTER_SECRET_BYTES} (e.g. `openssl rand -hex 32`)",
                secret.len()
            );
        }
        Ok(secret)
    }

    /// The address peers use for this node.
    pub fn advertise(&self) -> String {
        self.peer_advertise
            .clone()
            .unwrap_or_else(|| self.peer_listen.to_string())
    }
}

#[cfg(unix)]
fn warn_if_shared(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                file = %path.display(),
                mode = format!("{mode:04o}"),
                "the configuration holds the cluster secret inline and others may read it; \
                 move it to cluster_secret_file (mode 0600) or chmod 600 the configuration"
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_shared(_path: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_example_parses() {
        let text = include_str!("../../examples/node.toml");
        let cfg = NodeFile::parse(text).unwrap();
        assert_eq!(cfg.node_id, 1);
        assert_eq!(cfg.peers.len(), 3);
        assert_eq!(cfg.body_limit_bytes, 2 * 1024 * 1024);
    }

    #[test]
    fn the_default_lease_applies_when_spread_by_default_and_zero_turns_it_off() {
        let lease = |v: Option<u64>| {
            let t = ExecutorTiming {
                owner_lease_ms: v,
                ..ExecutorTiming::default()
            };
            t.to_config(1).owner_lease
        };
        let default = executors::SPREAD_BY_DEFAULT.then_some(executors::DEFAULT_OWNER_LEASE);
        assert_eq!(lease(None), default);
        assert_eq!(lease(Some(0)), None);
        assert_eq!(lease(Some(3000)), Some(std::time::Duration::from_secs(3)));
    }

    #[test]
    fn the_deploy_configs_parse_and_differ_only_where_they_should() {
        let files = [
            include_str!("../../../deploy/config/dc1.toml"),
            include_str!("../../../deploy/config/dc2.toml"),
            include_str!("../../../deploy/config/dc3.toml"),
        ];
        let cfgs: Vec<NodeFile> = files.iter().map(|t| NodeFile::parse(t).unwrap()).collect();
        for (i, c) in cfgs.iter().enumerate() {
            assert_eq!(c.node_id, i as u64 + 1);
            assert_eq!(
                c.peers, cfgs[0].peers,
                "peers must be identical on every node"
            );
            assert_eq!(c.peers.get(&c.node_id), Some(&c.advertise()));
            assert_eq!(c.cluster_id, cfgs[0].cluster_id);
            let tls = c.tls.as_ref().unwrap();
            assert!(tls.cert_file.ends_with(format!("node{}.crt", c.node_id)));
            assert_eq!(c.raft.election_timeout_min_ms, Some(400));
        }
    }

    #[test]
    fn listener_limits_default_and_take_overrides() {
        let base = "node_id = 1\ndata_dir = \"d\"\ntoken_file = \"t\"\ncluster_secret = \"s\"\n";
        let cfg = NodeFile::parse(base).unwrap();
        let s = cfg.listeners.settings().unwrap();
        assert_eq!(s.api.max_connections, 4096);
        assert_eq!(s.peer.max_connections, 64);
        assert_eq!(s.api.header_read_timeout.as_millis(), 10_000);
        assert_eq!(s.peer.idle_timeout.as_millis(), 120_000);
        let text =
            format!("{base}[listeners]\nheader_read_timeout_ms = 2000\npeer_max_connections = 8\n");
        let cfg = NodeFile::parse(&text).unwrap();
        let flags = ListenerFile {
            header_read_timeout_ms: Some(500),
            api_max_connections: Some(3),
            ..ListenerFile::default()
        };
        let s = cfg.listeners.overridden_by(&flags).settings().unwrap();
        assert_eq!(s.api.header_read_timeout.as_millis(), 500);
        assert_eq!(s.api.max_connections, 3);
        assert_eq!(s.peer.max_connections, 8);
        let zero = ListenerFile {
            idle_timeout_ms: Some(0),
            ..ListenerFile::default()
        };
        assert!(zero.settings().is_err());
        assert!(NodeFile::parse(&format!("{base}[listeners]\nbogus = 1\n")).is_err());
    }

    #[test]
    fn the_credentials_section_parses() {
        let base = "node_id = 1\ndata_dir = \"d\"\ntoken_file = \"t\"\ncluster_secret = \"s\"\n";
        assert!(NodeFile::parse(base).unwrap().credentials.is_none());
        let text = format!(
            "{base}[credentials]\ncurrent = \"b\"\nkeys = [{{ id = \"b\", file = \"/k\" }}, \
             {{ id = \"a\", env = \"K\" }}]\n"
        );
        let c = NodeFile::parse(&text).unwrap().credentials.unwrap();
        assert_eq!(c.current, "b");
        assert_eq!(c.keys.len(), 2);
        assert!(NodeFile::parse(&format!("{base}[credentials]\ncurrent = \"b\"\n")).is_err());
    }

    #[test]
    fn refuses_unknown_fields_and_missing_secret() {
        assert!(
            NodeFile::parse("node_id = 1\ndata_dir = \"d\"\ntoken_file = \"t\"\nbogus = 1\n")
                .is_err()
        );
        assert!(NodeFile::parse("node_id = 1\ndata_dir = \"d\"\ntoken_file = \"t\"\n").is_err());
    }
}
