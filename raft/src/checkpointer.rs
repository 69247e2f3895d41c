//! The checkpointer: encodes images of the state ([`StateImage`]) on its own thread, into audit
//! checkpoints and raft snapshot data, and runs retention after each checkpoint.
//!
//! Why: encoding the whole state takes hundreds of milliseconds once it holds 10^5 objects.
//! Done inside `apply` or under the state's lock, it held up every write in flight and doubled
//! the API's p99. Here the live side only takes an image (`State::image`: the replicated tables
//! with their objects shared, tens of milliseconds at 10^5 objects, once per checkpoint), and this
//! thread encodes and writes it while the live state moves on. An earlier design kept a second
//! copy of the state here and re-applied every command to it: about 7% of a loaded cluster's
//! CPU, spent all the time, for a checkpoint every 100,000 commands.
//!
//! When: the live side asks [`Checkpointer::claim_due`] after each command. At most one
//! checkpoint is in flight: claiming one makes nothing due until it is written, and the thread
//! then schedules the next one, [`checkpoint_interval`] commands after it, rounded up to this
//! node's [`Grid`], so the nodes of a cluster keep taking their images at different commands.
//! Memory stays bounded (one image) and a busy node never queues checkpoints behind each other.
//! A snapshot installed while one is being written restarts the schedule; at worst one extra
//! checkpoint follows.
//!
//! The thread runs at a lower scheduling priority than the rest of the node: it is maintenance,
//! and on a busy machine serving writes comes first.
//!
//! Every checkpoint's image carries a copy of the state's derived indexes, and the thread checks
//! them against a rebuild from the data (`StateImage::check_consistency`) before writing it: a
//! mismatch (booked capacity, placements, alarms that drifted from the data) stops the node
//! the way a failed write does, before a checkpoint of a state that cannot be trusted is written.
//! Cost at 10^5 objects: docs/performance.md (the copy is taken under the state's lock).
//!
//! Must not: decide anything, or write anything but checkpoints and retention cuts. Jobs are
//! handled strictly in the order they were sent, so a flush answers after every checkpoint sent
//! before it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fedraft_core::command::LogEntry;
use fedraft_core::state::{State, StateImage};
use fedraft_store::{Store, StoreError};
use tokio::sync::oneshot;

use crate::audit::{checkpoint_interval, AuditOptions};
use crate::failure::FirstFailure;
use crate::metrics::{ImageKind, ImageMetrics};

/// What `next` holds while no checkpoint can be due: one is being written, or checkpoints are
/// off.
const NONE_DUE: u64 = u64::MAX;

/// How much lower the thread's priority is than the node's (a `nice` increment).
#[cfg(target_os = "linux")]
const NICE_INCREMENT: i32 = 10;

enum Job {
    /// Write this image as the checkpoint at its index, then let retention cut the archive.
    Checkpoint(StateImage),
    /// Encode this image (a raft snapshot's data).
    Encode(StateImage, oneshot::Sender<Vec<u8>>),
    /// Answer once every job sent before this one is done.
    Flush(oneshot::Sender<()>),
}

/// The live side's handle. Dropping it lets the thread finish its queue and exit.
pub(crate) struct Checkpointer {
    /// `None` only while dropping.
    jobs: Option<crossbeam_channel::Sender<Job>>,
    /// Joined on drop: the thread holds the store, and the last holder closes the database. That
    /// must not happen on a detached thread racing the process's exit (RocksDB aborts when its
    /// locks are torn down under it).
    thread: Option<std::thread::JoinHandle<()>>,
    /// The first failure to write a checkpoint or cut the archive. Storage that refuses writes
    /// stops the node; `apply` reports it on its next call.
    failed: Arc<FirstFailure>,
    /// The command index from which the next checkpoint is due, or [`NONE_DUE`].
    next: Arc<AtomicU64>,
    /// Where checkpoints may go.
    grid: Grid,
}

