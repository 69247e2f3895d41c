//! Static weights with min/max: the KubeFed ReplicaSchedulingPreference planner's rules.
//!
//! Given the same inputs, [`plan`] returns the same plan and overflow as KubeFed's planner
//! (`pkg/controller/util/planner`), which the `scheduler_kubefed` tests check case by case.
//! The rules, restated:
//! 1. Each available cluster takes its own preference, else the `"*"` one, else it gets 0 and
//!    takes no further part.
//! 2. Preferences are ordered by weight (descending), then by a 32-bit FNV-1 hash of the cluster
//!    name followed by a salt (ascending). The hash keeps a one-replica object from always
//!    landing on the alphabetically first cluster.
//! 3. In that order, each cluster gets `min(minReplicas, remaining, capacity)`.
//! 4. Without rebalance, a cluster already running more than that is topped up towards what it
//!    runs now (capped by maxReplicas, capacity and what remains); those replicas are
//!    "preallocated" and are consumed first by later rounds.
//! 5. Rounds: each round shares the replicas left at its start in proportion to weight,
//!    rounding every share up, in order, never beyond what remains; a cluster that hits
//!    maxReplicas or capacity is full and leaves; capacity overflow is recorded. Rounds stop
//!    when nothing is left or a round changes nothing.
//! 6. Without rebalance, the overflow is trimmed to the number of replicas left unplaced.
//!
//! Determinism note (where fedraft differs from KubeFed): KubeFed sorts with an unstable sort,
//! so two clusters whose hashes collide are ordered arbitrarily; fedraft orders them by name.
//! Every other ordering is identical. `schedule` salts the hash with the object's
//! `namespace/name` (`ScheduleRequest::object_key`). Must not: filter clusters or read capacity
//! reports; the caller passes capacity as replica counts.

use std::collections::BTreeMap;

use crate::policy::{ClusterPreference, DEFAULT_PREFERENCE_KEY};

/// A plan: replicas per cluster, and the capacity overflow KubeFed reports beside it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub plan: BTreeMap<String, u64>,
    pub overflow: BTreeMap<String, u64>,
}

/// One available cluster as the planner sees it.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub name: &'a str,
    pub pref: Option<&'a ClusterPreference>,
    pub current: Option<u64>,
    pub capacity: Option<u64>,
}

/// 32-bit FNV-1 (multiply, then xor) over the bytes of `a` followed by `b`.
pub fn fnv1_32(a: &str, b: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &byte in a.as_bytes().iter().chain(b.as_bytes()) {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(byte);
    }
    h
}

/// `fnv1_32(name, salt)` for `n` names. FNV is one long multiply chain per name, so eight
/// names are hashed side by side to let their chains overlap; the results are those of
/// `fnv1_32`.
fn fnv1_32_many<'a>(
    n: usize,
    name: impl Fn(usize) -> &'a str,
    salt: &str,
    mut out: impl FnMut(usize, u32),
) {
    const LANES: usize = 8;
    let mut i = 0;
    while i + LANES <= n {
        let names: [&[u8]; LANES] = std::array::from_fn(|l| name(i + l).as_bytes());
        let common = names.iter().map(|n| n.len()).min().unwrap_or(0);
        let heads: [&[u8]; LANES] = names.map(|n| &n[..common]);
        let mut h = [FNV_BASIS; LANES];
        for j in 0..common {
            for (lane, head) in h.iter_mut().zip(&heads) {
                *lane = lane.wrapping_mul(FNV_PRIME) ^ u32::from(head[j]);
            }
        }
        for (lane, n) in h.iter_mut().zip(&names) {
            *lane = fnv1_32_from(*lane, &n[common..]);
        }
        for &b in salt.as_bytes() {
            for lane in h.iter_mut() {
                *lane = lane.wrapping_mul(FNV_PRIME) ^ u32::from(b);
            }
        }
        for (l, &h) in h.iter().enumerate() {
            out(i + l, h);
        }
        i += LANES;
    }
    for k in i..n {
        out(
            k,
            fnv1_32_from(fnv1_32_from(FNV_BASIS, name(k).as_bytes()), salt.as_bytes()),
        );
    }
}

const FNV_BASIS: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

fn fnv1_32_from(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        h = h.wrapping_mul(FNV_PRIME) ^ u32::from(b);
    }
    h
}

/// The preference that applies to `cluster`: its own, else `"*"`, else none.
pub fn preference_for<'a>(
    weights: &'a BTreeMap<String, ClusterPreference>,
    cluster: &str,
) -> Option<&'a ClusterPreference> {
    weights
        .get(cluster)
        .or_else(|| weights.get(DEFAULT_PREFERENCE_KEY))
}

