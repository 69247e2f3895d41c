//! openraft's state machine (storage-v2 `RaftStateMachine`): core's `State` in memory, snapshots
//! and the audit archive in fedraft-store.
//!
//! The in-memory state is rebuilt at start from the latest snapshot; openraft then re-applies
//! the committed entries after it. Every applied command (a raft entry carries a batch) appends
//! one audit record keyed by its resource version (entry bytes, outcome bytes, hash-chained) and
//! is broadcast to subscribers. `apply` queues the records with the store's writer and returns
//! without waiting for them ([`ArchiveProgress`] says how far they are written; readers of the
//! archive wait for it). They are not synced at once: entries after the last snapshot are
//! re-applied and re-archived on restart, and a snapshot this node builds is saved only once
//! the records of every command it covers are written and synced (the snapshot itself is
//! written beside the WAL, so nothing else orders the two). A failed archive write stops the
//! node at its next apply. Applying is the only writer of the state; readers take the read lock
//! briefly. State checkpoints (every `checkpoint_every_commands` commands or more, see
//! `audit::checkpoint_interval`) and raft snapshots take an image of the state (`State::image`, cheap: objects are shared) and the
//! checkpointer's thread encodes and writes it (`checkpointer.rs`), so encoding the state never
//! holds up an apply.

use std::io::Cursor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use fedraft_core::state::{State, StateImage};
use fedraft_store::{AuditInput, Store, StoreError};
use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, OptionalSend, RaftLogId, RaftSnapshotBuilder, StorageIOError,
};
use tokio::sync::broadcast;

use crate::audit::AuditOptions;
use crate::checkpointer::Checkpointer;
use crate::codec::{self, Response};
use crate::failure::FirstFailure;
use crate::log_store::{store_op, store_read};
use crate::metrics::ImageMetrics;
use crate::types::{
    AppliedEntry, Entry, LogId, SavedSnapshot, Snapshot, SnapshotMeta, StorageError,
    StoredMembership, TypeConfig,
};

/// Applied entries kept for slow subscribers before they see `Lagged`.
pub const SUBSCRIBER_BUFFER_ENTRIES: usize = 4096;

/// The state machine's in-memory part, shared with the node for reads.
pub struct SmState {
    pub state: State,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
}

/// Shared between the raft state machine, snapshot builders and the node.
pub struct SmShared {
    inner: RwLock<SmState>,
    pub events: broadcast::Sender<Arc<AppliedEntry>>,
    /// Highest timestamp of any applied entry: a new leader never stamps below it.
    pub last_timestamp_ms: AtomicU64,
    snapshot_seq: AtomicU64,
    /// The raft position of the snapshot in the store. Saves take turns through it, and a built
    /// snapshot older than the stored one is not saved: openraft builds snapshots on a spawned
    /// task, so one built before a snapshot from the leader was installed can finish after it,
    /// and saving it would pair an old state with a log already cut past it.
    /// The log store purges only what it covers (`LogStore::purge`).
    saved_snapshot: SavedSnapshot,
    pub(crate) store: Store,
    /// How far the audit records are written: the state is ahead of it for the moment between
    /// applying and archiving.
    pub(crate) archived: Arc<ArchiveProgress>,
    checkpointer: Checkpointer,
}

/// How far the audit archive is written, moved by the store writer's completions.
#[derive(Debug)]
pub(crate) struct ArchiveProgress {
    /// Highest command whose audit record is written.
    index: AtomicU64,
    failed: FirstFailure,
    moved: tokio::sync::Notify,
}

impl ArchiveProgress {
    fn starting_at(index: u64) -> ArchiveProgress {
        ArchiveProgress {
            index: AtomicU64::new(index),
            failed: FirstFailure::default(),
            moved: tokio::sync::Notify::new(),
        }
    }

    pub fn index(&self) -> u64 {
        self.index.load(Ordering::Acquire)
    }

    fn written(&self, upto: u64) {
        self.index.fetch_max(upto, Ordering::Release);
        self.moved.notify_waiters();
    }

    fn fail(&self, why: String) {
        self.failed.record(why);
        self.moved.notify_waiters();
    }

    fn failure(&self) -> Option<String> {
        self.failed.get()
    }

    /// Waits until the records up to command `upto` are written, or archiving has failed.
    pub async fn reached(&self, upto: u64) {
        loop {
            let moved = self.moved.notified();
            tokio::pin!(moved);
            // Registered before the check, so a move in between is not missed.
            moved.as_mut().enable();
            if self.index() >= upto || self.failure().is_some() {
                return;
            }
            moved.await;
        }
    }
}

