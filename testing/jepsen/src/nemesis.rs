//! Seeded nemesis schedules: which fault happens when, to which node or member cluster, for how long. The same
//! seed and config always give the same schedule (with the `rand` version locked in Cargo.lock). This module
//! only plans; killing, pausing, cutting links, darkening member clusters, shifting clocks and changing the
//! raft membership is done by the harness (`run::faults`).
//!
//! A schedule is a list of non-overlapping windows separated by quiet periods, so the cluster gets time to
//! recover between faults and every fault is undone before the run ends.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::Error;

/// Bounds (inclusive) of the one-way latency the slow nemesis adds to every peer link.
pub const SLOW_DELAY_MS: (u64, u64) = (50, 200);

/// Which node a fault hits. The leader is only known at run time; `fallback` is used when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Node(usize),
    Leader { fallback: usize },
}

impl Target {
    /// The node to hit, given the leader the harness observed (if any).
    pub fn resolve(self, leader: Option<usize>) -> usize {
        match self {
            Target::Node(n) => n,
            Target::Leader { fallback } => leader.unwrap_or(fallback),
        }
    }
}

/// A network partition, expressed as the directed links to cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Partition {
    /// One node loses every link.
    Isolate { target: Target },
    /// The listed minority is cut off from the rest.
    Halves { minority: Vec<usize> },
    /// Two halves cannot talk to each other, but both talk to the bridge node.
    Bridge { bridge: usize },
}

impl Partition {
    /// The directed links (both directions of each severed pair) this partition cuts among `nodes` nodes.
    pub fn cut_links(&self, nodes: usize, leader: Option<usize>) -> Vec<(usize, usize)> {
        let side: Vec<u8> = match self {
            Partition::Isolate { target } => {
                let t = target.resolve(leader);
                (0..nodes).map(|n| u8::from(n == t)).collect()
            }
            Partition::Halves { minority } => (0..nodes)
                .map(|n| u8::from(minority.contains(&n)))
                .collect(),
            Partition::Bridge { bridge } => {
                // The others alternate between two sides; side 2 is the bridge, which talks to everyone.
                let mut next = 0u8;
                (0..nodes)
                    .map(|n| {
                        if n == *bridge {
                            2
                        } else {
                            next ^= 1;
                            next
                        }
                    })
                    .collect()
            }
        };
        let mut links = Vec::new();
        for a in 0..nodes {
            for b in 0..nodes {
                if a != b && side[a] != side[b] && side[a] != 2 && side[b] != 2 {
                    links.push((a, b));
                }
            }
        }
        links
    }
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "fault")]
pub enum Fault {
    /// SIGKILL at the window's start, restart at its end.
    Kill { target: Target },
    /// SIGSTOP at the start, SIGCONT at the end.
    Pause { target: Target },
    /// Cut links at the start, heal them at the end.
    Partition { partition: Partition },
    /// Member cluster `cluster` (index into the simulated clusters) refuses every connection for the window.
    MemberDark { cluster: usize },
    /// The wall clock of one node is shifted by `offset_ms` (forward when positive) for the window; its
    /// monotonic clock is left alone, as when NTP steps a clock.
    Clock { target: Target, offset_ms: i64 },
    /// The runbook's replace-a-node, under load: at the window's start the target's voter is removed from
    /// the membership, its process killed and its data directory wiped, and it starts again under a new
    /// id (same addresses) and is added as a learner; at the window's end the learner is promoted.
    Replace { target: Target },
    /// Every peer link gains `delay_ms` of one-way latency for the window (a slow network).
    Slow { delay_ms: u64 },
}

/// The fault families a schedule may draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NemesisKind {
    Kill,
    Pause,
    Partition,
    MemberDark,
    Clock,
    Membership,
    Slow,
}

/// A fault active from `start` to `end` (offsets from the start of the run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub start: Duration,
    pub end: Duration,
    pub fault: Fault,
}

