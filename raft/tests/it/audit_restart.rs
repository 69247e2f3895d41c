//! Where a node's audit archive restarts, at the state machine's level, each case made
//! deterministic: a snapshot installed from the leader as the node's last act (nothing applied
//! after it) ends the archive legitimately, and a snapshot this node builds is saved only once
//! the audit records of every command it covers are written. Both were seen as "the archive
//! ends at N but the node applied commands up to M" after a crash (ROBUSTNESS.md, bugs found).

use std::io::Cursor;
use std::time::Duration;

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::model::ClusterSpec;
use fedraft_core::state::State;
use fedraft_raft::audit::{AuditLog, AuditOptions, LiveState};
use fedraft_raft::state_machine::StateMachine;
use fedraft_raft::types::{Entry, EntryBatch, LogId, SnapshotMeta, StoredMembership};
use fedraft_store::{Restart, Store};
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};

/// Command `n` of the tests' history: a cluster registration.
fn command(n: u64) -> LogEntry {
    LogEntry::new(
        format!("r{n}"),
        "tester",
        1_000 + n,
        Command::RegisterCluster(ClusterSpec::new(
            format!("dc{n}"),
            format!("https://dc{n}:6443"),
        )),
    )
}

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

/// Raft entry `index`, carrying command `index` alone (so raft and command indexes agree).
fn entry(index: u64) -> Entry {
    Entry {
        log_id: log_id(index),
        payload: EntryPayload::Normal(EntryBatch::new(vec![command(index)])),
    }
}

async fn open(dir: &std::path::Path) -> (Store, StateMachine) {
    let store = Store::open(dir, "t").expect("opening the store");
    let sm = StateMachine::open_with(store.clone(), AuditOptions::default())
        .await
        .expect("opening the state machine");
    (store, sm)
}

/// What the leader's state machine holds after commands 1..=upto.
fn leader_snapshot(upto: u64) -> (SnapshotMeta, Vec<u8>) {
    let mut s = State::new();
    for n in 1..=upto {
        s.apply(n, &command(n));
    }
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(upto)),
        last_membership: StoredMembership::default(),
        snapshot_id: format!("1-{upto}-0"),
    };
    (meta, s.image().to_snapshot())
}

fn live(sm: &StateMachine) -> LiveState {
    LiveState::of(&sm.shared().read().state)
}

#[tokio::test]
async fn an_install_with_nothing_applied_after_it_ends_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut sm) = open(dir.path()).await;
    sm.apply((1..=3).map(entry)).await.unwrap();
    // The node was away; the leader had purged its log and sends its snapshot at 10.
    let (meta, data) = leader_snapshot(10);
    sm.install_snapshot(&meta, Box::new(Cursor::new(data)))
        .await
        .unwrap();
    sm.shared().archive_caught_up().await;
    let log = AuditLog::new(store.reader());

    let report = log.verify(Some(live(&sm)), &mut |_| {}).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.chain.last, Some(3));
    assert_eq!(report.replay_index, 10);
    assert!(report.live_matched);
    assert_eq!(
        report.chain.restarts,
        vec![(0, Restart::Genesis), (10, Restart::Installed)]
    );
    // The chain alone (no replay) ends there too.
    let chain = store.reader().verify_chain(|_| {}).unwrap();
    assert!(chain.problems.is_empty(), "{:?}", chain.problems);
    assert_eq!(chain.restarts.last(), Some(&(10, Restart::Installed)));

    // Not a blanket pass: a node past the installed state still needs its records.
    let beyond = LiveState {
        index: 12,
        ..live(&sm)
    };
    let report = log.verify(Some(beyond), &mut |_| {}).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("the archive ends at 10")),
        "{:?}",
        report.problems
    );

    // Commands applied after the install chain to it as before.
    sm.apply((11..=12).map(entry)).await.unwrap();
    sm.shared().archive_caught_up().await;
    let report = log.verify(Some(live(&sm)), &mut |_| {}).unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.replay_index, 12);
    assert!(report.live_matched);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_snapshot_waits_for_the_audit_records_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut sm) = open(dir.path()).await;
    sm.apply((1..=3).map(entry)).await.unwrap();
    sm.shared().archive_caught_up().await;

    // Hold the store's writer thread inside a completion callback: every op queued after it,
    // such as the audit records of the next commands, waits, as it does behind a slow fsync.
    let (release, held) = std::sync::mpsc::channel::<()>();
    store.sync(Box::new(move |_| {
        let _ = held.recv();
    }));
    sm.apply((4..=6).map(entry)).await.unwrap();
    let mut builder = sm.get_snapshot_builder().await;
    let build = tokio::spawn(async move { builder.build_snapshot().await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A crash now restarts from whatever snapshot is saved and never re-applies what it
    // covers: one at command 6 would leave records 4..6 missing for good.
    assert!(
        store.snapshot().unwrap().is_none(),
        "a snapshot was saved before its commands' audit records"
    );
    assert!(!build.is_finished());

    release.send(()).unwrap();
    let built = build.await.unwrap().unwrap();
    assert_eq!(built.meta.last_log_id, Some(log_id(6)));
    assert!(store.snapshot().unwrap().is_some());
    assert_eq!(store.audit_head().unwrap().map(|(i, _)| i), Some(6));
    let report = AuditLog::new(store.reader())
        .verify(Some(live(&sm)), &mut |_| {})
        .unwrap();
    assert!(report.ok(), "{:?}", report.problems);
}
