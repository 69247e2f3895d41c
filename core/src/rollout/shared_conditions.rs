//! One copy of each distinct list of workload conditions the state holds.
//!
//! The state keeps a workload status per object and placed cluster, and nearly all of them
//! carry one of a handful of condition lists (a settled Deployment reports `Available` and
//! `Progressing` with the same reasons everywhere). Each status held its own copy, about a
//! hundred bytes per object and cluster; [`ConditionSets::share`] hands out the copy already
//! held instead.
//!
//! Must not: change what a status says (a shared list is equal to the one it replaces), take
//! part in the replicated state's encoding, hash or equality (it is a cache: two states with
//! different sets hold the same statuses), or depend on hash order.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::WorkloadCondition;

/// A list of conditions as a status holds it.
pub type Conditions = Arc<[WorkloadCondition]>;

/// Below this many lists the set is never pruned: pruning a small set saves nothing.
const MIN_PRUNE_AT: usize = 64;

/// The distinct condition lists held, each once.
#[derive(Debug, Clone)]
pub struct ConditionSets {
    held: BTreeSet<Conditions>,
    /// Lists no status uses any more are dropped when the set reaches this size, which then
    /// doubles what it kept, so the work of pruning stays proportional to the lists added.
    prune_at: usize,
}

impl Default for ConditionSets {
    fn default() -> Self {
        ConditionSets {
            held: BTreeSet::new(),
            prune_at: MIN_PRUNE_AT,
        }
    }
}

impl ConditionSets {
    /// The held list equal to `list`, or `list` itself, now held.
    pub fn share(&mut self, list: Conditions) -> Conditions {
        if let Some(held) = self.held.get(&list) {
            return held.clone();
        }
        if self.held.len() >= self.prune_at {
            // A list only the set still points at belongs to no status.
            self.held.retain(|l| Arc::strong_count(l) > 1);
            self.prune_at = (self.held.len() * 2).max(MIN_PRUNE_AT);
        }
        self.held.insert(list.clone());
        list
    }
}

/// Always equal: what a cache holds says nothing about the state it serves.
impl PartialEq for ConditionSets {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ConditionSets {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::words::word;

    fn list(reasons: &[&str]) -> Conditions {
        reasons
            .iter()
            .map(|r| WorkloadCondition {
                type_: word("Available"),
                status: true,
                reason: word(r),
            })
            .collect()
    }

    #[test]
    fn equal_lists_come_back_as_one_copy() {
        let mut sets = ConditionSets::default();
        let a = sets.share(list(&["MinimumReplicasAvailable"]));
        let b = sets.share(list(&["MinimumReplicasAvailable"]));
        assert!(Arc::ptr_eq(&a, &b));
        let c = sets.share(list(&["Other"]));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, *list(&["Other"]));
        assert_eq!(sets.held.len(), 2);
    }

    #[test]
    fn lists_no_status_holds_are_dropped_and_held_ones_kept() {
        let mut sets = ConditionSets::default();
        let kept: Vec<Conditions> = (0..10)
            .map(|i| sets.share(list(&[&format!("kept-{i}")])))
            .collect();
        for i in 0..1_000 {
            // Let go at once, as a status replaced by a newer report would.
            sets.share(list(&[&format!("gone-{i}")]));
        }
        assert!(
            sets.held.len() < 2 * MIN_PRUNE_AT + 10,
            "{} held",
            sets.held.len()
        );
        for k in &kept {
            let again = sets.share(list(&[&k[0].reason]));
            assert!(Arc::ptr_eq(k, &again), "a list in use was dropped");
        }
    }
}
