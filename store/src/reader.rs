//! [`StoreReader`]: every read of a node's data directory, over a RocksDB handle shared with the
//! running [`crate::Store`] (online) or opened read-only on a copy of a data directory while no
//! node runs there (offline audit). It never writes: a read-only open also sends RocksDB's own
//! info log to the temp directory, so the copy under inspection stays byte for byte as it was.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::{Direction, IteratorMode, Options, ReadOptions, DB};

use crate::audit::{AuditHead, AuditRecord, AuditRecordRef};
use crate::audit_checkpoint::{checkpoint_index, checkpoint_key, Checkpoint, CHECKPOINT_PREFIX};
use crate::error::{missing_cf, StoreError};
use crate::keys::*;

/// Forward scans over at least this many records read ahead and leave the block cache alone.
const BULK_SCAN_RECORDS: u64 = 10_000;

/// Read options of a forward audit scan. Block checksums stay on: replay trusts the bytes it
/// reads (only `verify` checks the hash chain), so a flipped bit on disk must fail the read
/// rather than replay into a wrong state. A long scan (replay, verify, export) reads ahead in
/// large chunks and keeps its blocks out of the cache, where they would only evict the blocks
/// a running node reads again.
fn scan_options(from: u64, to: u64) -> ReadOptions {
    let mut o = ReadOptions::default();
    o.set_iterate_upper_bound(index_key(to).to_vec());
    if to.saturating_sub(from) >= BULK_SCAN_RECORDS {
        o.set_readahead_size(4 << 20);
        o.fill_cache(false);
    }
    o
}

/// A stored snapshot: (meta, data), both encoded by the layer above.
pub type SnapshotBytes = (Vec<u8>, Vec<u8>);

/// Read access to one data directory. Cheap to clone.
#[derive(Clone)]
pub struct StoreReader {
    db: Arc<DB>,
    path: PathBuf,
}

impl StoreReader {
    pub(crate) fn new(db: Arc<DB>, path: PathBuf) -> Self {
        StoreReader { db, path }
    }

