//! The leader's proposal batcher: packs every proposal that queued up while earlier raft
//! entries were being written into one entry (`EntryBatch`).
//!
//! Why: openraft 0.9 appends each client write with its own fsync and waits for it before taking
//! the next, so one command per raft entry caps throughput at one command per fsync. Must not
//! reorder proposals or split one proposer's outcome from its command.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use fedraft_core::command::LogEntry;
use fedraft_core::state::Applied;
use openraft::error::{ClientWriteError, RaftError as OrRaftError};

use crate::error::{write_error, RaftError};
use crate::metrics::{NodeMetrics, ProposalOutcome};
use crate::state_machine::SmShared;
use crate::types::{EntryBatch, Proposal, Raft};

/// Most commands packed into one raft entry: ~64 KiB of typical 256-byte commands, well inside
/// one AppendEntries message.
pub(crate) const MAX_BATCH_COMMANDS: usize = 256;
/// Raft entries proposed but not yet committed at once. openraft 0.9 writes them one after the
/// other; while they are in flight, new proposals queue and form the next batch.
pub(crate) const MAX_BATCHES_IN_FLIGHT: usize = 2;
/// Proposals waiting for a batch before proposers themselves wait (backpressure).
pub(crate) const BATCH_QUEUE_PROPOSALS: usize = 8192;

/// A proposal waiting in the batcher, with where its outcome goes.
pub(crate) struct Pending {
    pub proposal: Proposal,
    pub reply: tokio::sync::oneshot::Sender<BatchOutcome>,
}

pub(crate) enum BatchOutcome {
    Applied(Applied),
    /// Leadership moved before the entry was appended: nothing was written, retry elsewhere.
    NotLeader,
    Failed(RaftError),
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How much faster than the monotonic clock log time may run while it catches up with a wall
/// clock that stepped forward (as a fraction: 1/4 = 25 % faster).
const CATCH_UP_DIVISOR: u64 = 4;

/// The leader's log time: its wall clock, never below what was applied before, and never running
/// ahead of its own monotonic clock by more than [`CATCH_UP_DIVISOR`]. A wall clock that leaps
/// forward (a bad NTP step, a VM resumed with a stale offset) would otherwise move log time by
/// the leap in one entry and expire every cluster's health deadline at once; bounded, log time
/// catches up gradually and a 30 s failure threshold still needs at least 24 s of real silence.
#[derive(Debug, Default)]
struct LogClock {
    /// The last stamp given here and the monotonic instant it was given at.
    last: Option<(u64, Instant)>,
}

impl LogClock {
    fn stamp(&mut self, wall_ms: u64, now: Instant, floor_ms: u64) -> u64 {
        let mut stamp = wall_ms.max(floor_ms);
        if let Some((last_ms, at)) = self.last {
            let elapsed = now.saturating_duration_since(at).as_millis() as u64;
            let ceiling = last_ms + elapsed + elapsed / CATCH_UP_DIVISOR;
            stamp = stamp.min(ceiling).max(last_ms).max(floor_ms);
        }
        self.last = Some((stamp, now));
        stamp
    }
}

/// Packs queued proposals into raft entries: waits for a free in-flight slot, takes everything
/// queued (up to `MAX_BATCH_COMMANDS`), stamps it with the leader's time and writes it as one
/// entry. Each proposer gets its own command's outcome.
pub(crate) async fn run_batcher(
    raft: Raft,
    sm: Arc<SmShared>,
    mut rx: tokio::sync::mpsc::Receiver<Pending>,
    metrics: NodeMetrics,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_BATCHES_IN_FLIGHT));
    let mut clock = LogClock::default();
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else { return };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_COMMANDS {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        // Never below anything stamped here or applied anywhere before (a new leader's clock
        // may be behind the old one's).
        let floor = sm.last_timestamp_ms.load(Ordering::Relaxed);
        let last_stamp_ms = clock.stamp(now_ms(), Instant::now(), floor);
        let (entries, replies): (Vec<LogEntry>, Vec<_>) = batch
            .into_iter()
            .map(|p| {
                let q = p.proposal;
                (
                    LogEntry::new(q.request_id, q.actor, last_stamp_ms, q.command),
                    p.reply,
                )
            })
            .unzip();
        metrics.entry_proposed(entries.len());
        let raft = raft.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let result = raft.client_write(EntryBatch::new(entries)).await;
            let outcome = match &result {
                Ok(resp) if resp.data.0.len() == replies.len() => ProposalOutcome::Applied,
                Err(OrRaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                    ProposalOutcome::NotLeader
                }
                _ => ProposalOutcome::Failed,
            };
            metrics.proposals(outcome, replies.len());
            match result {
                Ok(resp) if resp.data.0.len() == replies.len() => {
                    for (reply, applied) in replies.into_iter().zip(resp.data.0) {
                        let _ = reply.send(BatchOutcome::Applied(applied));
                    }
                }
                Ok(resp) => {
                    let msg = format!(
                        "entry {} answered {} outcomes for {} commands",
                        resp.log_id,
                        resp.data.0.len(),
                        replies.len()
                    );
                    for reply in replies {
                        let _ = reply.send(BatchOutcome::Failed(RaftError::Fatal(msg.clone())));
                    }
                }
                Err(OrRaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                    for reply in replies {
                        let _ = reply.send(BatchOutcome::NotLeader);
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(BatchOutcome::Failed(write_error(e.clone())));
                    }
                }
            }
        });
    }
}

#[cfg(test)]
mod clock_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_forward_leap_of_the_wall_clock_is_absorbed_gradually() {
        let t0 = Instant::now();
        let mut c = LogClock::default();
        assert_eq!(c.stamp(1_000_000, t0, 0), 1_000_000);
        // One second later the wall clock leaps 65 s ahead: log time moves 1.25 s at most.
        let s1 = c.stamp(1_066_000, t0 + Duration::from_secs(1), 0);
        assert_eq!(s1, 1_001_250);
        // It keeps catching up at most 25 % faster than real time.
        let s2 = c.stamp(1_070_000, t0 + Duration::from_secs(5), 0);
        assert_eq!(s2, 1_001_250 + 5_000);
    }

    #[test]
    fn never_below_the_floor_or_the_last_stamp() {
        let t0 = Instant::now();
        let mut c = LogClock::default();
        assert_eq!(c.stamp(5_000, t0, 9_000), 9_000);
        // The wall clock went back: log time holds.
        assert_eq!(c.stamp(1_000, t0 + Duration::from_millis(10), 0), 9_000);
        // A newer applied stamp (another leader's) lifts it.
        assert_eq!(
            c.stamp(1_000, t0 + Duration::from_millis(20), 12_000),
            12_000
        );
    }
}
