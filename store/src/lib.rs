//! fedraft-store: one RocksDB per node, holding the raft log, raft metadata, state-machine
//! snapshots and the audit archive. It knows nothing of HTTP, Kubernetes, openraft's types or the
//! state machine: every value it keeps is bytes that the layer above encodes.
//!
//! Start reading at [`Store`] (`db.rs`): opening validates the data directory (format version,
//! cluster id) and refuses anything it did not write itself. All writes go through one writer
//! thread (`writer.rs`) so they are ordered and group-committed; reads go straight to RocksDB and
//! block, so async callers should run them off the runtime (`spawn_blocking`).
//!
//! Durability contract, per write kind:
//! - log appends: visible to reads when `written` fires, durable (WAL fsynced) when `durable`
//!   fires; many appends share one fsync;
//! - vote, snapshot: durable before their completion fires;
//! - committed index, truncation, purge, audit records: ordered but not synced on their own; the
//!   next synced write makes them durable. Losing them in a crash is safe: raft re-derives the
//!   committed index, replays re-write audit records, and a purge is simply redone.

mod audit;
mod db;
mod error;
mod keys;
mod writer;

pub use audit::{AuditInput, AuditRecord, GENESIS_DIGEST};
pub use db::{SnapshotBytes, Store, StoreOptions, FORMAT_VERSION};
pub use error::StoreError;
pub use writer::Done;
