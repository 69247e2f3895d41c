//! A failed WAL fsync stops the store for good (fsyncgate): the appends it covered fail, no
//! later write succeeds (a second fsync could succeed without the pages the first one lost), the
//! failure names its seam, and reopening the directory recovers every append that was durable.
//! The failpoint is configured in a child process (this binary re-run), so it cannot reach the
//! other tests of this binary.

use std::process::Stdio;

use fedraft_store::{failpoints, Store, StoreError};

const CHILD_ENV: &str = "FEDRAFT_STORE_WAL_FAIL_CHILD_DIR";
/// Appends, one fsync each, before the failing one.
const GOOD_SYNCS: u64 = 5;

fn append(s: &Store, i: u64) -> Result<(), StoreError> {
    s.append_sync(vec![(i, vec![(i % 251) as u8; 64])])
}

/// Child mode (only when the env var is set): appends until the injected EIO, then checks that
/// the store refuses everything after it.
#[test]
fn wal_fail_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let configured = failpoints::configure_from_env().unwrap();
    assert_eq!(configured, vec!["store::wal_sync".to_string()]);
    let s = Store::open(&dir, "walfail").unwrap();
    for i in 1..=GOOD_SYNCS {
        append(&s, i).unwrap();
    }
    let failed = append(&s, GOOD_SYNCS + 1).unwrap_err();
    assert!(
        failed.to_string().contains("store::wal_sync"),
        "the failure names its seam: {failed}"
    );
    // The failpoint is off again, so a retried fsync would succeed: it must not be tried.
    for i in GOOD_SYNCS + 2..GOOD_SYNCS + 5 {
        let e = append(&s, i).unwrap_err();
        assert!(
            matches!(&e, StoreError::Stopped { what, cause }
            if what == "WAL sync" && cause.contains("store::wal_sync")),
            "{e}"
        );
    }
    assert!(matches!(
        Store::wait(|d| s.save_vote(b"v".to_vec(), d)),
        Err(StoreError::Stopped { .. })
    ));
    assert!(matches!(
        s.save_built_snapshot(b"m", b"d"),
        Err(StoreError::Stopped { .. })
    ));
    assert!(matches!(s.failure(), Some(StoreError::Stopped { .. })));
    println!("child done");
}

#[test]
fn a_failed_wal_sync_is_never_retried_and_reopening_recovers_what_was_synced() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::child(module_path!(), "wal_fail_child")
        .env(CHILD_ENV, dir.path())
        .env(
            failpoints::ENV,
            format!("store::wal_sync={GOOD_SYNCS}*off->1*return(EIO)->off"),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("child done"),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = Store::open(dir.path(), "walfail").unwrap();
    let log = s.log_range(1, u64::MAX).unwrap();
    let synced: Vec<u64> = log.iter().map(|(i, _)| *i).collect();
    // Every acknowledged append is there. The failed one may be too (its write reached the WAL
    // file; only its fsync "failed"), but nothing after it was ever written.
    assert!(
        synced == (1..=GOOD_SYNCS).collect::<Vec<_>>()
            || synced == (1..=GOOD_SYNCS + 1).collect::<Vec<_>>(),
        "{synced:?}"
    );
    assert!(s.failure().is_none());
    append(&s, synced.len() as u64 + 1).unwrap();
}
