//! Request-id memo: a retried request (same id) gets the first outcome back and changes nothing.
//!
//! Raft may apply an entry whose client saw an error (leader change), so clients retry with the
//! same id. The memo is part of the replicated state (every node must answer a retry the same
//! way), bounded in log time and in count; eviction is oldest-first, hence deterministic.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;

/// How long a request id is remembered, in log time: ten minutes covers client retry budgets.
pub const DEDUPE_RETENTION_MS: u64 = 10 * 60 * 1000;
/// Most request ids remembered; at ~200 bytes each, 100k ids cost ~20 MB.
pub const DEDUPE_MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Memo {
    pub index: u64,
    pub time_ms: u64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Dedupe {
    by_id: BTreeMap<String, Memo>,
    /// Insertion order (by log index, hence by log time) for eviction.
    order: VecDeque<String>,
}

impl Dedupe {
    /// The first outcome of `request_id` if it is still remembered at log time `now_ms`.
    pub fn lookup(&self, request_id: &str, now_ms: u64) -> Option<&Memo> {
        if request_id.is_empty() {
            return None;
        }
        self.by_id
            .get(request_id)
            .filter(|m| now_ms.saturating_sub(m.time_ms) <= DEDUPE_RETENTION_MS)
    }

    pub fn remember(&mut self, request_id: &str, memo: Memo) {
        if request_id.is_empty() {
            return;
        }
        let now_ms = memo.time_ms;
        // An expired memo of the same id may still be stored; replace it and its order slot.
        if self.by_id.insert(request_id.to_owned(), memo).is_some() {
            self.order.retain(|id| id != request_id);
        }
        self.order.push_back(request_id.to_owned());
        while let Some(oldest) = self.order.front() {
            let expired = self
                .by_id
                .get(oldest)
                .is_none_or(|m| now_ms.saturating_sub(m.time_ms) > DEDUPE_RETENTION_MS);
            if !expired && self.order.len() <= DEDUPE_MAX_ENTRIES {
                break;
            }
            if let Some(id) = self.order.pop_front() {
                self.by_id.remove(&id);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo(index: u64, time_ms: u64) -> Memo {
        Memo {
            index,
            time_ms,
            outcome: Outcome::Accepted {
                resource_version: Some(index),
            },
        }
    }

    #[test]
    fn remembers_within_retention_only() {
        let mut d = Dedupe::default();
        d.remember("a", memo(1, 1000));
        assert_eq!(d.lookup("a", 1000 + DEDUPE_RETENTION_MS).unwrap().index, 1);
        assert!(d.lookup("a", 1001 + DEDUPE_RETENTION_MS).is_none());
        assert!(d.lookup("", 1000).is_none());
        d.remember("b", memo(2, 2001 + DEDUPE_RETENTION_MS));
        assert_eq!(d.len(), 1, "a expired and was evicted");
    }

    #[test]
    fn bounded_count_evicts_oldest() {
        let mut d = Dedupe::default();
        for i in 0..(DEDUPE_MAX_ENTRIES as u64 + 5) {
            d.remember(&format!("r{i}"), memo(i, 0));
        }
        assert_eq!(d.len(), DEDUPE_MAX_ENTRIES);
        assert!(d.lookup("r4", 0).is_none());
        assert!(d.lookup("r5", 0).is_some());
    }
}