impl Checkpointer {
    /// Starts the thread; the first checkpoint is due at the next multiple of the interval after
    /// `state`.
    pub fn start(
        store: Store,
        audit: AuditOptions,
        state: &State,
        metrics: ImageMetrics,
    ) -> std::io::Result<Checkpointer> {
        let (jobs, rx) = crossbeam_channel::unbounded();
        let failed = Arc::new(FirstFailure::default());
        let grid = Grid::of(&audit);
        let next = Arc::new(AtomicU64::new(grid.first_after(state.applied_index())));
        let writer = CheckpointWriter {
            store,
            audit,
            grid,
            failed: failed.clone(),
            next: next.clone(),
            metrics,
        };
        let thread = std::thread::Builder::new()
            .name("fedraft-checkpoint".into())
            .spawn(move || {
                lower_priority();
                let _panic = PanicGuard(writer.failed.clone());
                for job in rx {
                    writer.handle(job);
                }
            })?;
        Ok(Checkpointer {
            jobs: Some(jobs),
            thread: Some(thread),
            failed,
            next,
            grid,
        })
    }

    /// Whether a checkpoint is due now that command `index` is applied. If it is, the caller
    /// owes a [`Handoff`] an image at that index, once the index's audit record is written (a
    /// checkpoint is bound to it); nothing else is due until that one is written. Only the
    /// applying side calls this.
    pub fn claim_due(&self, index: u64) -> bool {
        let due = index >= self.next.load(Ordering::Acquire);
        if due {
            self.next.store(NONE_DUE, Ordering::Release);
        }
        due
    }

    /// A handle for handing over a checkpoint from elsewhere (the store's writer thread, once
    /// the checkpoint's audit record is written), or reporting that it never will be.
    pub fn handoff(&self) -> Option<Handoff> {
        Some(Handoff {
            jobs: self.jobs.as_ref()?.clone(),
            failed: self.failed.clone(),
        })
    }

    /// The live state was replaced wholesale (a snapshot from the leader): checkpoints restart
    /// from it. A checkpoint still being written does not move this schedule.
    pub fn restart_from(&self, state: &State) {
        self.next.store(
            self.grid.first_after(state.applied_index()),
            Ordering::Release,
        );
    }

    /// The image's bytes, encoded on the thread; `None` if the thread is gone.
    pub async fn encode(&self, image: StateImage) -> Option<Vec<u8>> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Encode(image, tx));
        rx.await.ok()
    }

    /// Waits until every checkpoint handed over so far is written.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Flush(tx));
        let _ = rx.await;
    }

    pub fn failure(&self) -> Option<String> {
        self.failed.get()
    }

    fn send(&self, job: Job) {
        // The thread only ends when the sender is gone, or after a panic; the failure then
        // surfaces through `failure` and the awaited replies.
        let sent = self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok());
        if !sent {
            self.failed.record("the checkpoint thread stopped".into());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Closing the queue lets the thread finish what it holds and exit.
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Hands a claimed checkpoint's image to the thread (see [`Checkpointer::handoff`]).
pub(crate) struct Handoff {
    jobs: crossbeam_channel::Sender<Job>,
    failed: Arc<FirstFailure>,
}

impl Handoff {
    pub fn checkpoint(self, image: StateImage) {
        if self.jobs.send(Job::Checkpoint(image)).is_err() {
            self.failed.record("the checkpoint thread stopped".into());
        }
    }
}

/// Records a panic of the thread as its failure, so the next apply stops the node.
struct PanicGuard(Arc<FirstFailure>);

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.record("the checkpoint thread panicked".into());
        }
    }
}

/// Lowers the calling thread's scheduling priority (Linux: `nice` applies per thread). Failing
/// to is harmless: the thread then competes like any other.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take no pointers and only affect this thread.
        let r = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, NICE_INCREMENT)
        };
        if r != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "could not lower the checkpoint thread's priority"
            );
        }
    }
}

/// The thread's side: where checkpoints go and when the next one is due.
struct CheckpointWriter {
    store: Store,
    audit: AuditOptions,
    /// Where the next checkpoint may go (from `audit`).
    grid: Grid,
    failed: Arc<FirstFailure>,
    next: Arc<AtomicU64>,
    metrics: ImageMetrics,
}

