//! The checkpointer: a second copy of the state, kept on its own thread one step behind the live
//! one, from which audit checkpoints and raft snapshot data are encoded.
//!
//! Why: encoding the whole state takes tens of milliseconds once it holds tens of thousands of
//! objects. Done inside `apply` (a checkpoint every 10,000 commands) or under the state's read
//! lock (a raft snapshot), it held up every write in flight and doubled the API's p99. Here the
//! live state is never locked for it: this thread re-applies exactly the commands the live state
//! applied, with the same indexes (core is deterministic, so the copy is the live state as it was
//! when those commands were applied), and encodes its own copy. The price is a second apply per
//! command and a second copy of the state in memory.
//!
//! The thread runs at a lower scheduling priority than the rest of the node: it is maintenance,
//! and on a busy machine serving writes comes first. Its lag is bounded
//! ([`MAX_LAG_COMMANDS`]): past it, `apply` waits for the copy to catch up, so memory stays
//! bounded and a checkpoint is never more than that far behind.
//!
//! Must not: decide anything, or write anything but checkpoints, retention cuts and the bytes of
//! snapshots it is asked for. Jobs are handled strictly in the order they were sent, so a snapshot
//! or a flush reflects every command applied before it was requested.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fedraft_core::command::LogEntry;
use fedraft_core::state::State;
use fedraft_store::{Store, StoreError};
use tokio::sync::oneshot;

use crate::audit::{checkpoint_interval, AuditOptions};
use crate::types::{AppliedEntry, LogId, StoredMembership};

/// Commands handed over but not yet applied to the copy beyond which `apply` waits for it. At
/// about 1 KB queued per command this bounds the queue near 20 MB; replaying this many commands
/// takes a fraction of a second, so a state at a recent index stays fast to rebuild.
pub(crate) const MAX_LAG_COMMANDS: usize = 20_000;

/// How much lower the thread's priority is than the node's (a `nice` increment).
#[cfg(target_os = "linux")]
const NICE_INCREMENT: i32 = 10;

/// The state's bytes with the raft position they belong to.
pub(crate) struct EncodedState {
    pub data: Vec<u8>,
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
}

enum Job {
    /// What one `apply` call applied, and the raft position after it.
    Applied {
        commands: Vec<Arc<AppliedEntry>>,
        last_applied: Option<LogId>,
        membership: StoredMembership,
    },
    /// The live state was replaced wholesale (a snapshot from the leader): start from it.
    Reset {
        state: Box<State>,
        last_applied: Option<LogId>,
        membership: StoredMembership,
    },
    /// Encode the state as it is after every job sent before this one.
    Encode(oneshot::Sender<EncodedState>),
    /// Answer once every job sent before this one is done.
    Flush(oneshot::Sender<()>),
}

/// The live side's handle. Dropping the last one lets the thread finish its queue and exit.
pub(crate) struct Checkpointer {
    /// `None` only while dropping.
    jobs: Option<crossbeam_channel::Sender<Job>>,
    /// Joined on drop: the thread holds the store, and the last holder closes the database. That
    /// must not happen on a detached thread racing the process's exit (RocksDB aborts when its
    /// locks are torn down under it).
    thread: Option<std::thread::JoinHandle<()>>,
    /// The first failure to write a checkpoint or cut the archive. Storage that refuses writes
    /// stops the node; `apply` reports it on its next call.
    failed: Arc<Mutex<Option<String>>>,
    /// Commands handed over and not yet applied to the copy.
    lag: Arc<AtomicUsize>,
    /// Signalled by the thread after every job, for `catch_up`.
    progress: Arc<tokio::sync::Notify>,
}

