//! fedraft-raft: the openraft node. Log storage and state-machine adapters over `fedraft-store`,
//! the node-to-node network, bootstrap and membership, propose-with-forwarding and linearizable
//! reads. It holds no business logic: every decision is `fedraft-core`'s.
//!
//! Start at [`FedNode`] (`node/mod.rs`; `node/read.rs` linearizable reads, `node/forward.rs`
//! forwarded proposals). Storage adapters: `log_store.rs` (durable log and vote),
//! `state_machine.rs` (core state, snapshots, audit records). Batching: `batcher.rs` (leader: many
//! proposals per raft entry), `forwarder.rs` (follower: many proposals per call to the leader).
//! Transport: `network/` (HTTP + bincode, cluster-secret auth); the bincode codec of everything
//! raft sends or stores: `codec.rs`. Timeouts and their reasoning: `config.rs`.
//! The audit archive as readers see it (replay, verify, online and offline): `audit/`. Seeding a
//! new cluster's data directories from a backup: `restore.rs`.
//! What the node measures (proposals, batches, checkpoints, raft position): `metrics.rs`; what it
//! tells operators about itself (position, state hash, disk use): `node/health.rs`.

// openraft's storage traits fix their error type (`StorageError`, ~224 bytes); helpers that feed
// those traits return it as is rather than boxing and unboxing at every call.
#![allow(clippy::result_large_err)]

pub mod audit;
mod batcher;
mod checkpointer;
pub mod codec;
pub mod config;
pub mod error;
mod failure;
mod forwarder;
mod log_cache;
pub mod log_store;
mod metrics;
pub mod network;
pub mod node;
pub mod restore;
pub mod state_machine;
pub mod types;

pub use config::NodeConfig;
pub use error::RaftError;
/// The failpoints at the durability seams (the store's table of them, configured once per
/// process from `FAILPOINTS`).
pub use fedraft_store::{encode_gauge, failpoints};
pub use network::client::{install_crypto_provider, PeerClient};
pub use network::tls::PeerTls;
pub use node::health::{DiskFigures, HashAt, NodeHealth};
pub use node::{FedNode, ForwardingStats};
pub use types::{AppliedEntry, NodeReport, NodeStatus, Proposal, TypeConfig};
