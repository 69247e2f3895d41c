//! Node configuration and the openraft `Config` derived from it.
//!
//! # Timeout defaults (three data centers, <= 50 ms round trip)
//!
//! - `heartbeat_interval_ms = 100`: two round trips. Frequent enough that a follower sees many
//!   heartbeats inside one election timeout, rare enough to cost nothing on a WAN link. It is
//!   also how long openraft waits for an AppendEntries' answer: a peer that needs longer for a
//!   full batch is sent smaller ones (`network::append_budget`).
//! - `election_timeout_min_ms = 400`, `election_timeout_max_ms = 700`: 8 to 14 round trips and
//!   more than a hundred fsyncs (1 to 4 ms here), so neither a slow link nor a slow disk starts
//!   an election. openraft 0.9 adds a leader lease equal to `election_timeout_max_ms` before a
//!   follower that knew a leader may stand, so a dead leader is replaced after
//!   `max + rand[min, max)` = 1.1 to 1.4 s plus one vote round and one commit: under the 2 s
//!   failover budget, while a follower must miss at least 1.1 s of heartbeats (11 in a row)
//!   before it disrupts a healthy leader. That margin is what keeps a loaded machine or a GC-like
//!   stall from causing spurious elections; openraft's own defaults (50 / 150-300 ms) do not.
//! - `install_snapshot_timeout_ms = 10_000` with 1 MiB chunks: a chunk crosses a 50 ms link in
//!   well under a second even at 10 Mbit/s; the 200 ms default retries forever on slow links.
//! - `max_in_snapshot_log_to_keep = 1000`: followers a little behind still catch up from the
//!   log instead of needing a whole snapshot.

use std::path::PathBuf;

use crate::error::RaftError;

/// The most entries one AppendEntries carries; a peer that does not answer such a batch in time
/// gets fewer (`network::append_budget`).
pub(crate) const MAX_PAYLOAD_ENTRIES: u64 = 1024;

/// Everything a node needs to start. `Default` gives the documented production timeouts and a
/// placeholder identity; tests override ids, paths and addresses.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub node_id: u64,
    pub data_dir: PathBuf,
    /// Where peers reach this node's peer router, e.g. "127.0.0.1:7001".
    pub advertise_peer_addr: String,
    /// Shared secret; every peer request carries it as `authorization: Bearer <secret>`.
    pub cluster_secret: String,
    /// Written into the data dir at first start; another id refuses to open.
    pub cluster_id: String,
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// How often the leader proposes `Command::Tick` so log time advances when idle.
    pub tick_interval_ms: u64,
    /// Build a snapshot (and purge the log before it) after this many entries.
    pub snapshot_every_entries: u64,
    /// Bounded wait of propose and read; `NoQuorum` after it.
    pub propose_timeout_ms: u64,
    /// Per-RPC timeout of install-snapshot chunks.
    pub install_snapshot_timeout_ms: u64,
    /// Entries kept behind a snapshot for followers that lag a little.
    pub max_in_snapshot_log_to_keep: u64,
    /// Audit archive: checkpoint interval and retention (default: checkpoint every 10,000
    /// commands, keep everything).
    pub audit: crate::audit::AuditOptions,
    /// Mutual TLS for the peer transport; `None` speaks plain HTTP. The peer listener's owner
    /// serves with `peer_tls.server`; the node's outbound client uses `peer_tls.client`.
    pub peer_tls: Option<crate::network::tls::PeerTls>,
    /// Advertised peer address -> address this node dials instead (a local proxy). Membership
    /// addresses are replicated and the same on every node; this is each node's own route.
    pub peer_dial: std::collections::BTreeMap<String, String>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            node_id: 1,
            data_dir: PathBuf::from("fedraft-data"),
            advertise_peer_addr: "127.0.0.1:7001".into(),
            cluster_secret: String::new(),
            cluster_id: "fedraft".into(),
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 400,
            election_timeout_max_ms: 700,
            tick_interval_ms: 1000,
            snapshot_every_entries: 10_000,
            propose_timeout_ms: 5_000,
            install_snapshot_timeout_ms: 10_000,
            max_in_snapshot_log_to_keep: 1_000,
            audit: crate::audit::AuditOptions::default(),
            peer_tls: None,
            peer_dial: std::collections::BTreeMap::new(),
        }
    }
}

/// Snapshot chunk size: 1 MiB, far below the peer router's body limit.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1 << 20;

impl NodeConfig {
    pub(crate) fn openraft_config(&self) -> Result<openraft::Config, RaftError> {
        if self.cluster_secret.is_empty() {
            return Err(RaftError::Invalid(
                "cluster_secret must not be empty".into(),
            ));
        }
        let c = openraft::Config {
            cluster_name: self.cluster_id.clone(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(
                self.snapshot_every_entries.max(1),
            ),
            max_in_snapshot_log_to_keep: self.max_in_snapshot_log_to_keep,
            // Up to 1024 entries per AppendEntries: large enough for group commit under load,
            // small enough (~300 KiB of 256-byte commands) for one WAN round trip.
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            ..Default::default()
        };
        c.validate().map_err(|e| RaftError::Invalid(e.to_string()))
    }
}
