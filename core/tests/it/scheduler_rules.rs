//! One test per scheduling rule, through the public `schedule` entry point.

use std::collections::{BTreeMap, BTreeSet};

use fedraft_core::policy::*;
use fedraft_core::scheduler::*;

#[derive(Clone)]
struct C {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    cordoned: bool,
    health: HealthView,
    available: Option<Resources>,
}

fn cl(name: &str) -> C {
    C {
        name: name.to_string(),
        labels: BTreeMap::new(),
        taints: Vec::new(),
        cordoned: false,
        health: HealthView::Ready,
        available: None,
    }
}

impl C {
    fn label(mut self, k: &str, v: &str) -> C {
        self.labels.insert(k.into(), v.into());
        self
    }
    fn taint(mut self, key: &str, effect: TaintEffect) -> C {
        self.taints.push(Taint {
            key: key.into(),
            value: String::new(),
            effect,
        });
        self
    }
    fn cordon(mut self) -> C {
        self.cordoned = true;
        self
    }
    fn health(mut self, h: HealthView) -> C {
        self.health = h;
        self
    }
    fn cpu(mut self, millis: u64) -> C {
        self.available = Some(Resources {
            cpu_millis: millis,
            memory_bytes: 1 << 40,
            pods: 1000,
        });
        self
    }
}

fn views(cs: &[C]) -> Vec<ClusterView<'_>> {
    cs.iter()
        .map(|c| ClusterView {
            name: &c.name,
            labels: &c.labels,
            taints: &c.taints,
            cordoned: c.cordoned,
            health: c.health,
            available: c.available,
            extended: None,
            held_to: None,
        })
        .collect()
}

fn counts(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

const PER: Resources = Resources {
    cpu_millis: 100,
    memory_bytes: 0,
    pods: 1,
};

fn run(p: &Placement, total: u32, cs: &[C], current: &[(&str, u32)], now_ms: u64) -> Decision {
    let v = views(cs);
    let cur = counts(current);
    schedule(&ScheduleRequest {
        object_key: "default/web",
        placement: p,
        total_replicas: total,
        per_replica: PER,
        per_replica_extended: &NO_EXTENDED,
        clusters: &v,
        current: &cur,
        allowed: None,
        peers: None,
        overflow: None,
        now_ms,
        steady_spread: true,
    })
}

fn divided(division: Option<Division>) -> Placement {
    Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: division.map(Box::new),
        },
        ..Default::default()
    }
}

fn weights(ws: &[(&str, u64, u32, Option<u32>)], rebalance: bool) -> Option<Division> {
    Some(Division::StaticWeights {
        weights: ws
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
            .collect(),
        rebalance,
    })
}

fn reason_of<'d>(d: &'d Decision, cluster: &str) -> Option<&'d DropReason> {
    d.dropped
        .iter()
        .find(|x| x.cluster == cluster)
        .map(|x| &x.reason)
}

fn three() -> Vec<C> {
    vec![cl("dc1"), cl("dc2"), cl("dc3")]
}

#[test]
fn duplicated_runs_the_full_count_everywhere_eligible() {
    let p = Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Duplicated,
            division: None,
        },
        ..Default::default()
    };
    let mut cs = three();
    cs[1] = cs[1].clone().cordon();
    let d = run(&p, 4, &cs, &[("dc2", 4)], 0);
    assert_eq!(d.placement, counts(&[("dc1", 4), ("dc2", 4), ("dc3", 4)]));
    assert_eq!(d.candidates, vec!["dc1", "dc3"]);
    let d = run(&p, 4, &cs, &[], 0);
    assert_eq!(
        d.placement,
        counts(&[("dc1", 4), ("dc3", 4)]),
        "cordoned cluster gets no new copy"
    );
}

