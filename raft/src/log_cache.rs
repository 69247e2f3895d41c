//! The newest raft log entries, held in memory beside the store.
//!
//! openraft reads every entry back right after appending it: the raft core reads it to hand it
//! to the state machine (awaiting the read on its own task), and the leader reads it once per
//! follower to replicate it. From RocksDB each of those reads is a hop to the blocking pool, a
//! range scan and a decode of every command. This cache answers them with reference-counted
//! copies of the entries that were appended.
//!
//! It mirrors the store's tail and never decides anything: appends extend it, truncate and
//! purge cut it, and past its count or byte budget it forgets its oldest entries, but only ones
//! the store has written: `append` returns before the store's writer has written the entries
//! (openraft asks only that they be readable), so until it has, the cache is where they are
//! read from. A read is answered only when the cache holds the whole range; anything else goes
//! to the store, which stays the only source of truth.

use std::collections::VecDeque;

use openraft::RaftLogId;

use crate::types::Entry;

/// Entries kept: a follower more than this far behind is served from the store. Reads right
/// after an append, and followers keeping up, need the newest few hundred entries; 8,192 entries
/// held about 60 MiB more than 512 did in a fleet run, with the same convergence time
/// (docs/performance.md).
pub(crate) const MAX_CACHED_ENTRIES: usize = 1024;
/// Encoded bytes kept, whichever bound is hit first: about 56 MiB decoded, some seconds of the
/// log at the busiest write rate measured (a fleet converging wrote under 1 MiB/s).
pub(crate) const MAX_CACHED_BYTES: usize = 16 << 20;
/// A decoded entry takes about this many times its encoded bytes in memory, as a ratio (a batch
/// of status reports is a vector of small structs, each owning its strings): jemalloc's
/// profiler found about 100 MB of decoded entries held where the encoded bytes were 30 MB.
const DECODED_PER_ENCODED: (usize, usize) = (7, 2);

pub(crate) struct LogCache {
    /// Consecutive entries starting at `first`, each with its encoded size and the number of
    /// the append that brought it (non-decreasing from front to back).
    entries: VecDeque<(Entry, usize, u64)>,
    first: u64,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
    /// Number of the last append.
    appended: u64,
    /// Appends up to this number are written in the store. Appends are numbered rather than
    /// marked by index: an append truncated and rewritten at the same indexes is a new one.
    written: u64,
}

impl LogCache {
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Self {
        LogCache {
            entries: VecDeque::new(),
            first: 0,
            bytes: 0,
            max_entries,
            max_bytes,
            appended: 0,
            written: 0,
        }
    }

    /// About how much memory the entries held take once decoded (their encoded bytes scaled
    /// by [`DECODED_PER_ENCODED`]): what the cache costs, for the gauge.
    pub(crate) fn memory_estimate(&self) -> usize {
        let (num, den) = DECODED_PER_ENCODED;
        self.bytes / den * num
    }

    /// One past the last index held.
    fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    /// Records entries about to be handed to the store, in log order with their encoded sizes.
    /// Answers the append's number, for [`LogCache::written`].
    pub(crate) fn append(&mut self, entries: impl IntoIterator<Item = (Entry, usize)>) -> u64 {
        self.appended += 1;
        let seq = self.appended;
        for (entry, size) in entries {
            let index = entry.get_log_id().index;
            if self.entries.is_empty() || index > self.end() {
                // A gap (the store's tail moved by a snapshot install): start over here.
                self.clear();
                self.first = index;
            } else if index < self.end() {
                // openraft truncates before overwriting; do the same if it ever did not.
                self.truncate(index);
                if self.entries.is_empty() {
                    self.first = index;
                }
            }
            self.entries.push_back((entry, size, seq));
            self.bytes += size;
        }
        self.shrink();
        seq
    }

    /// The store has written append `seq` (and, its writer keeping order, every one before).
    pub(crate) fn written(&mut self, seq: u64) {
        self.written = self.written.max(seq);
        self.shrink();
    }

