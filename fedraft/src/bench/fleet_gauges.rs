//! A fedraft node's own figures at the end of each phase of `fedraft bench fleet`: where its
//! memory goes (from `/metrics`: the Rust heap as jemalloc counts it, the raft log's cache of the
//! newest entries, RocksDB's memtables, block caches and table readers), the checkpoints it wrote
//! (count, size, time) and its bytes on disk by kind (from `GET /v1/status/node`).
//!
//! RSS growth over the convergence phase divided by the objects written counts bounded caches
//! as if they grew with every object: the log cache fills to its budget and the memtables to
//! their write buffers within the first tens of thousands of entries, whatever the fleet's size.
//! The breakdown separates those from what fedraft holds for each object (the state, the
//! executors' copies, RocksDB's indexes), which is what the memory goal is about.
//!
//! Must not: fail the bench: a node that does not answer, or a gauge it does not report, leaves
//! that figure out.

use std::time::Duration;

use serde_json::{json, Value};

use super::procs::FedraftCluster;

/// One node's figures at one moment; each part is absent when the node did not give it.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct NodeGauges {
    pub memory: Option<NodeMemory>,
    pub checkpoints: Option<Images>,
    pub disk: Option<Disk>,
    /// Whether the node led the raft group when scraped: its RSS runs above the followers'
    /// (outside the Rust heap, which is about the same on every node), so the heaviest node by
    /// RSS is usually the leader.
    pub leader: Option<bool>,
}

/// Checkpoints written since the node started: how many, and their seconds and bytes summed.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Images {
    pub count: f64,
    pub seconds: f64,
    pub bytes: f64,
}

impl Images {
    fn parse(text: &str) -> Option<Images> {
        Some(Images {
            count: gauge(
                text,
                "fedraft_raft_image_seconds_count{kind=\"checkpoint\"}",
            )?,
            seconds: gauge(text, "fedraft_raft_image_seconds_sum{kind=\"checkpoint\"}")?,
            bytes: gauge(text, "fedraft_raft_image_bytes_sum{kind=\"checkpoint\"}")?,
        })
    }
}

/// Bytes on disk by kind: the raft log's and the audit archive's table files, the write-ahead
/// log (recent writes of both not yet in tables), and the whole data directory.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Disk {
    pub log: f64,
    pub archive: f64,
    pub wal: f64,
    pub total: f64,
}

impl Disk {
    fn parse(status: &Value) -> Option<Disk> {
        let d = &status["disk"];
        let bytes = |k: &str| d[k].as_f64();
        Some(Disk {
            log: bytes("logBytes")?,
            archive: bytes("archiveBytes")?,
            wal: bytes("walBytes").unwrap_or(0.0),
            total: bytes("totalBytes")?,
        })
    }
}

/// The value of the sample named exactly `name` (labels included) in a Prometheus text scrape.
pub(super) fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse::<f64>()
            .ok()
    })
}

/// One node's memory, in bytes, as its gauges reported it.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct NodeMemory {
    /// Rust heap allocated and not freed (jemalloc).
    pub heap: f64,
    /// The raft log's in-memory cache, as the node estimates its decoded entries (bounded).
    pub log_cache: f64,
    /// RocksDB's memtables and block caches (bounded by their budgets).
    pub rocksdb_caches: f64,
    /// RocksDB's table readers (index and filter blocks): they grow with the data.
    pub table_readers: f64,
}

impl NodeMemory {
    /// Reads the gauges out of a Prometheus text scrape; `None` without the heap gauge (a
    /// binary that does not report it).
    pub fn parse(text: &str) -> Option<NodeMemory> {
        let value = |name: &str| gauge(text, name);
        Some(NodeMemory {
            heap: value("fedraft_heap_allocated_bytes")?,
            log_cache: value("fedraft_raft_log_cache_bytes").unwrap_or(0.0),
            rocksdb_caches: value("fedraft_store_memtable_bytes").unwrap_or(0.0)
                + value("fedraft_store_block_cache_bytes").unwrap_or(0.0),
            table_readers: value("fedraft_store_table_readers_bytes").unwrap_or(0.0),
        })
    }
}

/// Every node's figures, in the order of the cluster's API addresses.
pub async fn scrape(http: &reqwest::Client, fed: &FedraftCluster) -> Vec<NodeGauges> {
    let mut out = Vec::with_capacity(fed.apis.len());
    for (_, base) in &fed.apis {
        let metrics = async {
            http.get(format!("{base}/metrics"))
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()
        };
        let status = async {
            http.get(format!("{base}/v1/status/node"))
                .bearer_auth(&fed.token)
                .timeout(Duration::from_secs(10))
                .send()
                .await
                .ok()?
                .json::<Value>()
                .await
                .ok()
        };
        let (metrics, status) = (metrics.await, status.await);
        out.push(NodeGauges {
            memory: metrics.as_deref().and_then(NodeMemory::parse),
            checkpoints: metrics.as_deref().and_then(Images::parse),
            disk: status.as_ref().and_then(Disk::parse),
            leader: metrics
                .as_deref()
                .and_then(|m| gauge(m, "fedraft_raft_is_leader"))
                .map(|v| v > 0.0),
        });
    }
    out
}

