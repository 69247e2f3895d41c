//! The runtime raft's own tasks run on: openraft's core, replication and state-machine worker,
//! and this node's batcher, forwarder and ticker.
//!
//! openraft 0.9 gives every AppendEntries `heartbeat_interval` (100 ms) before it counts the
//! call as failed and sends again. On the process's main runtime, raft's tasks wait in one
//! queue with a thousand clusters' executors and the API: a fleet run at 1,000 clusters and
//! 50,000 objects saw the leader time out every append to both idle followers for minutes, and
//! nothing committed. On a runtime of its own, a replication task waits for its own thread only.
//!
//! The peer listener is not served here: its router holds the node, and the node owns this
//! runtime, so a listener task on it would keep the node (and its RocksDB) alive forever.
//!
//! Must not: run anything but raft's tasks, or be dropped while blocking (shut down in the
//! background, as a runtime dropped inside an async context would panic).

use std::future::Future;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

use crate::error::RaftError;

/// Worker threads of the raft runtime: the core and the replication tasks are light; the
/// store's writes run on its blocking pool, and the state machine's apply hands the worker to
/// another thread while it runs (`block_in_place`).
const WORKERS: usize = 1;

/// Owns the raft runtime; dropping it stops every task on it.
pub(crate) struct RaftRuntime {
    runtime: Option<Runtime>,
    handle: Handle,
}

impl RaftRuntime {
    pub(crate) fn start(node_id: u64) -> Result<RaftRuntime, RaftError> {
        let runtime = Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name(format!("fedraft-raft-{node_id}"))
            .enable_all()
            .build()
            .map_err(|e| RaftError::Fatal(format!("starting the raft runtime: {e}")))?;
        let handle = runtime.handle().clone();
        Ok(RaftRuntime {
            runtime: Some(runtime),
            handle,
        })
    }

    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(task)
    }
}

impl Drop for RaftRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
