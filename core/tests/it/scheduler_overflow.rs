//! Overflow tiers (Karmada's `overflowAffinities`) through the public `schedule` entry point:
//! the primary tier first, the overflow tiers in order for what it cannot hold, scale down
//! from the last tier, the record of terms; and, as properties over random fleets, that the
//! replicas placed are the request (or all the tiers hold) and an overflow tier holds
//! replicas only when every tier before it is full.

use std::collections::BTreeMap;

use fedraft_core::policy::*;
use fedraft_core::scheduler::*;
use proptest::prelude::*;

/// 100m per replica: a cluster with `n * 100` millis free holds `n` replicas.
const PER: Resources = Resources {
    cpu_millis: 100,
    memory_bytes: 0,
    pods: 0,
};
const NO_TAINTS: &[Taint] = &[];

struct Fleet {
    names: Vec<String>,
    labels: Vec<BTreeMap<String, String>>,
    fits: Vec<Option<u64>>,
    health: Vec<HealthView>,
}

/// `(name, replicas that fit)`, every cluster Ready, labelled `tier=<first letter>`.
fn fleet(cs: &[(&str, u64)]) -> Fleet {
    Fleet {
        names: cs.iter().map(|(n, _)| n.to_string()).collect(),
        labels: cs
            .iter()
            .map(|(n, _)| [("tier".to_string(), n[..1].to_string())].into())
            .collect(),
        fits: cs.iter().map(|(_, f)| Some(*f)).collect(),
        health: vec![HealthView::Ready; cs.len()],
    }
}

fn names(v: &[&str]) -> Option<Vec<String>> {
    Some(v.iter().map(|s| s.to_string()).collect())
}

/// Primary `idc` over `primary`, then one overflow tier per entry of `tiers`.
fn tiers(primary: &[&str], tiers: &[(&str, &[&str])]) -> (Placement, Overflow) {
    let placement = Placement {
        clusters: names(primary),
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: Some(Box::new(Division::DynamicByCapacity { rebalance: false })),
        },
        ..Default::default()
    };
    let overflow = Overflow {
        primary: "idc".into(),
        tiers: tiers
            .iter()
            .map(|(name, cs)| OverflowTier {
                name: name.to_string(),
                clusters: names(cs),
                cluster_selector: None,
            })
            .collect(),
    };
    (placement, overflow)
}

fn run(
    p: &Placement,
    o: Option<&Overflow>,
    total: u32,
    f: &Fleet,
    current: &[(&str, u32)],
) -> Decision {
    let views: Vec<ClusterView<'_>> = (0..f.names.len())
        .map(|i| ClusterView {
            name: &f.names[i],
            labels: &f.labels[i],
            taints: NO_TAINTS,
            cordoned: false,
            health: f.health[i],
            available: f.fits[i].map(|n| Resources {
                cpu_millis: n * 100,
                memory_bytes: 0,
                pods: 0,
            }),
            extended: None,
            held_to: None,
        })
        .collect();
    let cur: BTreeMap<String, u32> = current.iter().map(|(c, n)| (c.to_string(), *n)).collect();
    schedule(&ScheduleRequest {
        object_key: "default/gpu",
        placement: p,
        total_replicas: total,
        per_replica: PER,
        per_replica_extended: &NO_EXTENDED,
        clusters: &views,
        current: &cur,
        allowed: None,
        peers: None,
        overflow: o,
        now_ms: 1_000_000,
        steady_spread: true,
    })
}

fn placed(d: &Decision) -> Vec<(&str, u32)> {
    d.placement.iter().map(|(c, n)| (c.as_str(), *n)).collect()
}

const FLEET: &[(&str, u64)] = &[
    ("a-idc", 4),
    ("b-cloud1", 3),
    ("b-cloud2", 3),
    ("c-burst", 50),
];

#[test]
fn a_primary_that_holds_everything_leaves_the_overflow_tiers_empty() {
    let f = fleet(FLEET);
    let (p, o) = tiers(&["a-idc"], &[("cloud", &["b-cloud1", "b-cloud2"])]);
    let d = run(&p, Some(&o), 4, &f, &[]);
    assert_eq!(placed(&d), [("a-idc", 4)]);
    assert!(d.unschedulable.is_none());
    let terms = d.terms.as_ref().expect("terms recorded");
    assert_eq!(terms.term("a-idc"), Some(("idc", false)));
    assert!(!d.summary().contains("overflow"), "{}", d.summary());
}