/// What a schedule is drawn from.
#[derive(Debug, Clone)]
pub struct NemesisConfig {
    pub nodes: usize,
    pub kinds: Vec<NemesisKind>,
    /// Every window ends by then.
    pub run_length: Duration,
    /// Bounds (inclusive) of a fault's length and of the quiet gap before each fault.
    pub fault_length: (Duration, Duration),
    pub quiet_length: (Duration, Duration),
    /// Chance that a kill, pause or isolation targets the leader rather than a random node.
    pub leader_bias: f64,
    /// Simulated member clusters a member-dark fault may pick from.
    pub member_clusters: usize,
    /// Bounds of a member-dark window: longer than other faults, so the cluster is declared NotReady and its
    /// replicas fail over before it comes back.
    pub dark_length: (Duration, Duration),
    /// Largest backward clock step; steps are drawn between 1 s (or this, when smaller) and this.
    pub max_clock_shift: Duration,
    /// Largest forward clock leap, drawn the same way.
    pub max_clock_leap: Duration,
}

impl NemesisConfig {
    /// Three nodes, the given kinds, 5-10 s faults after 3-6 s of quiet.
    pub fn three_nodes(kinds: Vec<NemesisKind>, run_length: Duration) -> Self {
        NemesisConfig {
            nodes: 3,
            kinds,
            run_length,
            fault_length: (Duration::from_secs(5), Duration::from_secs(10)),
            quiet_length: (Duration::from_secs(3), Duration::from_secs(6)),
            leader_bias: 0.5,
            member_clusters: 3,
            dark_length: (Duration::from_secs(14), Duration::from_secs(20)),
            max_clock_shift: Duration::from_secs(120),
            max_clock_leap: Duration::from_secs(120),
        }
    }
}

