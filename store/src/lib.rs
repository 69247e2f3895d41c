//! fedraft-store: one RocksDB per node, holding the raft log, raft metadata, state-machine
//! snapshots and the audit archive. It knows nothing of HTTP, Kubernetes, openraft's types or the
//! state machine: every value it keeps is bytes that the layer above encodes.
//!
//! Start reading at [`Store`] (`db.rs`): opening validates the data directory (format version,
//! cluster id) and refuses anything it did not write itself. All writes go through one writer
//! thread (`writer.rs`) so they are ordered and group-committed; reads go straight to RocksDB and
//! block, so async callers should run them off the runtime (`spawn_blocking`). Every read lives
//! on [`StoreReader`] (`reader.rs`), which also opens a copy of a data directory read-only for
//! offline audit. What the writer measures (fsync latency, group-commit sizes): `metrics.rs`,
//! registered by [`Store::register_metrics`]. The audit archive: record format `audit.rs`, chain verification
//! `audit_chain.rs`, state checkpoints `audit_checkpoint.rs`, retention `audit_retention.rs`. Bytes on disk by kind, for operators:
//! `disk.rs` ([`StoreReader::disk_use`]).
//!
//! Durability contract, per write kind:
//! - log appends: visible to reads when `written` fires, durable (WAL fsynced) when `durable`
//!   fires; many appends share one fsync;
//! - vote, snapshot: durable before their completion fires; `sync`: every write queued before
//!   it is durable when it fires;
//! - committed index, truncation, purge, audit records, checkpoints, retention: ordered but not synced on their own; the
//!   next synced write makes them durable. Losing them in a crash is safe: raft re-derives the
//!   committed index, a purge is simply redone, and the commands after the last snapshot are
//!   re-applied and re-archived (so a snapshot the node builds must follow a `sync` of the
//!   audit records it covers: it is written beside the WAL, which orders nothing for it).
//!
//! The first failed write or WAL sync stops the store for good ([`StoreError::Stopped`],
//! [`Store::failure`]); the named failpoints at these seams are listed in `failpoints.rs`.

mod audit;
mod audit_chain;
mod audit_checkpoint;
mod audit_retention;
mod db;
mod disk;
mod error;
pub mod failpoints;
mod keys;
mod metrics;
mod reader;
mod writer;

pub use audit::{snapshot_digest, AuditInput, AuditRecord, AuditRecordRef, GENESIS_DIGEST};
pub use audit_chain::{ChainChecker, ChainProblem, ChainReport, Restart};
pub use audit_checkpoint::{Checkpoint, CheckpointKind};
pub use audit_retention::RetentionPolicy;
pub(crate) use db::Stopped;
pub use db::{Store, StoreOptions, FORMAT_VERSION};
pub use disk::DiskUse;
pub use error::StoreError;
pub use metrics::encode_gauge;
pub use reader::{SnapshotBytes, StoreReader};
pub use writer::Done;
