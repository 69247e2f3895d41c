//! The executors' own runtime. A node converging a thousand member clusters runs thousands of
//! executor tasks (probes, watches, member writes, report building); on the runtime the API
//! serves from, a client's request waited in the same queue behind them. Here the API keeps its
//! runtime to itself, and raft has its own (`fedraft_raft`'s runtime).
//!
//! Deliberately not at a lower priority: the executors carry the members' health heartbeats. A
//! run at 1,000 clusters x 100,000 objects with the executors' threads at `nice` +5 starved them
//! on a saturated machine, and two thirds of the fleet turned NotReady because their owners'
//! heartbeats came 11 s late.
//!
//! Must not: host raft or the API, or be dropped while blocking (it shuts down in the
//! background, as a runtime dropped inside an async context would panic).

use anyhow::Context;
use tokio::runtime::{Builder, Runtime};

/// Owns the executors' runtime; dropping it stops every task on it.
pub struct ExecutorLane {
    runtime: Option<Runtime>,
}

impl ExecutorLane {
    pub fn start() -> anyhow::Result<ExecutorLane> {
        let runtime = Builder::new_multi_thread()
            .thread_name("fedraft-executors")
            .enable_all()
            .build()
            .context("starting the executors' runtime")?;
        Ok(ExecutorLane {
            runtime: Some(runtime),
        })
    }

    /// Runs `start` with the lane as the current runtime, so every task it spawns, and every
    /// task those spawn, runs on the lane.
    pub fn enter<T>(&self, start: impl FnOnce() -> T) -> T {
        match &self.runtime {
            Some(rt) => {
                let _guard = rt.enter();
                start()
            }
            None => start(),
        }
    }
}

impl Drop for ExecutorLane {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_started_in_the_lane_and_their_children_run_there() {
        let lane = ExecutorLane::start().expect("a runtime");
        let handle = lane.enter(|| {
            tokio::spawn(async {
                let child = tokio::spawn(async { std::thread::current().name().map(String::from) });
                child.await.ok().flatten()
            })
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let name = rt.block_on(handle).expect("the task ran");
        assert_eq!(name.as_deref(), Some("fedraft-executors"));
    }
}