#[test]
fn cluster_list_and_selector_filter_with_reasons() {
    let cs = vec![
        cl("dc1").label("region", "eu"),
        cl("dc2").label("region", "us"),
        cl("dc3").label("region", "eu"),
    ];
    let mut p = divided(None);
    p.clusters = Some(vec!["dc1".into(), "dc2".into()]);
    p.cluster_selector = Some(Box::new(LabelSelector {
        match_labels: BTreeMap::new(),
        match_expressions: vec![LabelSelectorRequirement {
            key: "region".into(),
            operator: SelectorOperator::In,
            values: vec!["eu".into()],
        }],
    }));
    let d = run(&p, 5, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("dc1", 5)]));
    assert_eq!(reason_of(&d, "dc2"), Some(&DropReason::SelectorMismatch));
    assert_eq!(reason_of(&d, "dc3"), Some(&DropReason::NotInClusterList));
}

#[test]
fn plain_weights_use_webster_with_ties_to_the_smaller_name() {
    let d = run(&divided(None), 10, &three(), &[], 0);
    assert_eq!(d.placement, counts(&[("dc1", 4), ("dc2", 3), ("dc3", 3)]));
    let p = divided(weights(
        &[("dc1", 3), ("dc2", 2), ("dc3", 1)].map(|(k, w)| (k, w, 0, None)),
        true,
    ));
    let d = run(&p, 12, &three(), &[], 0);
    // One by one: dc1, dc2, dc3 (tie with dc1 at 1, fewer replicas first), dc1, dc2, ... -> 6, 4, 2.
    assert_eq!(d.placement, counts(&[("dc1", 6), ("dc2", 4), ("dc3", 2)]));
    assert_eq!(
        d.weights,
        BTreeMap::from([
            ("dc1".to_string(), 3),
            ("dc2".to_string(), 2),
            ("dc3".to_string(), 1)
        ])
    );
}

#[test]
fn static_weights_with_min_max_follow_kubefed() {
    let p = divided(weights(
        &[
            ("dc1", 10000, 0, Some(10)),
            ("dc2", 1, 0, None),
            ("dc3", 1, 0, Some(10)),
        ],
        false,
    ));
    let d = run(&p, 50, &three(), &[], 0);
    assert_eq!(
        d.placement,
        counts(&[("dc1", 10), ("dc2", 30), ("dc3", 10)])
    );
    // "*" covers clusters not named.
    let p = divided(weights(&[("*", 1, 2, Some(3)), ("dc1", 5, 0, None)], false));
    let d = run(&p, 20, &three(), &[], 0);
    assert_eq!(d.placement, counts(&[("dc1", 14), ("dc2", 3), ("dc3", 3)]));
}

#[test]
fn cordon_and_noschedule_keep_existing_but_add_nothing() {
    let cs = vec![
        cl("dc1").cordon(),
        cl("dc2").taint("maint", TaintEffect::NoSchedule),
        cl("dc3"),
    ];
    let d = run(
        &divided(None),
        9,
        &cs,
        &[("dc1", 3), ("dc2", 3), ("dc3", 3)],
        0,
    );
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc2", 3), ("dc3", 3)]));
    assert!(d.moved.is_empty());
    let d = run(
        &divided(None),
        12,
        &cs,
        &[("dc1", 3), ("dc2", 3), ("dc3", 3)],
        0,
    );
    assert_eq!(
        d.placement,
        counts(&[("dc1", 3), ("dc2", 3), ("dc3", 6)]),
        "growth goes to dc3 only"
    );
    assert_eq!(reason_of(&d, "dc1"), Some(&DropReason::Cordoned));
    assert_eq!(
        reason_of(&d, "dc2"),
        Some(&DropReason::UntoleratedTaint {
            key: "maint".into(),
            effect: TaintEffect::NoSchedule
        })
    );
}