#[test]
fn what_the_primary_cannot_hold_goes_to_the_overflow_tiers_in_order() {
    let f = fleet(FLEET);
    let (p, o) = tiers(
        &["a-idc"],
        &[
            ("cloud", &["b-cloud1", "b-cloud2"]),
            ("burst", &["c-burst"]),
        ],
    );
    let d = run(&p, Some(&o), 8, &f, &[]);
    // 4 fill the primary; the next 4 go to the first overflow tier, shared by capacity.
    assert_eq!(d.placement["a-idc"], 4);
    assert_eq!(d.placement["b-cloud1"] + d.placement["b-cloud2"], 4);
    assert!(!d.placement.contains_key("c-burst"));
    let d = run(&p, Some(&o), 15, &f, &[]);
    assert_eq!(
        placed(&d),
        [
            ("a-idc", 4),
            ("b-cloud1", 3),
            ("b-cloud2", 3),
            ("c-burst", 5)
        ]
    );
    let terms = d.terms.as_ref().expect("terms");
    assert_eq!(terms.term("b-cloud2"), Some(("cloud", true)));
    assert_eq!(terms.term("c-burst"), Some(("burst", true)));
    let summary = d.summary();
    assert!(summary.contains("beyond idc"), "{summary}");
    assert!(
        summary.contains("c-burst (5) by overflow burst"),
        "{summary}"
    );
    // More than every tier holds: the rest is a shortfall of this term.
    let d = run(&p, Some(&o), 70, &f, &[]);
    assert_eq!(d.total(), 60);
    assert_eq!(d.unschedulable.as_ref().map(|s| s.replicas), Some(10));
}

#[test]
fn without_tiers_the_same_request_stays_on_the_primary() {
    let f = fleet(FLEET);
    let (p, _) = tiers(&["a-idc"], &[]);
    let d = run(&p, None, 8, &f, &[]);
    assert_eq!(placed(&d), [("a-idc", 4)]);
    assert_eq!(d.unschedulable.as_ref().map(|s| s.replicas), Some(4));
    assert!(d.terms.is_none());
}

#[test]
fn a_scale_down_releases_the_last_tier_first() {
    let f = fleet(FLEET);
    let (p, o) = tiers(
        &["a-idc"],
        &[
            ("cloud", &["b-cloud1", "b-cloud2"]),
            ("burst", &["c-burst"]),
        ],
    );
    // A cluster's capacity counts what this object runs there (the caller adds it back).
    let now = [
        ("a-idc", 4),
        ("b-cloud1", 3),
        ("b-cloud2", 3),
        ("c-burst", 5),
    ];
    let d = run(&p, Some(&o), 12, &f, &now);
    assert_eq!(
        placed(&d),
        [
            ("a-idc", 4),
            ("b-cloud1", 3),
            ("b-cloud2", 3),
            ("c-burst", 2)
        ]
    );
    let d = run(&p, Some(&o), 6, &f, &now);
    assert_eq!(d.placement["a-idc"], 4, "the primary keeps its replicas");
    assert_eq!(d.placement.get("c-burst"), None, "the last tier goes first");
    assert_eq!(d.placement["b-cloud1"] + d.placement["b-cloud2"], 2);
    let d = run(&p, Some(&o), 3, &f, &now);
    assert_eq!(placed(&d), [("a-idc", 3)]);
}

#[test]
fn capacity_back_on_the_primary_fills_it_first_at_the_next_decision() {
    // The primary held 4 and the overflow 6; now 12 fit on the primary again. Karmada does not
    // reschedule for capacity alone (the state machine re-places such an object only when it
    // is written or scaled, `door_overflow`); when it does, the primary is filled first.
    let mut f = fleet(FLEET);
    f.fits[0] = Some(12);
    let (p, o) = tiers(&["a-idc"], &[("cloud", &["b-cloud1", "b-cloud2"])]);
    let now = [("a-idc", 4), ("b-cloud1", 3), ("b-cloud2", 3)];
    let d = run(&p, Some(&o), 11, &f, &now);
    assert_eq!(placed(&d), [("a-idc", 11)]);
    assert!(
        d.summary().contains("b-cloud1 reduced 3 -> 0"),
        "{}",
        d.summary()
    );
}

#[test]
fn a_failed_primary_leaves_everything_to_the_overflow_tiers() {
    let mut f = fleet(FLEET);
    f.health[0] = HealthView::NotReady { since_ms: 0 };
    let (p, o) = tiers(&["a-idc"], &[("cloud", &["b-cloud1", "b-cloud2"])]);
    let d = run(&p, Some(&o), 5, &f, &[("a-idc", 4), ("b-cloud1", 1)]);
    assert_eq!(d.placement.get("a-idc"), None);
    assert_eq!(d.placement["b-cloud1"] + d.placement["b-cloud2"], 5);
}

#[test]
fn a_cluster_belongs_to_the_first_tier_that_selects_it() {
    let f = fleet(FLEET);
    let (mut p, mut o) = tiers(
        &["a-idc", "b-cloud1"],
        &[("cloud", &["b-cloud1", "b-cloud2"])],
    );
    // A label selector tier: every `tier=c` cluster.
    o.tiers.push(OverflowTier {
        name: "burst".into(),
        clusters: None,
        cluster_selector: Some(LabelSelector {
            match_labels: [("tier".to_string(), "c".to_string())].into(),
            match_expressions: Vec::new(),
        }),
    });
    let d = run(&p, Some(&o), 9, &f, &[]);
    assert_eq!(placed(&d), [("a-idc", 4), ("b-cloud1", 3), ("b-cloud2", 2)]);
    let terms = d.terms.as_ref().expect("terms");
    assert_eq!(terms.term("b-cloud1"), Some(("idc", false)));
    assert_eq!(terms.term("b-cloud2"), Some(("cloud", true)));
    let d = run(&p, Some(&o), 12, &f, &[]);
    assert_eq!(d.placement["c-burst"], 2);
    // Unselected by every tier: dropped with the primary's reason.
    p.clusters = names(&["a-idc"]);
    o.tiers.truncate(1);
    let d = run(
        &p,
        Some(&o),
        1,
        &fleet(&[("a-idc", 1), ("z-other", 9)]),
        &[],
    );
    let z = d
        .dropped
        .iter()
        .find(|x| x.cluster == "z-other")
        .expect("dropped");
    assert_eq!(z.reason, DropReason::NotInClusterList);
}