impl CheckpointWriter {
    fn handle(&self, job: Job) {
        match job {
            Job::Checkpoint(image) => {
                if self.failed.get().is_some() {
                    return;
                }
                let index = image.applied_index();
                if let Err(e) = image.check_consistency() {
                    self.failed
                        .record(format!("state check at checkpoint {index}: {e}"));
                    return;
                }
                let started = std::time::Instant::now();
                match self.checkpoint(&image) {
                    Ok(bytes) => {
                        let took = started.elapsed();
                        self.metrics.encoded(ImageKind::Checkpoint, took, bytes);
                        let interval = checkpoint_interval(self.grid.every, bytes);
                        let next = self.grid.at_or_after(index.saturating_add(interval));
                        // Only if the schedule is still waiting for this checkpoint: a restart
                        // from an installed snapshot has set its own meanwhile.
                        let _ = self.next.compare_exchange(
                            NONE_DUE,
                            next,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                    }
                    Err(e) => self.failed.record(format!("checkpoint {index}: {e}")),
                }
            }
            Job::Encode(image, reply) => {
                let started = std::time::Instant::now();
                let data = image.to_snapshot();
                let took = started.elapsed();
                self.metrics.encoded(ImageKind::Snapshot, took, data.len());
                let _ = reply.send(data);
            }
            Job::Flush(reply) => {
                let _ = reply.send(());
            }
        }
    }

    /// Writes the checkpoint, then lets retention cut the archive (it cuts only at a
    /// checkpoint). Answers the checkpoint's size.
    fn checkpoint(&self, image: &StateImage) -> Result<usize, StoreError> {
        let data = image.to_snapshot();
        let bytes = data.len();
        // Durable when this returns, and written beside the log appends, not among them.
        self.store
            .write_checkpoint_direct(image.applied_index(), data)?;
        let policy = self.audit.retention;
        if policy.keeps_everything() {
            return Ok(bytes);
        }
        let cut = self
            .store
            .reader()
            .retention_cut(policy, image.log_time_ms(), |r| {
                LogEntry::decode(&r.entry).ok().map(|e| e.timestamp_ms)
            })?;
        if let Some(cut) = cut {
            Store::wait(|d| self.store.retain_audit(cut, d))?;
        }
        Ok(bytes)
    }
}

/// The command indexes a node's checkpoints may go at: `offset` past multiples of `every`
/// (`checkpoint_offset` and `checkpoint_every_commands`). Rounding up to it adds less than
/// `every` commands to an interval, so the replay a state needs stays within
/// `MAX_CHECKPOINT_STRETCH + 1` intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grid {
    /// 0 = never.
    every: u64,
    /// Below `every`.
    offset: u64,
}

impl Grid {
    fn of(audit: &AuditOptions) -> Grid {
        let every = audit.checkpoint_every_commands;
        Grid {
            every,
            offset: audit.checkpoint_offset.checked_rem(every).unwrap_or(0),
        }
    }

    /// The first grid index at or after `index`, or [`NONE_DUE`] when checkpoints are off.
    fn at_or_after(self, index: u64) -> u64 {
        if self.every == 0 {
            return NONE_DUE;
        }
        if index <= self.offset {
            return self.offset;
        }
        let steps = (index - self.offset).div_ceil(self.every);
        steps
            .checked_mul(self.every)
            .and_then(|d| d.checked_add(self.offset))
            .unwrap_or(NONE_DUE)
    }