/// KubeFed's `Plan` over maps, for callers and tests that think in names.
pub fn plan(
    weights: &BTreeMap<String, ClusterPreference>,
    total: u64,
    available: &[&str],
    current: &BTreeMap<String, u64>,
    capacity: &BTreeMap<String, u64>,
    rebalance: bool,
    salt: &str,
) -> Plan {
    let entries: Vec<Entry<'_>> = available
        .iter()
        .map(|&name| Entry {
            name,
            pref: preference_for(weights, name),
            current: current.get(name).copied(),
            capacity: capacity.get(name).copied(),
        })
        .collect();
    let (counts, overflow) = plan_entries(total, &entries, rebalance, salt);
    let mut out = Plan::default();
    for (i, e) in entries.iter().enumerate() {
        out.plan.insert(e.name.to_string(), counts[i]);
        if overflow[i] > 0 {
            out.overflow.insert(e.name.to_string(), overflow[i]);
        }
    }
    out
}

/// The planner over a slice: returns (replicas, overflow) parallel to `entries`.
pub fn plan_entries(
    total: u64,
    entries: &[Entry<'_>],
    rebalance: bool,
    salt: &str,
) -> (Vec<u64>, Vec<u64>) {
    let parts: Vec<Part> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let p = e.pref?;
            Some(Part::new(
                i,
                p.weight,
                u64::from(p.min_replicas),
                p.max_replicas.map_or(u64::MAX, u64::from),
                e.capacity.unwrap_or(u64::MAX),
                e.current.unwrap_or(0),
            ))
        })
        .collect();
    let mut planned = vec![0u64; entries.len()];
    let mut overflow = vec![0u64; entries.len()];
    let over = plan_parts(
        total,
        parts,
        |i| entries[i].name,
        rebalance,
        salt,
        |i, n| planned[i] = n,
    );
    for (i, o) in over {
        overflow[i as usize] = o;
    }
    (planned, overflow)
}

/// One cluster taking part in the planner (it has a preference), kept in planning order while
/// the rules run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    weight: u64,
    /// `u64::MAX` = no maxReplicas: a cap no count reaches behaves exactly as none.
    max: u64,
    /// `u64::MAX` = no capacity limit, for the same reason.
    cap: u64,
    /// The minimum until rule 3, then the replicas planned so far.
    planned: u64,
    /// What it runs now until rule 4 (0 = none: rule 4 ignores a count not above the
    /// minimum), then the replicas preallocated to it.
    keep: u64,
    /// Its position in the caller's input.
    pos: u32,
}

impl Part {
    pub(crate) fn new(pos: usize, weight: u64, min: u64, max: u64, cap: u64, current: u64) -> Self {
        Self {
            weight,
            max,
            cap,
            planned: min,
            keep: current,
            // A planner input of 2^32 clusters could not be held in memory.
            pos: u32::try_from(pos).unwrap_or(u32::MAX),
        }
    }
}

