//! [`Store`]: opening and validating a node's data directory, the read API, and the handles that
//! queue writes to the writer thread.
//!
//! Opening never re-initialises existing data: a directory is initialised only when it is
//! absent, empty, or a database this code created whose first start was interrupted before
//! anything but the empty column families was written.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use rocksdb::{
    ColumnFamilyDescriptor, DBCompressionType, DBRecoveryMode, IteratorMode, Options, WriteBatch,
    WriteOptions, DB,
};

use crate::audit::{AuditHead, AuditInput, AuditRecord};
use crate::audit_checkpoint::{checkpoint_key, Checkpoint, CheckpointKind};
use crate::error::{missing_cf, StoreError};
use crate::keys::*;
use crate::metrics::StoreMetrics;
use crate::reader::{load_audit_head, SnapshotBytes, StoreReader};
use crate::writer::{self, Done, Op};

/// On-disk format written by this build. Bump when keys or value layouts change; an older binary
/// refuses a newer directory instead of misreading it.
pub const FORMAT_VERSION: u32 = 1;

/// Write rate of RocksDB's flushes and compactions together: far above what fedraft's write
/// load needs on average, low enough that a checkpoint's flush leaves the disk to the log.
const BACKGROUND_WRITE_BYTES_PER_SEC: i64 = 64 << 20;

/// Tuning knobs; the defaults suit a node whose log is purged after every snapshot.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// RocksDB background threads (flush + compaction).
    pub background_threads: i32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            background_threads: 2,
        }
    }
}

/// A node's open data directory. Cheap to clone; the database closes when the last clone drops
/// (after the writer has flushed and fired every queued callback).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    db: Arc<DB>,
    path: PathBuf,
    cluster_id: String,
    ops: Option<Sender<Op>>,
    writer: Option<std::thread::JoinHandle<()>>,
    metrics: StoreMetrics,
    stopped: Arc<Stopped>,
}

/// The first failed write or sync of this store, after which it writes nothing more (see the
/// writer's module doc): shared by the writer thread and the writes made beside it.
#[derive(Debug, Default)]
pub(crate) struct Stopped(Mutex<Option<(String, String)>>);

