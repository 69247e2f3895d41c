//! fedraft's static-weights planner against KubeFed's own planner test cases.
//!
//! Each row restates one case of KubeFed's `pkg/controller/util/planner/planner_test.go`
//! (inputs and expected outputs are facts about that planner): preferences, total replicas,
//! available clusters, existing replicas, capacity, and the plan and overflow KubeFed returns.
//! KubeFed's "hash dependent" rows pass an empty salt, as these do, so they pin the
//! equal-weight ordering (FNV-1 of the cluster name) too.

use std::collections::BTreeMap;

use fedraft_core::policy::ClusterPreference;
use fedraft_core::scheduler::static_weights::{fnv1_32, plan};

type Pref = (&'static str, u64, u32, Option<u32>);
type Counts = &'static [(&'static str, u64)];

struct Case {
    line: &'static str,
    rebalance: bool,
    prefs: &'static [Pref],
    total: u64,
    clusters: &'static [&'static str],
    existing: Counts,
    capacity: Counts,
    want: Counts,
    /// None = KubeFed asserts an empty overflow.
    overflow: Counts,
}

const fn c(
    line: &'static str,
    prefs: &'static [Pref],
    total: u64,
    clusters: &'static [&'static str],
    existing: Counts,
    want: Counts,
) -> Case {
    Case {
        line,
        rebalance: false,
        prefs,
        total,
        clusters,
        existing,
        capacity: &[],
        want,
        overflow: &[],
    }
}

#[allow(clippy::too_many_arguments)]
const fn cap(
    line: &'static str,
    rebalance: bool,
    prefs: &'static [Pref],
    total: u64,
    clusters: &'static [&'static str],
    existing: Counts,
    capacity: Counts,
    want: Counts,
    overflow: Counts,
) -> Case {
    Case {
        line,
        rebalance,
        prefs,
        total,
        clusters,
        existing,
        capacity,
        want,
        overflow,
    }
}

const ABC: &[&str] = &["A", "B", "C"];
const AB: &[&str] = &["A", "B"];
const STAR1: &[Pref] = &[("*", 1, 0, None)];