#[test]
fn noexecute_evicts_unless_tolerated() {
    let cs = vec![
        cl("dc1"),
        cl("dc2").taint("drain", TaintEffect::NoExecute),
        cl("dc3"),
    ];
    let d = run(
        &divided(None),
        6,
        &cs,
        &[("dc1", 2), ("dc2", 2), ("dc3", 2)],
        0,
    );
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc3", 3)]));
    assert_eq!(d.moved.len(), 3);
    assert!(
        d.summary()
            .contains("dc2 untolerated taint drain:NoExecute"),
        "{}",
        d.summary()
    );
    let mut p = divided(None);
    p.tolerations = vec![Toleration {
        key: "drain".into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
    }];
    let d = run(&p, 6, &cs, &[("dc1", 2), ("dc2", 2), ("dc3", 2)], 0);
    assert_eq!(d.placement, counts(&[("dc1", 2), ("dc2", 2), ("dc3", 2)]));
}

#[test]
fn not_ready_keeps_replicas_within_grace_then_fails_over() {
    let cs = vec![
        cl("dc1"),
        cl("dc2").health(HealthView::NotReady { since_ms: 1_000 }),
        cl("dc3"),
    ];
    let cur = [("dc1", 2), ("dc2", 2), ("dc3", 2)];
    let p = divided(None); // grace 60 s
    let d = run(&p, 6, &cs, &cur, 61_000);
    assert_eq!(
        d.placement,
        counts(&cur),
        "exactly at the grace period nothing moves"
    );
    assert_eq!(
        reason_of(&d, "dc2"),
        Some(&DropReason::NotReady { since_ms: 1_000 })
    );
    let d = run(&p, 6, &cs, &cur, 61_001);
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc3", 3)]));
    assert_eq!(
        reason_of(&d, "dc2"),
        Some(&DropReason::FailedOver { since_ms: 1_000 })
    );
    assert!(
        d.summary().starts_with("dc2 unhealthy since 1000 ms"),
        "{}",
        d.summary()
    );
    assert!(
        d.summary()
            .contains("2 replicas moved to dc1 (1) and dc3 (1)"),
        "{}",
        d.summary()
    );
    let mut off = divided(None);
    off.failover.enabled = false;
    let d = run(&off, 6, &cs, &cur, 10_000_000);
    assert_eq!(
        d.placement,
        counts(&cur),
        "failover disabled keeps replicas forever"
    );
    let cs = vec![
        cl("dc1"),
        cl("dc2").health(HealthView::Unknown { since_ms: 0 }),
    ];
    let d = run(&p, 4, &cs, &[], 1);
    assert_eq!(
        d.placement,
        counts(&[("dc1", 4)]),
        "Unknown gets no new replicas"
    );
}

#[test]
fn dynamic_by_capacity_weights_by_what_fits_and_never_overcommits() {
    let cs = vec![cl("dc1").cpu(1000), cl("dc2").cpu(300), cl("dc3")]; // 10, 3, unreported
    let p = divided(Some(Division::DynamicByCapacity { rebalance: false }));
    let d = run(&p, 13, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("dc1", 10), ("dc2", 3)]));
    assert_eq!(
        d.weights,
        BTreeMap::from([("dc1".to_string(), 10), ("dc2".to_string(), 3)])
    );
    assert_eq!(reason_of(&d, "dc3"), Some(&DropReason::CapacityNotReported));
    assert!(d.unschedulable.is_none());
    let d = run(&p, 20, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("dc1", 10), ("dc2", 3)]));
    assert_eq!(d.unschedulable.as_ref().map(|s| s.replicas), Some(7));
    let d = run(&p, 4, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc2", 1)]));
    // A cluster where not one replica fits is dropped.
    let cs = vec![cl("dc1").cpu(1000), cl("dc2").cpu(50)];
    let d = run(&p, 2, &cs, &[], 0);
    assert_eq!(reason_of(&d, "dc2"), Some(&DropReason::NoCapacity));
}

