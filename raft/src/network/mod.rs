//! Node-to-node transport: HTTP POST with bincode bodies, every request authenticated by the
//! cluster secret. `client` is the pooled outbound side (openraft's `RaftNetwork` plus the
//! forwarding calls); `server` is the axum peer router that answers them; `tls` builds the
//! mutual-TLS configurations both sides use when the node has certificates; `secret` is the
//! constant-time comparison the server's secret check (and the API's token check) rely on;
//! `append_budget` keeps appends to a slow peer small enough to be answered in time.

pub mod append_budget;
pub mod client;
pub mod secret;
pub mod server;
pub mod tls;

/// Header carrying the cluster secret: `authorization: Bearer <secret>`.
pub const AUTH_HEADER: &str = "authorization";
/// Set on proposals a follower forwards, so the receiver never forwards them again.
pub const FORWARDED_HEADER: &str = "x-fedraft-forwarded";
/// The forwarder's remaining wait, so the leader gives up when the caller does.
pub const TIMEOUT_HEADER: &str = "x-fedraft-timeout-ms";

pub const PATH_APPEND: &str = "/raft/append";
pub const PATH_VOTE: &str = "/raft/vote";
pub const PATH_SNAPSHOT: &str = "/raft/snapshot";
pub const PATH_PROPOSE: &str = "/raft/propose";
/// Several forwarded proposals in one call (a follower's forwarding batcher).
pub const PATH_PROPOSE_BATCH: &str = "/raft/propose-batch";
pub const PATH_READ_INDEX: &str = "/raft/read-index";
pub const PATH_STATUS: &str = "/raft/status";
/// A node's health for operators (`?at=INDEX` adds the state hash at that index).
pub const PATH_HEALTH: &str = "/raft/health";
