//! A hash map split into copy-on-write shards, for the big tables a checkpoint image copies.
//!
//! Why: `State::image` copies the replicated tables while the node's applies wait. An ordinary
//! map copies every entry (10^5 objects: tens of milliseconds, up to 100 ms on a loaded node,
//! with every client request in flight waiting). A persistent map (a HAMT) copies nothing but
//! costs several cache misses per lookup, a third more per status report. Here a copy shares
//! all shards, and the first change to a shared shard copies that shard only (1/64 of the
//! table), so the cost of a copy is spread over the changes that follow it. A map stays one
//! shard until it holds [`SPLIT_AT`] entries: copying a small one whole is cheap, and many small
//! tables split 64 ways scatter their lookups over many more cache lines (a fifth more per
//! status report in the apply bench, with 100 namespaces of 1,000 objects).
//!
//! Must not: be iterated where order matters. Shards and their maps iterate in hash order,
//! which differs between processes (see `table` for how tables iterate in name order).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

/// foldhash rather than SipHash: hashing the two names of every status report was a visible
/// share of applying it. Seeded per process like std's.
pub(crate) type Hasher = foldhash::fast::RandomState;

type Shard<K, V> = HashMap<K, V, Hasher>;

/// Shards of a split map: a changed shard of a 10^5-entry table is ~1,600 entries to copy.
const SHARDS: usize = 64;

/// Entries above which a one-shard map splits into [`SHARDS`] (never back): a shard this size
/// copies in well under a millisecond. Small in unit tests, so the property test splits maps.
#[cfg(not(test))]
const SPLIT_AT: usize = 4_096;
#[cfg(test)]
const SPLIT_AT: usize = 40;

#[derive(Clone)]
pub(crate) struct ShardedMap<K, V> {
    /// Picks the shard.
    select: Hasher,
    /// What the shards' maps hash with: other seeds than `select`, or every key of a shard
    /// would share the top bits its map tags slots with.
    within: Hasher,
    /// None before anything was inserted, then one, then `SHARDS` once split; `None` is an
    /// empty shard.
    shards: Vec<Option<Arc<Shard<K, V>>>>,
    len: usize,
}

impl<K, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        ShardedMap {
            select: Hasher::default(),
            within: Hasher::default(),
            shards: Vec::new(),
            len: 0,
        }
    }
}

/// The shard of a key's hash. foldhash's bits are good enough for a table's own buckets, but with
/// an unlucky process seed the top bits of keys that differ only in their low bits (small
/// integers, names with a counter) take a few values only: a run of 10^4 keys once filled 24 of
/// the 64 shards. Folding the halves and multiplying by an odd constant (Fibonacci hashing) makes
/// the top six bits depend on every bit of the hash.
fn shard_index(hash: u64) -> usize {
    const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;
    let folded = hash ^ (hash >> 32);
    (folded.wrapping_mul(FIBONACCI) >> (64 - SHARDS.trailing_zeros())) as usize
}

impl<K: Hash + Eq, V> ShardedMap<K, V> {
    fn shard_of<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        if self.shards.len() < SHARDS {
            return 0;
        }
        shard_index(self.select.hash_one(key))
    }

    /// The shard that would hold `key`, if it holds anything.
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> Option<&Shard<K, V>> {
        self.shards.get(self.shard_of(key))?.as_deref()
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shard(key)?.get(key)
    }

    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shard(key)?.get_key_value(key)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.shards.iter().flatten().flat_map(|s| s.iter())
    }
}

impl<K: Hash + Eq + Clone, V: Clone> ShardedMap<K, V> {
    /// The shard at `i` to change, made first if empty and copied first if a copy of this map
    /// still shares it.
    fn shard_mut(&mut self, i: usize) -> &mut Shard<K, V> {
        if self.shards.is_empty() {
            self.shards.push(None);
        }
        let within = &self.within;
        let shard =
            self.shards[i].get_or_insert_with(|| Arc::new(HashMap::with_hasher(within.clone())));
        Arc::make_mut(shard)
    }