impl SmShared {
    /// Poisoning only follows a panic inside apply, which already stops the node; reads go on.
    pub fn read(&self) -> RwLockReadGuard<'_, SmState> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, SmState> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until every checkpoint due for the commands applied so far is written (a
    /// checkpoint is handed over once its audit record is).
    pub async fn flush_checkpoints(&self) {
        self.archive_caught_up().await;
        self.checkpointer.flush().await
    }

    /// The first failed write off the apply path (an audit record, a checkpoint), if any: the
    /// node must stop (the next apply refuses to go on).
    pub(crate) fn failure(&self) -> Option<String> {
        self.checkpointer
            .failure()
            .or_else(|| self.archived.failure())
    }

    /// The saved snapshot's position, for the log store (see `LogStore::purge`).
    pub(crate) fn saved_snapshot(&self) -> SavedSnapshot {
        self.saved_snapshot.clone()
    }

    /// Waits until the audit records of every command applied so far are written.
    pub async fn archive_caught_up(&self) {
        let applied = self.read().state.applied_index();
        self.archived.reached(applied).await
    }
}

fn sm_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

fn snap_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_snapshot(None, AnyError::new(&e)).into()
}

#[derive(Clone)]
pub struct StateMachine {
    shared: Arc<SmShared>,
    store: Store,
}

impl StateMachine {
    /// Restores the in-memory state from the latest stored snapshot (or starts empty).
    pub async fn open(store: Store) -> Result<StateMachine, crate::RaftError> {
        StateMachine::open_with(store, AuditOptions::default()).await
    }

    /// [`StateMachine::open`] with explicit audit options.
    pub async fn open_with(
        store: Store,
        audit: AuditOptions,
    ) -> Result<StateMachine, crate::RaftError> {
        Self::open_measured(store, audit, ImageMetrics::default()).await
    }

    /// [`StateMachine::open_with`], recording checkpoint and snapshot encoding into `images`.
    pub(crate) async fn open_measured(
        store: Store,
        audit: AuditOptions,
        images: ImageMetrics,
    ) -> Result<StateMachine, crate::RaftError> {
        let s = store.clone();
        let snap = store_read(move || s.snapshot()).await?;
        let (state, last_applied, membership) = match snap {
            Some((meta, data)) => {
                let meta: SnapshotMeta = codec::decode(&meta)?;
                let state = State::from_snapshot(&data)
                    .map_err(|e| crate::RaftError::Codec(e.to_string()))?;
                (state, meta.last_log_id, meta.last_membership)
            }
            None => (State::new(), None, StoredMembership::default()),
        };
        let last_ts = state.log_time_ms();
        let last_index = state.applied_index();
        let s = store.clone();
        let head = store_read(move || s.audit_head())
            .await?
            .map_or(0, |(h, _)| h);
        if head < last_index {
            // Only a data directory written before built snapshots waited for the archive
            // (`archive_durable`) can look like this; say so rather than let it pass silently.
            tracing::error!(
                archive_ends_at = head,
                snapshot_at = last_index,
                "the audit archive lacks the records of commands this node applied before its \
                 snapshot; `fedraft audit verify` reports them missing"
            );
        }
        let (events, _) = broadcast::channel(SUBSCRIBER_BUFFER_ENTRIES);
        let checkpointer = Checkpointer::start(store.clone(), audit, &state, images)
            .map_err(|e| crate::RaftError::Fatal(format!("starting the checkpoint thread: {e}")))?;
        let shared = Arc::new(SmShared {
            inner: RwLock::new(SmState {
                state,
                last_applied,
                membership,
            }),
            events,
            last_timestamp_ms: AtomicU64::new(last_ts),
            snapshot_seq: AtomicU64::new(0),
            saved_snapshot: Arc::new(tokio::sync::Mutex::new(last_applied)),
            store: store.clone(),
            archived: Arc::new(ArchiveProgress::starting_at(last_index)),
            checkpointer,
        });
        Ok(StateMachine { shared, store })
    }

    pub fn shared(&self) -> Arc<SmShared> {
        self.shared.clone()
    }

