//! The audit archive at the store level: checkpoints bound to the chain, chain verification
//! (changed byte, removed record, forged restart), restart after an installed snapshot,
//! retention by size and by age cutting at a checkpoint, and a read-only open that changes no
//! file of the directory.

use std::collections::BTreeMap;
use std::path::Path;

use fedraft_store::{
    snapshot_digest, AuditInput, ChainProblem, Restart, RetentionPolicy, Store, StoreReader,
};

fn input(index: u64) -> AuditInput {
    AuditInput {
        index,
        term: 1,
        // The "timestamp" of record i is i seconds, readable by the retention closure.
        entry: (index * 1000).to_be_bytes().to_vec(),
        outcome: format!("outcome {index}").into_bytes(),
    }
}

fn ts(r: &fedraft_store::AuditRecord) -> Option<u64> {
    Some(u64::from_be_bytes(r.entry.as_slice().try_into().ok()?))
}

fn archive(s: &Store, from: u64, to: u64, every: u64) {
    for i in from..=to {
        Store::wait(|d| s.write_audit(vec![input(i)], d)).unwrap();
        if i % every == 0 {
            s.write_checkpoint_direct(i, format!("state {i}").into_bytes())
                .unwrap();
        }
    }
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn chain_checkpoints_and_read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), "c1").unwrap();
        archive(&s, 1, 30, 10);
        let r = s.reader();
        assert_eq!(r.checkpoint_indexes().unwrap(), vec![10, 20, 30]);
        let cp = r.checkpoint_at_or_below(25).unwrap().unwrap();
        assert_eq!(
            (cp.index, cp.state.as_slice()),
            (20, b"state 20".as_slice())
        );
        assert_eq!(cp.audit_digest, r.audit_record(20).unwrap().unwrap().digest);
        let rep = r.verify_chain(|_| {}).unwrap();
        assert_eq!((rep.records, rep.problems.len()), (30, 0));
        assert_eq!(rep.restarts, vec![(0, Restart::Genesis)]);
    }
    let before = files(dir.path());
    let r = StoreReader::open_read_only(dir.path()).unwrap();
    assert_eq!(r.audit_range(0, 100).unwrap().len(), 30);
    assert!(r.verify_chain(|_| {}).unwrap().problems.is_empty());
    drop(r);
    assert_eq!(
        files(dir.path()),
        before,
        "a read-only open changed the directory"
    );
}

#[test]
fn tampering_and_removal_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    drop({
        let s = Store::open(dir.path(), "c1").unwrap();
        archive(&s, 1, 30, 10);
        s
    });
    {
        let db = rocksdb::DB::open_cf(
            &rocksdb::Options::default(),
            dir.path(),
            ["log", "meta", "snapshot", "audit"],
        )
        .unwrap();
        let cf = db.cf_handle("audit").unwrap();
        let mut v = db.get_cf(cf, 7u64.to_be_bytes()).unwrap().unwrap();
        let n = v.len();
        v[n - 1] ^= 0x20;
        db.put_cf(cf, 7u64.to_be_bytes(), v).unwrap();
        // Removing record 11 leaves a periodic checkpoint at 10 whose digest 12 still names:
        // only retention may restart there, so this must still be caught.
        db.delete_cf(cf, 11u64.to_be_bytes()).unwrap();
    }
    let r = StoreReader::open_read_only(dir.path()).unwrap();
    let rep = r.verify_chain(|_| {}).unwrap();
    assert_eq!(
        rep.problems,
        vec![
            ChainProblem::Tampered { index: 7 },
            ChainProblem::Missing {
                after: Some(10),
                index: 12
            }
        ]
    );
}

#[test]
fn installed_snapshot_restarts_the_chain_with_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), "c1").unwrap();
    archive(&s, 1, 5, 100);
    Store::wait(|d| s.save_snapshot(b"meta".to_vec(), b"leader state".to_vec(), Some(50), d))
        .unwrap();
    archive(&s, 51, 55, 100);
    let r = s.reader();
    let cp = r.checkpoint(50).unwrap().unwrap();
    assert_eq!(cp.audit_digest, snapshot_digest(50, b"leader state"));
    assert_eq!(r.audit_record(51).unwrap().unwrap().prev, cp.audit_digest);
    let rep = r.verify_chain(|_| {}).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert_eq!(
        rep.restarts,
        vec![(0, Restart::Genesis), (50, Restart::Installed)]
    );
}

#[test]
fn retention_by_size_and_age_cuts_at_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), "c1").unwrap();
    archive(&s, 1, 100, 10);
    let r = s.reader();
    assert_eq!(
        r.retention_cut(RetentionPolicy::keep_everything(), 0, ts)
            .unwrap(),
        None
    );
    // Keep the last ~25 records by size: the cut lands at 75, retention at checkpoint 70.
    let one = r.audit_bytes_from(100).unwrap();
    let policy = RetentionPolicy {
        max_bytes: Some(one * 25),
        max_age_ms: None,
    };
    let cut = r.retention_cut(policy, 0, ts).unwrap().unwrap();
    assert_eq!(cut, 75);
    Store::wait(|d| s.retain_audit(cut, d)).unwrap();
    assert_eq!(r.audit_first().unwrap(), Some(71));
    assert_eq!(r.checkpoint_indexes().unwrap(), vec![70, 80, 90, 100]);
    assert_eq!(r.audit_retained_from().unwrap(), Some(70));
    let rep = r.verify_chain(|_| {}).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert_eq!(rep.restarts, vec![(70, Restart::Retention)]);
    // By age: entries older than 15 s before t=100 s go (cut 84 -> checkpoint 80).
    let policy = RetentionPolicy {
        max_age_ms: Some(15_000),
        max_bytes: None,
    };
    let cut = r.retention_cut(policy, 100_000, ts).unwrap().unwrap();
    assert_eq!(cut, 84);
    Store::wait(|d| s.retain_audit(cut, d)).unwrap();
    assert_eq!(r.audit_first().unwrap(), Some(81));
    assert!(r.verify_chain(|_| {}).unwrap().problems.is_empty());
}

#[test]
fn a_direct_checkpoint_is_bound_to_the_chain_and_survives_a_reopen_without_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let digest_at_7;
    {
        let s = Store::open(dir.path(), "c1").unwrap();
        for i in 1..=9 {
            Store::wait(|d| s.write_audit(vec![input(i)], d)).unwrap();
        }
        digest_at_7 = s.audit_range(7, 8).unwrap()[0].digest;
        s.write_checkpoint_direct(7, b"state 7".to_vec()).unwrap();
        // No record at 12 (as below an installed snapshot): nothing is written.
        s.write_checkpoint_direct(12, b"state 12".to_vec()).unwrap();
    }
    // The checkpoint skipped the write-ahead log: it is on disk because it was flushed.
    let s = Store::open(dir.path(), "c1").unwrap();
    let r = s.reader();
    assert_eq!(r.checkpoint_indexes().unwrap(), vec![7]);
    let cp = r.checkpoint(7).unwrap().unwrap();
    assert_eq!(cp.state, b"state 7");
    assert_eq!(cp.audit_digest, digest_at_7);
    assert!(r.verify_chain(|_| {}).unwrap().problems.is_empty());
}
