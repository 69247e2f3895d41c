//! What the store measures: the writer thread's WAL fsyncs (latency, and how many log entries and
//! bytes each one made durable), failed writes, and at scrape time the data directory's disk
//! space and RocksDB's table size and memory (memtables, block caches, table readers).
//!
//! Every handle is an atomic or a histogram with its own small lock, touched only by the writer
//! thread on the write path, so recording costs no allocation and no shared lock. The binary's
//! registry receives them through [`Store::register_metrics`](crate::Store::register_metrics).
//!
//! Must not: know about HTTP, or keep the database open: the scrape-time collector holds the
//! database weakly, so a closed store simply stops reporting its sizes.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use rocksdb::DB;

/// The writer's measurements. Cheap to clone: every clone records into the same series.
#[derive(Debug, Clone)]
pub struct StoreMetrics {
    fsync_seconds: Histogram,
    batch_entries: Histogram,
    batch_bytes: Histogram,
    write_errors: Counter,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        StoreMetrics {
            // 100 us .. 3.3 s: a healthy SSD sits in the first buckets, a sick disk at the top.
            fsync_seconds: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            // 1 .. 4096 entries per fsync (the writer drains at most 4096 ops at once).
            batch_entries: Histogram::new(exponential_buckets(1.0, 2.0, 13)),
            // 256 B .. 64 MiB per fsync.
            batch_bytes: Histogram::new(exponential_buckets(256.0, 4.0, 10)),
            write_errors: Counter::default(),
        }
    }
}

impl StoreMetrics {
    /// One group commit: the WAL fsync that made `entries` log entries (`bytes` encoded bytes)
    /// durable, and how long it took.
    pub(crate) fn group_commit(&self, took: Duration, entries: u64, bytes: u64) {
        self.fsync_seconds.observe(took.as_secs_f64());
        self.batch_entries.observe(entries as f64);
        self.batch_bytes.observe(bytes as f64);
    }

    /// A write or fsync RocksDB refused.
    pub(crate) fn write_failed(&self) {
        self.write_errors.inc();
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "fedraft_store_wal_fsync_seconds",
            "Latency of the writer's WAL fsync, one per group commit of log appends",
            self.fsync_seconds.clone(),
        );
        registry.register(
            "fedraft_store_append_batch_entries",
            "Log entries made durable by one WAL fsync",
            self.batch_entries.clone(),
        );
        registry.register(
            "fedraft_store_append_batch_bytes",
            "Encoded log entry bytes made durable by one WAL fsync",
            self.batch_bytes.clone(),
        );
        registry.register(
            "fedraft_store_write_errors",
            "Writes and fsyncs of the data directory that failed",
            self.write_errors.clone(),
        );
    }
}

/// Registers `metrics` and a scrape-time collector of the data directory's sizes.
pub(crate) fn register(
    metrics: &StoreMetrics,
    db: &Arc<DB>,
    path: PathBuf,
    registry: &mut Registry,
) {
    metrics.register(registry);
    registry.register_collector(Box::new(SizeCollector {
        db: Arc::downgrade(db),
        path,
    }));
}

/// Reads sizes when scraped: disk space of the data directory's file system, and RocksDB's
/// table files and memory, summed over the column families. A scrape costs one `statvfs` and a
/// few property reads per column family.
struct SizeCollector {
    db: Weak<DB>,
    path: PathBuf,
}

impl std::fmt::Debug for SizeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SizeCollector")
            .field("path", &self.path)
            .finish()
    }
}

/// RocksDB properties reported, each summed over every column family: the table files, and the
/// memory RocksDB holds outside the Rust heap. Memtables and block caches are bounded by their
/// budgets; table readers (index and filter blocks) grow with the data.
const ROCKSDB_GAUGES: [(&str, &str, &str); 4] = [
    (
        "rocksdb.total-sst-files-size",
        "fedraft_store_sst_bytes",
        "Size of RocksDB's table files in the data directory",
    ),
    (
        "rocksdb.cur-size-all-mem-tables",
        "fedraft_store_memtable_bytes",
        "Memory of RocksDB's memtables (active and not yet flushed)",
    ),
    (
        "rocksdb.block-cache-usage",
        "fedraft_store_block_cache_bytes",
        "Memory of RocksDB's block caches",
    ),
    (
        "rocksdb.estimate-table-readers-mem",
        "fedraft_store_table_readers_bytes",
        "Memory of RocksDB's table readers outside the block caches (indexes and filters)",
    ),
];

/// `property` summed over the default and every named column family; `None` when the database
/// answers it for none of them.
fn property_sum(db: &DB, property: &str) -> Option<u64> {
    let default = db.property_int_value(property).ok().flatten();
    let named = crate::keys::ALL_CFS.iter().filter_map(|name| {
        let cf = db.cf_handle(name)?;
        db.property_int_value_cf(&cf, property).ok().flatten()
    });
    default.into_iter().chain(named).reduce(u64::saturating_add)
}

impl Collector for SizeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some((free, total)) = disk_space(&self.path) {
            encode_gauge(
                &mut encoder,
                "fedraft_store_disk_free_bytes",
                "Bytes available to fedraft on the data directory's file system",
                free,
            )?;
            encode_gauge(
                &mut encoder,
                "fedraft_store_disk_capacity_bytes",
                "Size of the data directory's file system",
                total,
            )?;
        }
        let Some(db) = self.db.upgrade() else {
            return Ok(());
        };
        for (property, name, help) in ROCKSDB_GAUGES {
            if let Some(value) = property_sum(&db, property) {
                encode_gauge(&mut encoder, name, help, value)?;
            }
        }
        Ok(())
    }
}

/// Encodes one unlabelled gauge of a scrape-time collector (saturating at `i64::MAX`). Shared by
/// every collector of the binary so that each reads its values and nothing else.
pub fn encode_gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    let e = encoder.encode_descriptor(name, help, None, g.metric_type())?;
    g.encode(e)
}

/// (available to unprivileged users, total) bytes of the file system holding `path`.
#[cfg(unix)]
pub(crate) fn disk_space(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs; statvfs writes
    // the whole struct when it returns 0, and only then is it read.
    let st = unsafe {
        if libc::statvfs(c.as_ptr(), st.as_mut_ptr()) != 0 {
            return None;
        }
        st.assume_init()
    };
    // The field types differ between platforms (u32 on some, u64 on others).
    #[allow(clippy::unnecessary_cast)]
    let (frsize, avail, blocks) = (st.f_frsize as u64, st.f_bavail as u64, st.f_blocks as u64);
    Some((avail.saturating_mul(frsize), blocks.saturating_mul(frsize)))
}

#[cfg(not(unix))]
pub(crate) fn disk_space(_path: &std::path::Path) -> Option<(u64, u64)> {
    None
}
