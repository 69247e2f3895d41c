//! Cutting an object's placed clusters into the waves of a rollout: group (by name order, a
//! label's value, or explicit groups), put a canary wave first, then cut each group by
//! `maxConcurrency`. Pure; clusters arrive and leave in name order, so the same placement and
//! labels always give the same waves. Must not: look at health or status (gates do).

use std::collections::BTreeMap;

use super::{Concurrency, RolloutStrategy, RolloutType, WaveGrouping};

/// The waves for `placed` (cluster names, sorted, with their labels). All-at-once is one wave.
pub fn plan(
    strategy: &RolloutStrategy,
    placed: &[(&str, &BTreeMap<String, String>)],
) -> Vec<Vec<String>> {
    let all: Vec<String> = placed.iter().map(|(c, _)| c.to_string()).collect();
    if all.is_empty() {
        return Vec::new();
    }
    if strategy.type_ == RolloutType::All {
        return vec![all];
    }
    let mut groups: Vec<Vec<String>> = match &strategy.grouping {
        WaveGrouping::ClusterOrder => vec![all.clone()],
        WaveGrouping::Label(key) => {
            // Value order; clusters without the label go last ("" cannot be a label value
            // that sorts after others, so they are kept apart).
            let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            let mut unlabelled = Vec::new();
            for (c, labels) in placed {
                match labels.get(key) {
                    Some(v) => by.entry(v.as_str()).or_default().push(c.to_string()),
                    None => unlabelled.push(c.to_string()),
                }
            }
            let mut g: Vec<Vec<String>> = by.into_values().collect();
            g.push(unlabelled);
            g
        }
        WaveGrouping::Groups(explicit) => {
            let mut rest: Vec<String> = all.clone();
            let mut g = Vec::new();
            for group in explicit {
                let mut members: Vec<String> = group
                    .iter()
                    .filter(|c| all.binary_search(c).is_ok())
                    .cloned()
                    .collect();
                members.sort();
                rest.retain(|c| !members.contains(c));
                g.push(members);
            }
            g.push(rest);
            g
        }
    };
    groups.retain(|g| !g.is_empty());
    let mut waves = Vec::new();
    if strategy.canary > 0 {
        if let Some(first) = groups.first_mut() {
            let n = (strategy.canary as usize).min(first.len());
            waves.push(first.drain(..n).collect::<Vec<_>>());
        }
        groups.retain(|g| !g.is_empty());
    }
    let size = match strategy.max_concurrency {
        Concurrency::Count(0) => usize::MAX,
        Concurrency::Count(n) => n as usize,
        // Percent of the whole placement, rounded up: 50% of 3 clusters is 2 at a time.
        Concurrency::Percent(p) => (all.len() * p as usize).div_ceil(100).max(1),
    };
    for g in groups {
        for chunk in g.chunks(size) {
            waves.push(chunk.to_vec());
        }
    }
    waves
}
