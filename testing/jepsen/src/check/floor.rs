//! The floor checker (issue 26): while rollouts and drains run under faults, the ready replicas
//! of one workload summed over the member clusters that are not dark never drop below the floor
//! the rollout or drain promises, and no member ever runs a template revision that the log did
//! not roll out to it.
//!
//! The floor is the workload's desired replicas minus the unavailability its rollout allows;
//! fedraft's moves (drain, rebalance, fail-back) are make-before-break, so for them it is the
//! desired count itself. It holds from the first sample that reaches it (before that the
//! workload is still coming up). A member that goes dark takes its replicas with it and
//! nothing can hold the floor until failover has re-placed them and they turned ready: from
//! the start of a dark window until `excuse_ns` after it, the floor is not judged. Members are
//! judged healthy by the harness's own record of what it darkened ([`DarkWindow`]), not by
//! fedraft's view, which is what is under test.
//!
//! Revisions: every revision a member runs must be one the log rolled out to that member (the
//! audit's rollout steps: `cluster updated` to revision R), no earlier than the entry that did
//! so, give or take `skew_ns` between the audit's log time and the sampler's clock.
//!
//! Pure: judges samples the harness took; it never contacts fedraft or a member.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::clock::DarkWindow;
use super::Verdict;

/// What one member ran of the workload at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// Ready replicas (the member's own status).
    pub ready: u64,
    /// Template revisions its replicas run (the rollout revision annotation).
    pub revisions: BTreeSet<u32>,
}

/// One sweep over the members, on the history's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloorSample {
    pub t_ns: u64,
    /// Member -> what it ran; a member that did not answer is absent (and counts 0 ready).
    pub members: BTreeMap<String, MemberView>,
}

/// Member -> revision -> when (history clock) the log first rolled that revision out to it.
pub type RolledOut = BTreeMap<String, BTreeMap<u32, u64>>;

/// The promise and the tolerances.
#[derive(Debug, Clone, Copy)]
pub struct FloorCheck {
    /// Ready replicas the workload keeps over members that are not dark.
    pub floor: u64,
    /// How long after a dark window starts the floor is excused: the window itself, then the
    /// failover grace and the time re-placed replicas take to turn ready.
    pub excuse_ns: u64,
    /// Tolerated difference between the audit's log time and the sampler's clock.
    pub skew_ns: u64,
}

/// Whether `t_ns` falls in a dark window of any member, or within `excuse_ns` after one ended.
fn excused(dark: &[DarkWindow], t_ns: u64, excuse_ns: u64) -> bool {
    dark.iter()
        .any(|w| t_ns >= w.start_ns && t_ns <= w.end_ns.saturating_add(excuse_ns))
}

fn is_dark(dark: &[DarkWindow], cluster: &str, t_ns: u64) -> bool {
    dark.iter()
        .any(|w| w.cluster == cluster && t_ns >= w.start_ns && t_ns <= w.end_ns)
}

/// Judges the ready floor: samples in time order, the dark windows the nemesis opened.
pub fn check_floor(samples: &[FloorSample], dark: &[DarkWindow], limits: &FloorCheck) -> Verdict {
    let mut list: Vec<&FloorSample> = samples.iter().collect();
    list.sort_by_key(|s| s.t_ns);
    let mut armed = false;
    let mut problems = Vec::new();
    for s in list {
        let ready: u64 = s
            .members
            .iter()
            .filter(|(c, _)| !is_dark(dark, c, s.t_ns))
            .map(|(_, m)| m.ready)
            .sum();
        if !armed {
            armed = ready >= limits.floor;
            continue;
        }
        if ready < limits.floor && !excused(dark, s.t_ns, limits.excuse_ns) {
            problems.push(format!(
                "at {} ms: {ready} ready replicas over members not dark, floor {}",
                s.t_ns / 1_000_000,
                limits.floor
            ));
        }
    }
    if !armed {
        return Verdict::Unknown {
            reason: format!(
                "the workload never reached its floor of {} ready replicas",
                limits.floor
            ),
        };
    }
    verdict(problems)
}

