//! Turns filter results into replica counts and assembles the `Decision`.
//!
//! Frozen clusters keep what they run (trimmed only if the total shrank below it); the rest of
//! the total goes to candidates. Duplicated: every candidate runs the full count. Divided: the
//! KubeFed planner when any static preference sets minReplicas or maxReplicas; otherwise
//! Webster over the weights (1 each without a division, static weights, or replicas that fit
//! for DynamicByCapacity and, among the fewest clusters that hold them all, for Aggregated),
//! with capacity as a cap. Without rebalance, Webster starts from the
//! current counts and only adds or removes the difference, so the fewest replicas move.
//! With overflow tiers, the dynamic division runs once per tier, in order (`overflow`).
//! Must not: filter clusters (that is `filter` and `spread`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::decision::{diff, Decision, DropReason, DroppedCluster, Shortfall};
use super::filter::{Class, Classes};
use super::static_weights::{plan_parts, preference_for, Part};
use super::webster::{apportion, Seat};
use super::{aggregated, dynamic, overflow};
use crate::policy::{ClusterPreference, Division, ReplicaMode, DEFAULT_PREFERENCE_KEY};
use crate::scheduler::support::bytes;
use crate::scheduler::support::names::{ClusterNames, ClusterWeights, NameBuf};
use crate::scheduler::{ClusterView, ScheduleRequest};

/// The weight a candidate gets under the object's division.
pub(crate) fn candidate_weight(req: &ScheduleRequest<'_>, name: &str, cap: Option<u64>) -> u64 {
    match (
        &req.placement.replicas.mode,
        req.placement.replicas.division.as_deref(),
    ) {
        (ReplicaMode::Duplicated, _) | (ReplicaMode::Divided | ReplicaMode::ByKind, None) => 1,
        (
            ReplicaMode::Divided | ReplicaMode::ByKind,
            Some(Division::StaticWeights { weights, .. }),
        ) => preference_for(weights, name).map_or(0, |p| p.weight),
        (
            ReplicaMode::Divided | ReplicaMode::ByKind,
            Some(Division::DynamicByCapacity { .. } | Division::Aggregated { .. }),
        ) => dynamic::weight(cap),
    }
}

