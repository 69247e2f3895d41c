//! The follower's forwarding batcher: proposals made on a follower travel to the leader several
//! per HTTP call (`/raft/propose-batch`) instead of one call each.
//!
//! Why: one call per proposal costs a request, a response and a handler task on both nodes for
//! every command, which made writes through a follower several times slower than writes to the
//! leader. Batching here feeds the leader's own batcher (`batcher.rs`) whole groups at once.
//!
//! Must not: reorder the proposals of one call, retry anything (the proposer's loop in `node.rs`
//! decides, with the request id, whether a retry is safe), or wait without a bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fedraft_core::state::Applied;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;

use crate::error::RaftError;
use crate::metrics::NodeMetrics;
use crate::network::client::{CallError, PeerClient};

/// Most proposals in one forwarding call; the leader packs up to 256 commands per raft entry, so
/// one call fills at most one entry.
pub(crate) const MAX_FORWARD_BATCH_PROPOSALS: usize = 256;
/// Most encoded proposal bytes in one call: 8 MiB, an eighth of the peer router's body limit
/// (64 MiB), so four API-sized (2 MiB) proposals or thousands of small ones fit.
pub(crate) const MAX_FORWARD_BATCH_BYTES: usize = 8 << 20;
/// Forwarding calls in flight at once. With two the next batch is on the wire while the leader
/// commits the previous one; four leaves room for a slow call without stalling the queue.
pub(crate) const MAX_FORWARDS_IN_FLIGHT: usize = 4;
/// Proposals waiting for a forwarding call before proposers themselves wait (backpressure).
pub(crate) const FORWARD_QUEUE_PROPOSALS: usize = 8192;

/// What a forwarded proposal's caller gets: the leader's answer, or why the call failed.
pub(crate) type ForwardResult = Result<Result<Applied, RaftError>, CallError>;

/// One proposal waiting to be forwarded.
pub(crate) struct Forward {
    /// The leader's peer address when the proposal was queued.
    pub addr: String,
    /// The proposal, encoded with `codec::encode` by the proposing task.
    pub encoded: Vec<u8>,
    /// When the proposer stops waiting; the call's timeout covers the latest of its batch.
    pub deadline: Instant,
    pub reply: oneshot::Sender<ForwardResult>,
}

/// Counters of the forwarding batcher since the node started.
#[derive(Debug, Default)]
pub(crate) struct ForwardCounters {
    pub calls: AtomicU64,
    pub proposals: AtomicU64,
}

/// Takes queued proposals, groups consecutive ones for the same leader (up to the limits above)
/// and sends each group in one call, with up to `MAX_FORWARDS_IN_FLIGHT` calls at once.
pub(crate) async fn run_forwarder(
    client: PeerClient,
    mut rx: mpsc::Receiver<Forward>,
    counters: Arc<ForwardCounters>,
    metrics: NodeMetrics,
) {
    let slots = Arc::new(Semaphore::new(MAX_FORWARDS_IN_FLIGHT));
    let mut carried: Option<Forward> = None;
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match carried.take() {
            Some(f) => f,
            None => match rx.recv().await {
                Some(f) => f,
                None => return,
            },
        };
        let mut bytes = first.encoded.len();
        let mut batch = vec![first];
        while batch.len() < MAX_FORWARD_BATCH_PROPOSALS {
            match rx.try_recv() {
                Ok(f)
                    if f.addr == batch[0].addr
                        && bytes + f.encoded.len() <= MAX_FORWARD_BATCH_BYTES =>
                {
                    bytes += f.encoded.len();
                    batch.push(f);
                }
                // Another leader, or the batch is full by bytes: it starts the next call.
                Ok(f) => {
                    carried = Some(f);
                    break;
                }
                Err(_) => break,
            }
        }
        // A proposer that already gave up needs no call.
        batch.retain(|f| !f.reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        counters.calls.fetch_add(1, Ordering::Relaxed);
        counters
            .proposals
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        metrics.forward_sent(batch.len());
        let client = client.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let ok = send_batch(&client, batch).await;
            metrics.forward_done(ok);
        });
    }
}

/// Sends one batch and answers its proposers; false when the call itself failed.
async fn send_batch(client: &PeerClient, batch: Vec<Forward>) -> bool {
    let addr = batch[0].addr.clone();
    let latest = batch
        .iter()
        .map(|f| f.deadline)
        .max()
        .unwrap_or_else(Instant::now);
    let timeout = latest
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let (encoded, replies): (Vec<Vec<u8>>, Vec<_>) =
        batch.into_iter().map(|f| (f.encoded, f.reply)).unzip();
    match client.propose_batch(&addr, &encoded, timeout).await {
        Ok(results) => {
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(Ok(result));
            }
            true
        }
        Err(e) => {
            tracing::debug!(leader = %addr, proposals = replies.len(), error = %e, "forwarding call failed");
            for reply in replies {
                let _ = reply.send(Err(same_failure(&e)));
            }
            false
        }
    }
}

/// The same transport failure for every proposal of a failed call (`CallError` is not `Clone`
/// because of the codec variant; its text is all a proposer uses).
fn same_failure(e: &CallError) -> CallError {
    match e {
        CallError::Unreachable(m) => CallError::Unreachable(m.clone()),
        CallError::Transport(m) => CallError::Transport(m.clone()),
        CallError::Status(s) => CallError::Status(*s),
        CallError::Codec(inner) => CallError::Codec(RaftError::Codec(inner.to_string())),
    }
}