impl Stopped {
    /// Records the first failure; later ones add nothing, the first is the cause.
    pub(crate) fn set(&self, what: &str, cause: &StoreError) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some((what.to_string(), cause.to_string()));
        }
    }

    /// The error every write after the first failure gets.
    pub(crate) fn error(&self) -> Option<StoreError> {
        let g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.as_ref().map(|(what, cause)| StoreError::Stopped {
            what: what.clone(),
            cause: cause.clone(),
        })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ops.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Store {
    /// Opens (or, when absent or empty, creates) the data directory for `cluster_id`.
    pub fn open(path: impl AsRef<Path>, cluster_id: &str) -> Result<Store, StoreError> {
        Store::open_with(path, cluster_id, StoreOptions::default())
    }

    pub fn open_with(
        path: impl AsRef<Path>,
        cluster_id: &str,
        opts: StoreOptions,
    ) -> Result<Store, StoreError> {
        let path = path.as_ref().to_path_buf();
        let exists = path.join("CURRENT").exists();
        if !exists && dir_has_entries(&path)? {
            return Err(StoreError::NotADataDir { path });
        }
        let mut o = Options::default();
        o.create_if_missing(!exists);
        o.create_missing_column_families(!exists);
        o.set_paranoid_checks(true);
        // A record cut short at the WAL's end is what a crash mid-write leaves: it was never
        // synced, so never acknowledged, and recovery drops it. A damaged record anywhere else
        // is refused: RocksDB's default (point in time) stopped replay there and silently
        // dropped every synced append after it, which a raft node must never do (it acked them).
        o.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        o.increase_parallelism(opts.background_threads.max(1));
        o.set_compression_type(DBCompressionType::Lz4);
        // Bound the WAL so a quiet node does not keep gigabytes of it around.
        o.set_max_total_wal_size(256 << 20);
        // Flushes and compactions (a checkpoint is tens of megabytes flushed at once) write at
        // a bounded rate and sync every megabyte as they go. Unbounded, their dirty pages
        // reached the disk in one burst and the log's own fsyncs queued behind it: every write
        // in flight waited, which showed up as the API's p99 and p999.
        o.set_ratelimiter(BACKGROUND_WRITE_BYTES_PER_SEC, 100_000, 10);
        o.set_bytes_per_sync(1 << 20);
        let cfs = ALL_CFS.iter().map(|n| {
            let mut co = Options::default();
            co.set_compression_type(DBCompressionType::Lz4);
            ColumnFamilyDescriptor::new(*n, co)
        });
        let db =
            DB::open_cf_descriptors(&o, &path, cfs).map_err(|e| match StoreError::from(e) {
                // A database without our column families is not ours or is damaged: never "fix" it.
                StoreError::Rocks(m) if exists && m.contains("Invalid argument") => {
                    StoreError::Corrupt(m)
                }
                StoreError::Corrupt(m) => match damaged_file(&path) {
                    Some(file) => StoreError::Corrupt(format!("{m} ({file})")),
                    None => StoreError::Corrupt(m),
                },
                other => other,
            })?;
        let db = Arc::new(db);
        validate_or_init(&db, cluster_id)?;
        let audit_head = load_audit_head(&db)?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let metrics = StoreMetrics::default();
        let stopped = Arc::new(Stopped::default());
        let writer = writer::spawn(db.clone(), audit_head, rx, metrics.clone(), stopped.clone())?;
        tracing::info!(path = %path.display(), cluster_id, "store opened");
        Ok(Store {
            inner: Arc::new(Inner {
                db,
                path,
                cluster_id: cluster_id.to_string(),
                ops: Some(tx),
                writer: Some(writer),
                metrics,
                stopped,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn cluster_id(&self) -> &str {
        &self.inner.cluster_id
    }

    /// Registers this store's measurements (see `metrics.rs`) into the binary's registry.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        crate::metrics::register(
            &self.inner.metrics,
            &self.inner.db,
            self.inner.path.clone(),
            registry,
        );
    }

    fn submit(&self, op: Op) {
        let Some(tx) = &self.inner.ops else {
            return op.fail(StoreError::Closed);
        };
        if let Err(crossbeam_channel::SendError(op)) = tx.send(op) {
            op.fail(StoreError::Closed);
        }
    }

    /// The failure that stopped this store, if one did ([`StoreError::Stopped`]): a write or a
    /// WAL sync failed, nothing more is written, and the node must stop and restart from what
    /// was synced.
    pub fn failure(&self) -> Option<StoreError> {
        self.inner.stopped.error()
    }

    // ---- writes (queued; completion through callbacks) ----

    /// Queues contiguous ascending log entries. `written`: readable; `durable`: WAL fsynced.
    pub fn append(&self, entries: Vec<(u64, Vec<u8>)>, written: Done, durable: Done) {
        if let Some(gap) = entries.windows(2).find(|w| w[1].0 != w[0].0 + 1) {
            let e = StoreError::Invalid(format!(
                "log append not contiguous: {} then {}",
                gap[0].0, gap[1].0
            ));
            written(Err(e.clone()));
            return durable(Err(e));
        }
        self.submit(Op::Append {
            entries,
            written,
            durable,
        })
    }

    /// Deletes log entries with index >= `from`.
    pub fn truncate(&self, from: u64, done: Done) {
        self.submit(Op::Truncate { from, done })
    }

    /// Deletes log entries with index <= `upto` and records `last_purged` atomically.
    pub fn purge(&self, upto: u64, last_purged: Vec<u8>, done: Done) {
        self.submit(Op::Purge {
            upto,
            last_purged,
            done,
        })
    }

    /// Durable (synced) before `done` fires.
    pub fn save_vote(&self, vote: Vec<u8>, done: Done) {
        self.submit(Op::SaveVote { vote, done })
    }

    pub fn save_committed(&self, committed: Vec<u8>, done: Done) {
        self.submit(Op::SaveCommitted { committed, done })
    }

    /// Durable before `done` fires. `installed_at`: the snapshot's last index when it was received
    /// from another node (the audit chain restarts there).
    pub fn save_snapshot(
        &self,
        meta: Vec<u8>,
        data: Vec<u8>,
        installed_at: Option<u64>,
        done: Done,
    ) {
        self.submit(Op::SaveSnapshot {
            meta,
            data,
            installed_at,
            done,
        })
    }

    /// Appends audit records for applied entries (in index order).
    pub fn write_audit(&self, records: Vec<AuditInput>, done: Done) {
        self.submit(Op::Audit { records, done })
    }

    /// Makes every write queued before this one durable (one WAL fsync) before `done` fires.
    /// Audit records are written unsynced; a raft snapshot of the state, which a restart
    /// resumes from instead of re-applying (and re-archiving) the commands it covers, must not
    /// become durable before their records are.
    pub fn sync(&self, done: Done) {
        self.submit(Op::Sync { done })
    }

    /// Runs one of the queued writes above and blocks until its completion fires. For tests,
    /// tools and non-async callers; async code should await its own channel instead.
    pub fn wait(f: impl FnOnce(Done)) -> Result<(), StoreError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        f(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        rx.recv().unwrap_or(Err(StoreError::Closed))
    }

    /// Blocking append that returns once the entries are durable.
    pub fn append_sync(&self, entries: Vec<(u64, Vec<u8>)>) -> Result<(), StoreError> {
        Store::wait(|d| self.append(entries, Box::new(|_| {}), d))
    }

    /// Writes a state checkpoint at command `index` from the calling thread, beside the writer
    /// thread rather than through it, and returns once it is durable. Its audit record must be
    /// written already; without one (below an installed snapshot) nothing is written.
    ///
    /// Why not through the writer: a checkpoint is the whole state, tens of megabytes. Queued
    /// with the log appends it went into the write-ahead log, and the next group sync, which
    /// acknowledged appends wait for, had to push those megabytes to disk first. Here it skips
    /// the log and its column family is flushed to a table file instead, which waits for nobody
    /// else. Retention may rely on it once this returns.
    pub fn write_checkpoint_direct(&self, index: u64, state: Vec<u8>) -> Result<(), StoreError> {
        fail::fail_point!("store::checkpoint_write", |arg| self.stop_on(Err(
            crate::failpoints::injected("store::checkpoint_write", arg)
        )));
        let Some(batch) = periodic_checkpoint(&self.inner.db, index, state)? else {
            return Ok(());
        };
        self.write_snapshot_cf_direct(batch)
    }

    /// Saves a raft snapshot this node built from its own state the way
    /// [`Store::write_checkpoint_direct`] writes a checkpoint, for the same reason: it is the
    /// whole state. Durable when this returns. A snapshot installed from the leader goes through
    /// [`Store::save_snapshot`] instead, because it also restarts the audit chain, which only
    /// the writer thread touches.
    pub fn save_built_snapshot(&self, meta: &[u8], data: &[u8]) -> Result<(), StoreError> {
        fail::fail_point!("store::snapshot_write", |arg| self.stop_on(Err(
            crate::failpoints::injected("store::snapshot_write", arg)
        )));
        let db = &self.inner.db;
        let cf = db
            .cf_handle(CF_SNAPSHOT)
            .ok_or_else(|| missing_cf(CF_SNAPSHOT))?;
        let mut b = WriteBatch::default();
        b.put_cf(cf, SNAPSHOT_META, meta);
        b.put_cf(cf, SNAPSHOT_DATA, data);
        self.write_snapshot_cf_direct(b)
    }

    /// Writes a batch into the snapshot column family without the write-ahead log, then
    /// flushes that column family to a table file, so the batch is durable on return.
    fn write_snapshot_cf_direct(&self, batch: WriteBatch) -> Result<(), StoreError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let db = &self.inner.db;
        let mut wo = WriteOptions::default();
        wo.disable_wal(true);
        let cf = db
            .cf_handle(CF_SNAPSHOT)
            .ok_or_else(|| missing_cf(CF_SNAPSHOT))?;
        let written = db
            .write_opt(batch, &wo)
            .and_then(|()| db.flush_cf(cf))
            .map_err(StoreError::from);
        self.stop_on(written)
    }

    /// A failed write beside the writer stops the store as one of the writer's does.
    fn stop_on(&self, res: Result<(), StoreError>) -> Result<(), StoreError> {
        if let Err(e) = &res {
            self.inner.metrics.write_failed();
            tracing::error!(error = %e, "a direct store write failed; the store stops");
            self.inner.stopped.set("direct write", e);
        }
        res
    }

    /// Retention: removes audit records at or below the highest checkpoint `<= upto` (and older
    /// checkpoints); that checkpoint becomes the base the chain is verified from.
    pub fn retain_audit(&self, upto: u64, done: Done) {
        self.submit(Op::Retain { upto, done })
    }

    // ---- reads (blocking; call off the async runtime) ----

    /// Every read, over this store's database.
    pub fn reader(&self) -> StoreReader {
        StoreReader::new(self.inner.db.clone(), self.inner.path.clone())
    }

    /// Log entries with `start <= index < end`, ascending: from the first stored index in the
    /// range up to the first hole after it (raft logs never have holes; a hole means the rest
    /// was truncated and not yet rewritten).
    pub fn log_range(&self, start: u64, end: u64) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        self.reader().log_range(start, end)
    }

    /// The entry with the highest index, if any.
    pub fn last_log(&self) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        self.reader().last_log()
    }

    pub fn vote(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.reader().vote()
    }

    pub fn committed(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.reader().committed()
    }

    pub fn last_purged(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.reader().last_purged()
    }

    /// The latest snapshot as `(meta, data)`.
    pub fn snapshot(&self) -> Result<Option<SnapshotBytes>, StoreError> {
        self.reader().snapshot()
    }

    /// Audit records with `from <= index < to`, ascending (holes where a snapshot was installed).
    pub fn audit_range(&self, from: u64, to: u64) -> Result<Vec<AuditRecord>, StoreError> {
        self.reader().audit_range(from, to)
    }

    /// Where the audit chain currently ends: (index, digest).
    pub fn audit_head(&self) -> Result<AuditHead, StoreError> {
        load_audit_head(&self.inner.db)
    }
}

/// The write of a periodic checkpoint at `index`, bound to the chain digest there. `None` when
/// that record was never written here (below an installed snapshot): a checkpoint that no chain
/// can reach would only mislead.
fn periodic_checkpoint(
    db: &DB,
    index: u64,
    state: Vec<u8>,
) -> Result<Option<WriteBatch>, StoreError> {
    let cf = |name| db.cf_handle(name).ok_or_else(|| missing_cf(name));
    let Some(record) = db.get_cf(cf(CF_AUDIT)?, index_key(index))? else {
        tracing::warn!(index, "no audit record for checkpoint; skipped");
        return Ok(None);
    };
    let digest = AuditRecord::decode(&record)?.digest;
    let cp = Checkpoint {
        index,
        kind: CheckpointKind::Periodic,
        audit_digest: digest,
        state,
    };
    let mut b = WriteBatch::default();
    b.put_cf(cf(CF_SNAPSHOT)?, checkpoint_key(index), cp.encode());
    Ok(Some(b))
}

/// The file a failed open found damaged, from RocksDB's own log in the directory (its error
/// says only "checksum mismatch"): the last line that names a file it stopped reading, e.g.
/// `/data/000004.log: dropping 16864 bytes; Corruption: checksum mismatch`. Best effort.
fn damaged_file(path: &Path) -> Option<String> {
    let log = std::fs::read_to_string(path.join("LOG")).ok()?;
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("Corruption") && l.contains(": dropping "))?;
    let (head, rest) = line.split_once(": dropping ")?;
    let file = head.rsplit(' ').next()?;
    let what = rest.split(';').next()?;
    Some(format!("{file}: {what} damaged"))
}