/// How many samples [`check_floor`] holds to the floor: those after the first that reached it,
/// outside every excused stretch. A run that judged none proved nothing about the floor.
pub fn judged(samples: &[FloorSample], dark: &[DarkWindow], limits: &FloorCheck) -> usize {
    let mut list: Vec<&FloorSample> = samples.iter().collect();
    list.sort_by_key(|s| s.t_ns);
    let ready = |s: &FloorSample| -> u64 {
        s.members
            .iter()
            .filter(|(c, _)| !is_dark(dark, c, s.t_ns))
            .map(|(_, m)| m.ready)
            .sum()
    };
    let Some(first) = list.iter().position(|s| ready(s) >= limits.floor) else {
        return 0;
    };
    list[first + 1..]
        .iter()
        .filter(|s| !excused(dark, s.t_ns, limits.excuse_ns))
        .count()
}

/// Judges the revisions every member ran against what the log rolled out to it.
pub fn check_revisions(
    samples: &[FloorSample],
    rolled: &RolledOut,
    limits: &FloorCheck,
) -> Verdict {
    let mut problems = BTreeSet::new();
    for s in samples {
        for (cluster, m) in &s.members {
            for r in &m.revisions {
                let first = rolled.get(cluster).and_then(|by| by.get(r));
                match first {
                    None => {
                        problems.insert(format!(
                            "{cluster} ran revision {r}, which the log never rolled out to it"
                        ));
                    }
                    Some(at) if s.t_ns.saturating_add(limits.skew_ns) < *at => {
                        problems.insert(format!(
                            "{cluster} ran revision {r} at {} ms, before the log rolled it out \
                             at {} ms",
                            s.t_ns / 1_000_000,
                            at / 1_000_000
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    verdict(problems.into_iter().collect())
}

/// At most this many problems are spelled out; the rest are counted.
const SHOWN: usize = 10;

fn verdict(problems: Vec<String>) -> Verdict {
    if problems.is_empty() {
        return Verdict::Valid;
    }
    let more = problems.len().saturating_sub(SHOWN);
    let mut description = problems
        .into_iter()
        .take(SHOWN)
        .collect::<Vec<_>>()
        .join("\n");
    if more > 0 {
        description.push_str(&format!("\n... and {more} more"));
    }
    Verdict::Invalid { description }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const LIMITS: FloorCheck = FloorCheck {
        floor: 4,
        excuse_ns: 10 * S,
        skew_ns: S,
    };

    fn sample(t_s: u64, members: &[(&str, u64, &[u32])]) -> FloorSample {
        FloorSample {
            t_ns: t_s * S,
            members: members
                .iter()
                .map(|(c, ready, revs)| {
                    (
                        c.to_string(),
                        MemberView {
                            ready: *ready,
                            revisions: revs.iter().copied().collect(),
                        },
                    )
                })
                .collect(),
        }
    }

    fn dark(cluster: &str, from_s: u64, to_s: u64) -> DarkWindow {
        DarkWindow {
            cluster: cluster.into(),
            start_ns: from_s * S,
            end_ns: to_s * S,
        }
    }

    /// A make-before-break drain of dc1: dc2 comes up before dc1 goes down.
    fn drain() -> Vec<FloorSample> {
        vec![
            sample(0, &[("dc1", 1, &[1])]),
            sample(1, &[("dc1", 2, &[1]), ("dc2", 2, &[1])]),
            sample(2, &[("dc1", 2, &[1]), ("dc2", 4, &[1])]),
            sample(3, &[("dc2", 4, &[1])]),
        ]
    }

    #[test]
    fn a_make_before_break_drain_holds_the_floor() {
        assert_eq!(check_floor(&drain(), &[], &LIMITS), Verdict::Valid);
    }

    #[test]
    fn a_break_before_make_drain_is_caught() {
        let mut h = drain();
        h.push(sample(4, &[("dc2", 3, &[1])]));
        h.push(sample(5, &[("dc2", 1, &[1]), ("dc3", 1, &[1])]));
        let v = check_floor(&h, &[], &LIMITS);
        let Verdict::Invalid { description } = v else {
            panic!("{v:?}");
        };
        assert!(description.contains("at 4000 ms: 3 ready"), "{description}");
        assert!(description.contains("at 5000 ms: 2 ready"), "{description}");
    }

    #[test]
    fn a_dark_member_is_excused_until_failover_had_its_time() {
        // dc2 dark from 4 s to 6 s: its replicas do not count, and the floor waits 10 s more.
        let mut h = drain();
        h.push(sample(5, &[("dc2", 4, &[1])]));
        h.push(sample(12, &[("dc3", 2, &[1])]));
        assert_eq!(
            check_floor(&h, &[dark("dc2", 4, 6)], &LIMITS),
            Verdict::Valid
        );
        // Still short after the excuse ran out.
        h.push(sample(17, &[("dc2", 2, &[1]), ("dc3", 1, &[1])]));
        let v = check_floor(&h, &[dark("dc2", 4, 6)], &LIMITS);
        assert!(matches!(v, Verdict::Invalid { .. }), "{v:?}");
        // A dark member's ready count is its own word, which nobody can use: it never counts.
        let lying = vec![
            sample(0, &[("dc1", 4, &[1])]),
            sample(30, &[("dc1", 4, &[1])]),
        ];
        let v = check_floor(&lying, &[dark("dc1", 20, 40)], &LIMITS);
        assert_eq!(v, Verdict::Valid, "excused while dark");
        let v = check_floor(
            &lying,
            &[dark("dc1", 20, 40)],
            &FloorCheck {
                excuse_ns: 0,
                ..LIMITS
            },
        );
        assert_eq!(v, Verdict::Valid, "inside the window itself");
    }

    #[test]
    fn judged_counts_the_samples_held_to_the_floor() {
        // The first sample is short (not armed), the second arms, the rest are judged.
        assert_eq!(judged(&drain(), &[], &LIMITS), 2);
        // Samples within a dark window's excuse are not judged.
        assert_eq!(judged(&drain(), &[dark("dc9", 2, 2)], &LIMITS), 0);
        assert_eq!(judged(&drain()[..1], &[], &LIMITS), 0);
    }

    #[test]
    fn a_workload_that_never_came_up_is_unknown_not_valid() {
        let h = vec![sample(0, &[("dc1", 1, &[1])])];
        assert!(matches!(
            check_floor(&h, &[], &LIMITS),
            Verdict::Unknown { .. }
        ));
    }

    #[test]
    fn revisions_must_have_been_rolled_out_to_that_member_first() {
        let rolled: RolledOut = [
            (
                "dc1".to_string(),
                [(1, 0), (2, 10 * S)].into_iter().collect(),
            ),
            ("dc2".to_string(), [(1, 0)].into_iter().collect()),
        ]
        .into_iter()
        .collect();
        let ok = vec![
            sample(5, &[("dc1", 2, &[1]), ("dc2", 2, &[1])]),
            // Within the tolerated skew of the entry that rolled revision 2 out.
            sample(9, &[("dc1", 2, &[1, 2]), ("dc2", 2, &[1])]),
            sample(12, &[("dc1", 2, &[2]), ("dc2", 2, &[1])]),
        ];
        assert_eq!(check_revisions(&ok, &rolled, &LIMITS), Verdict::Valid);
        let bad = vec![
            sample(5, &[("dc1", 2, &[2])]),
            sample(12, &[("dc2", 2, &[1, 2])]),
        ];
        let v = check_revisions(&bad, &rolled, &LIMITS);
        let Verdict::Invalid { description } = v else {
            panic!("{v:?}");
        };
        assert!(
            description.contains("dc1 ran revision 2 at 5000 ms, before the log rolled it out"),
            "{description}"
        );
        assert!(
            description.contains("dc2 ran revision 2, which the log never rolled out to it"),
            "{description}"
        );
    }
}
