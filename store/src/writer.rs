//! The single writer thread. Every mutation of the database is an [`Op`] sent here, so writes
//! apply in the order they were submitted, and RocksDB's blocking calls never run on an async
//! runtime.
//!
//! Group commit: the writer drains every queued op, writes consecutive log appends as one
//! unsynced WriteBatch (readable at once), fsyncs the WAL once at the end of the drain and only
//! then fires the appends' durability callbacks. While it waits for that fsync, new ops queue up
//! and the next drain takes them all, so one fsync covers every append that arrived during the
//! previous one: throughput is bounded by batch size / fsync latency, not by one fsync per
//! entry. The fsync is done here rather than handed to a second thread: on a loaded machine every
//! hand-off between threads is a wake-up that waits for a core (measured at 0.3 to 0.4 ms per
//! wake-up on the 2-core bench machine), and an append paid for one more of them.
//!
//! A failed write or WAL sync stops the writer for good (the PostgreSQL fsyncgate lesson): after
//! a failed fsync the kernel may have dropped the dirty pages and a second fsync can succeed
//! without them, so nothing written before it may ever be called durable. Every op after the
//! first failure fails with [`StoreError::Stopped`], which names it; [`Store::failure`] reports
//! it so the node can exit, and a restart recovers from what was synced.
//!
//! [`Store::failure`]: crate::Store::failure

use std::sync::Arc;

use crossbeam_channel::Receiver;
use rocksdb::{WriteBatch, WriteOptions, DB};

use crate::audit::{snapshot_digest, AuditHead, AuditInput, AuditRecord, GENESIS_DIGEST};
use crate::audit_checkpoint::{checkpoint_key, Checkpoint, CheckpointKind};
use crate::error::{missing_cf, StoreError};
use crate::keys::*;
use crate::metrics::StoreMetrics;
use crate::reader::StoreReader;
use crate::Stopped;

/// Completion callback of a write. It runs on the writer or syncer thread: keep it short
/// (typically it sends on a channel).
pub type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send + 'static>;

/// One queued mutation.
pub(crate) enum Op {
    /// Log entries `(index, bytes)`, contiguous and ascending. `written` fires when readable,
    /// `durable` once the WAL holding them is fsynced.
    Append {
        entries: Vec<(u64, Vec<u8>)>,
        written: Done,
        durable: Done,
    },
    /// Delete log entries with index >= `from` (conflicting suffix).
    Truncate {
        from: u64,
        done: Done,
    },
    /// Delete log entries with index <= `upto` and record `last_purged` (raft-encoded log id).
    Purge {
        upto: u64,
        last_purged: Vec<u8>,
        done: Done,
    },
    /// Durable before `done`: a vote that is forgotten lets a node vote twice in one term.
    SaveVote {
        vote: Vec<u8>,
        done: Done,
    },
    SaveCommitted {
        committed: Vec<u8>,
        done: Done,
    },
    /// Durable before `done`. `installed_at` is set when the snapshot came from the leader
    /// rather than from this node's own state: the audit chain restarts there.
    SaveSnapshot {
        meta: Vec<u8>,
        data: Vec<u8>,
        installed_at: Option<u64>,
        done: Done,
    },
    Audit {
        records: Vec<AuditInput>,
        done: Done,
    },
    /// Fsyncs the WAL: everything queued before it (audit records, the committed index) is
    /// durable when `done` fires.
    Sync {
        done: Done,
    },
    /// Retention: drop records at or below the highest checkpoint <= `upto`, which becomes the
    /// chain's base.
    Retain {
        upto: u64,
        done: Done,
    },
}

impl Op {
    /// Fails this op's every callback with `e`, writing nothing.
    pub(crate) fn fail(self, e: StoreError) {
        match self {
            Op::Append {
                written, durable, ..
            } => {
                written(Err(e.clone()));
                durable(Err(e))
            }
            Op::Truncate { done, .. }
            | Op::Purge { done, .. }
            | Op::SaveVote { done, .. }
            | Op::SaveCommitted { done, .. }
            | Op::SaveSnapshot { done, .. }
            | Op::Audit { done, .. }
            | Op::Sync { done }
            | Op::Retain { done, .. } => done(Err(e)),
        }
    }
}

pub(crate) struct Writer {
    db: Arc<DB>,
    audit_head: AuditHead,
    metrics: StoreMetrics,
    /// Set by the first failed write or sync; from then on every op fails (module doc).
    stopped: Arc<Stopped>,
}

