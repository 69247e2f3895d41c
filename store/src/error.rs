//! The one error type of fedraft-store. Each variant says what is wrong with the data directory
//! or the write, so an operator can act without reading logs.

use std::path::PathBuf;

/// Everything that can go wrong opening or using a node's data directory.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The directory holds files but no RocksDB database: it is not a fedraft data dir, and
    /// creating one inside it could mix two systems' files.
    #[error("{path}: not empty and not a fedraft data directory (no RocksDB CURRENT file)")]
    NotADataDir { path: PathBuf },
    /// RocksDB or fedraft found damaged data; the directory must be restored or replaced by hand.
    #[error("corrupt data directory: {0}")]
    Corrupt(String),
    /// The directory belongs to another cluster (a node pointed at the wrong disk).
    #[error("data directory belongs to cluster {found:?}, expected {expected:?}")]
    ClusterIdMismatch { expected: String, found: String },
    /// Written by a newer fedraft whose on-disk format this binary does not understand.
    #[error("data directory format version {found} is newer than supported version {supported}")]
    NewerFormat { found: u32, supported: u32 },
    /// A RocksDB call failed for another reason (I/O, lock held by another process, ...).
    #[error("rocksdb: {0}")]
    Rocks(String),
    /// The writer thread is gone (store closed or the thread died).
    #[error("store is closed")]
    Closed,
    /// An earlier write or WAL sync failed, so this store writes nothing more: after a failed
    /// fsync nothing written before it may be called durable. The node must stop; a restart
    /// recovers from what was synced.
    #[error("store stopped after a failed {what}: {cause}")]
    Stopped { what: String, cause: String },
    /// The caller asked for something inconsistent (e.g. appending a gap in the log).
    #[error("invalid store request: {0}")]
    Invalid(String),
}

impl From<rocksdb::Error> for StoreError {
    fn from(e: rocksdb::Error) -> Self {
        match e.kind() {
            rocksdb::ErrorKind::Corruption => StoreError::Corrupt(e.into_string()),
            _ => StoreError::Rocks(e.into_string()),
        }
    }
}

/// A column family every data directory has is absent: the directory is damaged.
pub(crate) fn missing_cf(name: &str) -> StoreError {
    StoreError::Corrupt(format!("column family {name:?} missing"))
}