    /// Opens a data directory read-only (no lock taken, nothing written, not even RocksDB's info
    /// log). Refuses a directory that is not a fedraft data directory or of a newer format.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<StoreReader, StoreError> {
        let path = path.as_ref().to_path_buf();
        if !path.join("CURRENT").exists() {
            return Err(StoreError::NotADataDir { path });
        }
        let mut o = Options::default();
        o.set_paranoid_checks(true);
        // RocksDB renames and rewrites `LOG` in the database directory on every open, even a
        // read-only one; point it elsewhere so the inspected copy is untouched.
        let log_dir = std::env::temp_dir().join("fedraft-audit-rocksdb-logs");
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| StoreError::Rocks(format!("{}: {e}", log_dir.display())))?;
        o.set_db_log_dir(&log_dir);
        let db = DB::open_cf_for_read_only(&o, &path, ALL_CFS, false)?;
        let r = StoreReader {
            db: Arc::new(db),
            path,
        };
        let format = r
            .get_meta(META_FORMAT_VERSION)?
            .ok_or_else(|| StoreError::Corrupt("format_version missing".into()))?;
        let found = u32::from_be_bytes(
            format
                .as_slice()
                .try_into()
                .map_err(|_| StoreError::Corrupt("format_version malformed".into()))?,
        );
        if found > crate::FORMAT_VERSION {
            return Err(StoreError::NewerFormat {
                found,
                supported: crate::FORMAT_VERSION,
            });
        }
        Ok(r)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes on disk of this data directory by kind (log, archive, snapshots, WAL) and the file
    /// system's free space. Blocks briefly (a directory listing); cheap enough to poll.
    pub fn disk_use(&self) -> crate::DiskUse {
        crate::disk::measure(&self.db, &self.path)
    }

    fn cf(&self, name: &'static str) -> Result<&rocksdb::ColumnFamily, StoreError> {
        self.db.cf_handle(name).ok_or_else(|| missing_cf(name))
    }

    pub(crate) fn get_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get_cf(self.cf(CF_META)?, key)?)
    }

    pub fn cluster_id(&self) -> Result<String, StoreError> {
        let id = self
            .get_meta(META_CLUSTER_ID)?
            .ok_or_else(|| StoreError::Corrupt("cluster_id missing".into()))?;
        String::from_utf8(id).map_err(|_| StoreError::Corrupt("cluster_id is not UTF-8".into()))
    }

    // ---- raft log and metadata ----

    /// Log entries with `start <= index < end`, ascending, up to the first hole.
    pub fn log_range(&self, start: u64, end: u64) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
        if start >= end {
            return Ok(out);
        }
        let key = index_key(start);
        let iter = self.db.iterator_cf(
            self.cf(CF_LOG)?,
            IteratorMode::From(&key, Direction::Forward),
        );
        for item in iter {
            let (k, v) = item?;
            let idx = decode_index(&k)
                .ok_or_else(|| StoreError::Corrupt("log key not 8 bytes".into()))?;
            let contiguous = out.last().is_none_or(|(prev, _)| idx == prev + 1);
            if idx >= end || !contiguous {
                break;
            }
            out.push((idx, v.into_vec()));
        }
        Ok(out)
    }

    pub fn last_log(&self) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        let mut iter = self.db.iterator_cf(self.cf(CF_LOG)?, IteratorMode::End);
        match iter.next() {
            None => Ok(None),
            Some(item) => {
                let (k, v) = item?;
                let idx = decode_index(&k)
                    .ok_or_else(|| StoreError::Corrupt("log key not 8 bytes".into()))?;
                Ok(Some((idx, v.into_vec())))
            }
        }
    }

    pub fn vote(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.get_meta(META_VOTE)
    }

    pub fn committed(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.get_meta(META_COMMITTED)
    }

    pub fn last_purged(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.get_meta(META_LAST_PURGED)
    }

    /// The latest raft snapshot as `(meta, data)`.
    pub fn snapshot(&self) -> Result<Option<SnapshotBytes>, StoreError> {
        let cf = self.cf(CF_SNAPSHOT)?;
        let meta = self.db.get_cf(cf, SNAPSHOT_META)?;
        let data = self.db.get_cf(cf, SNAPSHOT_DATA)?;
        match (meta, data) {
            (Some(m), Some(d)) => Ok(Some((m, d))),
            (None, None) => Ok(None),
            _ => Err(StoreError::Corrupt(
                "snapshot meta and data out of step".into(),
            )),
        }
    }

    // ---- audit archive ----

    /// Audit records with `from <= index < to`, ascending (holes where a snapshot was installed).
    pub fn audit_range(&self, from: u64, to: u64) -> Result<Vec<AuditRecord>, StoreError> {
        let mut out = Vec::new();
        self.audit_scan(from, to, |r| {
            out.push(r);
            Ok::<bool, StoreError>(true)
        })?;
        Ok(out)
    }

    /// Visits records with `from <= index < to` in ascending order until `f` returns false.
    /// Streams: memory stays flat however long the archive is.
    pub fn audit_scan<E: From<StoreError>>(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(AuditRecord) -> Result<bool, E>,
    ) -> Result<(), E> {
        self.audit_scan_ref(from, to, |r| f(r.to_owned()))
    }

    /// [`StoreReader::audit_scan`] without copies: each record borrows RocksDB's buffer for the
    /// length of the call. What replay and verification use.
    pub fn audit_scan_ref<E: From<StoreError>>(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(AuditRecordRef<'_>) -> Result<bool, E>,
    ) -> Result<(), E> {
        if from >= to {
            return Ok(());
        }
        let mut it = self
            .db
            .raw_iterator_cf_opt(self.cf(CF_AUDIT)?, scan_options(from, to));
        it.seek(index_key(from));
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            let idx = decode_index(k)
                .ok_or_else(|| StoreError::Corrupt("audit key not 8 bytes".into()))?;
            if idx >= to {
                break;
            }
            if !f(AuditRecordRef::parse(v)?)? {
                return Ok(());
            }
            it.next();
        }
        it.status().map_err(StoreError::from)?;
        Ok(())
    }

    /// Visits records with `from <= index < to` in descending order until `f` returns false.
    pub fn audit_scan_rev<E: From<StoreError>>(
        &self,
        from: u64,
        to: u64,
        mut f: impl FnMut(AuditRecord) -> Result<bool, E>,
    ) -> Result<(), E> {
        if from >= to {
            return Ok(());
        }
        let mut it = self.db.raw_iterator_cf(self.cf(CF_AUDIT)?);
        it.seek_for_prev(index_key(to - 1));
        while it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            let idx = decode_index(k)
                .ok_or_else(|| StoreError::Corrupt("audit key not 8 bytes".into()))?;
            if idx < from {
                break;
            }
            if !f(AuditRecord::decode(v)?)? {
                return Ok(());
            }
            it.prev();
        }
        it.status().map_err(StoreError::from)?;
        Ok(())
    }

    pub fn audit_record(&self, index: u64) -> Result<Option<AuditRecord>, StoreError> {
        match self.db.get_cf(self.cf(CF_AUDIT)?, index_key(index))? {
            Some(v) => Ok(Some(AuditRecord::decode(&v)?)),
            None => Ok(None),
        }
    }

    /// Index of the oldest record kept.
    pub fn audit_first(&self) -> Result<Option<u64>, StoreError> {
        let mut it = self.db.raw_iterator_cf(self.cf(CF_AUDIT)?);
        it.seek_to_first();
        match it.key() {
            Some(k) => {
                Ok(Some(decode_index(k).ok_or_else(|| {
                    StoreError::Corrupt("audit key not 8 bytes".into())
                })?))
            }
            None => {
                it.status().map_err(StoreError::from)?;
                Ok(None)
            }
        }
    }

    /// Where the audit chain currently ends: (index, digest).
    pub fn audit_head(&self) -> Result<AuditHead, StoreError> {
        load_audit_head(&self.db)
    }

    /// The index retention cut the archive at, if it ever did.
    pub fn audit_retained_from(&self) -> Result<Option<u64>, StoreError> {
        match self.get_meta(META_AUDIT_RETAINED)? {
            None => Ok(None),
            Some(v) => decode_index(&v)
                .map(Some)
                .ok_or_else(|| StoreError::Corrupt("audit_retained_from malformed".into())),
        }
    }

    /// Total bytes of the records at or above `from` (keys and values), for size retention.
    pub fn audit_bytes_from(&self, from: u64) -> Result<u64, StoreError> {
        let mut total = 0u64;
        self.audit_scan(from, u64::MAX, |r| {
            total += 8 + r.stored_len() as u64;
            Ok::<bool, StoreError>(true)
        })?;
        Ok(total)
    }

    // ---- checkpoints ----

    /// The checkpoint at `index`, if one was taken there.
    pub fn checkpoint(&self, index: u64) -> Result<Option<Checkpoint>, StoreError> {
        match self
            .db
            .get_cf(self.cf(CF_SNAPSHOT)?, checkpoint_key(index))?
        {
            Some(v) => Ok(Some(Checkpoint::decode(index, &v)?)),
            None => Ok(None),
        }
    }

    /// The checkpoint with the highest index at or below `index`.
    pub fn checkpoint_at_or_below(&self, index: u64) -> Result<Option<Checkpoint>, StoreError> {
        let mut it = self.db.raw_iterator_cf(self.cf(CF_SNAPSHOT)?);
        it.seek_for_prev(checkpoint_key(index));
        if it.valid() {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                if let Some(i) = checkpoint_index(k) {
                    return Ok(Some(Checkpoint::decode(i, v)?));
                }
            }
        }
        it.status().map_err(StoreError::from)?;
        Ok(None)
    }

    /// Indexes of every checkpoint, ascending (values are not copied).
    pub fn checkpoint_indexes(&self) -> Result<Vec<u64>, StoreError> {
        let mut out = Vec::new();
        let mut it = self.db.raw_iterator_cf(self.cf(CF_SNAPSHOT)?);
        it.seek(CHECKPOINT_PREFIX);
        while it.valid() {
            let Some(i) = it.key().and_then(checkpoint_index) else {
                break;
            };
            out.push(i);
            it.next();
        }
        it.status().map_err(StoreError::from)?;
        Ok(out)
    }
}