#[test]
fn a_zero_request_dimension_does_not_limit() {
    let a = Resources {
        cpu_millis: 0,
        memory_bytes: 1 << 30,
        pods: 10,
    };
    assert_eq!(
        a.fits_times(&Resources {
            cpu_millis: 0,
            memory_bytes: 1 << 28,
            pods: 1
        }),
        4
    );
    assert_eq!(
        a.fits_times(&Resources {
            cpu_millis: 1,
            memory_bytes: 0,
            pods: 0
        }),
        0
    );
}

#[test]
fn spread_constraint_picks_groups_and_reports_impossible() {
    let cs = vec![
        cl("a1").label("zone", "a"),
        cl("a2").label("zone", "a"),
        cl("b1").label("zone", "b"),
        cl("c1").label("zone", "c"),
        cl("x1"),
    ];
    let mut p = divided(None);
    p.spread_constraints = vec![SpreadConstraint {
        label_key: "zone".into(),
        min_groups: 2,
        max_groups: 2,
    }];
    let d = run(&p, 6, &cs, &[], 0);
    // Zone a has the most weight (2 clusters), then b by name.
    assert_eq!(d.placement, counts(&[("a1", 2), ("a2", 2), ("b1", 2)]));
    assert_eq!(
        reason_of(&d, "c1"),
        Some(&DropReason::SpreadConstraint {
            label_key: "zone".into(),
            group: "c".into()
        })
    );
    assert_eq!(
        reason_of(&d, "x1"),
        Some(&DropReason::MissingSpreadLabel {
            label_key: "zone".into()
        })
    );
    // Two replicas still cover two zones.
    let d = run(&p, 2, &cs, &[], 0);
    let zones: BTreeSet<char> = d
        .placement
        .keys()
        .map(|k| k.chars().next().unwrap())
        .collect();
    assert_eq!(zones.len(), 2, "{:?}", d.placement);
    // Impossible: min 4 groups, only 3 zones.
    p.spread_constraints[0] = SpreadConstraint {
        label_key: "zone".into(),
        min_groups: 4,
        max_groups: 5,
    };
    let d = run(&p, 6, &cs, &[], 0);
    let why = d.unschedulable.expect("unschedulable");
    assert!(
        why.message.contains("3 usable groups, minGroups is 4"),
        "{}",
        why.message
    );
}

#[test]
fn a_spread_groups_required_replica_goes_where_it_fits_and_stays_where_it_runs() {
    let cs = vec![
        cl("a0").label("zone", "a"),
        cl("a1").label("zone", "a"),
        cl("b0").label("zone", "b").cpu(0),
        cl("b1").label("zone", "b"),
        cl("b2").label("zone", "b"),
    ];
    let mut p = divided(None);
    p.spread_constraints = vec![SpreadConstraint {
        label_key: "zone".into(),
        min_groups: 2,
        max_groups: 2,
    }];
    // b0 is first by name but has no room: zone b's replica goes to b1.
    let d = run(&p, 2, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("a0", 1), ("b1", 1)]));
    // Where zone b's replica already runs, it stays (a0 first by name and equal in weight).
    let d = run(&p, 2, &cs, &[("a1", 1), ("b2", 1)], 0);
    assert_eq!(d.placement, counts(&[("a1", 1), ("b2", 1)]));
    assert!(d.moved.is_empty(), "{:?}", d.moved);
}

#[test]
fn the_cluster_name_key_excludes_by_name_and_spreads_over_clusters() {
    // A label of that name on a cluster does not stand in for the cluster's own name.
    let cs = vec![cl("dc1"), cl("dc2").label("zone", "b"), cl("dc3")];
    let mut p = Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Duplicated,
            division: None,
        },
        cluster_selector: Some(Box::new(LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: CLUSTER_NAME_KEY.into(),
                operator: SelectorOperator::NotIn,
                values: vec!["dc2".into()],
            }],
        })),
        ..Default::default()
    };
    assert!(p.validate("p").is_ok());
    let d = run(&p, 3, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc3", 3)]));
    assert_eq!(reason_of(&d, "dc2"), Some(&DropReason::SelectorMismatch));

    // Spread over clusters: at most two of the three, the ones already running it first.
    p.cluster_selector = None;
    p.spread_constraints = vec![SpreadConstraint {
        label_key: CLUSTER_NAME_KEY.into(),
        min_groups: 1,
        max_groups: 2,
    }];
    assert!(p.validate("p").is_ok());
    let d = run(&p, 3, &cs, &[("dc3", 3)], 0);
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc3", 3)]));
    assert_eq!(
        reason_of(&d, "dc2"),
        Some(&DropReason::SpreadConstraint {
            label_key: CLUSTER_NAME_KEY.into(),
            group: "dc2".into()
        })
    );
}