    /// The shard that would hold `key`, ready to change: `None` if it is empty, or if a copy
    /// still shares it and it does not hold `key` (so a miss copies nothing).
    fn holding_shard_mut<Q>(&mut self, key: &Q) -> Option<&mut Shard<K, V>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let i = self.shard_of(key);
        let shard = self.shards.get_mut(i)?.as_mut()?;
        // Unshared (the usual case): one lookup, by the caller. A plain count suffices: no `Weak`
        // to a shard is ever made, and `&mut self` keeps other clones from appearing meanwhile.
        if Arc::strong_count(shard) > 1 && !shard.contains_key(key) {
            return None;
        }
        Some(Arc::make_mut(shard))
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.holding_shard_mut(key)?.get_mut(key)
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let i = self.shard_of(&key);
        let old = self.shard_mut(i).insert(key, value);
        if old.is_none() {
            self.len += 1;
            if self.len > SPLIT_AT && self.shards.len() < SHARDS {
                self.split();
            }
        }
        old
    }

    /// Spreads the one shard's entries over `SHARDS` (moved if no copy shares it, else copied).
    fn split(&mut self) {
        let whole = self.shards.pop().flatten();
        self.shards = vec![None; SHARDS];
        for (k, v) in whole.map(Arc::unwrap_or_clone).into_iter().flatten() {
            let i = self.shard_of(&k);
            self.shard_mut(i).insert(k, v);
        }
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let old = self.holding_shard_mut(key)?.remove(key);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FromIterator<(K, V)> for ShardedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = ShardedMap::default();
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

impl<K: Hash + Eq, V: PartialEq> PartialEq for ShardedMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<K: Hash + Eq, V: Eq> Eq for ShardedMap<K, V> {}

impl<K: std::fmt::Debug + Hash + Eq, V: std::fmt::Debug> std::fmt::Debug for ShardedMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_keeps_its_entries_while_the_original_changes() {
        let mut m: ShardedMap<String, u64> = (0..1_000).map(|i| (format!("k{i}"), i)).collect();
        let frozen = m.clone();
        for i in 0..500 {
            *m.get_mut(format!("k{i}").as_str()).unwrap() += 1_000;
        }
        m.remove("k999");
        m.insert("new".into(), 7);
        assert_eq!(m.len(), 1_000);
        assert_eq!(frozen.len(), 1_000);
        for i in 0..1_000u64 {
            assert_eq!(frozen.get(format!("k{i}").as_str()), Some(&i));
        }
        assert_eq!(frozen.get("new"), None);
        assert_eq!(m.get("k3"), Some(&1_003));
        assert_eq!(m.get("k999"), None);
        assert_ne!(m, frozen);
    }

    #[test]
    fn a_small_map_is_one_shard_and_a_large_one_splits() {
        let mut m: ShardedMap<u64, u64> = (0..SPLIT_AT as u64).map(|i| (i, i)).collect();
        assert_eq!(m.shards.len(), 1);
        let frozen = m.clone();
        m.insert(SPLIT_AT as u64, 0);
        assert_eq!(m.shards.len(), SHARDS);
        assert_eq!(frozen.shards.len(), 1, "the copy keeps its one shard");
        for i in 0..SPLIT_AT as u64 {
            assert_eq!(m.get(&i), Some(&i));
            assert_eq!(frozen.get(&i), Some(&i));
        }
        assert_eq!(frozen.get(&(SPLIT_AT as u64)), None);
    }

    #[test]
    fn the_shard_depends_on_every_bit_of_the_hash() {
        let filled = |hashes: &mut dyn Iterator<Item = u64>| {
            let mut seen = [false; SHARDS];
            for h in hashes {
                seen[shard_index(h)] = true;
            }
            seen.iter().filter(|s| **s).count()
        };
        // Hashes that vary only in their low bits, only in their high bits, or that step by a
        // multiple of a large power of two (what a bad seed makes of consecutive keys).
        assert_eq!(filled(&mut (0..4_096u64)), SHARDS);
        assert_eq!(filled(&mut (0..4_096u64).map(|d| d << 52)), SHARDS);
        assert_eq!(filled(&mut (0..4_096u64).map(|d| d << 20)), SHARDS);
        assert_eq!(
            filled(&mut (0..4_096u64).map(|d| d.wrapping_mul(0x5555_5555_5555_5555))),
            SHARDS
        );
        assert!(shard_index(u64::MAX) < SHARDS);
    }

    #[test]
    fn every_shard_fills_whatever_the_seeds() {
        for _ in 0..50 {
            let m: ShardedMap<u64, u64> = (0..5_000).map(|i| (i, i)).collect();
            let filled = m.shards.iter().flatten().count();
            assert_eq!(filled, SHARDS, "{filled} of {SHARDS} shards hold entries");
        }
    }

    #[test]
    fn a_change_copies_only_the_shard_it_touches() {
        let mut m: ShardedMap<u64, u64> = (0..10_000).map(|i| (i, i)).collect();
        let frozen = m.clone();
        *m.get_mut(&42).unwrap() = 0;
        let copied = m
            .shards
            .iter()
            .zip(frozen.shards.iter())
            .filter(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
                (None, None) => false,
                _ => true,
            })
            .count();
        assert_eq!(copied, 1);
        // Misses copy nothing.
        assert!(m.get_mut(&10_001).is_none());
        assert!(m.remove(&10_002).is_none());
        assert_eq!(m.len(), 10_000);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16, u32),
        Remove(u16),
        Bump(u16),
        /// Keep a copy of the map as it is now.
        Copy,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0u16..300, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            (0u16..300).prop_map(Op::Remove),
            (0u16..300).prop_map(Op::Bump),
            Just(Op::Copy),
        ]
    }

    proptest::proptest! {
        /// Against an ordered map: the live map and every copy taken along the way hold exactly
        /// what the model held at that point, however the later changes touched shared shards.
        #[test]
        fn copies_and_the_live_map_match_the_model(ops in proptest::collection::vec(op(), 0..400)) {
            use std::collections::BTreeMap;
            let mut live: ShardedMap<u16, u32> = ShardedMap::default();
            let mut model: BTreeMap<u16, u32> = BTreeMap::new();
            let mut copies = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        proptest::prop_assert_eq!(live.insert(k, v), model.insert(k, v));
                    }
                    Op::Remove(k) => {
                        proptest::prop_assert_eq!(live.remove(&k), model.remove(&k));
                    }
                    Op::Bump(k) => {
                        if let Some(v) = live.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                        if let Some(v) = model.get_mut(&k) {
                            *v = v.wrapping_add(1);
                        }
                    }
                    Op::Copy => copies.push((live.clone(), model.clone())),
                }
            }
            copies.push((live, model));
            for (map, model) in copies {
                proptest::prop_assert_eq!(map.len(), model.len());
                let mut entries: Vec<(u16, u32)> = map.iter().map(|(k, v)| (*k, *v)).collect();
                entries.sort_unstable();
                let expected: Vec<(u16, u32)> = model.into_iter().collect();
                proptest::prop_assert_eq!(entries, expected);
            }
        }
    }

    #[test]
    fn an_empty_map_allocates_no_shards() {
        let mut m: ShardedMap<u64, u64> = ShardedMap::default();
        assert!(m.shards.is_empty());
        assert!(m.get_mut(&1).is_none() && m.remove(&1).is_none());
        assert!(m.shards.is_empty(), "misses allocate nothing");
        m.insert(1, 1);
        assert_eq!(m.shards.len(), 1);
    }

    #[test]
    fn equal_maps_compare_equal_whatever_their_seeds() {
        let a: ShardedMap<u64, u64> = (0..100).map(|i| (i, i * 2)).collect();
        let b: ShardedMap<u64, u64> = (0..100).rev().map(|i| (i, i * 2)).collect();
        assert_eq!(a, b);
        let mut c = b.clone();
        c.insert(5, 0);
        assert_ne!(a, c);
    }
}
