//! Request-id memo: a retried request (same id, same actor, same command) gets the first
//! outcome back and changes nothing.
//!
//! Raft may apply an entry whose client saw an error (leader change), so clients retry with the
//! same id. The memo is part of the replicated state (every node must answer a retry the same
//! way), bounded in log time and in count; eviction is oldest-first, hence deterministic.
//!
//! A memo is scoped to the actor that wrote it and remembers a fingerprint of its command (the
//! Idempotency-Key draft's rules): another actor's id never matches, and the same actor reusing
//! an id for a different command is told so ([`Seen::Reused`]) instead of being answered with
//! the first command's outcome. One actor holds at most [`DEDUPE_MAX_PER_ACTOR`] memos, evicting
//! its own oldest beyond that, so no caller can push everyone else's memos out.
//!
//! Encoding: the layout is unchanged from unscoped memos (an ordered map of id -> memo, then the
//! order), so older snapshots decode. A scoped memo's id in that map is
//! `NUL, fingerprint (16 hex), actor length (8 hex), actor, request id`; ids without the leading
//! NUL are unscoped memos from before, which never match and age out. What is derived from the
//! ids (scope -> id, each actor's ids in order, sequence numbers) is rebuilt on decode.
//!
//! Ids are looked up in a hash map: every command looks one up, and most insert one and evict
//! one, which in a 100,000-entry ordered map cost a handful of cache misses and string compares
//! each. The map is encoded in key order, exactly as an ordered map, so snapshots and state
//! hashes do not depend on hashing.
//!
//! Each id is stored once, shared by the maps and the eviction orders, and all share their
//! contents with a copy (a [`ShardedMap`](super::sharded::ShardedMap) and persistent vectors):
//! copying the memo for a checkpoint image (`State::image`) copies at most a few shard pointers
//! and vector roots, not 100,000 entries.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::command::Command;
use crate::state::Outcome;

/// How long a request id is remembered, in log time: ten minutes covers client retry budgets.
pub const DEDUPE_RETENTION_MS: u64 = 10 * 60 * 1000;
/// Most request ids remembered; at ~200 bytes each, 100k ids cost ~20 MB.
pub const DEDUPE_MAX_ENTRIES: usize = 100_000;
/// Most request ids one actor holds: a fifth of the memo, so at least five busy actors share it
/// before any one of them can evict another's memos early.
pub const DEDUPE_MAX_PER_ACTOR: usize = DEDUPE_MAX_ENTRIES / 5;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Memo {
    pub index: u64,
    pub time_ms: u64,
    pub outcome: Outcome,
}

/// What the memo knows of an entry's request id.
#[derive(Debug)]
pub(crate) enum Seen<'a> {
    /// Not remembered (or no id): apply it.
    New,
    /// The same actor sent the same command under this id: answer with its memo.
    Retry(&'a Memo),
    /// The same actor used this id for a different command: refuse, change nothing.
    Reused(&'a Memo),
}

use super::sharded::ShardedMap as Map;

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Dedupe {
    #[serde(serialize_with = "in_key_order")]
    by_id: Map<Arc<str>, Memo>,
    /// Insertion order (by log index, hence by log time) for eviction: the ids of the map by a
    /// sequence number, so that an id evicted early (by its actor's cap) leaves no slot behind.
    /// Encoded as the plain list of ids; the numbers are derived (only their order matters).
    #[serde(serialize_with = "ids_in_order")]
    order: imbl::OrdMap<u64, Arc<str>>,
    /// Derived: the next sequence number.
    #[serde(skip)]
    next_seq: u64,
    /// Derived: id -> its sequence number in `order`.
    #[serde(skip)]
    seq_of: Map<Arc<str>, u64>,
    /// Derived: (actor, request id) -> the id in the map.
    #[serde(skip)]
    scopes: Map<Arc<str>, Arc<str>>,
    /// Derived: each actor's ids in the map, oldest first.
    #[serde(skip)]
    per_actor: imbl::OrdMap<Arc<str>, imbl::Vector<Arc<str>>>,
}

/// Equal when the replicated part is: the memos and their order (sequence numbers are derived
/// and renumbered on decode).
impl PartialEq for Dedupe {
    fn eq(&self, other: &Self) -> bool {
        self.by_id == other.by_id && self.order.values().eq(other.order.values())
    }
}

impl Eq for Dedupe {}

/// Encodes the memo as an ordered map would: the same bytes whatever the hash seeds.
fn in_key_order<S: Serializer>(by_id: &Map<Arc<str>, Memo>, s: S) -> Result<S::Ok, S::Error> {
    let mut sorted: Vec<(&str, &Memo)> = by_id.iter().map(|(k, m)| (&**k, m)).collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    s.collect_map(sorted)
}

/// Encodes the order as the list of ids it always was.
fn ids_in_order<S: Serializer>(
    order: &imbl::OrdMap<u64, Arc<str>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(order.len()))?;
    for id in order.values() {
        seq.serialize_element(&**id)?;
    }
    seq.end()
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
        let mut memo = Dedupe {
            by_id,
            ..Dedupe::default()
        };
        for id in order {
            // Share the map's ids. An id in the order but not in the map, or twice in it, is
            // made by no writer; it would only be skipped at eviction, so it is dropped here.
            let Some((id, _)) = memo.by_id.get_key_value(id.as_str()) else {
                continue;
            };
            let id = id.clone();
            if memo.seq_of.get(&*id).is_some() {
                continue;
            }
            memo.push(id);
        }
        Ok(memo)
    }
}