pub(crate) fn decide(
    req: &ScheduleRequest<'_>,
    clusters: &[ClusterView<'_>],
    unique: bool,
    classes: Classes,
) -> Decision {
    let cur = current_by_index(req.current, clusters);
    let mut counts = vec![0u64; clusters.len()];
    let mut cand: Vec<usize> = Vec::with_capacity(clusters.len());
    let mut name_bytes = 0usize;
    for (i, class) in classes.class.iter().enumerate() {
        if *class == Class::Candidate {
            cand.push(i);
            name_bytes += clusters[i].name.len();
        }
    }
    let dropped: Vec<DroppedCluster> = classes
        .reasons
        .iter()
        .map(|(i, r)| DroppedCluster {
            cluster: clusters[*i].name.to_string(),
            reason: r.clone(),
        })
        .collect();
    // The candidates' names, once, shared by `candidates` and `weights` (see `names`).
    let mut names = NameBuf::with_capacity(cand.len(), name_bytes);
    for &i in &cand {
        names.push(clusters[i].name);
    }
    let names = Arc::new(names);
    let total = u64::from(req.total_replicas);
    let mut budget = total;
    // Frozen clusters keep their replicas (no new ones), in name order if the total shrank.
    for (i, class) in classes.class.iter().enumerate() {
        if *class == Class::Frozen {
            let keep = cur[i].min(budget);
            counts[i] = keep;
            if req.placement.replicas.mode.divides() {
                budget -= keep;
            }
        }
    }

    let mut weights = ClusterWeights::default();
    let mut shortfall: Option<Shortfall> = None;
    match req.placement.replicas.mode {
        ReplicaMode::Duplicated => {
            for &i in &cand {
                counts[i] = total;
            }
            if total > 0 && cand.is_empty() && counts.iter().all(|&c| c == 0) {
                shortfall = Some(Shortfall {
                    replicas: req.total_replicas,
                    message: format!("no eligible cluster ({} dropped)", dropped.len()),
                });
            }
        }
        ReplicaMode::Divided | ReplicaMode::ByKind => {
            let prefs = candidate_prefs(req, clusters, &cand);
            let cand_weights: Vec<u64> = cand
                .iter()
                .enumerate()
                .map(|(k, &i)| weight_with(req, prefs.get(k).copied().flatten(), classes.cap[i]))
                .collect();
            let placed = match overflow::applies(req) {
                // Tier by tier (`overflow`): only capacity-weighted divisions get here, so no
                // static preference (`prefs`) nor name-salted tie-break is involved.
                Some(o) => {
                    let weight_of: BTreeMap<usize, u64> = cand
                        .iter()
                        .copied()
                        .zip(cand_weights.iter().copied())
                        .collect();
                    overflow::by_tier(
                        o.tiers.len(),
                        &classes.tier,
                        &classes.cap,
                        &cand,
                        budget,
                        |members, give| {
                            let w: Vec<u64> = members
                                .iter()
                                .map(|i| weight_of.get(i).copied().unwrap_or(0))
                                .collect();
                            divide(
                                req,
                                &names,
                                &classes,
                                members,
                                &[],
                                &w,
                                &cur,
                                give,
                                &mut counts,
                            )
                        },
                    )
                }
                None => divide(
                    req,
                    &names,
                    &classes,
                    &cand,
                    &prefs,
                    &cand_weights,
                    &cur,
                    budget,
                    &mut counts,
                ),
            };
            weights = if unique {
                ClusterWeights::shared(Arc::clone(&names), cand_weights)
            } else {
                // Repeated names: a map keeps the last weight of each, as collecting did.
                cand.iter()
                    .zip(cand_weights)
                    .map(|(&i, w)| (clusters[i].name.to_string(), w))
                    .collect()
            };
            if placed < budget {
                let missing = budget - placed;
                let message = if cand.is_empty() {
                    format!("no eligible cluster ({} dropped)", dropped.len())
                } else {
                    format!(
                        "{} candidate clusters hold only {placed} of the {budget} replicas to place",
                        cand.len()
                    )
                };
                shortfall = Some(Shortfall {
                    replicas: clamp_u32(missing),
                    message,
                });
            }
        }
    }
    // With no candidate left, the shortfall names the workloads that kept it from the clusters
    // workload affinity took away, so the status says which rule and which peer to look at.
    if let (Some(s), true) = (&mut shortfall, cand.is_empty()) {
        if let Some(note) = workload_note(&dropped) {
            s.message = format!("{}; {note}", s.message);
        }
    }
    if let Some(err) = &classes.spread_error {
        match &mut shortfall {
            Some(s) => s.message = format!("{}; {err}", s.message),
            None => {
                shortfall = Some(Shortfall {
                    replicas: 0,
                    message: err.clone(),
                })
            }
        }
    }

    let placement: BTreeMap<String, u32> = counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(i, &c)| (clusters[i].name.to_string(), clamp_u32(c)))
        .collect();
    let moved = diff(req.current, &placement);
    let terms = overflow::applies(req).map(|o| {
        let placed = counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, _)| (i, clusters[i].name.to_string()));
        overflow::record(o, &classes.tier, placed)
    });
    Decision {
        candidates: ClusterNames::shared(names),
        placement,
        dropped,
        weights,
        unschedulable: shortfall,
        moved,
        terms,
    }
}

/// "member1 workloadAffinity: ... runs there, member2 ...", for the clusters workload affinity
/// dropped; None when it dropped none.
fn workload_note(dropped: &[DroppedCluster]) -> Option<String> {
    let parts: Vec<String> = dropped
        .iter()
        .filter(|d| {
            matches!(
                d.reason,
                DropReason::WorkloadAffinity { .. } | DropReason::WorkloadAntiAffinity { .. }
            )
        })
        .map(|d| format!("{} {}", d.cluster, d.reason.describe()))
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The static-weights preference of each candidate (empty for other divisions), by one merge
/// walk of two name-sorted sequences instead of a map lookup per cluster.
fn candidate_prefs<'p>(
    req: &ScheduleRequest<'p>,
    clusters: &[ClusterView<'_>],
    cand: &[usize],
) -> Vec<Option<&'p ClusterPreference>> {
    let Some(Division::StaticWeights { weights, .. }) = req.placement.replicas.division.as_deref()
    else {
        return Vec::new();
    };
    let star = weights.get(DEFAULT_PREFERENCE_KEY);
    let mut it = weights.iter().peekable();
    cand.iter()
        .map(|&i| {
            let name = clusters[i].name;
            while it.peek().is_some_and(|(k, _)| k.as_str() < name) {
                it.next();
            }
            match it.peek() {
                Some((k, p)) if k.as_str() == name => Some(*p),
                _ => star,
            }
        })
        .collect()
}