/// The planner itself over the clusters that take part, listed by ascending input position
/// (`name(pos)` names them). Positions not listed get 0 and are not reported; `set(pos,
/// replicas)` receives every listed position's count, once. Returns the capacity overflow as
/// (position, replicas), positions without overflow left out.
///
/// The parts are put in planning order once, so every rule is a sequential pass over one
/// compact array, and each round drops the clusters that became full by compacting it in
/// place.
pub(crate) fn plan_parts<'a>(
    total: u64,
    mut parts: Vec<Part>,
    name: impl Fn(usize) -> &'a str,
    rebalance: bool,
    salt: &str,
    mut set: impl FnMut(usize, u64),
) -> Vec<(u32, u64)> {
    debug_assert!(parts.windows(2).all(|w| w[0].pos < w[1].pos));
    // Rule 1 and 2: planning order is weight (descending), then hash. The sort key packs
    // (weight descending, hash, index in `parts`) into one integer; indexes make keys unique,
    // and the rare runs of equal weight and hash are then put in name order.
    let mut keys: Vec<u128> = Vec::with_capacity(parts.len());
    fnv1_32_many(
        parts.len(),
        |j| name(parts[j].pos as usize),
        salt,
        |j, h| {
            let rank = u128::from(u64::MAX - parts[j].weight);
            keys.push((rank << 64) | (u128::from(h) << 32) | j as u128);
        },
    );
    keys.sort_unstable();
    let mut start = 0;
    while start < keys.len() {
        let mut end = start + 1;
        while end < keys.len() && keys[end] >> 32 == keys[start] >> 32 {
            end += 1;
        }
        if end - start > 1 {
            // Same weight and hash: name order, then input order (`parts` is in input order,
            // so comparing indexes compares positions).
            keys[start..end].sort_by(|&a, &b| {
                let (a, b) = (a as u32 as usize, b as u32 as usize);
                name(parts[a].pos as usize)
                    .cmp(name(parts[b].pos as usize))
                    .then(a.cmp(&b))
            });
        }
        start = end;
    }
    permute(&mut parts, &mut keys);
    drop(keys);

    // Rule 3: minimums, in order, as far as replicas and capacity allow.
    let mut remaining = total;
    for p in parts.iter_mut() {
        let take = p.planned.min(remaining).min(p.cap);
        remaining -= take;
        p.planned = take;
    }

    // Rule 4: keep what already runs when rebalancing is off.
    for p in parts.iter_mut() {
        let count = std::mem::take(&mut p.keep);
        if rebalance || count <= p.planned {
            continue;
        }
        let target = count.min(p.max).min(p.cap);
        let extra = target.saturating_sub(p.planned).min(remaining);
        remaining -= extra;
        p.keep = extra;
        p.planned += extra;
    }

    // Rule 5: proportional rounds. Each round either places everything, fills a cluster, or
    // consumes preallocated replicas (at least half of them), so it ends after
    // O(clusters * log(replicas)) rounds; usually two or three.
    let mut overflow: Vec<(u32, u64)> = Vec::new();
    let mut weight_sum: u128 = parts.iter().map(|p| u128::from(p.weight)).sum();
    let mut changed = true;
    while changed && remaining > 0 {
        changed = false;
        if weight_sum == 0 {
            break;
        }
        let round_sum = weight_sum;
        let to_share = u128::from(remaining);
        // Planning order sorts by weight, so equal weights (equal shares) come in runs: one
        // division per run instead of one per cluster.
        let mut share_of: Option<(u64, u128)> = None;
        let mut open = 0;
        for j in 0..parts.len() {
            let mut p = parts[j];
            let start = p.planned;
            // Share rounded up, never more than what remains; once nothing remains every
            // share is cut to 0, so the division is skipped.
            let share = match share_of {
                _ if remaining == 0 => 0,
                Some((w, s)) if w == p.weight => s,
                _ => {
                    let s = super::webster::div_fast(
                        to_share * u128::from(p.weight) + round_sum - 1,
                        round_sum,
                    );
                    share_of = Some((p.weight, s));
                    s
                }
            };
            let mut extra = (share.min(u128::from(remaining))) as u64;
            let used = extra.min(p.keep);
            p.keep -= used;
            extra -= used;
            if used > 0 {
                changed = true;
            }
            let mut total_here = start + extra;
            let mut full = false;
            if total_here > p.max {
                total_here = p.max;
                full = true;
            }
            if total_here > p.cap {
                overflow.push((p.pos, total_here - p.cap));
                total_here = p.cap;
                full = true;
            }
            // A cluster capped below what it already had (KubeFed keeps `total - start`
            // signed; here the count simply drops back and the replicas return to the pool).
            if total_here >= start {
                remaining -= total_here - start;
            } else {
                remaining += start - total_here;
            }
            p.planned = total_here;
            if total_here > start {
                changed = true;
            }
            if full {
                set(p.pos as usize, p.planned);
                weight_sum -= u128::from(p.weight);
            } else {
                parts[open] = p;
                open += 1;
            }
        }
        parts.truncate(open);
    }
    for p in &parts {
        set(p.pos as usize, p.planned);
    }

    // Rule 6.
    if !rebalance {
        for (_, o) in overflow.iter_mut() {
            *o = (*o).min(remaining);
        }
        overflow.retain(|&(_, o)| o > 0);
    }
    overflow
}

/// Reorders `parts` so that `parts[j]` becomes the old `parts[keys[j] as u32]`, in place by
/// following the permutation's cycles; `keys` is used up (entries are marked as they are
/// placed).
fn permute(parts: &mut [Part], keys: &mut [u128]) {
    const DONE: u128 = u128::MAX;
    for j in 0..parts.len() {
        if keys[j] == DONE {
            continue;
        }
        let first = parts[j];
        let mut at = j;
        loop {
            let from = keys[at] as u32 as usize;
            keys[at] = DONE;
            if from == j {
                parts[at] = first;
                break;
            }
            parts[at] = parts[from];
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_side_by_side_matches_one_at_a_time() {
        let names: Vec<String> = (0..23)
            .map(|i| "c".repeat(i % 9) + &i.to_string())
            .collect();
        for salt in ["", "ns/web", "default/a-much-longer-object-name"] {
            let mut many = Vec::new();
            fnv1_32_many(
                names.len(),
                |i| names[i].as_str(),
                salt,
                |i, h| {
                    assert_eq!(i, many.len());
                    many.push(h);
                },
            );
            let one: Vec<u32> = names.iter().map(|n| fnv1_32(n, salt)).collect();
            assert_eq!(many, one, "salt {salt:?}");
        }
    }
}
