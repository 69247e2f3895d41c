//! The leader's proposal batcher: packs every proposal that queued up while earlier raft
//! entries were being written into one entry (`EntryBatch`).
//!
//! Why: openraft 0.9 appends each client write with its own fsync and waits for it before taking
//! the next, so one command per raft entry caps throughput at one command per fsync. Must not
//! reorder proposals or split one proposer's outcome from its command.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use fedraft_core::command::LogEntry;
use fedraft_core::state::Applied;
use openraft::error::{ClientWriteError, RaftError as OrRaftError};

use crate::error::RaftError;
use crate::node::write_error;
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

/// Packs queued proposals into raft entries: waits for a free in-flight slot, takes everything
/// queued (up to `MAX_BATCH_COMMANDS`), stamps it with the leader's time and writes it as one
/// entry. Each proposer gets its own command's outcome.
pub(crate) async fn run_batcher(
    raft: Raft,
    sm: Arc<SmShared>,
    mut rx: tokio::sync::mpsc::Receiver<Pending>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_BATCHES_IN_FLIGHT));
    let mut last_stamp_ms = 0u64;
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
        let floor = sm
            .last_timestamp_ms
            .load(Ordering::Relaxed)
            .max(last_stamp_ms);
        last_stamp_ms = now_ms().max(floor);
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
        let raft = raft.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match raft.client_write(EntryBatch(entries)).await {
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