    /// Where the next checkpoint goes when no checkpoint size is known yet (at start, after a
    /// snapshot install): the first grid index after the state's last command (index 0 holds no
    /// command).
    fn first_after(self, applied: u64) -> u64 {
        self.at_or_after(applied.saturating_add(1).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::command::Command;
    use fedraft_core::model::ClusterSpec;
    use fedraft_store::AuditInput;
    use std::collections::BTreeSet;

    /// Applies `n` commands to `live` the way the state machine does: each archived, then an
    /// image handed over when a checkpoint is due. With `settle`, waits for each checkpoint to
    /// be written, so where the next one falls does not depend on the thread's speed. Returns
    /// the live state's bytes after every command.
    async fn run(
        store: &Store,
        cp: &Checkpointer,
        live: &mut State,
        n: u64,
        settle: bool,
    ) -> Vec<Vec<u8>> {
        let mut bytes = Vec::new();
        for _ in 0..n {
            let index = live.applied_index() + 1;
            let command = if index.is_multiple_of(3) {
                Command::Tick
            } else {
                Command::RegisterCluster(ClusterSpec::new(
                    format!("dc{index}"),
                    "https://10.0.0.1:6443",
                ))
            };
            let entry = LogEntry::new("", "test", 1_000 * index, command);
            live.apply(index, &entry);
            let record = AuditInput {
                index,
                term: 1,
                entry: entry.encode(),
                outcome: Vec::new(),
            };
            Store::wait(|d| store.write_audit(vec![record], d)).unwrap();
            bytes.push(live.to_snapshot());
            if cp.claim_due(index) {
                cp.handoff().unwrap().checkpoint(live.image());
                if settle {
                    cp.flush().await;
                }
            }
        }
        bytes
    }

    /// A checkpointer over `store` starting from the empty state, checkpointing every `every`.
    fn start_empty(store: &Store, every: u64) -> Checkpointer {
        let audit = AuditOptions {
            checkpoint_every_commands: every,
            ..AuditOptions::default()
        };
        Checkpointer::start(store.clone(), audit, &State::new(), Default::default()).unwrap()
    }

    /// A fresh store and an empty live state with a checkpointer every `every` commands.
    fn setup(every: u64) -> (tempfile::TempDir, Store, State, Checkpointer) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "t").unwrap();
        let cp = start_empty(&store, every);
        (dir, store, State::new(), cp)
    }

    /// Each checkpoint at `at` holds the live state's bytes after its command (`all[i - 1]`).
    fn assert_checkpoints_hold(store: &Store, at: &[u64], all: &[Vec<u8>]) {
        let reader = store.reader();
        for i in at {
            let c = reader.checkpoint(*i).unwrap().unwrap();
            assert_eq!(c.state, all[*i as usize - 1], "checkpoint {i}");
        }
    }

    #[tokio::test]
    async fn checkpoints_and_snapshots_are_the_live_state_at_their_index() {
        let (_dir, store, mut live, cp) = setup(4);
        let all = run(&store, &cp, &mut live, 16, true).await;
        let image = live.image();
        // The live state moves on; the image does not.
        run(&store, &cp, &mut live, 2, true).await;
        assert_eq!(cp.encode(image).await.unwrap(), all[15]);
        let at = store.reader().checkpoint_indexes().unwrap();
        assert_eq!(at, vec![4, 8, 12, 16]);
        assert_checkpoints_hold(&store, &at, &all);
        assert_eq!(cp.failure(), None);
    }

    #[tokio::test]
    async fn a_growing_state_stretches_the_interval_by_its_size() {
        let every = 2;
        let (_dir, store, mut live, cp) = setup(every);
        let bytes = run(&store, &cp, &mut live, 600, true).await;
        let at = store.reader().checkpoint_indexes().unwrap();
        assert_eq!(
            &at[..2],
            &[2, 4],
            "a small state keeps the configured interval"
        );
        let gaps: Vec<u64> = at.windows(2).map(|w| w[1] - w[0]).collect();
        for (w, gap) in at.windows(2).zip(&gaps) {
            let size = bytes[w[0] as usize - 1].len();
            // Rounded up to the grid: here, to the next multiple of `every`.
            let interval = checkpoint_interval(every, size);
            assert_eq!(
                *gap,
                interval.div_ceil(every) * every,
                "after checkpoint {}",
                w[0]
            );
        }
        assert!(gaps.iter().any(|g| *g > every), "never stretched: {gaps:?}");
        assert!(
            gaps.iter()
                .any(|g| *g == every * crate::audit::MAX_CHECKPOINT_STRETCH),
            "never reached the cap: {gaps:?}"
        );
        assert_eq!(cp.failure(), None);
    }

