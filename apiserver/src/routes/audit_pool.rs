//! The audit API's own threads, and how many audit queries may run at once.
//!
//! An audit query reads and may replay much of the archive. On tokio's blocking pool (where raft
//! and the store run their own blocking reads) a burst of them would queue ahead of the node's
//! work; here they get a fixed number of threads of their own, and a query that finds every
//! thread busy is answered 429 with Retry-After at once instead of waiting in line.
//!
//! Must not: queue work beyond its threads (a waiting query holds a connection and memory).

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, Semaphore};

use crate::error::ApiError;

/// Audit queries that may run at once on a node by default (each has a thread).
pub const DEFAULT_AUDIT_THREADS: usize = 2;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed set of threads for audit queries and the permits that bound them.
pub struct AuditPool {
    permits: Arc<Semaphore>,
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl AuditPool {
    /// Starts `threads` (at least one) threads; they end when the pool is dropped.
    pub fn start(threads: usize) -> Self {
        let threads = threads.max(1);
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("fedraft-audit-{i}"))
                .spawn(move || loop {
                    // The lock is held only while taking a job, never while running one.
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start an audit thread");
            }
        }
        AuditPool {
            permits: Arc::new(Semaphore::new(threads)),
            jobs: Mutex::new(tx),
        }
    }

    /// Runs `f` on an audit thread, or refuses at once (429) when all are busy.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit =
            self.permits
                .clone()
                .try_acquire_owned()
                .map_err(|_| ApiError::TooManyRequests {
                    message: "too many audit queries are running on this node; retry shortly"
                        .into(),
                })?;
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            // Free before answering: a caller that got its answer finds the thread free.
            drop(permit);
            // The caller may have gone; its answer is then dropped.
            let _ = tx.send(result);
        });
        self.jobs
            .lock()
            .map_err(|_| ApiError::internal("audit pool poisoned"))?
            .send(job)
            .map_err(|_| ApiError::internal("audit threads are gone"))?;
        match rx.await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(ApiError::internal("an audit query panicked")),
            Err(_) => Err(ApiError::internal("an audit query was dropped")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn busy_threads_refuse_at_once_and_free_ones_run() {
        let pool = Arc::new(AuditPool::start(1));
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let busy = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.run(move || {
                    let _ = wait.recv_timeout(Duration::from_secs(30));
                    Ok(std::thread::current().name().map(str::to_string))
                })
                .await
            })
        };
        // Wait until the first query holds the only thread.
        while pool.permits.available_permits() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let refused = pool.run(|| Ok(())).await.unwrap_err();
        assert_eq!(refused.status().as_u16(), 429);
        release.send(()).unwrap();
        let name = busy.await.unwrap().unwrap();
        assert_eq!(name.as_deref(), Some("fedraft-audit-0"));
        assert_eq!(pool.run(|| Ok(7)).await.unwrap(), 7);
        let panicked = pool.run::<()>(|| panic!("boom")).await.unwrap_err();
        assert_eq!(panicked.status().as_u16(), 500);
        assert_eq!(
            pool.run(|| Ok(8)).await.unwrap(),
            8,
            "a panic costs no thread"
        );
    }
}
