//! Request-id memo: a retried request (same id) gets the first outcome back and changes nothing.
//!
//! Raft may apply an entry whose client saw an error (leader change), so clients retry with the
//! same id. The memo is part of the replicated state (every node must answer a retry the same
//! way), bounded in log time and in count; eviction is oldest-first, hence deterministic.
//!
//! Ids are looked up in a hash map: every command looks one up, and most insert one and evict
//! one, which in a 100,000-entry ordered map cost a handful of cache misses and string compares
//! each. The map is encoded in key order, exactly as an ordered map, so snapshots and state
//! hashes do not depend on hashing.
//!
//! Each id is stored once, shared by the map and the eviction order, and both share their
//! contents with a copy (a [`ShardedMap`](super::sharded::ShardedMap) and a persistent vector):
//! copying the memo for a checkpoint image (`State::image`) copies at most 64 shard pointers
//! and a vector's root, not 100,000 entries.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::state::Outcome;

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

use super::sharded::ShardedMap as Map;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Dedupe {
    #[serde(serialize_with = "in_key_order")]
    by_id: Map<Arc<str>, Memo>,
    /// Insertion order (by log index, hence by log time) for eviction; the same ids as the map.
    #[serde(serialize_with = "super::shared_seq::serialize")]
    order: imbl::Vector<Arc<str>>,
}

/// Encodes the memo as an ordered map would: the same bytes whatever the hash seeds.
fn in_key_order<S: Serializer>(by_id: &Map<Arc<str>, Memo>, s: S) -> Result<S::Ok, S::Error> {
    let mut sorted: Vec<(&str, &Memo)> = by_id.iter().map(|(k, m)| (&**k, m)).collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    s.collect_map(sorted)
}

/// The encoded layout: an ordered map, then the order.
#[derive(Deserialize)]
struct Encoded {
    by_id: BTreeMap<String, Memo>,
    order: VecDeque<String>,
}

impl<'de> Deserialize<'de> for Dedupe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Encoded { by_id, order } = Encoded::deserialize(d)?;
        let by_id: Map<Arc<str>, Memo> = by_id.into_iter().map(|(k, m)| (k.into(), m)).collect();
        // Share the map's ids; an id in the order but not in the map (no writer makes one)
        // gets its own, and eviction skips it as it always did.
        let order = order
            .into_iter()
            .map(|id| match by_id.get_key_value(id.as_str()) {
                Some((shared, _)) => shared.clone(),
                None => id.into(),
            })
            .collect();
        Ok(Dedupe { by_id, order })
    }
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
        if self.by_id.remove(request_id).is_some() {
            self.order.retain(|old| **old != *request_id);
        }
        let id: Arc<str> = request_id.into();
        self.by_id.insert(id.clone(), memo);
        self.order.push_back(id);
        while let Some(oldest) = self.order.front() {
            let expired = self
                .by_id
                .get(oldest)
                .is_none_or(|m| now_ms.saturating_sub(m.time_ms) > DEDUPE_RETENTION_MS);
            if !expired && self.order.len() <= DEDUPE_MAX_ENTRIES {
                break;
            }
            if let Some(id) = self.order.pop_front() {
                self.by_id.remove(&*id);
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
    fn encodes_in_key_order_like_an_ordered_map() {
        #[derive(Serialize)]
        struct Ordered {
            by_id: BTreeMap<String, Memo>,
            order: VecDeque<String>,
        }
        let mut d = Dedupe::default();
        let mut ordered = Ordered {
            by_id: BTreeMap::new(),
            order: VecDeque::new(),
        };
        for (i, id) in ["m", "b", "zz", "a", "q1", "q0"].iter().enumerate() {
            d.remember(id, memo(i as u64, 5));
            ordered.by_id.insert(id.to_string(), memo(i as u64, 5));
            ordered.order.push_back(id.to_string());
        }
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(&d, config).unwrap();
        assert_eq!(
            bytes,
            bincode::serde::encode_to_vec(&ordered, config).unwrap()
        );
        let (back, _): (Dedupe, usize) = bincode::serde::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(back, d);
        assert_eq!(back.lookup("zz", 5).unwrap().index, 2);
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