#[test]
fn aggregated_uses_the_fewest_clusters_that_hold_the_replicas() {
    // 100m per replica: a holds 3, b 10, c 4; d never reported capacity.
    let cs = vec![
        cl("a").cpu(300),
        cl("b").cpu(1000),
        cl("c").cpu(400),
        cl("d"),
    ];
    let p = divided(Some(Division::Aggregated { rebalance: false }));
    assert!(p.validate("p").is_ok());
    let d = run(&p, 12, &cs, &[], 0);
    assert_eq!(d.placement.keys().cloned().collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(d.placement.values().sum::<u32>(), 12);
    assert_eq!(reason_of(&d, "d"), Some(&DropReason::CapacityNotReported));
    let d = run(&p, 9, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("b", 9)]));

    // Already running on a: it stays there and grows into the largest other cluster.
    let d = run(&p, 5, &cs, &[("a", 3)], 0);
    assert_eq!(d.placement.keys().cloned().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(d.placement["a"], 3);
    // Rebalancing packs it onto b alone.
    let p = divided(Some(Division::Aggregated { rebalance: true }));
    let d = run(&p, 5, &cs, &[("a", 3)], 0);
    assert_eq!(d.placement, counts(&[("b", 5)]));
    // More than all of them hold: everything that fits, and the shortfall said.
    let d = run(&p, 30, &cs, &[], 0);
    assert_eq!(d.placement, counts(&[("a", 3), ("b", 10), ("c", 4)]));
    assert!(d.unschedulable.is_some());
}

#[test]
fn without_rebalance_growth_and_shrink_move_only_the_delta() {
    let cur = [("dc1", 5), ("dc2", 1), ("dc3", 1)];
    let d = run(&divided(None), 9, &three(), &cur, 0);
    assert_eq!(d.placement, counts(&[("dc1", 5), ("dc2", 2), ("dc3", 2)]));
    let d = run(&divided(None), 5, &three(), &cur, 0);
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc2", 1), ("dc3", 1)]));
    // With rebalance the layout is recomputed from scratch.
    let p = divided(weights(&[("*", 1, 0, None)], true));
    let d = run(&p, 9, &three(), &cur, 0);
    assert_eq!(d.placement, counts(&[("dc1", 3), ("dc2", 3), ("dc3", 3)]));
}

#[test]
fn recovery_moves_back_only_with_rebalance() {
    let cur = [("dc1", 3), ("dc3", 3)];
    let d = run(&divided(None), 6, &three(), &cur, 0);
    assert_eq!(d.placement, counts(&cur));
    let p = divided(weights(&[("*", 1, 0, None)], true));
    let d = run(&p, 6, &three(), &cur, 0);
    assert_eq!(d.placement, counts(&[("dc1", 2), ("dc2", 2), ("dc3", 2)]));
}

#[test]
fn tenant_slices_restrict_candidates() {
    let cs = three();
    let v = views(&cs);
    let allowed: BTreeSet<String> = ["dc2".to_string()].into();
    let p = divided(None);
    let empty = BTreeMap::new();
    let d = schedule(&ScheduleRequest {
        object_key: "default/web",
        placement: &p,
        total_replicas: 3,
        per_replica: PER,
        per_replica_extended: &NO_EXTENDED,
        clusters: &v,
        current: &empty,
        allowed: Some(&allowed),
        peers: None,
        overflow: None,
        now_ms: 0,
        steady_spread: true,
    });
    assert_eq!(d.placement, counts(&[("dc2", 3)]));
    assert_eq!(reason_of(&d, "dc1"), Some(&DropReason::NotInTenantSlices));
}

