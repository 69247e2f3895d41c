//! Linearizable reads: confirm a read index with a quorum (on the leader, or by asking it), wait
//! until this node has applied that far, then read local state.
//!
//! Must not: read before the index is applied, or wait without a bound.

use std::time::{Duration, Instant};

use fedraft_core::state::State;
use openraft::error::{CheckIsLeaderError, RaftError as OrRaftError};

use super::{Attempt, FedNode, Leader};
use crate::error::{fatal, RaftError};

impl FedNode {
    /// Linearizable read: confirm the read index with a quorum (on the leader, or by asking it),
    /// wait until this node has applied that far, then run `f` on local state.
    pub async fn read<R: Send + 'static>(
        &self,
        f: impl FnOnce(&State) -> R + Send + 'static,
    ) -> Result<R, RaftError> {
        let started = Instant::now();
        let timeout = Duration::from_millis(self.inner.cfg.propose_timeout_ms);
        let deadline = started + timeout;
        let index = self
            .retry_until(started, timeout, |remaining, started| async move {
                match self.leader() {
                    Leader::Me => self.try_read_index_local(remaining, started).await,
                    Leader::Other { id, addr } => {
                        let result = self.inner.client.read_index(&addr, remaining).await;
                        self.note_leader_call(id, &result);
                        match result {
                            Ok(Ok(i)) => Attempt::Done(Ok(i)),
                            Ok(Err(
                                e @ (RaftError::NoQuorum { .. } | RaftError::Timeout { .. }),
                            )) => Attempt::Done(Err(e)),
                            // Reads are idempotent: any other failure is retried until the
                            // deadline.
                            _ => Attempt::Retry,
                        }
                    }
                    Leader::Unknown => Attempt::Retry,
                }
            })
            .await?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        self.inner
            .raft
            .wait(Some(remaining))
            .applied_index_at_least(Some(index), "linearizable read")
            .await
            .map_err(|e| match e {
                openraft::metrics::WaitError::Timeout(..) => self.timed_out(started),
                openraft::metrics::WaitError::ShuttingDown => RaftError::Shutdown,
            })?;
        Ok(self.read_stale(f))
    }

    async fn try_read_index_local(&self, remaining: Duration, started: Instant) -> Attempt<u64> {
        match tokio::time::timeout(remaining, self.inner.raft.get_read_log_id()).await {
            Err(_) => Attempt::Done(Err(self.timed_out(started))),
            Ok(Ok((read_log_id, _))) => {
                Attempt::Done(Ok(read_log_id.map(|l| l.index).unwrap_or(0)))
            }
            Ok(Err(OrRaftError::APIError(CheckIsLeaderError::ForwardToLeader(_)))) => {
                Attempt::Retry
            }
            // Not enough followers answered yet: keep trying until the deadline.
            Ok(Err(OrRaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)))) => {
                Attempt::Retry
            }
            Ok(Err(OrRaftError::Fatal(f))) => Attempt::Done(Err(fatal(f))),
        }
    }

    /// Leader-only read index for a follower's linearizable read.
    pub(crate) async fn read_index_here(&self, timeout: Duration) -> Result<u64, RaftError> {
        self.retry_until(Instant::now(), timeout, |remaining, started| async move {
            match self.leader() {
                Leader::Me => self.try_read_index_local(remaining, started).await,
                Leader::Other { id, addr } => Attempt::Done(Err(RaftError::NotLeader {
                    leader_id: Some(id),
                    leader_addr: Some(addr),
                })),
                Leader::Unknown => Attempt::Retry,
            }
        })
        .await
    }
}