/// The log appends of one drain: their durability callbacks, and what they hold (for the
/// group-commit metrics).
#[derive(Default)]
struct Durables {
    callbacks: Vec<Done>,
    entries: u64,
    bytes: u64,
}

pub(crate) fn spawn(
    db: Arc<DB>,
    audit_head: AuditHead,
    ops: Receiver<Op>,
    metrics: StoreMetrics,
    stopped: Arc<Stopped>,
) -> Result<std::thread::JoinHandle<()>, StoreError> {
    let mut writer = Writer {
        db,
        audit_head,
        metrics,
        stopped,
    };
    // When `run` returns every callback has fired, and the database handle goes with the writer.
    std::thread::Builder::new()
        .name("fedraft-store-write".into())
        .spawn(move || writer.run(ops))
        .map_err(|e| StoreError::Rocks(format!("spawn writer thread: {e}")))
}

impl Writer {
    fn run(&mut self, ops: Receiver<Op>) {
        while let Ok(first) = ops.recv() {
            let mut pending = vec![first];
            // Bounded drain: keeps one batch's memory and latency in check under overload.
            pending.extend(ops.try_iter().take(4096));
            self.process(pending);
        }
    }

    fn process(&mut self, ops: Vec<Op>) {
        if let Some(e) = self.stopped.error() {
            for op in ops {
                op.fail(e.clone());
            }
            return;
        }
        let mut batch = WriteBatch::default();
        let mut writtens: Vec<Done> = Vec::new();
        // Appends of the whole drain that wait for the one fsync at its end.
        let mut durables = Durables::default();
        for op in ops {
            match op {
                Op::Append {
                    entries,
                    written,
                    durable,
                } => {
                    let Some(cf) = self.db.cf_handle(CF_LOG) else {
                        written(Err(missing_cf(CF_LOG)));
                        durable(Err(missing_cf(CF_LOG)));
                        continue;
                    };
                    durables.entries += entries.len() as u64;
                    for (index, bytes) in entries {
                        durables.bytes += bytes.len() as u64;
                        batch.put_cf(cf, index_key(index), bytes);
                    }
                    writtens.push(written);
                    durables.callbacks.push(durable);
                }
                other => {
                    // Non-append ops keep their position in the order: write the appends so far.
                    self.write_appends(&mut batch, &mut writtens, &mut durables);
                    match self.stopped.error() {
                        Some(e) => other.fail(e),
                        None => self.apply_other(other),
                    }
                }
            }
        }
        self.write_appends(&mut batch, &mut writtens, &mut durables);
        self.sync_appends(durables);
    }

    /// Writes the appends batched so far, unsynced (readable at once). A failed write fails
    /// every durability callback still waiting in this drain (none of them is synced yet); the
    /// others wait for [`Writer::sync_appends`].
    fn write_appends(
        &self,
        batch: &mut WriteBatch,
        writtens: &mut Vec<Done>,
        durables: &mut Durables,
    ) {
        if writtens.is_empty() {
            return;
        }
        let b = std::mem::take(batch);
        // An op earlier in this drain may have stopped the store: then these are not written.
        let res = match self.stopped.error() {
            Some(e) => Err(e),
            None => self.write(b, false),
        };
        for w in writtens.drain(..) {
            w(res.clone());
        }
        if let Err(e) = res {
            for d in durables.callbacks.drain(..) {
                d(Err(e.clone()));
            }
            *durables = Durables::default();
        }
    }

    /// One fsync of the WAL for every append written in this drain, and only then their
    /// durability callbacks. It also covers the unsynced writes queued between them (audit
    /// records, the committed index).
    fn sync_appends(&self, durables: Durables) {
        if durables.callbacks.is_empty() {
            return;
        }
        if let Some(e) = self.stopped.error() {
            // A write earlier in this drain failed: none of these appends may be called durable.
            for d in durables.callbacks {
                d(Err(e.clone()));
            }
            return;
        }
        let started = std::time::Instant::now();
        let res = self.sync_wal();
        match &res {
            Ok(()) => {
                self.metrics
                    .group_commit(started.elapsed(), durables.entries, durables.bytes)
            }
            Err(e) => {
                self.metrics.write_failed();
                let n = durables.callbacks.len();
                tracing::error!(error = %e, "WAL fsync failed; failing {n} appends, the store stops");
                // Never retried: a second fsync could succeed without the pages the first lost.
                self.stopped.set("WAL sync", e);
            }
        }
        let res = self.stopped.error().map_or(res, Err);
        for d in durables.callbacks {
            d(res.clone());
        }
    }

