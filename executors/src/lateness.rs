//! How late this node's own runtime runs: a task that asks to wake every [`TICK`] adds up how
//! much later than asked it woke.
//!
//! A probe that timed out while the node itself ran late says more about the node than about
//! the member: on a saturated machine, an answer that came in time waits in a socket until the
//! runtime gets a core again, and a fleet of such probes turned healthy clusters NotReady under
//! load. So the probes ([`crate::probe::probe`]) widen their deadline by the lateness that
//! accrued while they waited, at most doubling it: a member that does not answer still fails,
//! at worst one timeout later.
//!
//! Must not: cost more than one timer per node, or keep a runtime alive (the task holds only a
//! weak reference and ends with the last clone).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio::time::Instant;

/// How often the task asks to wake.
pub const TICK: Duration = Duration::from_millis(50);

/// Lateness per wake-up that counts as a timer's ordinary slack (tokio's timer wheel ticks by
/// the millisecond), so an idle node's count stays still.
const SLACK: Duration = Duration::from_millis(5);

/// The node runtime's lateness so far (cheap to clone; clones share it). The task starts on
/// first use inside a runtime; until then, and outside one, the node counts as never late.
#[derive(Debug, Clone, Default)]
pub struct Lateness {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The instant the times below count from, fixed when the task starts.
    origin: OnceLock<Instant>,
    /// Lateness recorded by the task's wake-ups, in microseconds.
    recorded_us: AtomicU64,
    /// When the task's next wake-up is due, in microseconds since `origin`.
    due_us: AtomicU64,
}

impl Lateness {
    /// How late the runtime has run in all since the task started: what the task recorded,
    /// plus how overdue its next wake-up is now, so that a reader who runs first after a stall
    /// already sees that stall.
    pub fn late(&self) -> Duration {
        let Some(origin) = self.start() else {
            return Duration::ZERO;
        };
        let now = micros_since(origin, Instant::now());
        let overdue = now
            .saturating_sub(self.inner.due_us.load(Ordering::Acquire))
            .saturating_sub(micros(SLACK));
        Duration::from_micros(
            self.inner
                .recorded_us
                .load(Ordering::Acquire)
                .saturating_add(overdue),
        )
    }

    /// The task's origin, starting the task when this is the first use inside a runtime.
    fn start(&self) -> Option<Instant> {
        if let Some(origin) = self.inner.origin.get() {
            return Some(*origin);
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let mut first = false;
        let origin = *self.inner.origin.get_or_init(|| {
            first = true;
            Instant::now()
        });
        if first {
            self.inner.due_us.store(micros(TICK), Ordering::Release);
            runtime.spawn(run(Arc::downgrade(&self.inner), origin));
        }
        Some(origin)
    }
}

async fn run(inner: Weak<Inner>, origin: Instant) {
    let mut due = origin + TICK;
    loop {
        tokio::time::sleep_until(due).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let woke = Instant::now();
        let late = woke.saturating_duration_since(due).saturating_sub(SLACK);
        // Recorded before the next due time is published: a reader between the two stores
        // counts this stretch at most twice, never not at all.
        inner.recorded_us.fetch_add(micros(late), Ordering::AcqRel);
        due = woke + TICK;
        inner
            .due_us
            .store(micros_since(origin, due), Ordering::Release);
    }
}

/// A probe timeout widened by the node's lateness while the probe waited, at most doubled.
pub fn widened(timeout: Duration, late: Duration) -> Duration {
    timeout + late.min(timeout)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn micros_since(origin: Instant, at: Instant) -> u64 {
    micros(at.saturating_duration_since(origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_is_bounded_by_the_timeout() {
        let t = Duration::from_secs(3);
        assert_eq!(widened(t, Duration::ZERO), t);
        assert_eq!(widened(t, Duration::from_secs(1)), Duration::from_secs(4));
        assert_eq!(widened(t, Duration::from_secs(60)), Duration::from_secs(6));
    }

    #[test]
    fn outside_a_runtime_the_node_is_never_late() {
        assert_eq!(Lateness::default().late(), Duration::ZERO);
    }

    /// A one-thread runtime blocked by a task is late for every other task, and a reader that
    /// runs first afterwards sees the whole stall, before the task has recorded it.
    #[test]
    fn a_blocked_runtime_counts_as_late() -> Result<(), std::io::Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()?;
        rt.block_on(async {
            let lateness = Lateness::default();
            let before = lateness.late();
            tokio::time::sleep(TICK * 2).await;
            let stall = Duration::from_millis(400);
            std::thread::sleep(stall);
            let seen = lateness.late() - before;
            assert!(seen >= stall - TICK, "saw {seen:?} of a {stall:?} stall");
            // The task records the stall once it runs, and later reads do not count it twice.
            tokio::time::sleep(TICK * 2).await;
            let recorded = lateness.late() - before;
            assert!(recorded >= stall - TICK, "recorded {recorded:?}");
            assert!(recorded < stall * 2, "counted twice: {recorded:?}");
        });
        Ok(())
    }
}