/// Where the audit chain ends, read straight from the database: the open store seeds its writer
/// with it, and readers report it.
pub(crate) fn load_audit_head(db: &DB) -> Result<AuditHead, StoreError> {
    let cf = db.cf_handle(CF_AUDIT).ok_or_else(|| missing_cf(CF_AUDIT))?;
    let last = match db.iterator_cf(cf, IteratorMode::End).next() {
        Some(item) => {
            let (k, v) = item?;
            let idx = decode_index(&k)
                .ok_or_else(|| StoreError::Corrupt("audit key not 8 bytes".into()))?;
            Some((idx, AuditRecord::decode(&v)?.digest))
        }
        None => None,
    };
    let meta = db.cf_handle(CF_META).ok_or_else(|| missing_cf(CF_META))?;
    let base = match db.get_cf(meta, META_AUDIT_BASE)? {
        Some(v) if v.len() == 40 => {
            let idx =
                decode_index(&v[..8]).ok_or_else(|| StoreError::Corrupt("audit_base".into()))?;
            let d: [u8; 32] = v[8..]
                .try_into()
                .map_err(|_| StoreError::Corrupt("audit_base".into()))?;
            Some((idx, d))
        }
        Some(_) => return Err(StoreError::Corrupt("audit_base malformed".into())),
        None => None,
    };
    Ok(match (last, base) {
        (Some(l), Some(b)) => Some(if b.0 > l.0 { b } else { l }),
        (l, b) => l.or(b),
    })
}