#[test]
fn place_slices_by_capacity_and_keeps_existing() {
    let cs = vec![
        cl("dc1").cpu(4000),
        cl("dc2").cpu(2000),
        cl("dc3").cordon().cpu(9000),
        cl("dc4"),
    ];
    let v = views(&cs);
    let slice = Resources {
        cpu_millis: 1000,
        memory_bytes: 0,
        pods: 0,
    };
    let got = place_slices(3, &slice, &v, &BTreeMap::new());
    assert_eq!(got, counts(&[("dc1", 2), ("dc2", 1)]));
    let got = place_slices(4, &slice, &v, &counts(&[("dc2", 2)]));
    assert_eq!(got, counts(&[("dc1", 2), ("dc2", 2)]));
    let got = place_slices(10, &slice, &v, &BTreeMap::new());
    assert_eq!(got, counts(&[("dc1", 4), ("dc2", 2)]), "only what fits");
}

#[test]
fn no_eligible_cluster_is_unschedulable() {
    let cs = vec![cl("dc1").taint("x", TaintEffect::NoExecute)];
    let d = run(&divided(None), 3, &cs, &[], 0);
    assert!(d.placement.is_empty());
    let sf = d.unschedulable.expect("shortfall");
    assert_eq!(sf.replicas, 3);
    assert!(sf.message.contains("no eligible cluster"));
}

#[test]
fn decisions_encode_with_bincode_and_json() {
    let cs = vec![cl("dc1"), cl("dc2").taint("k", TaintEffect::NoExecute)];
    let d = run(&divided(None), 3, &cs, &[("dc2", 1)], 0);
    let bytes = bincode::serde::encode_to_vec(&d, bincode::config::standard()).unwrap();
    let (back, _): (Decision, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
    assert_eq!(back, d);
    let json = serde_json::to_string(&d).unwrap();
    assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
}

#[test]
fn placement_specs_encode_with_bincode_and_validate() {
    let mut p = divided(weights(&[("*", 1, 0, Some(3)), ("dc1", 2, 1, None)], true));
    p.spread_constraints = vec![SpreadConstraint {
        label_key: "topology.kubernetes.io/zone".into(),
        min_groups: 1,
        max_groups: 2,
    }];
    p.tolerations = vec![Toleration {
        key: "a".into(),
        operator: TolerationOperator::Equal,
        value: "b".into(),
        effect: Some(TaintEffect::NoExecute),
    }];
    p.validate("placement").unwrap();
    let bytes = bincode::serde::encode_to_vec(&p, bincode::config::standard()).unwrap();
    let (back, _): (Placement, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
    assert_eq!(back, p);

    let bad = divided(weights(&[("dc1", 1, 5, Some(2))], false));
    let e = bad.validate("placement").unwrap_err();
    assert_eq!(
        e.field,
        "placement.replicas.division.weights.dc1.minReplicas"
    );
    let mut bad = divided(None);
    bad.spread_constraints = vec![SpreadConstraint {
        label_key: "zone".into(),
        min_groups: 3,
        max_groups: 2,
    }];
    assert_eq!(
        bad.validate("p").unwrap_err().field,
        "p.spreadConstraints[0].minGroups"
    );
    let mut bad = divided(None);
    bad.clusters = Some(vec!["Bad_Name".into()]);
    assert_eq!(bad.validate("p").unwrap_err().field, "p.clusters[0]");
    let dup = Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Duplicated,
            division: Some(Box::new(Division::DynamicByCapacity { rebalance: false })),
        },
        ..Default::default()
    };
    assert_eq!(dup.validate("p").unwrap_err().field, "p.replicas.division");
}

