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
//! Must not: run anything but raft's tasks, or outlive the node: dropping it waits, on a thread
//! of its own, until every task on it is gone.

use std::future::Future;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

use crate::error::RaftError;

/// Worker threads of the raft runtime: the core and the replication tasks are light; the
/// store's writes run on its blocking pool, and the state machine's apply hands the worker to
/// another thread while it runs (`block_in_place`).
const WORKERS: usize = 1;

/// Names of the raft runtime's threads, followed by the node id.
const THREAD_PREFIX: &str = "fedraft-raft-";

/// Owns the raft runtime; dropping it stops every task on it.
pub(crate) struct RaftRuntime {
    runtime: Option<Runtime>,
    handle: Handle,
}

impl RaftRuntime {
    pub(crate) fn start(node_id: u64) -> Result<RaftRuntime, RaftError> {
        let runtime = Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name(format!("{THREAD_PREFIX}{node_id}"))
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
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        if std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with(THREAD_PREFIX))
        {
            // Dropped by one of its own tasks (the ticker's upgrade was the last handle):
            // waiting here would wait for this very thread.
            runtime.shutdown_background();
            return;
        }
        // Wait until every task is gone, and with them the store they hold: a node dropped
        // without waiting left RocksDB open behind it, and a process exiting then aborted in
        // RocksDB's destructors ("pthread lock: Invalid argument"). A runtime cannot be dropped
        // in place inside an async context, so a thread of its own drops it while this one waits.
        let stopper = std::thread::Builder::new()
            .name("fedraft-raft-stop".into())
            .spawn(move || drop(runtime));
        match stopper {
            Ok(handle) => {
                if handle.join().is_err() {
                    tracing::error!("stopping the raft runtime panicked");
                }
            }
            Err(e) => tracing::error!(error = %e, "no thread to stop the raft runtime on"),
        }
    }
}
