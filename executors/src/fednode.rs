//! [`ControlPlane`] for the raft node: leadership from its metrics, the locally applied state,
//! its applied-entry stream, and proposals (which forward to the leader if this node lost it
//! in between).
//!
//! Must not: read linearizably on the executors' hot path; the local state is enough since
//! reconciling is idempotent and every applied entry wakes the reconcilers again.

use std::sync::Arc;

use fedraft_core::command::Command;
use fedraft_core::state::{Outcome, State};
use fedraft_raft::{AppliedEntry, FedNode, Proposal};
use tokio::sync::broadcast;

use crate::node::ControlPlane;
use crate::wake::WakeScope;

impl ControlPlane for FedNode {
    type Applied = Arc<AppliedEntry>;

    fn is_leader(&self) -> bool {
        self.status().is_leader
    }

    fn log_position(&self) -> (u64, u64) {
        let st = self.status();
        (st.last_log_index, st.applied_index)
    }

    fn read_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        self.read_stale(f)
    }

    fn subscribe(&self) -> broadcast::Receiver<Arc<AppliedEntry>> {
        FedNode::subscribe(self)
    }

    fn wake_scope(applied: &Arc<AppliedEntry>) -> WakeScope {
        WakeScope::of(&applied.entry().command, &applied.applied)
    }

    fn propose(
        &self,
        request_id: String,
        actor: String,
        command: Command,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send {
        let node = self.clone();
        async move {
            let applied = FedNode::propose(
                &node,
                Proposal {
                    request_id,
                    actor,
                    command,
                },
            )
            .await
            .map_err(|e| e.to_string())?;
            match applied.outcome {
                Outcome::Accepted { .. } => Ok(()),
                Outcome::Rejected(r) => Err(format!("rejected: {r:?}")),
            }
        }
    }
}