fn dir_has_entries(path: &Path) -> Result<bool, StoreError> {
    match std::fs::read_dir(path) {
        Ok(mut rd) => Ok(rd.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StoreError::Rocks(format!("{}: {e}", path.display()))),
    }
}

fn validate_or_init(db: &DB, cluster_id: &str) -> Result<(), StoreError> {
    let meta = db.cf_handle(CF_META).ok_or_else(|| missing_cf(CF_META))?;
    match db.get_cf(meta, META_FORMAT_VERSION)? {
        Some(v) => {
            let arr: [u8; 4] = v.as_slice().try_into().map_err(|_| {
                StoreError::Corrupt(format!("format_version is {} bytes, want 4", v.len()))
            })?;
            let found = u32::from_be_bytes(arr);
            if found > FORMAT_VERSION {
                return Err(StoreError::NewerFormat {
                    found,
                    supported: FORMAT_VERSION,
                });
            }
            let id = db
                .get_cf(meta, META_CLUSTER_ID)?
                .ok_or_else(|| StoreError::Corrupt("cluster_id missing".into()))?;
            let found = String::from_utf8(id)
                .map_err(|_| StoreError::Corrupt("cluster_id is not UTF-8".into()))?;
            if found != cluster_id {
                return Err(StoreError::ClusterIdMismatch {
                    expected: cluster_id.to_string(),
                    found,
                });
            }
            Ok(())
        }
        None => {
            // Only a database with nothing at all in it may be initialised (first start that
            // stopped before writing its header). Anything else is damage.
            for name in ALL_CFS {
                let cf = db.cf_handle(name).ok_or_else(|| missing_cf(name))?;
                if db.iterator_cf(cf, IteratorMode::Start).next().is_some() {
                    return Err(StoreError::Corrupt(format!(
                        "format_version missing but {name:?} holds data"
                    )));
                }
            }
            let mut b = WriteBatch::default();
            b.put_cf(meta, META_FORMAT_VERSION, FORMAT_VERSION.to_be_bytes());
            b.put_cf(meta, META_CLUSTER_ID, cluster_id.as_bytes());
            let mut wo = WriteOptions::default();
            wo.set_sync(true);
            db.write_opt(b, &wo)?;
            Ok(())
        }
    }
}
