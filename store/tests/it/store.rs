//! fedraft-store against real RocksDB in temp dirs: what survives a reopen, what refuses to open,
//! and that concurrent appends are batched, ordered and durable.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use fedraft_store::{AuditInput, Store, StoreError, FORMAT_VERSION, GENESIS_DIGEST};

fn entries(from: u64, to: u64) -> Vec<(u64, Vec<u8>)> {
    (from..to)
        .map(|i| (i, format!("entry-{i}").into_bytes()))
        .collect()
}

fn audit(index: u64) -> AuditInput {
    AuditInput {
        index,
        term: 1,
        entry: format!("e{index}").into_bytes(),
        outcome: format!("o{index}").into_bytes(),
    }
}

#[test]
fn reopen_keeps_log_meta_snapshot_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), "c1").unwrap();
        s.append_sync(entries(1, 101)).unwrap();
        Store::wait(|d| s.save_vote(b"vote-3".to_vec(), d)).unwrap();
        Store::wait(|d| s.save_committed(b"committed-90".to_vec(), d)).unwrap();
        Store::wait(|d| s.purge(10, b"purged-10".to_vec(), d)).unwrap();
        Store::wait(|d| s.truncate(96, d)).unwrap();
        Store::wait(|d| s.write_audit((1..=5).map(audit).collect(), d)).unwrap();
        Store::wait(|d| s.save_snapshot(b"snap-meta".to_vec(), b"snap-data".to_vec(), None, d))
            .unwrap();
    }
    let s = Store::open(dir.path(), "c1").unwrap();
    assert_eq!(s.vote().unwrap().as_deref(), Some(&b"vote-3"[..]));
    assert_eq!(
        s.committed().unwrap().as_deref(),
        Some(&b"committed-90"[..])
    );
    assert_eq!(s.last_purged().unwrap().as_deref(), Some(&b"purged-10"[..]));
    assert_eq!(
        s.log_range(0, 200).unwrap(),
        entries(11, 96),
        "0..=10 purged: the range starts at the first kept entry"
    );
    assert_eq!(s.log_range(11, 200).unwrap(), entries(11, 96));
    assert_eq!(s.last_log().unwrap(), Some((95, b"entry-95".to_vec())));
    assert_eq!(
        s.snapshot().unwrap(),
        Some((b"snap-meta".to_vec(), b"snap-data".to_vec()))
    );
    let recs = s.audit_range(0, 100).unwrap();
    assert_eq!(recs.len(), 5);
    assert_eq!(recs[0].prev, GENESIS_DIGEST);
    for w in recs.windows(2) {
        assert_eq!(w[1].prev, w[0].digest, "chain links");
    }
    assert!(recs.iter().all(|r| r.verify()));
    assert_eq!(s.audit_head().unwrap(), Some((5, recs[4].digest)));
}

#[test]
fn audit_reapply_is_idempotent_and_snapshot_install_restarts_chain() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), "c1").unwrap();
    Store::wait(|d| s.write_audit((1..=3).map(audit).collect(), d)).unwrap();
    let before = s.audit_range(0, 10).unwrap();
    // A restart re-applies entries the snapshot did not cover: history stays as first written.
    Store::wait(|d| s.write_audit((2..=4).map(audit).collect(), d)).unwrap();
    let after = s.audit_range(0, 10).unwrap();
    assert_eq!(&after[..3], &before[..]);
    assert_eq!(after[3].prev, before[2].digest);
    // Installing a snapshot at 20 restarts the chain there, bound to the snapshot bytes.
    Store::wait(|d| s.save_snapshot(b"m".to_vec(), b"d".to_vec(), Some(20), d)).unwrap();
    let (h, base) = s.audit_head().unwrap().unwrap();
    assert_eq!(h, 20);
    Store::wait(|d| s.write_audit(vec![audit(21)], d)).unwrap();
    let r21 = s.audit_range(21, 22).unwrap();
    assert_eq!(r21[0].prev, base);
    assert!(r21[0].verify());
}

#[test]
fn refuses_other_cluster_id_without_touching_data() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), "prod").unwrap();
        s.append_sync(entries(1, 4)).unwrap();
    }
    match Store::open(dir.path(), "staging") {
        Err(StoreError::ClusterIdMismatch { expected, found }) => {
            assert_eq!(expected, "staging");
            assert_eq!(found, "prod");
        }
        other => panic!("expected ClusterIdMismatch, got {:?}", other.err()),
    }
    let s = Store::open(dir.path(), "prod").unwrap();
    assert_eq!(
        s.log_range(1, 10).unwrap(),
        entries(1, 4),
        "refusal must not re-initialise"
    );
}

#[test]
fn refuses_newer_format_version() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path(), "c1").unwrap());
    {
        let db = rocksdb::DB::open_cf(
            &rocksdb::Options::default(),
            dir.path(),
            ["log", "meta", "snapshot", "audit"],
        )
        .unwrap();
        let meta = db.cf_handle("meta").unwrap();
        db.put_cf(meta, b"format_version", (FORMAT_VERSION + 1).to_be_bytes())
            .unwrap();
    }
    match Store::open(dir.path(), "c1") {
        Err(StoreError::NewerFormat { found, supported }) => {
            assert_eq!(found, FORMAT_VERSION + 1);
            assert_eq!(supported, FORMAT_VERSION);
        }
        other => panic!("expected NewerFormat, got {:?}", other.err()),
    }
}