    /// Queues the audit records of one `apply` call, in order, and the checkpoint claimed in it
    /// (always at one of those records) to follow once they are written: a checkpoint is bound
    /// to its index's record. Not awaited: openraft applies one batch at a time, and waiting here
    /// for the writer thread held up every apply behind the log appends queued there. A failed
    /// archive write stops the node at its next apply, like any storage failure: history must
    /// not silently lose entries.
    fn archive(
        &self,
        records: Vec<AuditInput>,
        checkpoint: Option<StateImage>,
    ) -> Result<(), StorageError> {
        let Some(last) = records.last().map(|r| r.index) else {
            return Ok(());
        };
        let checkpoint = checkpoint
            .map(|image| {
                let handoff = self.shared.checkpointer.handoff();
                handoff
                    .map(|h| (image, h))
                    .ok_or_else(|| sm_err(StoreError::Closed))
            })
            .transpose()?;
        let progress = self.shared.archived.clone();
        self.store.write_audit(
            records,
            Box::new(move |r| match r {
                Ok(()) => {
                    progress.written(last);
                    if let Some((image, handoff)) = checkpoint {
                        handoff.checkpoint(image);
                    }
                }
                Err(e) => progress.fail(format!("audit records up to {last}: {e}")),
            }),
        );
        Ok(())
    }
}

impl StateMachine {
    /// Waits until the audit records up to command `upto` are written, then fsyncs them; fails
    /// when archiving has failed (the node is stopping) or the sync does.
    async fn archive_durable(&self, upto: u64) -> Result<(), StorageError> {
        self.shared.archived.reached(upto).await;
        if let Some(why) = self.shared.archived.failure() {
            return Err(sm_err(StoreError::Corrupt(why)));
        }
        store_op(|d| self.store.sync(d)).await.map_err(sm_err)
    }
}

