//! Cluster ownership, applied: `ExecutorLease` renewals, a lease expiring in the time advance,
//! and a cluster registering or leaving (`crate::owners` holds the rules).
//!
//! Entries older than envelope version 9 never change the book (the command did not exist,
//! and the time advance and the cluster hooks check `Ctx::version`), so old logs replay exactly
//! as they did.
//!
//! Must not: move a cluster whose owner's lease is live, or read clocks.

use crate::error::FieldError;
use crate::owners::{ExecutorLease, MAX_LEASE_MS, MAX_LOCALITY, MIN_LEASE_MS, OWNERS_SINCE};
use crate::state::{Ctx, HandlerResult, Rejection, State};

impl State {
    pub(crate) fn on_executor_lease(
        &mut self,
        lease: &ExecutorLease,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if ctx.version < OWNERS_SINCE {
            return Err(Rejection::from(FieldError::new(
                "lease",
                format!("executor leases need envelope version {OWNERS_SINCE}"),
            )));
        }
        if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&lease.lease_ms) {
            return Err(Rejection::from(FieldError::new(
                "lease.leaseMs",
                format!("must be within {MIN_LEASE_MS}..={MAX_LEASE_MS}"),
            )));
        }
        if lease.locality.len() > MAX_LOCALITY {
            return Err(Rejection::from(FieldError::new(
                "lease.locality",
                format!("more than {MAX_LOCALITY} pairs"),
            )));
        }
        let pairs = lease.locality.iter().cloned().collect();
        super::validate::labels(&pairs, "lease.locality")?;
        if self.owners.renew(ctx.actor_id, lease, ctx.now_ms) {
            self.owners_reassign(ctx);
        }
        Ok(None)
    }

    /// Time passed: leases that expired drop their nodes, whose clusters move at this entry.
    pub(crate) fn owners_advance(&mut self, ctx: &mut Ctx) {
        if ctx.version < OWNERS_SINCE || self.owners.is_empty() {
            return;
        }
        if self.owners.expire(ctx.now_ms) {
            self.owners_reassign(ctx);
        }
    }

    /// Every cluster without a live owner gets one at this entry's index.
    fn owners_reassign(&mut self, ctx: &Ctx) {
        let fleet = self
            .d
            .clusters
            .iter()
            .map(|(name, c)| (name, &c.spec.labels));
        self.owners.assign(fleet, ctx.index);
    }

    /// A cluster registered: it gets an owner now, if ownership is in force.
    pub(crate) fn owners_cluster_added(&mut self, name: &str, ctx: &Ctx) {
        if ctx.version < OWNERS_SINCE || !self.owners.in_force() {
            return;
        }
        let Some(c) = self.d.clusters.get(name) else {
            return;
        };
        self.owners.assign([(name, &c.spec.labels)], ctx.index);
    }

    /// A cluster left: its owner forgets it.
    pub(crate) fn owners_cluster_removed(&mut self, name: &str) {
        self.owners.clusters.remove(name);
    }

    /// Who owns `cluster` for the health rules: its assigned owner, or (no ownership in force)
    /// the actor of the latest heartbeats.
    pub(crate) fn health_owner(&self, cluster: &str) -> &str {
        self.owners
            .owner(cluster)
            .map_or(self.health.owner.as_str(), |o| o.node.as_str())
    }
}