#[test]
fn json_spelling_of_a_placement() {
    let text = r#"{"clusterSelector":{"matchLabels":{"env":"prod"}},
        "replicas":{"mode":"Divided","division":{"staticWeights":{"weights":{"*":{"weight":1,"maxReplicas":4}},"rebalance":true}}},
        "failover":{"gracePeriodSeconds":30}}"#;
    let p: Placement = serde_json::from_str(text).unwrap();
    assert!(p.failover.enabled);
    assert_eq!(p.failover.grace_period_seconds, 30);
    assert!(matches!(
        p.replicas.division.as_deref(),
        Some(Division::StaticWeights {
            rebalance: true,
            ..
        })
    ));
    assert!(serde_json::from_str::<Placement>(r#"{"bogus":1}"#).is_err());
}

#[test]
fn tolerations_follow_kubernetes_matching() {
    let t = Taint {
        key: "k".into(),
        value: "v".into(),
        effect: TaintEffect::NoSchedule,
    };
    let eq = |key: &str, value: &str, effect| Toleration {
        key: key.into(),
        operator: TolerationOperator::Equal,
        value: value.into(),
        effect,
    };
    assert!(eq("k", "v", None).tolerates(&t));
    assert!(!eq("k", "w", None).tolerates(&t));
    assert!(!eq("k", "v", Some(TaintEffect::NoExecute)).tolerates(&t));
    let any = Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: None,
    };
    assert!(any.tolerates(&t));
    let exists_k = Toleration {
        key: "k".into(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::NoSchedule),
    };
    assert!(exists_k.tolerates(&t));
}

#[test]
fn selector_operators() {
    let labels: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
    let req = |key: &str, operator, values: &[&str]| LabelSelectorRequirement {
        key: key.into(),
        operator,
        values: values.iter().map(|s| s.to_string()).collect(),
    };
    assert!(req("a", SelectorOperator::In, &["1", "2"]).matches(&labels));
    assert!(!req("a", SelectorOperator::NotIn, &["1"]).matches(&labels));
    assert!(req("b", SelectorOperator::NotIn, &["1"]).matches(&labels));
    assert!(req("a", SelectorOperator::Exists, &[]).matches(&labels));
    assert!(req("b", SelectorOperator::DoesNotExist, &[]).matches(&labels));
    assert!(LabelSelector::default().matches(&labels));
}

#[test]
fn equal_weight_single_replicas_spread_by_object_key() {
    // The KubeFed planner's tie-break hash is salted with the object key, as KubeFed's is: many
    // one-replica objects with equal weights must not all pile onto one cluster. (Plain weights
    // without min/max use Webster, whose ties go to the cluster name by definition.) The hash is
    // FNV-1 as in KubeFed, so keys that differ only in their last byte share an order; these
    // differ earlier, as namespaces do.
    let p = divided(weights(&[("*", 1, 0, Some(100))], false));
    let cs = three();
    let v = views(&cs);
    let empty = BTreeMap::new();
    let mut used = BTreeMap::<String, u32>::new();
    let decide = |key: &str| {
        schedule(&ScheduleRequest {
            object_key: key,
            placement: &p,
            total_replicas: 1,
            per_replica: PER,
            per_replica_extended: &NO_EXTENDED,
            clusters: &v,
            current: &empty,
            allowed: None,
            peers: None,
            overflow: None,
            now_ms: 0,
            steady_spread: true,
        })
    };
    for i in 0..60 {
        let key = format!("team-{i}/web");
        let d = decide(&key);
        assert_eq!(d.placement.values().sum::<u32>(), 1);
        for c in d.placement.keys() {
            *used.entry(c.clone()).or_default() += 1;
        }
        // Same key, same answer.
        assert_eq!(decide(&key).placement, d.placement);
    }
    assert_eq!(used.len(), 3, "every cluster gets some objects: {used:?}");
    assert!(used.values().all(|&n| n >= 5), "{used:?}");
}
