//! How many log entries one AppendEntries to a peer may carry, learnt from whether the peer
//! answers in time.
//!
//! openraft gives every AppendEntries one heartbeat interval to be answered and sends a follower
//! that is behind up to `max_payload_entries` at once. A follower that needs longer for such a
//! batch (a loaded machine, a far link, large entries after a restart) has the call cut off, gets
//! the same batch again, and never catches up: its log stays where it was while the others move
//! on. So an append that was not answered halves what the next one to that peer may carry, an
//! answered one that was near the limit doubles it back, and an append over the limit is refused
//! before it leaves with `PayloadTooLarge`, which makes openraft resend fewer entries.
//!
//! Must not: limit heartbeats (no entries) or a single entry, or count a peer that is down as
//! slow. One budget per peer id, kept by the network factory for the node's life.

use std::sync::atomic::{AtomicU64, Ordering};

/// No limit: as many entries as openraft sends.
const UNLIMITED: u64 = u64::MAX;

/// The entries an append to one peer may carry. Starts unlimited.
#[derive(Debug)]
pub struct AppendBudget {
    limit: AtomicU64,
    /// At or above this the budget is unlimited again: openraft's own cap per append.
    full: u64,
}

impl AppendBudget {
    pub fn new(full: u64) -> Self {
        AppendBudget {
            limit: AtomicU64::new(UNLIMITED),
            full: full.max(1),
        }
    }

    /// Whether an append of `entries` may be sent; otherwise the most it may carry.
    pub fn admit(&self, entries: u64) -> Result<(), u64> {
        let limit = self.limit.load(Ordering::Relaxed);
        match entries > limit {
            true => Err(limit),
            false => Ok(()),
        }
    }

    /// The peer answered an append of `entries` in time. Only a batch near the limit shows that
    /// a larger one may be answered too; heartbeats show nothing.
    pub fn answered(&self, entries: u64) {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == UNLIMITED || entries.saturating_mul(2) < limit {
            return;
        }
        let grown = limit.saturating_mul(2);
        let next = if grown >= self.full { UNLIMITED } else { grown };
        // A concurrent halving wins: it is newer news than this answer.
        let _ = self
            .limit
            .compare_exchange(limit, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// An append of `entries` got no answer in time (cut off, or failed in transit).
    pub fn unanswered(&self, entries: u64) {
        if entries > 1 {
            self.limit.fetch_min(entries / 2, Ordering::Relaxed);
        }
    }

    /// The current limit, `None` when unlimited.
    #[cfg(test)]
    pub fn limit(&self) -> Option<u64> {
        let limit = self.limit.load(Ordering::Relaxed);
        (limit != UNLIMITED).then_some(limit)
    }
}

/// Records an append as unanswered unless [`InFlight::answered`] is called: openraft drops the
/// call's future when its timeout fires, so the drop is the only place a cut-off call is seen.
pub struct InFlight<'a> {
    budget: &'a AppendBudget,
    entries: u64,
    answered: bool,
}

impl<'a> InFlight<'a> {
    pub fn new(budget: &'a AppendBudget, entries: u64) -> Self {
        InFlight {
            budget,
            entries,
            answered: false,
        }
    }

    pub fn answered(mut self) {
        self.answered = true;
        self.budget.answered(self.entries);
    }

    /// The call failed for a reason its size had no part in (the peer refused the connection:
    /// it is down, not slow).
    pub fn not_about_size(mut self) {
        self.answered = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.budget.unanswered(self.entries);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_off_append_halves_the_next_and_answers_near_the_limit_grow_it_back() {
        let b = AppendBudget::new(1024);
        assert_eq!(b.admit(1024), Ok(()), "unlimited at first");
        drop(InFlight::new(&b, 1024));
        assert_eq!(b.limit(), Some(512));
        assert_eq!(b.admit(1024), Err(512));
        assert_eq!(b.admit(512), Ok(()));
        drop(InFlight::new(&b, 512));
        assert_eq!(b.limit(), Some(256));
        // Small answers say nothing about larger batches.
        InFlight::new(&b, 3).answered();
        assert_eq!(b.limit(), Some(256));
        InFlight::new(&b, 256).answered();
        assert_eq!(b.limit(), Some(512));
        InFlight::new(&b, 300).answered();
        assert_eq!(b.limit(), None, "at openraft's own cap the limit goes away");
    }

    #[test]
    fn heartbeats_and_single_entries_are_never_limited() {
        let b = AppendBudget::new(1024);
        drop(InFlight::new(&b, 0));
        drop(InFlight::new(&b, 1));
        assert_eq!(b.limit(), None);
        drop(InFlight::new(&b, 3));
        drop(InFlight::new(&b, 2));
        drop(InFlight::new(&b, 2));
        assert_eq!(b.limit(), Some(1), "never below one entry");
        assert_eq!(b.admit(1), Ok(()));
        assert_eq!(b.admit(0), Ok(()));
    }

    #[test]
    fn a_halving_is_not_undone_by_a_shrink_to_less() {
        let b = AppendBudget::new(1024);
        b.unanswered(100);
        b.unanswered(1000);
        assert_eq!(b.limit(), Some(50), "the smaller of the two halvings holds");
    }
}