    /// Forgets the oldest written entries while over a budget.
    fn shrink(&mut self) {
        while self.entries.len() > self.max_entries
            || (self.bytes > self.max_bytes && self.entries.len() > 1)
        {
            match self.entries.front() {
                Some((_, _, seq)) if *seq <= self.written => self.pop_front(),
                _ => break,
            }
        }
    }

    /// Forgets entries at `from` and after, as the store's truncate does.
    pub(crate) fn truncate(&mut self, from: u64) {
        while self.end() > from.max(self.first) {
            match self.entries.pop_back() {
                Some((_, size, _)) => self.bytes -= size,
                None => break,
            }
        }
    }

    /// Forgets entries up to and including `upto`, as the store's purge does.
    pub(crate) fn purge(&mut self, upto: u64) {
        while !self.entries.is_empty() && self.first <= upto {
            self.pop_front();
        }
    }

    /// The entries `start..end`, if every one of them is held.
    pub(crate) fn get(&self, start: u64, end: u64) -> Option<Vec<Entry>> {
        if start >= end {
            return Some(Vec::new());
        }
        if self.entries.is_empty() || start < self.first || end > self.end() {
            return None;
        }
        let from = (start - self.first) as usize;
        let to = (end - self.first) as usize;
        Some(
            self.entries
                .range(from..to)
                .map(|(e, _, _)| e.clone())
                .collect(),
        )
    }

