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
//!
//! Cost: [`plan_parts`] hashes every name once and then reads the order only as far as the
//! outcome depends on it (`order.rs`), so placing a few dozen replicas over 1,000 clusters
//! costs a selection, not a sort, and each round stops once nothing remains. The
//! `scheduler_kubefed` cases check the rules; `order.rs` tests that the lazy order reads as
//! the full one.

use std::collections::BTreeMap;

use crate::policy::{ClusterPreference, DEFAULT_PREFERENCE_KEY};
use crate::scheduler::support::order::{fnv1_32_from, fnv1_32_many, Order, FNV_BASIS};

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
    fnv1_32_from(fnv1_32_from(FNV_BASIS, a.as_bytes()), b.as_bytes())
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
        |i| entries[i].name.as_bytes(),
        rebalance,
        salt,
        |i, n| planned[i] = n,
    );
    for (i, o) in over {
        overflow[i as usize] = o;
    }
    (planned, overflow)
}

/// One cluster taking part in the planner (it has a preference). Parts stay in input order;
/// the rules reach them through the planning order (`order::Order`).
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
/// Each rule reads the planning order only as far as its outcome depends on it (see
/// `order::Order`): a rule whose demands all fit serves everyone without it, and a round
/// stops reading once nothing remains, because from there on it changes nothing (unless a
/// cluster holds more than its maximum, which only a minimum above the maximum causes).
pub(crate) fn plan_parts<'a>(
    total: u64,
    mut parts: Vec<Part>,
    name: impl Fn(usize) -> &'a [u8],
    rebalance: bool,
    salt: &str,
    mut set: impl FnMut(usize, u64),
) -> Vec<(u32, u64)> {
    debug_assert!(parts.windows(2).all(|w| w[0].pos < w[1].pos));
    let n = parts.len();
    let positions: Vec<u32> = parts.iter().map(|p| p.pos).collect();
    let name_of = |j: usize| name(positions[j] as usize);
    // Rule 1 and 2: planning order (see `order`).
    let mut hashes = vec![0u32; n];
    fnv1_32_many(n, name_of, salt.as_bytes(), |j, h| hashes[j] = h);
    let mut order = Order::new(parts.iter().map(|p| p.weight).collect(), hashes);
    let mut remaining = total;

    // Rule 3: minimums, in order, as far as replicas and capacity allow.
    let asked: u128 = parts.iter().map(|p| u128::from(p.planned.min(p.cap))).sum();
    if asked <= u128::from(remaining) {
        for p in parts.iter_mut() {
            p.planned = p.planned.min(p.cap);
            remaining -= p.planned;
        }
    } else {
        let mut served = Vec::new();
        let mut t = 0;
        while remaining > 0 && t < n {
            let j = order.at(t, name_of);
            let take = parts[j].planned.min(remaining).min(parts[j].cap);
            remaining -= take;
            served.push((j, take));
            t += 1;
        }
        for p in parts.iter_mut() {
            p.planned = 0;
        }
        for (j, take) in served {
            parts[j].planned = take;
        }
    }

    // Rule 4: keep what already runs when rebalancing is off.
    let topping = |p: &Part| {
        if rebalance || p.keep <= p.planned {
            0
        } else {
            p.keep.min(p.max).min(p.cap).saturating_sub(p.planned)
        }
    };
    let asked: u128 = parts.iter().map(|p| u128::from(topping(p))).sum();
    if asked <= u128::from(remaining) {
        for p in parts.iter_mut() {
            let extra = topping(p);
            remaining -= extra;
            p.keep = extra;
            p.planned += extra;
        }
    } else {
        let mut served = Vec::new();
        let mut t = 0;
        while remaining > 0 && t < n {
            let j = order.at(t, name_of);
            let extra = topping(&parts[j]).min(remaining);
            remaining -= extra;
            served.push((j, extra));
            t += 1;
        }
        for p in parts.iter_mut() {
            p.keep = 0;
        }
        for (j, extra) in served {
            parts[j].keep = extra;
            parts[j].planned += extra;
        }
    }
    let tail_matters = parts.iter().any(|p| p.planned > p.max);

    // Rule 5: proportional rounds. Each round either places everything, fills a cluster, or
    // consumes preallocated replicas (at least half of them), so it ends after
    // O(clusters * log(replicas)) rounds; usually two or three. `open` lists, in planning
    // order, the clusters read so far that are not full; `read` counts the positions read.
    let mut overflow: Vec<(u32, u64)> = Vec::new();
    let mut weight_sum: u128 = parts.iter().map(|p| u128::from(p.weight)).sum();
    let mut open: Vec<u32> = Vec::new();
    let mut read = 0;
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
        let (mut t, mut kept) = (0, 0);
        loop {
            if remaining == 0 && !tail_matters {
                // Every later share is cut to 0 and no count can drop back: the rest of the
                // round would change nothing, and no round follows.
                let rest = open.len() - t;
                open.copy_within(t.., kept);
                kept += rest;
                break;
            }
            let j = if t < open.len() {
                open[t] as usize
            } else if read < n {
                let j = order.at(read, name_of);
                read += 1;
                open.push(j as u32);
                j
            } else {
                break;
            };
            t += 1;
            let p = &mut parts[j];
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
                weight_sum -= u128::from(p.weight);
            } else {
                open[kept] = j as u32;
                kept += 1;
            }
        }
        open.truncate(kept);
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