/// `candidate_weight` with the preference already looked up.
fn weight_with(
    req: &ScheduleRequest<'_>,
    pref: Option<&ClusterPreference>,
    cap: Option<u64>,
) -> u64 {
    match (
        &req.placement.replicas.mode,
        req.placement.replicas.division.as_deref(),
    ) {
        (ReplicaMode::Duplicated, _) | (ReplicaMode::Divided | ReplicaMode::ByKind, None) => 1,
        (ReplicaMode::Divided | ReplicaMode::ByKind, Some(Division::StaticWeights { .. })) => {
            pref.map_or(0, |p| p.weight)
        }
        (
            ReplicaMode::Divided | ReplicaMode::ByKind,
            Some(Division::DynamicByCapacity { .. } | Division::Aggregated { .. }),
        ) => dynamic::weight(cap),
    }
}

/// Places `budget` replicas among the candidates; returns how many were placed. `prefs` and
/// `weights` are parallel to `cand` (`prefs` empty unless the division is static weights).
#[allow(clippy::too_many_arguments)]
fn divide(
    req: &ScheduleRequest<'_>,
    names: &NameBuf,
    classes: &Classes,
    cand: &[usize],
    prefs: &[Option<&ClusterPreference>],
    weights: &[u64],
    cur_of: &[u64],
    budget: u64,
    counts: &mut [u64],
) -> u64 {
    let division = req.placement.replicas.division.as_deref();
    let rebalance = division.is_some_and(|d| d.rebalance());

    if let Some(Division::StaticWeights {
        weights: preferences,
        rebalance,
    }) = division
    {
        if preferences
            .values()
            .any(|p| p.min_replicas > 0 || p.max_replicas.is_some())
        {
            // Spread's "at least one here" becomes a raised minimum.
            let parts: Vec<Part> = cand
                .iter()
                .zip(prefs)
                .enumerate()
                .filter_map(|(k, (&i, p))| {
                    let p = (*p)?;
                    let min = u64::from(p.min_replicas);
                    Some(Part::new(
                        k,
                        p.weight,
                        if classes.need_one[i] { min.max(1) } else { min },
                        p.max_replicas.map_or(u64::MAX, u64::from),
                        classes.cap[i].unwrap_or(u64::MAX),
                        cur_of[i],
                    ))
                })
                .collect();
            let mut placed = 0;
            plan_parts(
                budget,
                parts,
                |k| names.bytes(k),
                *rebalance,
                req.object_key,
                |k, n| {
                    counts[cand[k]] = n;
                    placed += n;
                },
            );
            return placed;
        }
    }

    let dynamic = division.is_some_and(Division::by_capacity);
    let mut seats: Vec<Seat> = cand
        .iter()
        .zip(weights)
        .map(|(&i, &weight)| {
            let mut s = if dynamic {
                dynamic::seat(classes.cap[i].unwrap_or(0))
            } else {
                Seat {
                    weight,
                    lo: 0,
                    hi: classes.cap[i].unwrap_or(u64::MAX),
                }
            };
            if classes.need_one[i] {
                s.lo = 1.min(s.hi);
            }
            s
        })
        .collect();
    if matches!(division, Some(Division::Aggregated { .. })) {
        let cur: Vec<u64> = cand.iter().map(|&i| cur_of[i]).collect();
        aggregated::narrow(&mut seats, &cur, budget, rebalance);
    }
    if !rebalance {
        // Stability: start from what runs now, bounded as before.
        let cur: Vec<u64> = cand
            .iter()
            .zip(&seats)
            .map(|(&i, s)| {
                if s.weight == 0 {
                    0
                } else {
                    cur_of[i].min(s.hi)
                }
            })
            .collect();
        let sum_cur: u64 = cur.iter().sum();
        if sum_cur > 0 {
            for (s, &c) in seats.iter_mut().zip(&cur) {
                if sum_cur <= budget {
                    s.lo = s.lo.max(c);
                } else {
                    s.hi = c.max(s.lo);
                }
            }
        }
    }
    let got = apportion(budget, &seats);
    for (k, &i) in cand.iter().enumerate() {
        counts[i] = got[k];
    }
    got.iter().sum()
}

/// The current count of each cluster (`clusters` sorted by name). The current placement is
/// usually far shorter than the fleet, so each of its entries is found by galloping ahead from
/// the previous one rather than by walking every cluster.
fn current_by_index(current: &BTreeMap<String, u32>, clusters: &[ClusterView<'_>]) -> Vec<u64> {
    let mut out = vec![0u64; clusters.len()];
    let mut at = 0;
    for (name, &n) in current {
        let name = name.as_bytes();
        at = bytes::lower_bound_from(clusters, at, name, |c| c.name.as_bytes());
        // Repeated names (a caller's list need not be unique) all get the count.
        while at < clusters.len() && bytes::eq(clusters[at].name.as_bytes(), name) {
            out[at] = u64::from(n);
            at += 1;
        }
        if at == clusters.len() {
            break;
        }
    }
    out
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
