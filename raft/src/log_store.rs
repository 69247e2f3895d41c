//! openraft's log storage (storage-v2 `RaftLogStorage`) over fedraft-store.
//!
//! Durability: `append` returns once the entries are readable (from memory, `log_cache.rs`,
//! which holds them until the store's writer has written them) and fires openraft's flush
//! callback only when the store's writer has fsynced the WAL holding them; `save_vote` returns
//! after a synced write. Truncate, purge and the committed index are ordered behind earlier
//! appends by the store's single writer; the committed index is not awaited (see
//! `save_committed`). Reads of the newest entries come from memory; older ones run on the
//! blocking pool.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use fedraft_store::{Done, Store, StoreError};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, OptionalSend, RaftLogId, RaftLogReader, StorageIOError};

use crate::codec;
use crate::log_cache::{LogCache, MAX_CACHED_BYTES, MAX_CACHED_ENTRIES};
use crate::types::{Entry, LogId, SavedSnapshot, StorageError, TypeConfig, Vote};

/// Awaits a queued store write.
pub(crate) async fn store_op(f: impl FnOnce(Done)) -> Result<(), StoreError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    f(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.await.unwrap_or(Err(StoreError::Closed))
}

fn lock_cache(c: &Mutex<LogCache>) -> MutexGuard<'_, LogCache> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs a blocking store read off the async runtime.
pub(crate) async fn store_read<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or(Err(StoreError::Closed))
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

/// A weak handle on the log store's cache of the newest entries, for the node's metrics: it
/// keeps no entry alive once the log store is gone.
#[derive(Clone)]
pub(crate) struct CachedLog(Weak<Mutex<LogCache>>);

impl CachedLog {
    /// About how much memory the entries held take (0 once the log store is gone).
    pub(crate) fn memory_estimate(&self) -> u64 {
        self.0
            .upgrade()
            .map_or(0, |c| lock_cache(&c).memory_estimate() as u64)
    }
}

#[derive(Clone)]
pub struct LogStore {
    store: Store,
    /// Last committed index openraft persisted, for `status()`.
    committed: Arc<AtomicU64>,
    /// Shared by every clone: openraft hands one to each replication task.
    recent: Arc<Mutex<LogCache>>,
    /// The snapshot saved in the store, which bounds what a purge deletes (`None`: no bound,
    /// for a log store tested alone).
    saved_snapshot: Option<SavedSnapshot>,
}

impl LogStore {
    pub fn new(store: Store, committed: Arc<AtomicU64>) -> Self {
        LogStore {
            store,
            committed,
            recent: Arc::new(Mutex::new(LogCache::new(
                MAX_CACHED_ENTRIES,
                MAX_CACHED_BYTES,
            ))),
            saved_snapshot: None,
        }
    }

    /// The cache of the newest entries, measured (not read) by the node's metrics.
    pub(crate) fn cached(&self) -> CachedLog {
        CachedLog(Arc::downgrade(&self.recent))
    }

    /// Purges only what the snapshot saved in the store covers (see [`LogStore::purge`]).
    pub(crate) fn bounded_by(mut self, saved_snapshot: SavedSnapshot) -> Self {
        self.saved_snapshot = Some(saved_snapshot);
        self
    }

