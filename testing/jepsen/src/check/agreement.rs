//! The agreement checker: nodes that applied the same command sequence must hold the same state. Each sample
//! is one node's `(state index, state hash)` from one consistent local snapshot (`GET /v1/system/state`);
//! any index reported with two different hashes is a divergence. At the end of a run every node must have
//! been seen at one common index, otherwise the verdict is `Unknown` (not enough to compare). Pure: it never
//! contacts fedraft.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::Verdict;

/// One observation of one node's replicated state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateSample {
    /// When the answer arrived, nanoseconds since the start of the run.
    pub t_ns: u64,
    /// The harness's wall clock at that moment (milliseconds since the Unix epoch).
    pub wall_ms: u64,
    /// 0-based node.
    pub node: usize,
    pub state_index: u64,
    pub state_hash: String,
    pub log_time_ms: u64,
}

/// Judges `samples` of `nodes` nodes; only samples taken at or after `final_from_ns` count for the
/// end-of-run requirement, while every sample counts for divergence.
pub fn check_agreement(samples: &[StateSample], nodes: usize, final_from_ns: u64) -> Verdict {
    let mut by_index: BTreeMap<u64, BTreeMap<&str, BTreeSet<usize>>> = BTreeMap::new();
    for s in samples {
        by_index
            .entry(s.state_index)
            .or_default()
            .entry(&s.state_hash)
            .or_default()
            .insert(s.node);
    }
    let conflicts: Vec<String> = by_index
        .iter()
        .filter(|(_, hashes)| hashes.len() > 1)
        .take(5)
        .map(|(index, hashes)| {
            let parts: Vec<String> = hashes
                .iter()
                .map(|(h, n)| {
                    let nodes: Vec<String> = n.iter().map(|i| format!("node{}", i + 1)).collect();
                    format!("{} on {}", &h[..h.len().min(16)], nodes.join(","))
                })
                .collect();
            format!("state index {index}: {}", parts.join(" vs "))
        })
        .collect();
    if !conflicts.is_empty() {
        return Verdict::Invalid {
            description: format!("nodes diverged: {}", conflicts.join("; ")),
        };
    }
    let mut final_seen: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.t_ns >= final_from_ns) {
        final_seen.entry(s.state_index).or_default().insert(s.node);
    }
    match final_seen.iter().rev().find(|(_, n)| n.len() == nodes) {
        Some(_) => Verdict::Valid,
        None => Verdict::Unknown {
            reason: format!(
                "no state index was observed on all {nodes} nodes at the end (final samples: {})",
                samples.iter().filter(|s| s.t_ns >= final_from_ns).count()
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: u64, node: usize, index: u64, hash: &str) -> StateSample {
        StateSample {
            t_ns: t,
            wall_ms: 0,
            node,
            state_index: index,
            state_hash: hash.into(),
            log_time_ms: 0,
        }
    }

    #[test]
    fn equal_hashes_at_a_common_index_pass() {
        let v = check_agreement(
            &[
                s(1, 0, 5, "aa"),
                s(2, 1, 5, "aa"),
                s(3, 2, 6, "bb"),
                s(4, 2, 5, "aa"),
            ],
            3,
            0,
        );
        assert_eq!(v, Verdict::Valid);
    }

    #[test]
    fn a_divergent_node_fails_and_is_named() {
        let v = check_agreement(
            &[s(1, 0, 5, "aa"), s(2, 1, 5, "aa"), s(3, 2, 5, "cc")],
            3,
            0,
        );
        match v {
            Verdict::Invalid { description } => {
                assert!(description.contains("state index 5"), "{description}");
                assert!(description.contains("node3"), "{description}");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn without_a_common_final_index_it_is_unknown() {
        let v = check_agreement(
            &[s(1, 0, 5, "aa"), s(2, 1, 5, "aa"), s(9, 2, 6, "bb")],
            3,
            0,
        );
        assert!(matches!(v, Verdict::Unknown { .. }), "{v:?}");
        // Common index only before the final phase: still unknown.
        let v = check_agreement(
            &[
                s(1, 0, 5, "aa"),
                s(2, 1, 5, "aa"),
                s(3, 2, 5, "aa"),
                s(10, 0, 7, "x"),
            ],
            3,
            10,
        );
        assert!(matches!(v, Verdict::Unknown { .. }), "{v:?}");
    }
}