#[test]
fn duplicated_and_aggregated_objects() {
    let f = fleet(FLEET);
    let (mut p, o) = tiers(&["a-idc"], &[("cloud", &["b-cloud1", "b-cloud2"])]);
    // Aggregated: the tier's fewest clusters that hold what overflows.
    p.replicas.division = Some(Box::new(Division::Aggregated { rebalance: false }));
    let d = run(&p, Some(&o), 7, &f, &[]);
    assert_eq!(d.placement["a-idc"], 4);
    assert_eq!(d.placement.len(), 2, "{:?}", d.placement);
    // Without replicas to divide (a ConfigMap's placement), only the primary is used, as
    // Karmada places non-workloads.
    p.replicas = ReplicaPolicy {
        mode: ReplicaMode::Duplicated,
        division: None,
    };
    let d = run(&p, Some(&o), 1, &f, &[]);
    assert_eq!(placed(&d), [("a-idc", 1)]);
    assert!(d.terms.is_none());
}

/// A random fleet of tiers: `(tier, replicas that fit)` per cluster, tier 0 the primary.
fn tiered() -> impl Strategy<Value = (Vec<(usize, u64)>, usize, u32, Vec<u32>, bool)> {
    (1usize..4).prop_flat_map(|n_tiers| {
        (
            prop::collection::vec((0..n_tiers, 0u64..8), 1..9),
            Just(n_tiers - 1),
            0u32..50,
            prop::collection::vec(0u32..6, 9),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tiers_fill_in_order_and_place_the_request((cs, n_overflow, total, current, aggregated) in tiered()) {
        let names: Vec<String> = (0..cs.len()).map(|i| format!("c{i}")).collect();
        let members = |t: usize| -> Vec<String> {
            cs.iter().enumerate().filter(|(_, (k, _))| *k == t).map(|(i, _)| names[i].clone()).collect()
        };
        let division = if aggregated {
            Division::Aggregated { rebalance: false }
        } else {
            Division::DynamicByCapacity { rebalance: false }
        };
        let p = Placement {
            clusters: Some(members(0)),
            replicas: ReplicaPolicy { mode: ReplicaMode::Divided, division: Some(Box::new(division)) },
            ..Default::default()
        };
        let o = Overflow {
            primary: "p".into(),
            tiers: (1..=n_overflow)
                .map(|t| OverflowTier { name: format!("t{t}"), clusters: Some(members(t)), cluster_selector: None })
                .collect(),
        };
        let f = Fleet {
            names: names.clone(),
            labels: vec![BTreeMap::new(); cs.len()],
            fits: cs.iter().map(|(_, n)| Some(*n)).collect(),
            health: vec![HealthView::Ready; cs.len()],
        };
        // Whatever runs now (within each cluster's capacity, as the caller counts it).
        let now: Vec<(&str, u32)> = names
            .iter()
            .zip(&cs)
            .zip(&current)
            .map(|((n, (_, fits)), c)| (n.as_str(), (*c).min(*fits as u32)))
            .collect();
        let d = run(&p, Some(&o), total, &f, &now);
        let room: u64 = cs.iter().map(|(_, n)| n).sum();
        prop_assert_eq!(d.total(), u64::from(total).min(room));
        let short = u64::from(d.unschedulable.as_ref().map_or(0, |s| s.replicas));
        prop_assert_eq!(d.total() + short, u64::from(total));
        let mut tier_room = vec![0u64; n_overflow + 1];
        let mut tier_used = vec![0u64; n_overflow + 1];
        for (i, (t, fits)) in cs.iter().enumerate() {
            let got = u64::from(d.placement.get(&names[i]).copied().unwrap_or(0));
            prop_assert!(got <= *fits, "{} holds {} > {}", names[i], got, fits);
            tier_room[*t] += fits;
            tier_used[*t] += got;
            if got > 0 && n_overflow > 0 {
                let expect = if *t == 0 { "p".to_string() } else { format!("t{t}") };
                let terms = d.terms.as_ref().expect("terms");
                prop_assert_eq!(terms.term(&names[i]).map(|(n, _)| n.to_string()), Some(expect));
            }
        }
        for t in 1..=n_overflow {
            if tier_used[t] > 0 {
                for k in 0..t {
                    prop_assert_eq!(tier_used[k], tier_room[k], "tier {} used before tier {} is full", t, k);
                }
            }
        }
    }
}
