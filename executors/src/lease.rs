//! This node's ownership lease (spread ownership, `fedraft_core::owners`): an `ExecutorLease`
//! entry every eighth of the lease, proposed through the local node (which forwards to the
//! leader) without waiting for the one before, and the local deadline until which this node
//! may write to the clusters it owns.
//!
//! Self-fencing: the deadline is the moment a renewal was sent plus half the lease, moved only
//! when that renewal was committed. Core moves a node's clusters once a full lease passed
//! since its last renewal in log time (stamped when the leader took the proposal, after it was
//! sent), so a node that stops renewing, or whose renewals stop committing, stops writing half a
//! lease before its clusters can move. What that assumes: the leader's wall clock and this
//! node's monotonic clock do not drift apart by half a lease within one lease.
//!
//! Must not: decide which clusters this node owns (the applied state says), or write to members.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fedraft_core::command::Command;
use fedraft_core::owners::{ExecutorLease, MAX_LEASE_MS, MIN_LEASE_MS};
use tokio::time::Instant;

use crate::node::ControlPlane;

/// Until when this node may write, as its committed renewals say.
#[derive(Debug, Default)]
pub struct LeaseClock {
    fresh_until: Mutex<Option<Instant>>,
    /// Told when a renewal makes a stale clock fresh: the runners it paused resume at once
    /// rather than at their next look, and no other entry has to wake them.
    freshened: tokio::sync::Notify,
}

impl LeaseClock {
    /// Whether this node's lease is fresh now.
    pub fn is_fresh(&self) -> bool {
        self.lock().is_some_and(|t| Instant::now() < t)
    }

    pub(crate) fn renewed(&self, until: Instant) {
        let now = Instant::now();
        let mut t = self.lock();
        let was_fresh = t.is_some_and(|old| now < old);
        if t.is_none_or(|old| old < until) {
            *t = Some(until);
        }
        let fresh = t.is_some_and(|new| now < new);
        drop(t);
        if fresh && !was_fresh {
            self.freshened.notify_waiters();
        }
    }

    /// Resolves at the next renewal that makes a stale clock fresh.
    pub async fn freshened(&self) {
        self.freshened.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.fresh_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The lease length core accepts, nearest to `lease`.
pub fn clamp(lease: Duration) -> Duration {
    let ms = (lease.as_millis() as u64).clamp(MIN_LEASE_MS, MAX_LEASE_MS);
    Duration::from_millis(ms)
}

/// Renewals sent per lease. The lease stays fresh while a renewal commits within half a lease
/// minus one period of being sent (3.75 s of a 10 s lease at 8), at one entry per period per
/// node.
const RENEWALS_PER_LEASE: u32 = 8;

/// Renewals proposed and not yet answered, at most. More would only queue behind a stalled
/// leader; the next period sends again.
const MAX_IN_FLIGHT: usize = 4;

/// Renews the lease until the task is aborted. Renewals go out on a fixed period without
/// waiting for the previous one to answer, so one slow commit does not delay the next send.
pub async fn run_lease<C: ControlPlane>(
    ctrl: C,
    actor: String,
    lease: Duration,
    locality: Vec<(String, String)>,
    clock: Arc<LeaseClock>,
) {
    let lease = clamp(lease);
    let body = ExecutorLease {
        lease_ms: lease.as_millis() as u64,
        locality,
    };
    let tag: u64 = rand::random();
    let mut in_flight = tokio::task::JoinSet::new();
    let mut period = tokio::time::interval(lease / RENEWALS_PER_LEASE);
    period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut was_fresh = false;
    for seq in 1u64.. {
        period.tick().await;
        while in_flight.try_join_next().is_some() {}
        let fresh = clock.is_fresh();
        if was_fresh && !fresh {
            tracing::warn!(
                in_flight = in_flight.len(),
                "this node's ownership lease is not fresh: its executors write nothing until a renewal commits"
            );
        }
        was_fresh = fresh;
        if in_flight.len() >= MAX_IN_FLIGHT {
            continue;
        }
        let sent = Instant::now();
        let id = format!("lease-{tag:016x}-{seq}");
        let command = Command::ExecutorLease(body.clone());
        let (ctrl, actor, clock) = (ctrl.clone(), actor.clone(), clock.clone());
        in_flight.spawn(async move {
            match ctrl.propose(id, actor, command).await {
                Ok(()) => clock.renewed(sent + lease / 2),
                Err(e) => tracing::warn!(error = %e, "renewing this node's ownership lease failed"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_clock_is_fresh_until_its_deadline_and_never_moves_back() {
        let c = LeaseClock::default();
        assert!(!c.is_fresh(), "no renewal yet");
        let now = Instant::now();
        c.renewed(now + Duration::from_millis(300));
        c.renewed(now + Duration::from_millis(1));
        assert!(c.is_fresh());
        tokio::time::sleep_until(now + Duration::from_millis(350)).await;
        assert!(!c.is_fresh());
        assert_eq!(clamp(Duration::from_millis(10)), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_renewal_that_ends_a_pause_wakes_the_waiting_runners_and_no_other_does() {
        let c = Arc::new(LeaseClock::default());
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.freshened().await }
        });
        tokio::task::yield_now().await;
        let now = Instant::now();
        c.renewed(now + Duration::from_secs(5));
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the stale clock turned fresh: the waiter wakes")
            .unwrap();
        // Already fresh: a further renewal is no news to a paused runner.
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.freshened().await }
        });
        tokio::task::yield_now().await;
        c.renewed(now + Duration::from_secs(6));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        waiter.abort();
    }
}