/// A fingerprint of what an entry asks for: the first 8 bytes of SHA-256 over its command's
/// encoding (commands hold no hash maps, so the encoding is the same on every node).
pub fn fingerprint(command: &Command) -> u64 {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    // Into a hasher that never fails: as infallible as `LogEntry::encode`.
    bincode::serde::encode_into_std_write(command, &mut h, bincode::config::standard())
        .unwrap_or_else(|e| unreachable!("command encoding failed: {e}"));
    let digest = h.0.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The stored id of a scoped memo.
fn scoped_id(actor: &str, request_id: &str, fingerprint: u64) -> String {
    format!("\0{fingerprint:016x}{:08x}{actor}{request_id}", actor.len())
}

/// The part of a scoped id that names (actor, request id): the id without its fingerprint.
fn scope_of(id: &str) -> &str {
    id.get(17..).unwrap_or("")
}

/// (fingerprint, scope, actor) of a scoped id; None for an unscoped id from before.
fn parse_id(id: &str) -> Option<(u64, &str, &str)> {
    let rest = id.strip_prefix('\0')?;
    let fingerprint = u64::from_str_radix(rest.get(..16)?, 16).ok()?;
    let len = usize::from_str_radix(rest.get(16..24)?, 16).ok()?;
    let actor = rest.get(24..24usize.checked_add(len)?)?;
    Some((fingerprint, scope_of(id), actor))
}

impl Dedupe {
    /// What the memo remembers of `actor`'s `request_id` at log time `now_ms`, for a command
    /// whose [`fingerprint`] is `fingerprint`.
    pub fn lookup(&self, actor: &str, request_id: &str, fingerprint: u64, now_ms: u64) -> Seen<'_> {
        if request_id.is_empty() {
            return Seen::New;
        }
        let wanted = scoped_id(actor, request_id, fingerprint);
        let Some(id) = self.scopes.get(scope_of(&wanted)) else {
            return Seen::New;
        };
        let Some(memo) = self.by_id.get(&**id) else {
            return Seen::New;
        };
        if now_ms.saturating_sub(memo.time_ms) > DEDUPE_RETENTION_MS {
            Seen::New
        } else if **id == *wanted {
            Seen::Retry(memo)
        } else {
            Seen::Reused(memo)
        }
    }

    /// Remembers the outcome of `actor`'s `request_id` (for a command of `fingerprint`).
    pub fn remember(&mut self, actor: &str, request_id: &str, fingerprint: u64, memo: Memo) {
        if request_id.is_empty() {
            return;
        }
        let now_ms = memo.time_ms;
        let id: Arc<str> = scoped_id(actor, request_id, fingerprint).into();
        // An expired memo of the same scope may still be stored; it is replaced.
        if let Some(old) = self.scopes.get(scope_of(&id)).cloned() {
            self.forget(&old);
        }
        self.by_id.insert(id.clone(), memo);
        self.push(id);
        // The actor's own oldest go first once it holds its share.
        while let Some(oldest) = self
            .per_actor
            .get(actor)
            .filter(|mine| mine.len() > DEDUPE_MAX_PER_ACTOR)
            .and_then(|mine| mine.front().cloned())
        {
            self.forget(&oldest);
        }
        while let Some((_, oldest)) = self.order.get_min() {
            let expired = self
                .by_id
                .get(&**oldest)
                .is_none_or(|m| now_ms.saturating_sub(m.time_ms) > DEDUPE_RETENTION_MS);
            if !expired && self.by_id.len() <= DEDUPE_MAX_ENTRIES {
                break;
            }
            let oldest = oldest.clone();
            self.forget(&oldest);
        }
    }

    /// Adds `id` (already in the map) at the end of the order and to what is derived from it.
    fn push(&mut self, id: Arc<str>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.insert(seq, id.clone());
        self.seq_of.insert(id.clone(), seq);
        if let Some((_, scope, actor)) = parse_id(&id) {
            self.scopes.insert(scope.into(), id.clone());
            self.per_actor
                .entry(actor.into())
                .or_default()
                .push_back(id);
        }
    }

    /// Drops `id` from the map, the order and what is derived from them.
    fn forget(&mut self, id: &Arc<str>) {
        self.by_id.remove(&**id);
        if let Some(seq) = self.seq_of.remove(&**id) {
            self.order.remove(&seq);
        }
        let Some((_, scope, actor)) = parse_id(id) else {
            return;
        };
        self.scopes.remove(scope);
        let emptied = match self.per_actor.get_mut(actor) {
            Some(mine) => {
                // Almost always the front: the order is the actor's order too.
                if mine.front() == Some(id) {
                    mine.pop_front();
                } else {
                    mine.retain(|o| o != id);
                }
                mine.is_empty()
            }
            None => false,
        };
        if emptied {
            self.per_actor.remove(actor);
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

    /// The memo index a retry of `actor`'s `id` (command fingerprint 7) would be answered with.
    fn retry(d: &Dedupe, actor: &str, id: &str, now_ms: u64) -> Option<u64> {
        match d.lookup(actor, id, 7, now_ms) {
            Seen::Retry(m) => Some(m.index),
            Seen::New => None,
            Seen::Reused(m) => panic!("reused {m:?}"),
        }
    }

    #[test]
    fn remembers_within_retention_only() {
        let mut d = Dedupe::default();
        d.remember("u", "a", 7, memo(1, 1000));
        assert_eq!(retry(&d, "u", "a", 1000 + DEDUPE_RETENTION_MS), Some(1));
        assert_eq!(retry(&d, "u", "a", 1001 + DEDUPE_RETENTION_MS), None);
        assert!(matches!(d.lookup("u", "", 7, 1000), Seen::New));
        d.remember("u", "b", 7, memo(2, 2001 + DEDUPE_RETENTION_MS));
        assert_eq!(d.len(), 1, "a expired and was evicted");
    }

    #[test]
    fn memos_are_scoped_by_actor_and_command() {
        let mut d = Dedupe::default();
        d.remember("alice", "k", 7, memo(1, 0));
        assert_eq!(retry(&d, "alice", "k", 0), Some(1));
        // Another actor's id never matches; it is remembered separately.
        assert_eq!(retry(&d, "mallory", "k", 0), None);
        d.remember("mallory", "k", 7, memo(2, 0));
        assert_eq!(retry(&d, "alice", "k", 0), Some(1));
        assert_eq!(retry(&d, "mallory", "k", 0), Some(2));
        // The same actor and id for another command: reused, not a retry.
        assert!(matches!(d.lookup("alice", "k", 8, 0), Seen::Reused(m) if m.index == 1));
        // Actor and id boundaries cannot be shifted to collide.
        d.remember("ab", "c", 7, memo(3, 0));
        assert_eq!(retry(&d, "a", "bc", 0), None);
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
            d.remember("u", id, 7, memo(i as u64, 5));
            ordered
                .by_id
                .insert(scoped_id("u", id, 7), memo(i as u64, 5));
            ordered.order.push_back(scoped_id("u", id, 7));
        }
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(&d, config).unwrap();
        assert_eq!(
            bytes,
            bincode::serde::encode_to_vec(&ordered, config).unwrap()
        );
        let (back, _): (Dedupe, usize) = bincode::serde::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(back, d);
        assert_eq!(retry(&back, "u", "zz", 5), Some(2));
    }

    #[test]
    fn unscoped_memos_from_before_decode_never_match_and_age_out() {
        let old = Encoded {
            by_id: [("key:a".to_string(), memo(1, 0))].into_iter().collect(),
            order: ["key:a".to_string()].into_iter().collect(),
        };
        #[derive(Serialize)]
        struct Plain<'a> {
            by_id: &'a BTreeMap<String, Memo>,
            order: &'a VecDeque<String>,
        }
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(
            Plain {
                by_id: &old.by_id,
                order: &old.order,
            },
            config,
        )
        .unwrap();
        let (mut d, _): (Dedupe, usize) =
            bincode::serde::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(retry(&d, "u", "key:a", 0), None);
        d.remember("u", "b", 7, memo(2, 1 + DEDUPE_RETENTION_MS));
        assert_eq!(d.len(), 1, "the old memo expired and was evicted");
    }

    #[test]
    fn bounded_count_evicts_oldest() {
        let mut d = Dedupe::default();
        // Six actors, so that no one of them reaches its own cap.
        let actor = |i: u64| format!("u{}", i % 6);
        for i in 0..(DEDUPE_MAX_ENTRIES as u64 + 6) {
            d.remember(&actor(i), &format!("r{i}"), 7, memo(i, 0));
        }
        assert_eq!(d.len(), DEDUPE_MAX_ENTRIES);
        assert_eq!(retry(&d, &actor(5), "r5", 0), None);
        assert_eq!(retry(&d, &actor(6), "r6", 0), Some(6));
    }

    #[test]
    fn one_actor_evicts_only_its_own_memos() {
        let mut d = Dedupe::default();
        d.remember("victim", "mine", 7, memo(0, 0));
        let n = DEDUPE_MAX_ENTRIES as u64 * 2;
        for i in 1..=n {
            d.remember("flood", &format!("f{i}"), 7, memo(i, 0));
        }
        assert_eq!(
            retry(&d, "victim", "mine", 0),
            Some(0),
            "the victim's memo stays"
        );
        assert_eq!(d.len(), DEDUPE_MAX_PER_ACTOR + 1);
        let first_kept = n - DEDUPE_MAX_PER_ACTOR as u64 + 1;
        assert_eq!(retry(&d, "flood", &format!("f{}", first_kept - 1), 0), None);
        assert_eq!(
            retry(&d, "flood", &format!("f{first_kept}"), 0),
            Some(first_kept)
        );
        // Early evictions leave order slots behind; a decoded copy rebuilds the same memo and
        // goes on evicting exactly as the original does.
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(&d, config).unwrap();
        let (mut back, _): (Dedupe, usize) =
            bincode::serde::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(back, d);
        // A retry of an id evicted early is remembered again, once.
        for m in [&mut d, &mut back] {
            m.remember("flood", "f1", 7, memo(n + 1, 1));
            m.remember("victim", "again", 7, memo(n + 2, 2));
        }
        assert_eq!(back, d);
        assert_eq!(
            bincode::serde::encode_to_vec(&back, config).unwrap(),
            bincode::serde::encode_to_vec(&d, config).unwrap()
        );
        assert_eq!(retry(&d, "flood", "f1", 2), Some(n + 1));
        assert_eq!(
            d.order
                .values()
                .filter(|o| scope_of(o).ends_with("f1"))
                .count(),
            1
        );
        assert_eq!(d.order.len(), d.len(), "no slot left behind");
    }
}
