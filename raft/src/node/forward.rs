//! Proposals on their way to the leader: the follower's side ([`FedNode::forward`], through the
//! forwarding batcher in `forwarder.rs`) and the leader's side of a forwarded batch
//! ([`FedNode::propose_many_here`]).
//!
//! Must not: retry on its own (the proposer's loop in `mod.rs` decides), or reorder a batch.

use std::time::{Duration, Instant};

use fedraft_core::state::Applied;

use super::{FedNode, Leader};
use crate::batcher::{BatchOutcome, Pending};
use crate::error::RaftError;
use crate::forwarder::{Forward, ForwardResult};
use crate::network::client::CallError;
use crate::types::Proposal;

impl FedNode {
    /// Hands a proposal to the forwarding batcher and waits for the leader's answer (or the
    /// call's failure), a little longer than `remaining` so the leader's own verdict arrives.
    pub(super) async fn forward(
        &self,
        addr: &str,
        p: &Proposal,
        remaining: Duration,
    ) -> ForwardResult {
        let encoded = crate::codec::encode(p)?;
        let (reply, rx) = tokio::sync::oneshot::channel();
        let item = Forward {
            addr: addr.to_string(),
            encoded,
            deadline: tokio::time::Instant::now() + remaining,
            reply,
        };
        let waited = async {
            self.inner.forwarder.send(item).await.ok()?;
            rx.await.ok()
        };
        match tokio::time::timeout(remaining + Duration::from_millis(500), waited).await {
            Ok(Some(r)) => r,
            Ok(None) => Err(CallError::Transport("forwarder stopped".into())),
            // Maybe on the wire: the caller treats it like a lost reply.
            Err(_) => Err(CallError::Transport(format!(
                "no answer from the leader within {} ms",
                remaining.as_millis()
            ))),
        }
    }

    /// Leader side of a follower's forwarding batch: queues every proposal in the batcher in
    /// request order (so they land in the same or consecutive raft entries, in order) and
    /// answers each one. Never forwards; a node that is not the leader refuses them all with
    /// `NotLeader`, and the follower retries where the request id makes that safe.
    pub(crate) async fn propose_many_here(
        &self,
        proposals: Vec<Proposal>,
        timeout: Duration,
    ) -> Vec<Result<Applied, RaftError>> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        let all = |e: &dyn Fn() -> RaftError| proposals.iter().map(|_| Err(e())).collect();
        let mut pause = Duration::from_millis(10);
        loop {
            match self.leader() {
                Leader::Me => break,
                Leader::Other { id, addr } => {
                    return all(&|| RaftError::NotLeader {
                        leader_id: Some(id),
                        leader_addr: Some(addr.clone()),
                    })
                }
                // Mid-election: wait for it to settle rather than bounce the whole batch.
                Leader::Unknown => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return all(&|| self.timed_out(started));
            }
            pause = self.pause(pause, deadline.into_std()).await;
        }
        let mut waiting = Vec::with_capacity(proposals.len());
        for proposal in proposals {
            let (reply, rx) = tokio::sync::oneshot::channel();
            let queued = tokio::time::timeout_at(
                deadline,
                self.inner.batcher.send(Pending { proposal, reply }),
            )
            .await;
            waiting.push(match queued {
                Ok(Ok(())) => Ok(rx),
                Ok(Err(_)) => Err(RaftError::Shutdown),
                Err(_) => Err(self.timed_out(started)),
            });
        }
        let mut out = Vec::with_capacity(waiting.len());
        for w in waiting {
            out.push(match w {
                Err(e) => Err(e),
                Ok(rx) => match tokio::time::timeout_at(deadline, rx).await {
                    Ok(Ok(BatchOutcome::Applied(a))) => Ok(a),
                    // Nothing was written; the follower looks for the new leader and retries.
                    Ok(Ok(BatchOutcome::NotLeader)) => Err(RaftError::NotLeader {
                        leader_id: None,
                        leader_addr: None,
                    }),
                    Ok(Ok(BatchOutcome::Failed(e))) => Err(e),
                    Ok(Err(_)) => Err(RaftError::Shutdown),
                    Err(_) => Err(self.timed_out(started)),
                },
            });
        }
        out
    }
}