const CASES: &[Case] = &[
    // TestEqual
    c(
        "equal/3",
        STAR1,
        50,
        ABC,
        &[],
        &[("A", 16), ("B", 17), ("C", 17)],
    ),
    c("equal/2", STAR1, 50, AB, &[], &[("A", 25), ("B", 25)]),
    c("equal/1of2", STAR1, 1, AB, &[], &[("A", 0), ("B", 1)]),
    c(
        "equal/1of4",
        STAR1,
        1,
        &["A", "B", "C", "D"],
        &[],
        &[("A", 0), ("B", 0), ("C", 0), ("D", 1)],
    ),
    c("equal/1of1", STAR1, 1, &["A"], &[], &[("A", 1)]),
    c("equal/none", STAR1, 1, &[], &[], &[]),
    // TestEqualWithExisting
    c(
        "existing/1",
        STAR1,
        50,
        ABC,
        &[("C", 30)],
        &[("A", 10), ("B", 10), ("C", 30)],
    ),
    c(
        "existing/2",
        STAR1,
        50,
        AB,
        &[("A", 30)],
        &[("A", 30), ("B", 20)],
    ),
    c(
        "existing/3",
        STAR1,
        15,
        AB,
        &[("A", 0), ("B", 8)],
        &[("A", 7), ("B", 8)],
    ),
    c(
        "existing/4",
        STAR1,
        15,
        AB,
        &[("A", 1), ("B", 8)],
        &[("A", 7), ("B", 8)],
    ),
    c(
        "existing/5",
        STAR1,
        15,
        AB,
        &[("A", 4), ("B", 8)],
        &[("A", 7), ("B", 8)],
    ),
    c(
        "existing/6",
        STAR1,
        15,
        AB,
        &[("A", 5), ("B", 8)],
        &[("A", 7), ("B", 8)],
    ),
    c(
        "existing/7",
        STAR1,
        15,
        AB,
        &[("A", 6), ("B", 8)],
        &[("A", 7), ("B", 8)],
    ),
    c(
        "existing/8",
        STAR1,
        15,
        AB,
        &[("A", 7), ("B", 8)],
        &[("A", 7), ("B", 8)],
    ),
    c(
        "existing/9",
        STAR1,
        500_000,
        AB,
        &[("A", 300_000)],
        &[("A", 300_000), ("B", 200_000)],
    ),
    c(
        "existing/10",
        STAR1,
        50,
        AB,
        &[("A", 10)],
        &[("A", 25), ("B", 25)],
    ),
    c(
        "existing/11",
        STAR1,
        50,
        AB,
        &[("A", 10), ("B", 70)],
        &[("A", 0), ("B", 50)],
    ),
    c(
        "existing/12",
        STAR1,
        1,
        AB,
        &[("A", 30)],
        &[("A", 1), ("B", 0)],
    ),
    c(
        "existing/13",
        STAR1,
        50,
        AB,
        &[("A", 10), ("B", 20)],
        &[("A", 25), ("B", 25)],
    ),
    // TestWithExistingAndCapacity
    cap(
        "capacity/1",
        true,
        STAR1,
        50,
        ABC,
        &[],
        &[("C", 10)],
        &[("A", 20), ("B", 20), ("C", 10)],
        &[("C", 7)],
    ),
    cap(
        "capacity/2",
        true,
        &[("A", 10000, 0, None), ("B", 1, 0, None)],
        50,
        &["B", "C"],
        &[],
        &[("B", 10)],
        &[("B", 10), ("C", 0)],
        &[("B", 40)],
    ),
    cap(
        "capacity/3",
        true,
        &[("A", 1, 0, None), ("B", 2, 0, None)],
        60,
        ABC,
        &[],
        &[("B", 10)],
        &[("A", 50), ("B", 10), ("C", 0)],
        &[("B", 30)],
    ),
    cap(
        "capacity/4",
        true,
        &[
            ("A", 10000, 0, Some(10)),
            ("B", 1, 0, None),
            ("C", 1, 0, Some(21)),
            ("D", 1, 0, Some(10)),
        ],
        71,
        &["A", "B", "C", "D"],
        &[],
        &[("C", 10)],
        &[("A", 10), ("B", 41), ("C", 10), ("D", 10)],
        &[("C", 11)],
    ),
    cap(
        "capacity/5",
        false,
        &[("A", 1, 0, None), ("B", 1, 0, None)],
        60,
        ABC,
        &[],
        &[("A", 10), ("B", 10)],
        &[("A", 10), ("B", 10), ("C", 0)],
        &[("A", 20), ("B", 20)],
    ),
    cap(
        "capacity/6",
        false,
        &[("A", 1, 0, None), ("B", 5, 0, None)],
        60,
        ABC,
        &[],
        &[("B", 10)],
        &[("A", 50), ("B", 10), ("C", 0)],
        &[],
    ),
    cap(
        "capacity/7",
        false,
        &[("*", 0, 20, None)],
        50,
        ABC,
        &[],
        &[("B", 10)],
        &[("A", 20), ("B", 10), ("C", 20)],
        &[],
    ),
    cap(
        "capacity/8",
        true,
        &[("*", 1, 20, None)],
        60,
        AB,
        &[],
        &[("B", 10)],
        &[("A", 50), ("B", 10)],
        &[("B", 15)],
    ),
    // TestMin
    c(
        "min/1",
        &[("*", 0, 2, None)],
        50,
        ABC,
        &[],
        &[("A", 2), ("B", 2), ("C", 2)],
    ),
    c(
        "min/2",
        &[("*", 0, 20, None)],
        50,
        ABC,
        &[],
        &[("A", 10), ("B", 20), ("C", 20)],
    ),
    c(
        "min/3",
        &[("*", 0, 20, None), ("A", 1, 100, None)],
        50,
        ABC,
        &[],
        &[("A", 50), ("B", 0), ("C", 0)],
    ),
    c(
        "min/4",
        &[("*", 1, 10, Some(12))],
        50,
        ABC,
        &[],
        &[("A", 12), ("B", 12), ("C", 12)],
    ),
    // TestMax
    c(
        "max/1",
        &[("*", 1, 0, Some(2))],
        50,
        ABC,
        &[],
        &[("A", 2), ("B", 2), ("C", 2)],
    ),
    c(
        "max/2",
        &[("*", 0, 0, Some(2))],
        50,
        ABC,
        &[],
        &[("A", 0), ("B", 0), ("C", 0)],
    ),
    // TestWeight
    c(
        "weight/1",
        &[("A", 1, 0, None), ("B", 2, 0, None)],
        60,
        ABC,
        &[],
        &[("A", 20), ("B", 40), ("C", 0)],
    ),
    c(
        "weight/2",
        &[("A", 10000, 0, None), ("B", 1, 0, None)],
        50,
        ABC,
        &[],
        &[("A", 50), ("B", 0), ("C", 0)],
    ),
    c(
        "weight/3",
        &[("A", 10000, 0, None), ("B", 1, 0, None)],
        50,
        &["B", "C"],
        &[],
        &[("B", 50), ("C", 0)],
    ),
    c(
        "weight/4",
        &[
            ("A", 10000, 0, Some(10)),
            ("B", 1, 0, None),
            ("C", 1, 0, None),
        ],
        50,
        ABC,
        &[],
        &[("A", 10), ("B", 20), ("C", 20)],
    ),
    c(
        "weight/5",
        &[
            ("A", 10000, 0, Some(10)),
            ("B", 1, 0, None),
            ("C", 1, 0, Some(10)),
        ],
        50,
        ABC,
        &[],
        &[("A", 10), ("B", 30), ("C", 10)],
    ),
    c(
        "weight/6",
        &[
            ("A", 10000, 0, Some(10)),
            ("B", 1, 0, None),
            ("C", 1, 0, Some(21)),
            ("D", 1, 0, Some(10)),
        ],
        71,
        &["A", "B", "C", "D"],
        &[],
        &[("A", 10), ("B", 30), ("C", 21), ("D", 10)],
    ),
    c(
        "weight/7",
        &[
            ("A", 10000, 0, Some(10)),
            ("B", 1, 0, None),
            ("C", 1, 0, Some(21)),
            ("D", 1, 0, Some(10)),
            ("E", 1, 0, None),
        ],
        91,
        &["A", "B", "C", "D", "E"],
        &[],
        &[("A", 10), ("B", 25), ("C", 21), ("D", 10), ("E", 25)],
    ),
];