#[test]
fn refuses_corrupt_directory() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), "c1").unwrap();
        s.append_sync(entries(1, 10)).unwrap();
    }
    // Damage the manifest RocksDB needs to find its files.
    let current = std::fs::read_to_string(dir.path().join("CURRENT")).unwrap();
    let manifest = dir.path().join(current.trim());
    std::fs::write(&manifest, b"this is not a manifest").unwrap();
    let err = Store::open(dir.path(), "c1")
        .err()
        .expect("corrupt dir must not open");
    assert!(
        matches!(err, StoreError::Corrupt(_) | StoreError::Rocks(_)),
        "{err:?}"
    );
    // And it is still refused next time: nothing was re-initialised in between.
    assert!(Store::open(dir.path(), "c1").is_err());
}

#[test]
fn refuses_database_missing_header() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut o = rocksdb::Options::default();
        o.create_if_missing(true);
        o.create_missing_column_families(true);
        let db =
            rocksdb::DB::open_cf(&o, dir.path(), ["log", "meta", "snapshot", "audit"]).unwrap();
        db.put_cf(db.cf_handle("log").unwrap(), 1u64.to_be_bytes(), b"x")
            .unwrap();
    }
    assert!(matches!(
        Store::open(dir.path(), "c1"),
        Err(StoreError::Corrupt(_))
    ));
}

#[test]
fn refuses_foreign_database_and_non_empty_dir() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut o = rocksdb::Options::default();
        o.create_if_missing(true);
        rocksdb::DB::open(&o, dir.path())
            .unwrap()
            .put(b"k", b"v")
            .unwrap();
    }
    assert!(matches!(
        Store::open(dir.path(), "c1"),
        Err(StoreError::Corrupt(_))
    ));

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), b"someone's files").unwrap();
    assert!(matches!(
        Store::open(other.path(), "c1"),
        Err(StoreError::NotADataDir { .. })
    ));
}

#[test]
fn concurrent_appends_are_ordered_batched_and_durable() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), "c1").unwrap();
    let durable = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = crossbeam_channel::unbounded();
    // 2000 single-entry appends queued back to back: the writer groups them, one fsync covers many.
    let started = std::time::Instant::now();
    for i in 1..=2000u64 {
        let d = durable.clone();
        let tx = tx.clone();
        s.append(
            vec![(i, vec![i as u8; 256])],
            Box::new(|r| r.unwrap()),
            Box::new(move |r| {
                r.unwrap();
                d.fetch_add(1, Ordering::SeqCst);
                tx.send(i).unwrap();
            }),
        );
    }
    let order: Vec<u64> = (0..2000).map(|_| rx.recv().unwrap()).collect();
    let elapsed = started.elapsed();
    assert_eq!(durable.load(Ordering::SeqCst), 2000);
    assert_eq!(
        order,
        (1..=2000).collect::<Vec<_>>(),
        "durable callbacks fire in submit order"
    );
    // 2000 separate fsyncs would take seconds on this disk; batching makes it far cheaper.
    assert!(elapsed < std::time::Duration::from_secs(20), "{elapsed:?}");
    assert_eq!(s.log_range(1, 3000).unwrap().len(), 2000);
    // A non-contiguous append is refused before it reaches the disk.
    let r = Store::wait(|d| s.append(vec![(5000, vec![]), (5002, vec![])], Box::new(|_| {}), d));
    assert!(matches!(r, Err(StoreError::Invalid(_))));
}

#[test]
fn writes_from_many_threads_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), "c1").unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    // Disjoint index ranges per thread: each append is contiguous on its own.
                    let base = 1 + t * 10_000 + i * 10;
                    s.append_sync(entries(base, base + 10)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..4u64 {
        let base = 1 + t * 10_000;
        assert_eq!(s.log_range(base, base + 500).unwrap().len(), 500);
    }
}

#[test]
fn a_built_snapshot_replaces_the_last_and_survives_a_reopen_without_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), "c1").unwrap();
        Store::wait(|d| s.save_snapshot(b"m1".to_vec(), b"d1".to_vec(), None, d)).unwrap();
        s.save_built_snapshot(b"m2", b"d2").unwrap();
        assert_eq!(
            s.snapshot().unwrap(),
            Some((b"m2".to_vec(), b"d2".to_vec()))
        );
    }
    // Written without the write-ahead log: it is on disk because it was flushed, and the older
    // snapshot still in the log's history does not come back on replay.
    let s = Store::open(dir.path(), "c1").unwrap();
    assert_eq!(
        s.snapshot().unwrap(),
        Some((b"m2".to_vec(), b"d2".to_vec()))
    );
}

/// The scrape's value of gauge `name`, if it reported one.
fn scraped(registry: &prometheus_client::registry::Registry, name: &str) -> Option<u64> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn sizes_and_memory_are_summed_over_the_column_families() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), "c1").unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    s.register_metrics(&mut registry);
    s.append_sync(entries(1, 1001)).unwrap();
    // Log entries sit in the log column family's memtable until a flush.
    let memtables = scraped(&registry, "fedraft_store_memtable_bytes").unwrap();
    assert!(memtables > 10_000, "memtables: {memtables}");
    // A snapshot the node built is flushed to a table file of the snapshot column family, which
    // a read of the default column family alone would miss.
    s.save_built_snapshot(b"meta", &[7; 64 << 10]).unwrap();
    let sst = scraped(&registry, "fedraft_store_sst_bytes").unwrap();
    assert!(sst > 0, "sst: {sst}");
    for name in [
        "fedraft_store_block_cache_bytes",
        "fedraft_store_table_readers_bytes",
    ] {
        assert!(scraped(&registry, name).is_some(), "{name} not reported");
    }
}