/// Runs `work`, CPU-heavy apply work, without holding the raft runtime's only worker: on a
/// multi-thread runtime `block_in_place` hands the worker to another thread meanwhile, so raft's
/// core keeps answering appends and votes while a follower places a batch of objects over a
/// thousand clusters (it used to wait, and the leader's appends timed out). Elsewhere (a test's
/// single-threaded runtime) it runs in place.
fn off_the_raft_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let g = self.shared.read();
        Ok((g.last_applied, g.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        if let Some(why) = self
            .shared
            .checkpointer
            .failure()
            .or_else(|| self.shared.archived.failure())
        {
            return Err(sm_err(StoreError::Corrupt(why)));
        }
        let started = std::time::Instant::now();
        let mut replies = Vec::new();
        let mut audit = Vec::new();
        let mut events = Vec::new();
        let mut checkpoint: Option<StateImage> = None;
        off_the_raft_worker(|| -> Result<(), StorageError> {
            let mut g = self.shared.write();
            for entry in entries {
                let log_id = *entry.get_log_id();
                g.last_applied = Some(log_id);
                match entry.payload {
                    // Raft-internal entries change no fedraft state and have no resource version;
                    // the audit archive records commands only.
                    EntryPayload::Blank => replies.push(Response::default()),
                    EntryPayload::Membership(m) => {
                        g.membership = StoredMembership::new(Some(log_id), m);
                        replies.push(Response::default());
                    }
                    EntryPayload::Normal(batch) => {
                        let mut out = Vec::with_capacity(batch.0.len());
                        // The watch stream shares the batch (the log's memory usually still
                        // holds it too).
                        let commands = batch.0;
                        for (at, le) in commands.iter().enumerate() {
                            // Every node numbers commands the same way: one after core's applied
                            // index, which the snapshot carries across restarts.
                            let seq = g.state.applied_index() + 1;
                            let applied = g.state.apply(seq, le);
                            self.shared
                                .last_timestamp_ms
                                .fetch_max(le.timestamp_ms, Ordering::Relaxed);
                            audit.push(AuditInput {
                                index: seq,
                                term: log_id.leader_id.term,
                                entry: le.encode(),
                                outcome: codec::encode_applied(&applied).map_err(sm_err)?,
                            });
                            events.push(Arc::new(AppliedEntry::in_batch(
                                seq,
                                commands.clone(),
                                at,
                                applied.clone(),
                            )));
                            out.push(applied);
                            if self.shared.checkpointer.claim_due(seq) {
                                // With the indexes, checked on the checkpoint thread.
                                checkpoint = Some(g.state.checked_image());
                            }
                        }
                        replies.push(Response(out));
                    }
                }
            }
            Ok(())
        })?;
        self.archive(audit, checkpoint)?;
        tracing::trace!(
            entries = replies.len(),
            took_us = started.elapsed().as_micros() as u64,
            "applied"
        );
        for ev in &events {
            // No subscribers is fine.
            let _ = self.shared.events.send(ev.clone());
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let state = State::from_snapshot(&data)
            .map_err(|e| snap_err(StoreError::Corrupt(e.to_string())))?;
        let meta_bytes = codec::encode(meta).map_err(sm_err)?;
        let index = meta.last_log_id.map(|l| l.index).unwrap_or(0);
        // The audit chain (keyed by command sequence) restarts after the snapshot's last command.
        let last_command = state.applied_index();
        let mut saved = self.shared.saved_snapshot.lock().await;
        // Persist first: if this fails the in-memory state stays consistent with the disk.
        store_op(|d| {
            self.store
                .save_snapshot(meta_bytes, data, Some(last_command), d)
        })
        .await
        .map_err(sm_err)?;
        *saved = meta.last_log_id;
        drop(saved);
        self.shared
            .last_timestamp_ms
            .fetch_max(state.log_time_ms(), Ordering::Relaxed);
        // The archive restarts after the installed state: nothing below it is awaited.
        self.shared.archived.written(last_command);
        self.shared.checkpointer.restart_from(&state);
        let mut g = self.shared.write();
        g.state = state;
        g.last_applied = meta.last_log_id;
        g.membership = meta.last_membership.clone();
        tracing::info!(index, "installed snapshot from the leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let store = self.store.clone();
        match store_read(move || store.snapshot())
            .await
            .map_err(snap_err)?
        {
            None => Ok(None),
            Some((meta, data)) => {
                let meta: SnapshotMeta = codec::decode(&meta).map_err(snap_err)?;
                Ok(Some(Snapshot {
                    meta,
                    snapshot: Box::new(Cursor::new(data)),
                }))
            }
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        // State and raft position taken together; the encoding happens off the lock.
        let (image, last_log_id, last_membership) = {
            let g = self.shared.read();
            (g.state.image(), g.last_applied, g.membership.clone())
        };
        let commands = image.applied_index();
        let Some(data) = self.shared.checkpointer.encode(image).await else {
            return Err(sm_err(StoreError::Closed));
        };
        // A restart resumes from the saved snapshot and never re-applies (or re-archives) the
        // commands it covers, so their audit records must be durable before it is: otherwise a
        // crash while they still wait in the writer's queue left a snapshot past the archive's
        // end, and the archive without the records of commands this node applied.
        self.archive_durable(commands).await?;
        let seq = self.shared.snapshot_seq.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match last_log_id {
            Some(l) => format!("{}-{}-{seq}", l.leader_id.term, l.index),
            None => format!("0-0-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id,
        };
        let meta_bytes = codec::encode(&meta).map_err(sm_err)?;
        let mut saved = self.shared.saved_snapshot.lock().await;
        if saved.is_some() && last_log_id <= *saved {
            tracing::info!(
                built = ?last_log_id,
                stored = ?*saved,
                "built snapshot is not newer than the stored one; not saved"
            );
            return Ok(Snapshot {
                meta,
                snapshot: Box::new(Cursor::new(data)),
            });
        }
        // Beside the log's writer, not through it: tens of megabytes in the write-ahead log
        // made every write in flight wait for their sync.
        let store = self.store.clone();
        let data = store_read(move || store.save_built_snapshot(&meta_bytes, &data).map(|()| data))
            .await
            .map_err(sm_err)?;
        *saved = last_log_id;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::tests::blank_entry as blank;

    #[tokio::test]
    async fn a_snapshot_built_before_an_install_finished_does_not_replace_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "t").unwrap();
        let mut sm = StateMachine::open_with(store.clone(), AuditOptions::default())
            .await
            .unwrap();
        sm.apply((1..=3).map(|i| blank(1, i))).await.unwrap();
        // A snapshot from the leader, at 10, is being saved while this node builds its own at 3.
        let mut saving = sm.shared.saved_snapshot.lock().await;
        let mut builder = sm.clone();
        let build = tokio::spawn(async move { builder.build_snapshot().await });
        *saving = Some(blank(2, 10).log_id);
        drop(saving);
        let built = build.await.unwrap().unwrap();
        assert_eq!(built.meta.last_log_id, Some(blank(1, 3).log_id));
        assert_eq!(
            store.snapshot().unwrap(),
            None,
            "the older snapshot was saved"
        );

        // With nothing newer stored, a built snapshot is saved.
        *sm.shared.saved_snapshot.lock().await = None;
        sm.build_snapshot().await.unwrap();
        let (meta, _) = store.snapshot().unwrap().unwrap();
        let meta: SnapshotMeta = codec::decode(&meta).unwrap();
        assert_eq!(meta.last_log_id, Some(blank(1, 3).log_id));
        assert_eq!(*sm.shared.saved_snapshot.lock().await, meta.last_log_id);
    }
}
