//! The clock checker: log time (the leader's stamp on each entry, clamped never to go back) must stay
//! monotonic and sane on every node, and no member cluster may be declared NotReady unless it really went
//! dark. A leader whose wall clock leaps forward must not drag log time ahead of real time, because health
//! deadlines and failover timers run in log time: a leap would fail clusters over that never failed.
//!
//! Inputs are samples the harness took while the run went on: `StateSample`s (log time per node, with the
//! harness's own wall clock, which no fault touches) and `HealthSample`s, plus the windows in which a member
//! cluster was dark. Pure: it never contacts fedraft.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::agreement::StateSample;
use super::Verdict;

/// One node's view of one member cluster's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthSample {
    pub t_ns: u64,
    pub node: usize,
    pub cluster: String,
    /// `Ready`, `NotReady` or `Unknown`, as the API shows it.
    pub health: String,
}

/// A period in which `cluster` was dark, on the history's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DarkWindow {
    pub cluster: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Tolerances of the clock checker.
#[derive(Debug, Clone, Copy)]
pub struct ClockCheck {
    /// Log time may run ahead of the harness's wall clock by at most this much.
    pub max_ahead_ms: u64,
    /// After a dark window ends, NotReady may linger this long (heartbeats for the success threshold, the
    /// probe interval, replication to the sampled node).
    pub recovery_ns: u64,
}

/// Judges the samples.
pub fn check_clock(
    states: &[StateSample],
    health: &[HealthSample],
    dark: &[DarkWindow],
    limits: &ClockCheck,
) -> Verdict {
    let mut problems = Vec::new();
    // Monotonic: on each node, a later sample at an equal or higher state index never shows earlier log time.
    let mut per_node: BTreeMap<usize, Vec<&StateSample>> = BTreeMap::new();
    for s in states {
        per_node.entry(s.node).or_default().push(s);
    }
    for (node, mut list) in per_node {
        list.sort_by_key(|s| s.t_ns);
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.state_index >= a.state_index && b.log_time_ms < a.log_time_ms {
                problems.push(format!(
                    "node{}: log time went back from {} to {} ms (state index {} -> {})",
                    node + 1,
                    a.log_time_ms,
                    b.log_time_ms,
                    a.state_index,
                    b.state_index
                ));
            }
        }
    }
    // Sane: never ahead of real time by more than the tolerance.
    if let Some(worst) = states
        .iter()
        .filter(|s| s.log_time_ms > s.wall_ms + limits.max_ahead_ms)
        .max_by_key(|s| s.log_time_ms - s.wall_ms)
    {
        problems.push(format!(
            "log time ran {} ms ahead of real time on node{} at {:.1} s (state index {}; tolerance {} ms)",
            worst.log_time_ms - worst.wall_ms,
            worst.node + 1,
            worst.t_ns as f64 / 1e9,
            worst.state_index,
            limits.max_ahead_ms
        ));
    }
    // No false NotReady.
    let mut flagged = std::collections::BTreeSet::new();
    for h in health.iter().filter(|h| h.health == "NotReady") {
        let excused = dark.iter().any(|d| {
            d.cluster == h.cluster
                && h.t_ns >= d.start_ns
                && h.t_ns <= d.end_ns.saturating_add(limits.recovery_ns)
        });
        if !excused && flagged.insert(h.cluster.clone()) {
            problems.push(format!(
                "cluster {} was NotReady at {:.1} s (seen on node{}) without having gone dark",
                h.cluster,
                h.t_ns as f64 / 1e9,
                h.node + 1
            ));
        }
    }
    if !problems.is_empty() {
        problems.truncate(8);
        return Verdict::Invalid {
            description: problems.join("; "),
        };
    }
    if states.is_empty() {
        return Verdict::Unknown {
            reason: "no log-time samples".into(),
        };
    }
    Verdict::Valid
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ClockCheck = ClockCheck {
        max_ahead_ms: 2_000,
        recovery_ns: 5_000_000_000,
    };

    fn st(t_s: u64, node: usize, index: u64, log_ms: u64) -> StateSample {
        StateSample {
            t_ns: t_s * 1_000_000_000,
            wall_ms: 1_000_000 + t_s * 1000,
            node,
            state_index: index,
            state_hash: String::new(),
            log_time_ms: log_ms,
        }
    }

    fn hs(t_s: u64, cluster: &str, health: &str) -> HealthSample {
        HealthSample {
            t_ns: t_s * 1_000_000_000,
            node: 0,
            cluster: cluster.into(),
            health: health.into(),
        }
    }

    #[test]
    fn steady_log_time_and_explained_not_ready_pass() {
        let states = [
            st(1, 0, 10, 1_000_900),
            st(2, 0, 12, 1_001_950),
            st(2, 1, 12, 1_001_950),
        ];
        let health = [
            hs(5, "dc2", "NotReady"),
            hs(12, "dc2", "NotReady"),
            hs(12, "dc1", "Ready"),
        ];
        let dark = [DarkWindow {
            cluster: "dc2".into(),
            start_ns: 3_000_000_000,
            end_ns: 9_000_000_000,
        }];
        assert_eq!(
            check_clock(&states, &health, &dark, &LIMITS),
            Verdict::Valid
        );
    }

    #[test]
    fn a_forward_leap_a_step_back_and_a_false_failover_are_each_caught() {
        // Log time 60 s ahead of real time.
        let v = check_clock(&[st(1, 0, 10, 1_061_000)], &[], &[], &LIMITS);
        assert!(
            matches!(&v, Verdict::Invalid { description } if description.contains("ahead")),
            "{v:?}"
        );
        // Log time going back at a higher index.
        let v = check_clock(
            &[st(1, 0, 10, 1_000_900), st(2, 0, 11, 1_000_100)],
            &[],
            &[],
            &LIMITS,
        );
        assert!(
            matches!(&v, Verdict::Invalid { description } if description.contains("went back")),
            "{v:?}"
        );
        // NotReady with no dark window, or long after one ended.
        let dark = [DarkWindow {
            cluster: "dc2".into(),
            start_ns: 0,
            end_ns: 1_000_000_000,
        }];
        let v = check_clock(
            &[st(1, 0, 1, 1_000_500)],
            &[hs(30, "dc2", "NotReady")],
            &dark,
            &LIMITS,
        );
        assert!(
            matches!(&v, Verdict::Invalid { description } if description.contains("dc2")),
            "{v:?}"
        );
        let v = check_clock(
            &[st(1, 0, 1, 1_000_500)],
            &[hs(2, "dc1", "NotReady")],
            &dark,
            &LIMITS,
        );
        assert!(
            matches!(&v, Verdict::Invalid { description } if description.contains("dc1")),
            "{v:?}"
        );
    }
}
