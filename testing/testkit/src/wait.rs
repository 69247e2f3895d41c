//! Waiting for a condition with a deadline, and test logging. A condition is polled, never slept
//! on: a loaded machine makes a test slower, not wrong. Owns no assertion but "it happened in
//! time"; the panic names what was awaited.

use std::future::Future;
use std::time::Duration;

/// How often a condition is polled: short against every deadline used here, long enough that
/// polling costs nothing next to the nodes it watches.
pub const POLL: Duration = Duration::from_millis(50);

/// Polls `check` until it yields `Some`, or panics naming `what` after `limit`.
///
/// Measures on tokio's clock, so a test on paused time (`start_paused`) reaches its deadline by
/// auto-advance instead of spinning on the wall clock.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for code outside a runtime (threads, child processes): blocks the thread.
pub fn eventually_blocking<T>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        std::thread::sleep(POLL);
    }
}

/// Installs a subscriber writing through the test harness's capture, filtered by `RUST_LOG` or
/// else `default_filter`. Only the first call in a test binary takes effect.
pub fn init_tracing(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}
