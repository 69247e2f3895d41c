//! What the executors need from the fedraft node they run in, as a trait: leadership, the local
//! applied state, a signal per applied entry, and proposing events.
//!
//! `fedraft_raft::FedNode` implements it (see `fednode`); anything else that holds a real
//! `fedraft_core::state::State` and commits commands to it can too.
//!
//! Must not: expose writes to the state other than proposing commands.

use std::future::Future;

use fedraft_core::command::Command;
use fedraft_core::state::State;
use tokio::sync::broadcast;

use crate::wake::WakeScope;

/// A fedraft node as the executors see it.
pub trait ControlPlane: Clone + Send + Sync + 'static {
    /// One item per applied entry; the executors only use it as a wake-up.
    type Applied: Clone + Send + 'static;

    /// Whether this node leads the raft group now (executors run only on the leader).
    fn is_leader(&self) -> bool;

    /// (last log index, applied index) of this node's raft log. A new leader starts its
    /// executors only once it has applied everything up to the last index it held when it won
    /// the election: before that its state may lack objects the previous leader already
    /// placed, and a pass would delete them. The default (no log) is always caught up.
    fn log_position(&self) -> (u64, u64) {
        (0, 0)
    }

    /// Reads the locally applied state. It may trail the leader's commit by a few entries;
    /// reconciling is idempotent and the next wake-up catches up.
    fn read_state<R>(&self, f: impl FnOnce(&State) -> R) -> R;

    /// Applied entries, in order.
    fn subscribe(&self) -> broadcast::Receiver<Self::Applied>;

    /// Which clusters' reconcilers `applied` concerns. The default wakes them all, which is
    /// always correct; a node that knows the entry's changes narrows it (`crate::wake`).
    fn wake_scope(_applied: &Self::Applied) -> WakeScope {
        WakeScope::everything()
    }

    /// Commits `command` through the log. `request_id` lets the state machine recognise a retry.
    fn propose(
        &self,
        request_id: String,
        actor: String,
        command: Command,
    ) -> impl Future<Output = Result<(), String>> + Send;
}
