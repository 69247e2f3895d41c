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

/// A fedraft node as the executors see it.
pub trait ControlPlane: Clone + Send + Sync + 'static {
    /// One item per applied entry; the executors only use it as a wake-up.
    type Applied: Clone + Send + 'static;

    /// Whether this node leads the raft group now (executors run only on the leader).
    fn is_leader(&self) -> bool;

    /// Reads the locally applied state. It may trail the leader's commit by a few entries;
    /// reconciling is idempotent and the next wake-up catches up.
    fn read_state<R>(&self, f: impl FnOnce(&State) -> R) -> R;

    /// Applied entries, in order.
    fn subscribe(&self) -> broadcast::Receiver<Self::Applied>;

    /// Commits `command` through the log. `request_id` lets the state machine recognise a retry.
    fn propose(
        &self,
        request_id: String,
        actor: String,
        command: Command,
    ) -> impl Future<Output = Result<(), String>> + Send;
}
