//! How many bytes a node's data directory holds on disk, by what they are: the raft log's
//! tables, the audit archive's tables, the snapshot tables (raft snapshots and the archive's
//! state checkpoints), the write-ahead log, and the file system's free space.
//!
//! Read-only and cheap (one property read per column family, one directory listing, one
//! `statvfs`), so an operator's console may ask every few seconds. Must not: open, lock or write
//! anything in the data directory.

use std::path::Path;

use rocksdb::DB;

use crate::keys::{CF_AUDIT, CF_LOG, CF_META, CF_SNAPSHOT};

/// Bytes on disk of one data directory, by kind. A figure RocksDB or the file system would not
/// give is `None`, never a guess.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUse {
    /// Table files of the raft log (entries not yet purged behind a snapshot).
    pub log_bytes: Option<u64>,
    /// Table files of the audit archive (every applied command since retention's cut).
    pub archive_bytes: Option<u64>,
    /// Table files of raft snapshots and of the archive's state checkpoints.
    pub snapshot_bytes: Option<u64>,
    /// Table files of the small metadata column family (vote, committed index).
    pub meta_bytes: Option<u64>,
    /// Write-ahead log files: recent writes of every kind not yet flushed to tables.
    pub wal_bytes: Option<u64>,
    /// Every file directly in the data directory (tables, WAL, manifests, RocksDB's own log).
    pub total_bytes: Option<u64>,
    /// Bytes available to an unprivileged process on the data directory's file system.
    pub free_bytes: Option<u64>,
    /// Size of that file system.
    pub capacity_bytes: Option<u64>,
}

/// Measures `db`, whose files live in `path`.
pub(crate) fn measure(db: &DB, path: &Path) -> DiskUse {
    let sst = |name: &str| {
        db.cf_handle(name).and_then(|cf| {
            db.property_int_value_cf(&cf, "rocksdb.total-sst-files-size")
                .ok()
                .flatten()
        })
    };
    let (wal_bytes, total_bytes) = match directory_sizes(path) {
        Some((wal, total)) => (Some(wal), Some(total)),
        None => (None, None),
    };
    let space = crate::metrics::disk_space(path);
    DiskUse {
        log_bytes: sst(CF_LOG),
        archive_bytes: sst(CF_AUDIT),
        snapshot_bytes: sst(CF_SNAPSHOT),
        meta_bytes: sst(CF_META),
        wal_bytes,
        total_bytes,
        free_bytes: space.map(|(free, _)| free),
        capacity_bytes: space.map(|(_, cap)| cap),
    }
}

/// (write-ahead log bytes, all bytes) of the regular files directly in `path`. RocksDB keeps
/// its whole database flat in one directory; a file removed while listing is skipped.
fn directory_sizes(path: &Path) -> Option<(u64, u64)> {
    let mut wal = 0u64;
    let mut total = 0u64;
    for entry in std::fs::read_dir(path).ok()?.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        total = total.saturating_add(meta.len());
        if entry.path().extension().is_some_and(|e| e == "log") {
            wal = wal.saturating_add(meta.len());
        }
    }
    Some((wal, total))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_store_reports_its_tables_and_wal_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path(), "disk-test").unwrap();
        let entries: Vec<(u64, Vec<u8>)> = (1..=200).map(|i| (i, vec![7u8; 4096])).collect();
        store.append_sync(entries).unwrap();
        let before = store.reader().disk_use();
        assert!(before.wal_bytes.unwrap() >= 200 * 4096, "{before:?}");
        assert!(before.total_bytes.unwrap() >= before.wal_bytes.unwrap());
        assert!(before.capacity_bytes.unwrap() > 0);
        assert!(before.free_bytes.unwrap() <= before.capacity_bytes.unwrap());
        assert_eq!(before.archive_bytes, Some(0), "{before:?}");
    }
}