impl Checkpointer {
    /// Starts the thread with a copy of the state the live side starts from.
    pub fn start(
        store: Store,
        audit: AuditOptions,
        state: State,
        last_applied: Option<LogId>,
        membership: StoredMembership,
    ) -> std::io::Result<Checkpointer> {
        let (jobs, rx) = crossbeam_channel::unbounded();
        let failed = Arc::new(Mutex::new(None));
        let lag = Arc::new(AtomicUsize::new(0));
        let progress = Arc::new(tokio::sync::Notify::new());
        let next_checkpoint = first_checkpoint(audit.checkpoint_every_commands, &state);
        let mut copy = StateCopy {
            store,
            audit,
            next_checkpoint,
            state,
            last_applied,
            membership,
            failed: failed.clone(),
            lag: lag.clone(),
            progress: progress.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("fedraft-checkpoint".into())
            .spawn(move || {
                lower_priority();
                // Whatever ends the thread (its queue closed, or a panic), nobody may wait on
                // it afterwards.
                let _exit = ExitGuard {
                    failed: copy.failed.clone(),
                    progress: copy.progress.clone(),
                };
                for job in rx {
                    copy.handle(job);
                }
            })?;
        Ok(Checkpointer {
            jobs: Some(jobs),
            thread: Some(thread),
            failed,
            lag,
            progress,
        })
    }

    /// Hands over what one `apply` call applied.
    pub fn applied(
        &self,
        commands: Vec<Arc<AppliedEntry>>,
        last_applied: Option<LogId>,
        membership: StoredMembership,
    ) {
        self.lag.fetch_add(commands.len(), Ordering::Relaxed);
        self.send(Job::Applied {
            commands,
            last_applied,
            membership,
        });
    }

    pub fn reset(&self, state: State, last_applied: Option<LogId>, membership: StoredMembership) {
        self.send(Job::Reset {
            state: Box::new(state),
            last_applied,
            membership,
        });
    }

    /// The state's bytes after everything handed over so far; `None` if the thread is gone.
    pub async fn encode(&self) -> Option<EncodedState> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Encode(tx));
        rx.await.ok()
    }

    /// Waits until every checkpoint due for what was handed over so far is written.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Flush(tx));
        let _ = rx.await;
    }

    /// Whether the copy is more than [`MAX_LAG_COMMANDS`] behind.
    pub fn lagging(&self) -> bool {
        self.lag.load(Ordering::Relaxed) > MAX_LAG_COMMANDS
    }

    /// Waits while the copy is more than [`MAX_LAG_COMMANDS`] behind: back within the bound,
    /// not all the way (that would stall the caller for the whole backlog).
    pub async fn catch_up(&self) {
        if self.lagging() {
            tracing::debug!(
                lag = self.lag.load(Ordering::Relaxed),
                "apply waits for the checkpoint thread"
            );
        }
        loop {
            let progressed = self.progress.notified();
            tokio::pin!(progressed);
            // Registered before the check, so progress made in between is not missed.
            progressed.as_mut().enable();
            if !self.lagging() || self.failure().is_some() {
                return;
            }
            progressed.await;
        }
    }

    pub fn failure(&self) -> Option<String> {
        lock(&self.failed).clone()
    }

    fn send(&self, job: Job) {
        // The thread only ends when every sender is gone, or after a panic; the failure then
        // surfaces through `failure` and the awaited replies.
        let sent = self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok());
        if !sent {
            fail(&self.failed, "the checkpoint thread stopped".into());
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

/// Marks the thread as gone when it ends, waking anyone in `catch_up`.
struct ExitGuard {
    failed: Arc<Mutex<Option<String>>>,
    progress: Arc<tokio::sync::Notify>,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            fail(&self.failed, "the checkpoint thread panicked".into());
        }
        self.progress.notify_waiters();
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

fn lock(m: &Mutex<Option<String>>) -> std::sync::MutexGuard<'_, Option<String>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn fail(failed: &Mutex<Option<String>>, why: String) {
    let mut g = lock(failed);
    if g.is_none() {
        tracing::error!(%why, "checkpointing failed; the node stops applying");
        *g = Some(why);
    }
}

/// The thread's side: the copy of the state and where its checkpoints go.
struct StateCopy {
    store: Store,
    audit: AuditOptions,
    /// The command index at which the next checkpoint is written.
    next_checkpoint: u64,
    state: State,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    failed: Arc<Mutex<Option<String>>>,
    lag: Arc<AtomicUsize>,
    progress: Arc<tokio::sync::Notify>,
}

impl StateCopy {
    fn handle(&mut self, job: Job) {
        match job {
            Job::Applied {
                commands,
                last_applied,
                membership,
            } => {
                for c in &commands {
                    self.apply(c);
                }
                self.lag.fetch_sub(commands.len(), Ordering::Relaxed);
                self.progress.notify_waiters();
                self.last_applied = last_applied;
                self.membership = membership;
            }
            Job::Reset {
                state,
                last_applied,
                membership,
            } => {
                self.state = *state;
                self.next_checkpoint =
                    first_checkpoint(self.audit.checkpoint_every_commands, &self.state);
                self.last_applied = last_applied;
                self.membership = membership;
            }
            Job::Encode(reply) => {
                let _ = reply.send(EncodedState {
                    data: self.state.to_snapshot(),
                    last_applied: self.last_applied,
                    membership: self.membership.clone(),
                });
            }
            Job::Flush(reply) => {
                let _ = reply.send(());
            }
        }
    }

    fn apply(&mut self, c: &AppliedEntry) {
        if lock(&self.failed).is_some() {
            return;
        }
        let expected = self.state.applied_index() + 1;
        if c.index != expected {
            // The live side numbers commands the same way; a gap means a lost job, after
            // which this copy is no longer the live state and must not be checkpointed.
            fail(
                &self.failed,
                format!("command {} arrived while {expected} was next", c.index),
            );
            return;
        }
        self.state.apply(c.index, c.entry());
        let every = self.audit.checkpoint_every_commands;
        if every > 0 && c.index >= self.next_checkpoint {
            match self.checkpoint(c.index) {
                Ok(bytes) => self.next_checkpoint = c.index + checkpoint_interval(every, bytes),
                Err(e) => fail(&self.failed, format!("checkpoint {}: {e}", c.index)),
            }
        }
    }