/// Draws a schedule from `seed`.
pub fn schedule(seed: u64, config: &NemesisConfig) -> Result<Vec<Window>, Error> {
    let invalid = |why: &str| Err(Error::InvalidNemesisConfig(why.to_string()));
    if config.nodes < 2 {
        return invalid("need at least two nodes");
    }
    if config.kinds.is_empty() {
        return invalid("no nemesis kinds");
    }
    if config.fault_length.0 > config.fault_length.1
        || config.quiet_length.0 > config.quiet_length.1
    {
        return invalid("a length range has min > max");
    }
    if config.fault_length.0.is_zero() {
        return invalid("faults must last longer than zero");
    }
    if !(0.0..=1.0).contains(&config.leader_bias) {
        return invalid("leader_bias must be within 0..=1");
    }
    if config.kinds.contains(&NemesisKind::MemberDark)
        && (config.member_clusters == 0 || config.dark_length.0 > config.dark_length.1)
    {
        return invalid(
            "member-dark needs member clusters and a dark length range with min <= max",
        );
    }
    if config.kinds.contains(&NemesisKind::Clock)
        && (config.max_clock_shift < Duration::from_secs(1)
            || config.max_clock_leap < Duration::from_secs(1))
    {
        return invalid("the clock nemesis needs clock shifts and leaps of at least 1 s");
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut windows = Vec::new();
    let mut now = Duration::ZERO;
    loop {
        let quiet = pick(&mut rng, config.quiet_length);
        let kind = config.kinds[rng.random_range(0..config.kinds.len())];
        let length = if kind == NemesisKind::MemberDark {
            pick(&mut rng, config.dark_length)
        } else {
            pick(&mut rng, config.fault_length)
        };
        let start = now + quiet;
        let end = start + length;
        if end > config.run_length {
            return Ok(windows);
        }
        windows.push(Window {
            start,
            end,
            fault: draw_fault(&mut rng, kind, config),
        });
        now = end;
    }
}

fn pick(rng: &mut StdRng, (lo, hi): (Duration, Duration)) -> Duration {
    // Millisecond resolution keeps schedules readable in the results directory.
    Duration::from_millis(rng.random_range(lo.as_millis() as u64..=hi.as_millis() as u64))
}

fn draw_target(rng: &mut StdRng, config: &NemesisConfig) -> Target {
    let node = rng.random_range(0..config.nodes);
    if rng.random_bool(config.leader_bias) {
        Target::Leader { fallback: node }
    } else {
        Target::Node(node)
    }
}

fn draw_fault(rng: &mut StdRng, kind: NemesisKind, config: &NemesisConfig) -> Fault {
    match kind {
        NemesisKind::Kill => Fault::Kill {
            target: draw_target(rng, config),
        },
        NemesisKind::Pause => Fault::Pause {
            target: draw_target(rng, config),
        },
        NemesisKind::Partition => {
            let partition = match rng.random_range(0..3) {
                0 => Partition::Isolate {
                    target: draw_target(rng, config),
                },
                1 => {
                    // The largest minority that still leaves a majority: (n - 1) / 2 nodes.
                    let mut nodes: Vec<usize> = (0..config.nodes).collect();
                    for i in (1..nodes.len()).rev() {
                        nodes.swap(i, rng.random_range(0..=i));
                    }
                    let mut minority = nodes[..(config.nodes - 1) / 2].to_vec();
                    minority.sort_unstable();
                    Partition::Halves { minority }
                }
                _ => Partition::Bridge {
                    bridge: rng.random_range(0..config.nodes),
                },
            };
            Fault::Partition { partition }
        }
        NemesisKind::MemberDark => Fault::MemberDark {
            cluster: rng.random_range(0..config.member_clusters),
        },
        NemesisKind::Clock => {
            // Forward leaps are the dangerous direction (deadlines run in log time): drawn more often.
            let forward = rng.random_bool(0.6);
            let max = if forward {
                config.max_clock_leap
            } else {
                config.max_clock_shift
            }
            .as_millis() as i64;
            let magnitude = rng.random_range(1_000..=max.max(1_000));
            let offset_ms = if forward { magnitude } else { -magnitude };
            Fault::Clock {
                target: draw_target(rng, config),
                offset_ms,
            }
        }
        NemesisKind::Membership => Fault::Replace {
            target: draw_target(rng, config),
        },
        // Up to a fifth of the shortest election timeout each way: heartbeats arrive late but steady.
        NemesisKind::Slow => Fault::Slow {
            delay_ms: rng.random_range(SLOW_DELAY_MS.0..=SLOW_DELAY_MS.1),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> NemesisConfig {
        NemesisConfig::three_nodes(
            vec![
                NemesisKind::Kill,
                NemesisKind::Pause,
                NemesisKind::Partition,
            ],
            Duration::from_secs(600),
        )
    }

    #[test]
    fn same_seed_same_schedule_and_seeds_differ() {
        let a = schedule(7, &all()).unwrap();
        assert_eq!(a, schedule(7, &all()).unwrap());
        assert_ne!(a, schedule(8, &all()).unwrap());
        assert!(
            a.len() >= 600 / 16,
            "600 s of 8-16 s cycles gives at least 37 windows, got {}",
            a.len()
        );
    }

    #[test]
    fn windows_are_ordered_bounded_and_well_formed() {
        let config = all();
        for seed in 0..50 {
            let windows = schedule(seed, &config).unwrap();
            let mut previous_end = Duration::ZERO;
            for w in &windows {
                assert!(w.start >= previous_end + config.quiet_length.0);
                assert!(
                    w.end - w.start >= config.fault_length.0
                        && w.end - w.start <= config.fault_length.1
                );
                assert!(w.end <= config.run_length);
                if let Fault::Kill { target }
                | Fault::Pause { target }
                | Fault::Clock { target, .. } = w.fault
                {
                    assert!(target.resolve(None) < 3);
                }
                previous_end = w.end;
            }
            let kinds: Vec<_> = windows
                .iter()
                .map(|w| std::mem::discriminant(&w.fault))
                .collect();
            assert!(
                kinds.iter().any(|k| *k != kinds[0]),
                "seed {seed}: a mixed schedule mixes kinds"
            );
        }
    }

    #[test]
    fn only_requested_kinds_appear() {
        let config = NemesisConfig::three_nodes(vec![NemesisKind::Pause], Duration::from_secs(120));
        let windows = schedule(3, &config).unwrap();
        assert!(!windows.is_empty());
        assert!(windows
            .iter()
            .all(|w| matches!(w.fault, Fault::Pause { .. })));
    }

    #[test]
    fn partitions_cut_the_right_links() {
        let isolate = Partition::Isolate {
            target: Target::Leader { fallback: 0 },
        };
        assert_eq!(
            isolate.cut_links(3, Some(2)),
            vec![(0, 2), (1, 2), (2, 0), (2, 1)]
        );
        assert_eq!(
            isolate.cut_links(3, None),
            vec![(0, 1), (0, 2), (1, 0), (2, 0)]
        );
        let halves = Partition::Halves { minority: vec![1] };
        assert_eq!(
            halves.cut_links(3, None),
            vec![(0, 1), (1, 0), (1, 2), (2, 1)]
        );
        // Bridge 1: nodes 0 and 2 are severed, both still reach 1.
        assert_eq!(
            Partition::Bridge { bridge: 1 }.cut_links(3, None),
            vec![(0, 2), (2, 0)]
        );
    }

    #[test]
    fn member_dark_and_clock_faults_are_drawn_within_bounds() {
        let mut config = NemesisConfig::three_nodes(
            vec![NemesisKind::MemberDark, NemesisKind::Clock],
            Duration::from_secs(600),
        );
        config.max_clock_shift = Duration::from_secs(30);
        config.max_clock_leap = Duration::from_secs(30);
        let windows = schedule(11, &config).unwrap();
        let (mut dark, mut forward, mut backward) = (0, 0, 0);
        for w in &windows {
            match w.fault {
                Fault::MemberDark { cluster } => {
                    assert!(cluster < 3);
                    assert!(w.end - w.start >= config.dark_length.0);
                    dark += 1;
                }
                Fault::Clock { offset_ms, .. } => {
                    assert!((1_000..=30_000).contains(&offset_ms.abs()), "{offset_ms}");
                    if offset_ms > 0 {
                        forward += 1
                    } else {
                        backward += 1
                    }
                }
                ref other => panic!("unexpected fault {other:?}"),
            }
        }
        assert!(dark > 0 && forward > 0 && backward > 0);
    }

    #[test]
    fn membership_windows_replace_one_node_among_other_faults() {
        let config = NemesisConfig::three_nodes(
            vec![
                NemesisKind::Membership,
                NemesisKind::Kill,
                NemesisKind::Partition,
            ],
            Duration::from_secs(600),
        );
        let windows = schedule(5, &config).unwrap();
        let replaced: Vec<usize> = windows
            .iter()
            .filter_map(|w| match w.fault {
                Fault::Replace { target } => Some(target.resolve(None)),
                _ => None,
            })
            .collect();
        assert!(replaced.len() >= 5, "{replaced:?}");
        assert!(replaced.iter().all(|n| *n < 3));
        assert!(windows
            .iter()
            .any(|w| matches!(w.fault, Fault::Kill { .. })));
        assert!(windows
            .iter()
            .any(|w| matches!(w.fault, Fault::Partition { .. })));
    }

    #[test]
    fn bad_configs_are_refused() {
        let mut c = all();
        c.kinds.clear();
        assert!(schedule(1, &c).is_err());
        let mut c = all();
        c.fault_length = (Duration::from_secs(2), Duration::from_secs(1));
        assert!(schedule(1, &c).is_err());
    }
}
