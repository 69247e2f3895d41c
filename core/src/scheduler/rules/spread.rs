//! Spread constraints: use between `minGroups` and `maxGroups` distinct values of a cluster label,
//! or, by `CLUSTER_NAME_KEY`, between that many clusters (each cluster its own group).
//!
//! For each constraint in order: candidates without the label are dropped; groups holding
//! frozen replicas are chosen first (those replicas stay anyway), then, without rebalance,
//! groups by replicas they already run, then by total candidate weight, then by label value.
//! Candidates outside the chosen groups are dropped. In Divided mode one candidate of each of
//! the first `minGroups` chosen groups must get a replica: one that can take it (weight and
//! room), without rebalance the one already running the most (so re-placing the object never
//! moves a replica inside a group just to meet the rule), then the heaviest, then by name.
//! When fewer groups than `minGroups` are usable, or fewer replicas than `minGroups` exist, the
//! constraint cannot be met and `spread_error` says why. Frozen groups beyond `maxGroups` are
//! kept (their replicas are not new) and count towards the limit. Must not: compute replica
//! counts.

use std::collections::BTreeMap;

use super::decision::DropReason;
use super::divided::candidate_weight;
use super::filter::{Class, Classes};
use crate::policy::CLUSTER_NAME_KEY;
use crate::scheduler::{ClusterView, ScheduleRequest};

#[derive(Default)]
struct Group {
    members: Vec<usize>,
    frozen_replicas: u64,
    current: u64,
    weight: u128,
    usable: bool,
}

/// Whether a candidate of `weight` with room `cap` can be given a replica: what makes its group
/// usable, and what the replica a group must get asks of its cluster.
fn takes_replicas(weight: u64, cap: Option<u64>) -> bool {
    weight > 0 && cap != Some(0)
}

pub(crate) fn apply(
    req: &ScheduleRequest<'_>,
    clusters: &[ClusterView<'_>],
    classes: &mut Classes,
) {
    let rebalance = req
        .placement
        .replicas
        .division
        .as_deref()
        .is_some_and(|d| d.rebalance());
    let running = |c: &ClusterView<'_>| {
        if req.steady_spread && !rebalance {
            req.current.get(c.name).copied().unwrap_or(0)
        } else {
            0
        }
    };
    let divided = req.placement.replicas.mode.divides();
    for sc in &req.placement.spread_constraints {
        let mut groups: BTreeMap<&str, Group> = BTreeMap::new();
        for (i, c) in clusters.iter().enumerate() {
            let current = u64::from(req.current.get(c.name).copied().unwrap_or(0));
            let value = if sc.label_key == CLUSTER_NAME_KEY {
                Some(c.name)
            } else {
                c.labels.get(&sc.label_key).map(String::as_str)
            };
            match (classes.class[i], value) {
                (Class::Evicted, _) => {}
                (Class::Candidate, None) => {
                    classes.drop(
                        i,
                        DropReason::MissingSpreadLabel {
                            label_key: sc.label_key.clone(),
                        },
                    );
                }
                (Class::Frozen, None) => {}
                (Class::Frozen, Some(v)) => {
                    let g = groups.entry(v).or_default();
                    g.frozen_replicas += current;
                    g.current += current;
                }
                (Class::Candidate, Some(v)) => {
                    let w = candidate_weight(req, c.name, classes.cap[i]);
                    let g = groups.entry(v).or_default();
                    g.members.push(i);
                    g.current += current;
                    g.weight += u128::from(w);
                    g.usable |= takes_replicas(w, classes.cap[i]);
                }
            }
        }
        let mut ranked: Vec<(&str, &Group)> = groups
            .iter()
            .filter(|(_, g)| g.frozen_replicas > 0 || g.usable)
            .map(|(k, g)| (*k, g))
            .collect();
        ranked.sort_by(|(na, a), (nb, b)| {
            (b.frozen_replicas > 0)
                .cmp(&(a.frozen_replicas > 0))
                .then(if rebalance {
                    std::cmp::Ordering::Equal
                } else {
                    b.current.cmp(&a.current)
                })
                .then(b.weight.cmp(&a.weight))
                .then(na.cmp(nb))
        });
        let forced = ranked.iter().filter(|(_, g)| g.frozen_replicas > 0).count();
        let take = forced.max((sc.max_groups as usize).min(ranked.len()));
        let chosen: Vec<&str> = ranked[..take].iter().map(|(k, _)| *k).collect();

        if (chosen.len() as u64) < u64::from(sc.min_groups) {
            classes.spread_error.get_or_insert_with(|| {
                format!(
                    "spread over {}: {} usable groups, minGroups is {}",
                    sc.label_key,
                    chosen.len(),
                    sc.min_groups
                )
            });
        } else if divided && u64::from(req.total_replicas) < u64::from(sc.min_groups) {
            classes.spread_error.get_or_insert_with(|| {
                format!(
                    "spread over {}: {} replicas cannot cover minGroups {}",
                    sc.label_key, req.total_replicas, sc.min_groups
                )
            });
        }
        for (value, g) in &groups {
            if chosen.contains(value) {
                continue;
            }
            for &i in &g.members {
                classes.drop(
                    i,
                    DropReason::SpreadConstraint {
                        label_key: sc.label_key.clone(),
                        group: (*value).to_string(),
                    },
                );
            }
        }
        if divided {
            for value in chosen.iter().take(sc.min_groups as usize) {
                let g = &groups[value];
                if g.frozen_replicas > 0 {
                    continue;
                }
                let weight = |i: usize| candidate_weight(req, clusters[i].name, classes.cap[i]);
                let best = g
                    .members
                    .iter()
                    .copied()
                    .filter(|&i| classes.class[i] == Class::Candidate)
                    .filter(|&i| !req.steady_spread || takes_replicas(weight(i), classes.cap[i]))
                    .max_by(|&a, &b| {
                        running(&clusters[a])
                            .cmp(&running(&clusters[b]))
                            .then(weight(a).cmp(&weight(b)))
                            .then(clusters[b].name.cmp(clusters[a].name))
                    });
                if let Some(i) = best {
                    classes.need_one[i] = true;
                }
            }
        }
    }
    classes.sort_reasons();
}