    /// The cache holds no invariant a panicking holder could break halfway: keep using it.
    fn recent(&self) -> MutexGuard<'_, LogCache> {
        lock_cache(&self.recent)
    }

    fn decode_opt<T: serde::de::DeserializeOwned>(
        bytes: Option<Vec<u8>>,
    ) -> Result<Option<T>, StorageError> {
        bytes
            .map(|b| codec::decode(&b))
            .transpose()
            .map_err(read_err)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(x) => x.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(x) => x.saturating_add(1),
            Bound::Excluded(x) => *x,
            Bound::Unbounded => u64::MAX,
        };
        if let Some(entries) = self.recent().get(start, end) {
            return Ok(entries);
        }
        let store = self.store.clone();
        let raw = store_read(move || store.log_range(start, end))
            .await
            .map_err(read_err)?;
        raw.iter()
            .map(|(_, b)| codec::decode::<Entry>(b).map_err(read_err))
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let store = self.store.clone();
        let (purged, last) = store_read(move || Ok((store.last_purged()?, store.last_log()?)))
            .await
            .map_err(read_err)?;
        let last_purged_log_id: Option<LogId> = Self::decode_opt(purged)?;
        let last_log_id = match last {
            Some((_, bytes)) => Some(
                *codec::decode::<Entry>(&bytes)
                    .map_err(read_err)?
                    .get_log_id(),
            ),
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let bytes = codec::encode(vote)
            .map_err(|e| StorageError::from(StorageIOError::write_vote(AnyError::new(&e))))?;
        // Synced before returning: a forgotten vote could let this node vote twice in a term.
        store_op(|d| self.store.save_vote(bytes, d))
            .await
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        let store = self.store.clone();
        let v = store_read(move || store.vote())
            .await
            .map_err(|e| StorageError::from(StorageIOError::read_vote(AnyError::new(&e))))?;
        Self::decode_opt(v)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        if let Some(c) = &committed {
            self.committed.fetch_max(c.index, Ordering::Relaxed);
        }
        let bytes = codec::encode(&committed).map_err(write_err)?;
        // Not awaited: openraft calls this on every commit, before it applies, and waiting for the
        // writer thread here put a round trip through it on every commit's path. Nothing depends
        // on having waited: the value was never synced (a restart finds it or an older one, and
        // either only bounds how far the node re-applies before it hears from the leader), and the
        // writer keeps it behind the appends it covers. A failed write also fails the appends
        // queued with it, which stops the node.
        self.store.save_committed(
            bytes,
            Box::new(|r| {
                if let Err(e) = r {
                    tracing::error!(error = %e, "saving the committed index failed");
                }
            }),
        );
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let store = self.store.clone();
        let c = store_read(move || store.committed())
            .await
            .map_err(read_err)?;
        let c: Option<Option<LogId>> = Self::decode_opt(c)?;
        let c = c.flatten();
        if let Some(c) = &c {
            self.committed.fetch_max(c.index, Ordering::Relaxed);
        }
        Ok(c)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = Vec::new();
        let mut cached = Vec::new();
        for e in entries {
            let index = e.get_log_id().index;
            let bytes = codec::encode(&e).map_err(write_err)?;
            cached.push((e, bytes.len()));
            batch.push((index, bytes));
        }
        tracing::trace!(
            entries = batch.len(),
            first = batch.first().map(|b| b.0),
            "append"
        );
        if batch.is_empty() {
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        // openraft reads them from here as soon as this returns; the cache keeps them at least
        // until the store has written them.
        let seq = self.recent().append(cached);
        let recent = self.recent.clone();
        self.store.append(
            batch,
            // Not awaited: the raft core would wait here for the writer thread, once per append,
            // holding up everything else it does (commits, the next append). A failed write
            // reaches openraft through the flush callback below.
            Box::new(move |r| {
                if r.is_ok() {
                    lock_cache(&recent).written(seq);
                }
            }),
            // Fires on the writer thread after the WAL fsync: only then may openraft count this
            // node's copy towards a quorum.
            Box::new(move |r| callback.log_io_completed(r.map_err(std::io::Error::other))),
        );
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.recent().truncate(log_id.index);
        store_op(|d| self.store.truncate(log_id.index, d))
            .await
            .map_err(write_err)
    }

    /// Deletes the log up to `log_id`, but never past the snapshot saved in the store: openraft
    /// 0.9 purges the log a snapshot from the leader covers without waiting for the state
    /// machine to have saved it (its `PurgeLog` command has no condition), and a crash in between
    /// left a node with neither the entries nor the snapshot, which could not start again
    /// (ROBUSTNESS.md, `failpoints::crash_at_snapshot_install`). What is left is deleted by a
    /// later purge; openraft never reads below the position it asked to purge.
    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let log_id = match &self.saved_snapshot {
            None => log_id,
            // Waits for a snapshot being saved: the save does not depend on the raft core.
            Some(saved) => match *saved.lock().await {
                Some(s) if s.index < log_id.index => s,
                Some(_) => log_id,
                None => return Ok(()),
            },
        };
        let bytes = codec::encode(&log_id).map_err(write_err)?;
        self.recent().purge(log_id.index);
        store_op(|d| self.store.purge(log_id.index, bytes, d))
            .await
            .map_err(write_err)
    }
}
