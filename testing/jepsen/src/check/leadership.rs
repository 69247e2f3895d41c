//! Leadership stability: the raft terms the nodes reported during a run (`/readyz`, sampled by the
//! monitor) may change at most a stated number of times. Judged only for nemeses that must not cause
//! elections by themselves (slow links): there, a term change means the delays starved the leader's
//! heartbeats, and more than the bound is flapping. A pure function of the samples.

use serde::{Deserialize, Serialize};

use super::Verdict;

/// One node's term at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermSample {
    /// Nanoseconds since the start of the run.
    pub t_ns: u64,
    /// 0-based node.
    pub node: usize,
    pub term: u64,
}

/// Distinct terms in `samples`, ascending, each with the first moment (seconds) it was seen.
pub fn terms_seen(samples: &[TermSample]) -> Vec<(u64, f64)> {
    let mut first: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for s in samples {
        let t = first.entry(s.term).or_insert(s.t_ns);
        *t = (*t).min(s.t_ns);
    }
    first
        .into_iter()
        .map(|(term, t)| (term, t as f64 / 1e9))
        .collect()
}

/// Valid when the terms seen changed at most `max_changes` times; unknown without samples.
pub fn check_leadership(samples: &[TermSample], max_changes: usize) -> Verdict {
    let terms = terms_seen(samples);
    if terms.is_empty() {
        return Verdict::Unknown {
            reason: "no node reported a term".into(),
        };
    }
    let changes = terms.len() - 1;
    if changes <= max_changes {
        Verdict::Valid
    } else {
        Verdict::Invalid {
            description: format!(
                "{changes} term changes, at most {max_changes} allowed; (term, first seen at s): {terms:?}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t_ns: u64, node: usize, term: u64) -> TermSample {
        TermSample { t_ns, node, term }
    }

    #[test]
    fn changes_are_counted_across_nodes_against_the_bound() {
        let steady = [s(1, 0, 3), s(2, 1, 3), s(3, 2, 3)];
        assert_eq!(check_leadership(&steady, 0), Verdict::Valid);
        let one = [s(1, 0, 3), s(5, 1, 4), s(2, 2, 3), s(6, 2, 4)];
        assert_eq!(check_leadership(&one, 1), Verdict::Valid);
        assert!(matches!(check_leadership(&one, 0), Verdict::Invalid { .. }));
        assert_eq!(terms_seen(&one), vec![(3, 1e-9), (4, 5e-9)]);
        assert!(matches!(check_leadership(&[], 1), Verdict::Unknown { .. }));
    }
}