    fn apply_other(&mut self, op: Op) {
        match op {
            Op::Append { .. } => unreachable!("appends are batched in process()"),
            Op::Truncate { from, done } => done(self.truncate(from)),
            Op::Purge {
                upto,
                last_purged,
                done,
            } => done(self.purge(upto, last_purged)),
            Op::SaveVote { vote, done } => done(self.put_meta(META_VOTE, &vote, true)),
            Op::SaveCommitted { committed, done } => {
                done(self.put_meta(META_COMMITTED, &committed, false))
            }
            Op::SaveSnapshot {
                meta,
                data,
                installed_at,
                done,
            } => done(self.save_snapshot(meta, data, installed_at)),
            Op::Audit { records, done } => done(self.audit(records)),
            Op::Sync { done } => done(self.sync_now()),
            Op::Retain { upto, done } => done(self.retain(upto)),
        }
    }

    /// The group commit's fsync. The failpoints sit on both sides of it: a failure before it and
    /// a crash or failure after it, before any append is acknowledged.
    fn sync_wal(&self) -> Result<(), StoreError> {
        fail::fail_point!("store::wal_sync", |arg| Err(crate::failpoints::injected(
            "store::wal_sync",
            arg
        )));
        self.db.flush_wal(true)?;
        fail::fail_point!("store::after_wal_sync", |arg| Err(
            crate::failpoints::injected("store::after_wal_sync", arg)
        ));
        Ok(())
    }

    /// A WAL fsync on request ([`Op::Sync`]); a failure stops the store as the group commit's
    /// does.
    fn sync_now(&self) -> Result<(), StoreError> {
        let res = self.sync_wal();
        if let Err(e) = &res {
            self.metrics.write_failed();
            tracing::error!(error = %e, "WAL fsync failed; the store stops");
            self.stopped.set("WAL sync", e);
        }
        res
    }

    fn cf(&self, name: &'static str) -> Result<&rocksdb::ColumnFamily, StoreError> {
        self.db.cf_handle(name).ok_or_else(|| missing_cf(name))
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), StoreError> {
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        let res = self.db.write_opt(batch, &wo).map_err(StoreError::from);
        self.failed_if(res)
    }

    /// Counts a failed write and stops the writer on it (module doc).
    fn failed_if(&self, res: Result<(), StoreError>) -> Result<(), StoreError> {
        if let Err(e) = &res {
            self.metrics.write_failed();
            tracing::error!(error = %e, "a store write failed; the store stops");
            self.stopped.set("write", e);
        }
        res
    }

    fn put_meta(&self, key: &[u8], value: &[u8], sync: bool) -> Result<(), StoreError> {
        let mut b = WriteBatch::default();
        b.put_cf(self.cf(CF_META)?, key, value);
        self.write(b, sync)
    }

    fn truncate(&self, from: u64) -> Result<(), StoreError> {
        let mut b = WriteBatch::default();
        b.delete_range_cf(self.cf(CF_LOG)?, index_key(from), index_key(u64::MAX));
        // u64::MAX itself is excluded by the range end; no raft index ever gets there.
        self.write(b, false)
    }

    fn purge(&self, upto: u64, last_purged: Vec<u8>) -> Result<(), StoreError> {
        fail::fail_point!("store::log_purge", |arg| {
            let e = crate::failpoints::injected("store::log_purge", arg);
            self.failed_if(Err(e))
        });
        let mut b = WriteBatch::default();
        // last_purged and the deletion land atomically, so log state never shows a hole.
        b.put_cf(self.cf(CF_META)?, META_LAST_PURGED, last_purged);
        b.delete_range_cf(
            self.cf(CF_LOG)?,
            index_key(0),
            index_key(upto.saturating_add(1)),
        );
        self.write(b, false)
    }

