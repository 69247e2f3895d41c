//! Domain invariants asserted after every applied entry in debug builds (the tests and the fault
//! harness, whose nodes are debug builds), so a handler that breaks one stops at the entry that
//! did it instead of surfacing later as a wrong hash. Compiled out of release builds; the checks
//! every build runs are at checkpoints (`StateImage::check_consistency`, raft's checkpointer).
//!
//! Must not: change the state, or judge anything a log may legitimately hold (old logs replay:
//! every check here is on what apply made of an entry, never on the entry itself).

use std::collections::BTreeMap;

use super::State;
use crate::model::ObjectKey;
use crate::scheduler::Decision;

/// Fewest entries between two full consistency checks. The check rebuilds every derived index
/// from the data, O(objects): 409 ms for 20,000 objects in a debug build (the apply bench with
/// `--profile dev`), where an entry's apply takes about 126 us on average. After every entry it
/// would make debug apply thousands of times slower on such a state, so it runs every
/// `max(CONSISTENCY_EVERY, objects)` entries: about one object's rebuild (20 us) per entry
/// whatever the size, some 16 % of a debug apply (estimated from these figures). The checkpointer
/// runs the same check on every checkpoint in every build.
pub(super) const CONSISTENCY_EVERY: u64 = 64;

impl State {
    /// Asserts, after entry `index` applied with `decisions`: each object it placed holds exactly the
    /// replicas of its last decision, and, every `max(CONSISTENCY_EVERY, objects)` entries, that
    /// the derived indexes and aggregates (booked capacity per cluster against the sum over
    /// placements, health alarms, namespace usage) match a rebuild from the data.
    pub(super) fn assert_invariants(&self, index: u64, decisions: &[(ObjectKey, Decision)]) {
        let mut last: BTreeMap<&ObjectKey, &Decision> = BTreeMap::new();
        for (key, decision) in decisions {
            last.insert(key, decision);
        }
        for (key, decision) in last {
            let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
                continue;
            };
            let placed: u64 = obj
                .status
                .clusters
                .iter()
                .map(|p| u64::from(p.replicas))
                .sum();
            let decided: u64 = decision.placement.values().map(|n| u64::from(*n)).sum();
            assert_eq!(
                placed, decided,
                "entry {index}: {key:?} holds {placed} replicas, its decision placed {decided}"
            );
        }
        let every = CONSISTENCY_EVERY.max(self.d.objects.len() as u64);
        if index.is_multiple_of(every) {
            if let Err(e) = self.check_consistency() {
                panic!("entry {index}: derived state disagrees with a rebuild: {e}");
            }
        }
    }
}
