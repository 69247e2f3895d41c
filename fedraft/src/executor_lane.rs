//! The executors' own runtime, a lane below raft and the API. A node converging a thousand
//! member clusters keeps its cores busy with probes, member calls and report building; on the
//! runtime the API serves from, and competing at the same priority with raft's thread, that work
//! made a follower answer its leader's appends after the 100 ms openraft 0.9 gives them, and
//! every late answer cost a resend. Here the executors' threads run at a lower priority (a
//! `nice` increment, Linux), so when the machine is short of CPU the scheduler serves raft and
//! the API first and the executors take what is left; on an idle machine nothing changes.
//!
//! Must not: host raft or the API, or be dropped while blocking (it shuts down in the
//! background, as a runtime dropped inside an async context would panic).

use anyhow::Context;
use tokio::runtime::{Builder, Runtime};

/// How much lower the executors' threads run than the rest of the node (a `nice` value:
/// weight about a third of the node's threads' when they compete).
#[cfg(target_os = "linux")]
const EXECUTOR_NICE: libc::c_int = 5;

/// Owns the executors' runtime; dropping it stops every task on it.
pub struct ExecutorLane {
    runtime: Option<Runtime>,
}

impl ExecutorLane {
    pub fn start() -> anyhow::Result<ExecutorLane> {
        let runtime = Builder::new_multi_thread()
            .thread_name("fedraft-executors")
            .on_thread_start(lower_priority)
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

/// Lowers the calling thread's priority (Linux: `nice` is per thread). Failing to is harmless:
/// the thread then competes like any other.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take no pointers and only affect this thread.
        let r = unsafe {
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, EXECUTOR_NICE)
        };
        if r != 0 {
            tracing::debug!(
                error = %std::io::Error::last_os_error(),
                "could not lower an executor thread's priority"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_started_in_the_lane_run_there_at_lower_priority() {
        let lane = ExecutorLane::start().expect("a runtime");
        let handle =
            lane.enter(|| tokio::spawn(async { std::thread::current().name().map(String::from) }));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let name = rt.block_on(handle).expect("the task ran");
        assert_eq!(name.as_deref(), Some("fedraft-executors"));
        #[cfg(target_os = "linux")]
        {
            let nice = lane.enter(|| {
                tokio::spawn(async {
                    // SAFETY: getpriority takes no pointers; errno is cleared first as the
                    // manual asks, since -1 is also a valid nice value.
                    unsafe {
                        *libc::__errno_location() = 0;
                        libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t)
                    }
                })
            });
            let nice = rt.block_on(nice).expect("the task ran");
            assert!(nice >= EXECUTOR_NICE, "executor thread nice {nice}");
        }
    }
}