    fn pop_front(&mut self) {
        if let Some((_, size, _)) = self.entries.pop_front() {
            self.bytes -= size;
            self.first += 1;
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::*;
    use crate::types::tests::blank_entry as entry;

    fn ids(entries: &[Entry]) -> Vec<(u64, u64)> {
        entries
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    #[test]
    fn serves_only_ranges_it_holds_whole() {
        let mut c = LogCache::new(100, 1 << 20);
        c.append((5..10).map(|i| (entry(1, i), 10)));
        assert_eq!(
            ids(&c.get(5, 10).unwrap()),
            (5..10).map(|i| (1, i)).collect::<Vec<_>>()
        );
        assert_eq!(ids(&c.get(7, 8).unwrap()), vec![(1, 7)]);
        assert!(c.get(4, 8).is_none(), "starts before the cache");
        assert!(c.get(8, 11).is_none(), "ends after the cache");
        assert_eq!(c.get(9, 9).unwrap().len(), 0);
    }

    #[test]
    fn truncate_then_append_replaces_the_tail() {
        let mut c = LogCache::new(100, 1 << 20);
        c.append((1..=6).map(|i| (entry(1, i), 10)));
        c.truncate(4);
        assert!(c.get(4, 5).is_none());
        c.append((4..=5).map(|i| (entry(2, i), 10)));
        assert_eq!(ids(&c.get(3, 6).unwrap()), vec![(1, 3), (2, 4), (2, 5)]);
        assert_eq!(c.bytes, 50);
    }

    #[test]
    fn a_gap_starts_over_and_purge_cuts_the_head() {
        let mut c = LogCache::new(100, 1 << 20);
        c.append((1..=3).map(|i| (entry(1, i), 10)));
        c.append([(entry(1, 10), 10)]);
        assert!(c.get(3, 4).is_none());
        assert_eq!(ids(&c.get(10, 11).unwrap()), vec![(1, 10)]);
        c.append((11..=14).map(|i| (entry(1, i), 10)));
        c.purge(12);
        assert!(c.get(12, 13).is_none());
        assert_eq!(ids(&c.get(13, 15).unwrap()), vec![(1, 13), (1, 14)]);
        c.purge(20);
        assert!(c.get(14, 15).is_none());
        assert_eq!(c.bytes, 0);
    }

    #[test]
    fn budgets_forget_the_oldest_written() {
        let mut c = LogCache::new(4, 1 << 20);
        let seq = c.append((1..=6).map(|i| (entry(1, i), 1)));
        c.written(seq);
        assert!(c.get(2, 3).is_none());
        assert_eq!(c.get(3, 7).unwrap().len(), 4);
        let mut c = LogCache::new(100, 25);
        let seq = c.append((1..=6).map(|i| (entry(1, i), 10)));
        c.written(seq);
        assert_eq!(c.get(5, 7).unwrap().len(), 2);
        assert!(c.get(4, 7).is_none());
        // One entry over the byte budget is still kept: the newest entry is the one read next.
        let seq = c.append([(entry(1, 7), 100)]);
        c.written(seq);
        assert_eq!(c.get(7, 8).unwrap().len(), 1);
    }

    #[test]
    fn entries_the_store_has_not_written_stay_past_the_budget() {
        let mut c = LogCache::new(1, 1 << 20);
        let first = c.append((1..=3).map(|i| (entry(1, i), 1)));
        let second = c.append((4..=5).map(|i| (entry(1, i), 1)));
        assert_eq!(c.get(1, 6).unwrap().len(), 5, "nothing is in the store yet");
        c.written(first);
        assert!(c.get(3, 4).is_none(), "written and over the budget");
        assert_eq!(
            c.get(4, 6).unwrap().len(),
            2,
            "the second append is unwritten"
        );
        // A rewrite of the same indexes is a new append: the old one being written does not
        // count for it.
        c.truncate(4);
        let third = c.append((4..=5).map(|i| (entry(2, i), 1)));
        c.written(second);
        assert_eq!(ids(&c.get(4, 6).unwrap()), vec![(2, 4), (2, 5)]);
        c.written(third);
        assert_eq!(ids(&c.get(5, 6).unwrap()), vec![(2, 5)]);
        assert!(c.get(4, 5).is_none());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Append {
            term: u64,
            at: u64,
            n: u64,
        },
        Truncate(u64),
        Purge(u64),
        /// The store's writer catches up with every append so far.
        Written,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1..4u64, 0..40u64, 1..6u64).prop_map(|(term, at, n)| Op::Append { term, at, n }),
            1 => (0..40u64).prop_map(Op::Truncate),
            1 => (0..40u64).prop_map(Op::Purge),
            2 => Just(Op::Written),
        ]
    }

    proptest! {
        /// Whatever the cache answers equals what a log holding every operation would answer.
        #[test]
        fn answers_agree_with_a_full_log(ops in prop::collection::vec(op(), 1..40), max in 1..12usize) {
            let mut c = LogCache::new(max, 1 << 20);
            let mut log: BTreeMap<u64, u64> = BTreeMap::new();
            let mut unwritten: BTreeSet<u64> = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Append { term, at, n } => {
                        if !c.entries.is_empty() && at > c.end() {
                            // A gap (after a snapshot install): openraft never reads below it.
                            unwritten.clear();
                        }
                        // Like openraft: overwriting entries truncates them first.
                        log.retain(|i, _| *i < at);
                        unwritten.retain(|i| *i < at);
                        c.truncate(at);
                        for i in at..at + n {
                            log.insert(i, term);
                            unwritten.insert(i);
                        }
                        c.append((at..at + n).map(|i| (entry(term, i), 1)));
                    }
                    Op::Truncate(at) => {
                        log.retain(|i, _| *i < at);
                        unwritten.retain(|i| *i < at);
                        c.truncate(at);
                    }
                    Op::Purge(upto) => {
                        log.retain(|i, _| *i > upto);
                        unwritten.retain(|i| *i > upto);
                        c.purge(upto);
                    }
                    Op::Written => {
                        let last = c.appended;
                        c.written(last);
                        unwritten.clear();
                    }
                }
                // Over the budget only with unwritten entries at the front.
                let unwritten_front = c.entries.front().is_some_and(|e| e.2 > c.written);
                prop_assert!(c.entries.len() <= max || unwritten_front);
                // Whatever the store does not have yet is held.
                for i in &unwritten {
                    prop_assert!(c.get(*i, *i + 1).is_some(), "unwritten entry {} was dropped", i);
                }
                for start in 0..45u64 {
                    for end in start + 1..46u64 {
                        if let Some(got) = c.get(start, end) {
                            let want: Vec<(u64, u64)> =
                                (start..end).map(|i| (log.get(&i).copied().unwrap_or(0), i)).collect();
                            prop_assert_eq!(ids(&got), want);
                        }
                    }
                }
            }
        }
    }
}