/// One node's growth per object between two samples, in KiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerObject {
    pub rss: f64,
    pub heap: f64,
    pub log_cache: f64,
    pub rocksdb_caches: f64,
    pub table_readers: f64,
    /// The mean manifest (template text) written per object, the part of `held` the goal
    /// leaves out.
    pub manifest: f64,
}

impl PerObject {
    /// Growth from `before` to `after` (each RSS in MiB and the gauges) over `objects`.
    pub fn between(before: (f64, NodeMemory), after: (f64, NodeMemory), objects: u64) -> PerObject {
        let per = |b: f64, a: f64| (a - b) / 1024.0 / objects.max(1) as f64;
        let (b, a) = (before.1, after.1);
        PerObject {
            rss: (after.0 - before.0) * 1024.0 / objects.max(1) as f64,
            heap: per(b.heap, a.heap),
            log_cache: per(b.log_cache, a.log_cache),
            rocksdb_caches: per(b.rocksdb_caches, a.rocksdb_caches),
            table_readers: per(b.table_readers, a.table_readers),
            manifest: 0.0,
        }
    }

    /// The same growth, with the mean manifest size written per object (bytes).
    pub fn with_manifest(self, bytes: f64) -> PerObject {
        PerObject {
            manifest: bytes / 1024.0,
            ..self
        }
    }

    /// What the goal measures: held memory beyond one copy of the object's manifest.
    pub fn beyond_manifest(&self) -> f64 {
        self.held() - self.manifest
    }

    /// What grows with the objects: the heap without the log cache, and RocksDB's table
    /// readers. Bounded caches and the allocator's unreturned pages are left out.
    pub fn held(&self) -> f64 {
        self.heap - self.log_cache + self.table_readers
    }

    pub fn render(&self) -> String {
        format!(
            "{:.1} KiB per object held, {:.1} beyond its manifest of {:.0} bytes (Rust heap {:.1} \
             less the raft log cache {:.1}, plus RocksDB table readers {:.1}); bounded RocksDB \
             memtables and block caches {:.1}; RSS {:.1}",
            self.held(),
            self.beyond_manifest(),
            self.manifest * 1024.0,
            self.heap,
            self.log_cache,
            self.table_readers,
            self.rocksdb_caches,
            self.rss
        )
    }

    pub fn to_json(self) -> Value {
        json!({"held": self.held(), "beyondManifest": self.beyond_manifest(),
            "manifestBytes": self.manifest * 1024.0, "rss": self.rss, "heap": self.heap, "logCache": self.log_cache,
            "rocksdbCaches": self.rocksdb_caches, "tableReaders": self.table_readers})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_is_read_and_growth_splits_into_held_and_bounded() {
        let scrape = |heap: u64, cache: u64| {
            format!(
                "# HELP fedraft_heap_allocated_bytes x\nfedraft_heap_allocated_bytes {heap}\n\
                 fedraft_raft_log_cache_bytes {cache}\nfedraft_store_memtable_bytes 1000\n\
                 fedraft_store_block_cache_bytes 24\nfedraft_store_table_readers_bytes 0\n"
            )
        };
        let before = NodeMemory::parse(&scrape(1 << 20, 0)).unwrap();
        assert_eq!(before.rocksdb_caches, 1024.0);
        let after = NodeMemory::parse(&scrape(1 << 30, 64 << 20)).unwrap();
        let g = PerObject::between((100.0, before), (1124.0, after), 1 << 10);
        assert_eq!(g.rss, 1024.0);
        assert_eq!(g.log_cache, 64.0);
        assert!((g.held() - (1023.0 - 64.0)).abs() < 1e-9, "{g:?}");
        let g = g.with_manifest(512.0);
        assert!((g.beyond_manifest() - (959.0 - 0.5)).abs() < 1e-9, "{g:?}");
        assert!(
            g.render()
                .starts_with("959.0 KiB per object held, 958.5 beyond its manifest of 512 bytes"),
            "{}",
            g.render()
        );
        // A node without the heap gauge gives no breakdown rather than a wrong one.
        assert_eq!(NodeMemory::parse("fedraft_raft_log_cache_bytes 5\n"), None);
    }

    #[test]
    fn checkpoints_and_disk_are_read_by_kind() {
        let text = "fedraft_raft_image_seconds_sum{kind=\"snapshot\"} 9\n\
                    fedraft_raft_image_seconds_sum{kind=\"checkpoint\"} 1.5\n\
                    fedraft_raft_image_seconds_count{kind=\"checkpoint\"} 3\n\
                    fedraft_raft_image_bytes_sum{kind=\"checkpoint\"} 3000\n";
        let i = Images::parse(text).unwrap();
        assert_eq!((i.count, i.seconds, i.bytes), (3.0, 1.5, 3000.0));
        let status =
            json!({"disk": {"logBytes": 1, "archiveBytes": 2, "walBytes": null, "totalBytes": 4}});
        let d = Disk::parse(&status).unwrap();
        assert_eq!((d.log, d.archive, d.wal, d.total), (1.0, 2.0, 0.0, 4.0));
        assert_eq!(Disk::parse(&json!({"disk": {}})), None);
    }
}