    fn save_snapshot(
        &mut self,
        meta: Vec<u8>,
        data: Vec<u8>,
        installed_at: Option<u64>,
    ) -> Result<(), StoreError> {
        if installed_at.is_some() {
            fail::fail_point!("store::snapshot_install", |arg| self.failed_if(Err(
                crate::failpoints::injected("store::snapshot_install", arg)
            )));
        }
        let mut b = WriteBatch::default();
        let new_base = installed_at.map(|index| (index, snapshot_digest(index, &data)));
        if let Some((index, digest)) = new_base {
            let mut v = index.to_be_bytes().to_vec();
            v.extend_from_slice(&digest);
            b.put_cf(self.cf(CF_META)?, META_AUDIT_BASE, v);
        }
        let cf = self.cf(CF_SNAPSHOT)?;
        // The installed state is where this node's history restarts: keep it as a checkpoint so
        // replay and verification can start there (the snapshot slot itself is overwritten).
        if let Some((index, digest)) = new_base {
            if self.audit_head.is_none_or(|(h, _)| h < index) {
                let cp = Checkpoint {
                    index,
                    kind: CheckpointKind::Installed,
                    audit_digest: digest,
                    state: data.clone(),
                };
                b.put_cf(cf, checkpoint_key(index), cp.encode());
            }
        }
        b.put_cf(cf, SNAPSHOT_META, meta);
        b.put_cf(cf, SNAPSHOT_DATA, data);
        self.write(b, true)?;
        if let Some((index, digest)) = new_base {
            if self.audit_head.is_none_or(|(h, _)| h < index) {
                self.audit_head = Some((index, digest));
            }
        }
        Ok(())
    }

    fn audit(&mut self, records: Vec<AuditInput>) -> Result<(), StoreError> {
        fail::fail_point!("store::audit_write", |arg| {
            let e = crate::failpoints::injected("store::audit_write", arg);
            self.failed_if(Err(e))
        });
        let cf = self.cf(CF_AUDIT)?;
        let mut b = WriteBatch::default();
        let mut head = self.audit_head;
        for input in records {
            match head {
                Some((h, _)) if input.index <= h => {
                    // Re-applied after a restart (the state machine resumes from its snapshot).
                    // History is immutable: keep the first record, but report divergence.
                    self.check_reapplied(&input);
                    continue;
                }
                Some((h, _)) if input.index != h + 1 => {
                    // Not expected in a running node (apply is contiguous from the last applied
                    // entry or snapshot); readers see the hole from the indexes. Chain across it.
                    tracing::warn!(index = input.index, head = h, "audit chain has a gap");
                }
                _ => {}
            }
            let prev = head.map(|(_, d)| d).unwrap_or(GENESIS_DIGEST);
            let index = input.index;
            let (rec, value) = input.seal(prev);
            b.put_cf(cf, index_key(index), value);
            head = Some((index, rec.digest));
        }
        self.write(b, false)?;
        self.audit_head = head;
        Ok(())
    }

    fn retain(&self, upto: u64) -> Result<(), StoreError> {
        let reader = StoreReader::new(self.db.clone(), std::path::PathBuf::new());
        let Some(base) = reader.checkpoint_at_or_below(upto)? else {
            return Ok(());
        };
        if base.index == 0 || reader.audit_retained_from()? >= Some(base.index) {
            return Ok(());
        }
        let mut b = WriteBatch::default();
        // Records, and checkpoints below the base, go in one batch with the marker, so no reader
        // sees a cut chain without the marker that makes it legitimate.
        b.delete_range_cf(
            self.cf(CF_AUDIT)?,
            index_key(0),
            index_key(base.index.saturating_add(1)),
        );
        b.delete_range_cf(
            self.cf(CF_SNAPSHOT)?,
            checkpoint_key(0),
            checkpoint_key(base.index),
        );
        b.put_cf(
            self.cf(CF_META)?,
            META_AUDIT_RETAINED,
            index_key(base.index),
        );
        self.write(b, false)?;
        tracing::info!(base = base.index, "audit retention removed older records");
        Ok(())
    }

    fn check_reapplied(&self, input: &AuditInput) {
        let Ok(cf) = self.cf(CF_AUDIT) else { return };
        match self.db.get_cf(cf, index_key(input.index)) {
            Ok(Some(v)) => match AuditRecord::decode(&v) {
                Ok(rec) if rec.entry == input.entry && rec.outcome == input.outcome => {}
                Ok(_) => tracing::error!(
                    index = input.index,
                    "re-applied entry differs from its audit record"
                ),
                Err(e) => {
                    tracing::error!(index = input.index, error = %e, "audit record unreadable")
                }
            },
            // Below a snapshot install point there is no record to compare with.
            Ok(None) => {}
            Err(e) => tracing::warn!(index = input.index, error = %e, "audit read failed"),
        }
    }
}
