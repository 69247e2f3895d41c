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

/// `fnv1_32(name, salt)` for many names. FNV is one long multiply chain per name, so four
/// names are hashed side by side to let their chains overlap; the results are those of
/// `fnv1_32`.
fn fnv1_32_many<'a>(names: impl ExactSizeIterator<Item = &'a str>, salt: &str) -> Vec<u32> {
    const BASIS: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    let names: Vec<&[u8]> = names.map(str::as_bytes).collect();
    let mut out = Vec::with_capacity(names.len());
    let mut chunks = names.chunks_exact(4);
    for c in &mut chunks {
        let mut h = [BASIS; 4];
        let common = c.iter().map(|n| n.len()).min().unwrap_or(0);
        for j in 0..common {
            for (lane, n) in h.iter_mut().zip(c) {
                *lane = lane.wrapping_mul(PRIME) ^ u32::from(n[j]);
            }
        }
        for (lane, n) in h.iter_mut().zip(c) {
            for &b in &n[common..] {
                *lane = lane.wrapping_mul(PRIME) ^ u32::from(b);
            }
        }
        for &b in salt.as_bytes() {
            for lane in h.iter_mut() {
                *lane = lane.wrapping_mul(PRIME) ^ u32::from(b);
            }
        }
        out.extend_from_slice(&h);
    }
    for n in chunks.remainder() {
        let mut h = BASIS;
        for &b in n.iter().chain(salt.as_bytes()) {
            h = h.wrapping_mul(PRIME) ^ u32::from(b);
        }
        out.push(h);
    }
    out
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
    let n = entries.len();
    let mut planned = vec![0u64; n];
    let mut overflow = vec![0u64; n];
    let mut prealloc = vec![0u64; n];

    // Rule 1 and 2: only clusters with a preference take part, in weight-then-hash order. The
    // sort key packs (weight descending, hash, position) into one integer; positions make keys
    // unique, and the rare runs of equal weight and hash are then put in name order.
    let weight = |i: usize| entries[i].pref.map_or(0, |p| p.weight);
    let max_of = |i: usize| entries[i].pref.and_then(|p| p.max_replicas).map(u64::from);
    let taking_part: Vec<usize> = (0..n).filter(|&i| entries[i].pref.is_some()).collect();
    let hashes = fnv1_32_many(taking_part.iter().map(|&i| entries[i].name), salt);
    // Positions fit in 32 bits: a planner input of 2^32 clusters could not be held in memory.
    let mut keys: Vec<u128> = taking_part
        .iter()
        .zip(&hashes)
        .map(|(&i, &h)| {
            let rank = u128::from(u64::MAX - weight(i));
            (rank << 64) | (u128::from(h) << 32) | i as u128
        })
        .collect();
    keys.sort_unstable();
    let mut active: Vec<usize> = keys.iter().map(|&k| (k as u32) as usize).collect();
    let mut start = 0;
    while start < keys.len() {
        let mut end = start + 1;
        while end < keys.len() && keys[end] >> 32 == keys[start] >> 32 {
            end += 1;
        }
        if end - start > 1 {
            active[start..end]
                .sort_by(|&a, &b| entries[a].name.cmp(entries[b].name).then(a.cmp(&b)));
        }
        start = end;
    }
    let mut remaining = total;

    // Rule 3: minimums, in order, as far as replicas and capacity allow.
    for &i in &active {
        let min = entries[i].pref.map_or(0, |p| u64::from(p.min_replicas));
        let mut take = min.min(remaining);
        if let Some(cap) = entries[i].capacity {
            take = take.min(cap);
        }
        remaining -= take;
        planned[i] = take;
    }

    // Rule 4: keep what already runs when rebalancing is off.
    if !rebalance {
        for &i in &active {
            let Some(count) = entries[i].current else {
                continue;
            };
            if count <= planned[i] {
                continue;
            }
            let mut target = count;
            if let Some(max) = max_of(i) {
                target = target.min(max);
            }
            if let Some(cap) = entries[i].capacity {
                target = target.min(cap);
            }
            let extra = target.saturating_sub(planned[i]).min(remaining);
            remaining -= extra;
            prealloc[i] = extra;
            planned[i] += extra;
        }
    }

    // Rule 5: proportional rounds. Each round either places everything, fills a cluster, or
    // consumes preallocated replicas (at least half of them), so it ends after
    // O(clusters * log(replicas)) rounds; usually two or three.
    let mut changed = true;
    while changed && remaining > 0 {
        changed = false;
        let weight_sum: u128 = active.iter().map(|&i| u128::from(weight(i))).sum();
        if weight_sum == 0 {
            break;
        }
        let to_share = u128::from(remaining);
        let mut still_open = Vec::with_capacity(active.len());
        for &i in &active {
            let start = planned[i];
            // Share rounded up, never more than what remains.
            // Once nothing remains every share is cut to 0: skip the division.
            let share = if remaining == 0 {
                0
            } else {
                super::webster::div_fast(
                    to_share * u128::from(weight(i)) + weight_sum - 1,
                    weight_sum,
                )
            };
            let mut extra = (share.min(u128::from(remaining))) as u64;
            let used = extra.min(prealloc[i]);
            prealloc[i] -= used;
            extra -= used;
            if used > 0 {
                changed = true;
            }
            let mut total_here = start + extra;
            let mut full = false;
            if let Some(max) = max_of(i) {
                if total_here > max {
                    total_here = max;
                    full = true;
                }
            }
            if let Some(cap) = entries[i].capacity {
                if total_here > cap {
                    overflow[i] = total_here - cap;
                    total_here = cap;
                    full = true;
                }
            }
            if !full {
                still_open.push(i);
            }
            // A cluster capped below what it already had (KubeFed keeps `total - start` signed;
            // here the count simply drops back and the replicas return to the pool).
            if total_here >= start {
                remaining -= total_here - start;
            } else {
                remaining += start - total_here;
            }
            planned[i] = total_here;
            if total_here > start {
                changed = true;
            }
        }
        active = still_open;
    }

    // Rule 6.
    if !rebalance {
        for o in overflow.iter_mut() {
            *o = (*o).min(remaining);
        }
    }
    (planned, overflow)
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
            let many = fnv1_32_many(names.iter().map(String::as_str), salt);
            let one: Vec<u32> = names.iter().map(|n| fnv1_32(n, salt)).collect();
            assert_eq!(many, one, "salt {salt:?}");
        }
    }
}