    #[test]
    fn the_grid_puts_checkpoints_offset_past_multiples_of_the_interval() {
        let g = Grid {
            every: 10,
            offset: 3,
        };
        assert_eq!(g.first_after(0), 3);
        assert_eq!(g.first_after(3), 13);
        assert_eq!(g.at_or_after(13), 13);
        assert_eq!(g.at_or_after(14), 23);
        let plain = Grid {
            every: 10,
            offset: 0,
        };
        assert_eq!(plain.first_after(0), 10, "index 0 holds no command");
        assert_eq!(plain.first_after(10), 20);
        assert_eq!(plain.at_or_after(u64::MAX - 1), NONE_DUE, "no overflow");
        let off = Grid {
            every: 0,
            offset: 0,
        };
        assert_eq!(off.first_after(5), NONE_DUE);
    }

    #[test]
    fn the_nodes_of_a_cluster_checkpoint_at_different_commands() {
        let audit = AuditOptions::default();
        let grids: Vec<Grid> = (1..=3)
            .map(|id| Grid::of(&audit.staggered_for(id)))
            .collect();
        // Ten checkpoints in, whatever the interval stretched to, no two nodes share an index.
        for k in 0..10 {
            let at: BTreeSet<u64> = grids
                .iter()
                .map(|g| g.at_or_after(k * 37_000 + 1))
                .collect();
            assert_eq!(at.len(), 3, "{at:?}");
        }
        // Offsets stay inside the interval, also for an interval below the slot count.
        let tiny = AuditOptions {
            checkpoint_every_commands: 3,
            ..audit
        };
        for id in 0..10 {
            assert!(Grid::of(&tiny.staggered_for(id)).offset < 3);
        }
    }

    #[tokio::test]
    async fn a_staggered_node_checkpoints_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "t").unwrap();
        let audit = AuditOptions {
            checkpoint_every_commands: 4,
            ..AuditOptions::default()
        }
        .staggered_for(1);
        let cp =
            Checkpointer::start(store.clone(), audit, &State::new(), Default::default()).unwrap();
        let mut live = State::new();
        run(&store, &cp, &mut live, 12, true).await;
        assert_eq!(store.reader().checkpoint_indexes().unwrap(), vec![1, 5, 9]);
    }

    #[tokio::test]
    async fn one_checkpoint_at_a_time_and_each_is_the_state_at_its_index() {
        let (_dir, store, mut live, cp) = setup(1);
        // Without waiting: a checkpoint is due at every command, but only once the one before
        // it is written, however far the live side has moved meanwhile.
        let all = run(&store, &cp, &mut live, 300, false).await;
        cp.flush().await;
        let at = store.reader().checkpoint_indexes().unwrap();
        assert_eq!(at[0], 1);
        for w in at.windows(2) {
            assert!(w[1] > w[0], "{at:?}");
        }
        assert_checkpoints_hold(&store, &at, &all);
        assert_eq!(cp.failure(), None);
    }

    #[tokio::test]
    async fn a_restart_from_an_installed_state_reschedules_and_off_means_never() {
        let (_dir, store, mut live, cp) = setup(4);
        run(&store, &cp, &mut live, 5, true).await;
        // The live side jumps ahead (as after installing a snapshot at 9) and says so.
        let mut installed = State::new();
        run(&store, &start_empty(&store, 0), &mut installed, 9, true).await;
        cp.restart_from(&installed);
        assert!(!cp.claim_due(11));
        run(&store, &cp, &mut installed, 4, true).await;
        cp.flush().await;
        assert_eq!(store.reader().checkpoint_indexes().unwrap(), vec![4, 12]);

        let off = start_empty(&store, 0);
        assert!(!off.claim_due(u64::MAX - 1));
        assert_eq!(cp.failure(), None);
    }
}