    /// Writes the checkpoint at `index`, then lets retention cut the archive (it cuts only at a
    /// checkpoint). Answers the checkpoint's size.
    fn checkpoint(&self, index: u64) -> Result<usize, StoreError> {
        let data = self.state.to_snapshot();
        let bytes = data.len();
        // Durable when this returns, and written beside the log appends, not among them.
        self.store.write_checkpoint_direct(index, data)?;
        let policy = self.audit.retention;
        if policy.keeps_everything() {
            return Ok(bytes);
        }
        let cut = self
            .store
            .reader()
            .retention_cut(policy, self.state.log_time_ms(), |r| {
                LogEntry::decode(&r.entry).ok().map(|e| e.timestamp_ms)
            })?;
        if let Some(cut) = cut {
            Store::wait(|d| self.store.retain_audit(cut, d))?;
        }
        Ok(bytes)
    }
}

/// The first multiple of `every` after the state's last command: where the next checkpoint goes
/// when no checkpoint size is known yet (at start, after a snapshot install).
fn first_checkpoint(every: u64, state: &State) -> u64 {
    let every = every.max(1);
    (state.applied_index() / every + 1) * every
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::command::Command;
    use fedraft_core::model::ClusterSpec;
    use fedraft_store::AuditInput;

    /// Applies `n` commands to `live`, archives them, and returns them as the live side hands
    /// them over, with the live state's bytes after every command.
    fn run(store: &Store, live: &mut State, n: u64) -> (Vec<Arc<AppliedEntry>>, Vec<Vec<u8>>) {
        let mut handed = Vec::new();
        let mut records = Vec::new();
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
            let applied = live.apply(index, &entry);
            records.push(AuditInput {
                index,
                term: 1,
                entry: entry.encode(),
                outcome: Vec::new(),
            });
            bytes.push(live.to_snapshot());
            handed.push(Arc::new(AppliedEntry::single(index, entry, applied)));
        }
        Store::wait(|d| store.write_audit(records, d)).unwrap();
        (handed, bytes)
    }

    /// A checkpointer over `store` starting from the empty state, checkpointing every `every`.
    fn start_empty(store: &Store, every: u64) -> Checkpointer {
        let audit = AuditOptions {
            checkpoint_every_commands: every,
            ..AuditOptions::default()
        };
        Checkpointer::start(
            store.clone(),
            audit,
            State::new(),
            None,
            StoredMembership::default(),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn checkpoints_and_snapshots_are_the_live_state_at_their_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "t").unwrap();
        let mut live = State::new();
        let cp = start_empty(&store, 4);
        let mut all = Vec::new();
        for chunk in [3, 7, 1, 5] {
            let (handed, bytes) = run(&store, &mut live, chunk);
            all.extend(bytes);
            cp.applied(handed, None, StoredMembership::default());
        }
        let encoded = cp.encode().await.unwrap();
        assert_eq!(encoded.data, live.to_snapshot());
        cp.flush().await;
        assert!(!cp.lagging());
        assert_eq!(cp.lag.load(Ordering::Relaxed), 0);
        let reader = store.reader();
        assert_eq!(reader.checkpoint_indexes().unwrap(), vec![4, 8, 12, 16]);
        for i in [4u64, 8, 12, 16] {
            let c = reader.checkpoint(i).unwrap().unwrap();
            assert_eq!(c.state, all[i as usize - 1], "checkpoint {i}");
        }
        assert_eq!(cp.failure(), None);
    }

    #[tokio::test]
    async fn a_growing_state_stretches_the_interval_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "t").unwrap();
        let mut live = State::new();
        let every = 2;
        let cp = start_empty(&store, every);
        let (handed, bytes) = run(&store, &mut live, 600);
        cp.applied(handed, None, StoredMembership::default());
        cp.flush().await;
        let at = store.reader().checkpoint_indexes().unwrap();
        assert_eq!(
            &at[..2],
            &[2, 4],
            "a small state keeps the configured interval"
        );
        let gaps: Vec<u64> = at.windows(2).map(|w| w[1] - w[0]).collect();
        for (w, gap) in at.windows(2).zip(&gaps) {
            let size = bytes[w[0] as usize - 1].len();
            assert_eq!(
                *gap,
                checkpoint_interval(every, size),
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

    #[tokio::test]
    async fn a_reset_replaces_the_copy_and_a_gap_stops_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), "t").unwrap();
        let mut live = State::new();
        let cp = start_empty(&store, 2);
        // The live side jumps ahead (as after installing a snapshot) and says so.
        let (_, _) = run(&store, &mut live, 5);
        cp.reset(live.clone(), None, StoredMembership::default());
        let (handed, _) = run(&store, &mut live, 3);
        cp.applied(handed, None, StoredMembership::default());
        assert_eq!(cp.encode().await.unwrap().data, live.to_snapshot());
        cp.flush().await;
        assert_eq!(store.reader().checkpoint_indexes().unwrap(), vec![6, 8]);

        // A command that does not follow the copy's index means the copy is no longer the
        // live state: no checkpoint from it, and the failure is reported.
        let (mut handed, _) = run(&store, &mut live, 4);
        handed.remove(0);
        cp.applied(handed, None, StoredMembership::default());
        cp.flush().await;
        assert!(cp.failure().unwrap().contains("arrived while 9 was next"));
        assert_eq!(store.reader().checkpoint_indexes().unwrap(), vec![6, 8]);
    }
}
