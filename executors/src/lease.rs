//! This node's ownership lease (spread ownership, `fedraft_core::owners`): an `ExecutorLease`
//! entry every quarter of the lease, proposed through the local node (which forwards to the
//! leader), and the local deadline until which this node may write to the clusters it owns.
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
}

impl LeaseClock {
    /// Whether this node's lease is fresh now.
    pub fn is_fresh(&self) -> bool {
        self.lock().is_some_and(|t| Instant::now() < t)
    }

    fn renewed(&self, until: Instant) {
        let mut t = self.lock();
        if t.is_none_or(|old| old < until) {
            *t = Some(until);
        }
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

/// Renews the lease until the task is aborted.
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
    let mut seq: u64 = 0;
    loop {
        let sent = Instant::now();
        seq += 1;
        let id = format!("lease-{tag:016x}-{seq}");
        let command = Command::ExecutorLease(body.clone());
        match ctrl.propose(id, actor.clone(), command).await {
            Ok(()) => clock.renewed(sent + lease / 2),
            Err(e) => tracing::warn!(error = %e, "renewing this node's ownership lease failed"),
        }
        tokio::time::sleep_until(sent + lease / 4).await;
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
}