fn counts(c: Counts) -> BTreeMap<String, u64> {
    c.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn every_kubefed_planner_case_gives_kubefeds_result() {
    for case in CASES {
        let prefs: BTreeMap<String, ClusterPreference> = case
            .prefs
            .iter()
            .map(|&(k, weight, min_replicas, max_replicas)| {
                (
                    k.to_string(),
                    ClusterPreference {
                        weight,
                        min_replicas,
                        max_replicas,
                    },
                )
            })
            .collect();
        let got = plan(
            &prefs,
            case.total,
            case.clusters,
            &counts(case.existing),
            &counts(case.capacity),
            case.rebalance,
            "",
        );
        assert_eq!(got.plan, counts(case.want), "plan of case {}", case.line);
        assert_eq!(
            got.overflow,
            counts(case.overflow),
            "overflow of case {}",
            case.line
        );
    }
}

#[test]
fn the_plan_does_not_depend_on_the_order_clusters_are_listed() {
    for case in CASES {
        let prefs: BTreeMap<String, ClusterPreference> = case
            .prefs
            .iter()
            .map(|&(k, weight, min_replicas, max_replicas)| {
                (
                    k.to_string(),
                    ClusterPreference {
                        weight,
                        min_replicas,
                        max_replicas,
                    },
                )
            })
            .collect();
        let mut reversed: Vec<&str> = case.clusters.to_vec();
        reversed.reverse();
        let a = plan(
            &prefs,
            case.total,
            case.clusters,
            &counts(case.existing),
            &counts(case.capacity),
            case.rebalance,
            "",
        );
        let b = plan(
            &prefs,
            case.total,
            &reversed,
            &counts(case.existing),
            &counts(case.capacity),
            case.rebalance,
            "",
        );
        assert_eq!(a, b, "case {}", case.line);
    }
}

#[test]
fn fnv1_matches_the_reference_vectors() {
    // FNV-1 32-bit reference values (offset basis for the empty input).
    assert_eq!(fnv1_32("", ""), 0x811c_9dc5);
    assert_eq!(fnv1_32("a", ""), 0x050c_5d7e);
    assert_eq!(fnv1_32("foo", ""), 0x408f_5e13);
    assert_eq!(fnv1_32("fo", "o"), fnv1_32("foo", ""));
}

#[test]
fn a_salt_spreads_single_replica_objects_over_equal_clusters() {
    let prefs: BTreeMap<String, ClusterPreference> = [(
        "*".to_string(),
        ClusterPreference {
            weight: 1,
            min_replicas: 0,
            max_replicas: None,
        },
    )]
    .into();
    let clusters = ["dc1", "dc2", "dc3", "dc4"];
    let mut used = std::collections::BTreeSet::new();
    for i in 0..64 {
        let p = plan(
            &prefs,
            1,
            &clusters,
            &BTreeMap::new(),
            &BTreeMap::new(),
            false,
            &format!("ns/app-{i}"),
        );
        let (winner, _) = p
            .plan
            .iter()
            .find(|(_, &n)| n == 1)
            .expect("one replica placed");
        used.insert(winner.clone());
    }
    assert!(
        used.len() >= 3,
        "salted hashes should use most clusters, used {used:?}"
    );
}
