//! Properties of `schedule` over random fleets and placements (proptest; failures print the
//! minimal input and proptest stores the seed under proptest-regressions/).

use std::collections::BTreeMap;

use fedraft_core::policy::*;
use fedraft_core::scheduler::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Fleet {
    names: Vec<String>,
    labels: Vec<BTreeMap<String, String>>,
    /// Free CPU in millis; per replica is 100m, so cpu / 100 replicas fit.
    cpu: Vec<Option<u64>>,
}

#[derive(Debug, Clone)]
enum Mode {
    Plain,
    Weights(Vec<(u64, u32, Option<u32>)>, ClusterPreference, bool),
    Dynamic(bool),
    Aggregated(bool),
}

const PER: Resources = Resources {
    cpu_millis: 100,
    memory_bytes: 0,
    pods: 0,
};
const NO_TAINTS: &[Taint] = &[];

fn fleet() -> impl Strategy<Value = Fleet> {
    prop::collection::vec((0u8..4, prop::option::weighted(0.9, 0u64..3000)), 1..10).prop_map(|v| {
        let names = (0..v.len()).map(|i| format!("c{i:02}")).collect();
        let labels = v
            .iter()
            .map(|(z, _)| [("zone".to_string(), format!("z{z}"))].into())
            .collect();
        let cpu = v.iter().map(|(_, c)| *c).collect();
        Fleet { names, labels, cpu }
    })
}

fn pref() -> impl Strategy<Value = (u64, u32, Option<u32>)> {
    (0u64..6, 0u32..4, prop::option::of(4u32..30))
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::Plain),
        (prop::collection::vec(pref(), 10), pref(), any::<bool>()).prop_map(
            |(v, (weight, min_replicas, max_replicas), r)| {
                Mode::Weights(
                    v,
                    ClusterPreference {
                        weight,
                        min_replicas,
                        max_replicas,
                    },
                    r,
                )
            }
        ),
        any::<bool>().prop_map(Mode::Dynamic),
        any::<bool>().prop_map(Mode::Aggregated),
    ]
}

fn placement(mode: &Mode, fleet: &Fleet) -> Placement {
    let division = match mode {
        Mode::Plain => None,
        Mode::Weights(v, star, rebalance) => {
            // Every other cluster gets its own preference; the rest fall back to "*".
            let mut weights: BTreeMap<String, ClusterPreference> = fleet
                .names
                .iter()
                .zip(v)
                .step_by(2)
                .map(|(n, &(weight, min_replicas, max_replicas))| {
                    (
                        n.clone(),
                        ClusterPreference {
                            weight,
                            min_replicas,
                            max_replicas,
                        },
                    )
                })
                .collect();
            weights.insert("*".into(), star.clone());
            Some(Division::StaticWeights {
                weights,
                rebalance: *rebalance,
            })
        }
        Mode::Dynamic(rebalance) => Some(Division::DynamicByCapacity {
            rebalance: *rebalance,
        }),
        Mode::Aggregated(rebalance) => Some(Division::Aggregated {
            rebalance: *rebalance,
        }),
    };
    Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Divided,
            division: division.map(Box::new),
        },
        ..Default::default()
    }
}

fn views(f: &Fleet) -> Vec<ClusterView<'_>> {
    (0..f.names.len())
        .map(|i| ClusterView {
            name: &f.names[i],
            labels: &f.labels[i],
            taints: NO_TAINTS,
            cordoned: false,
            health: HealthView::Ready,
            available: f.cpu[i].map(|c| Resources {
                cpu_millis: c,
                memory_bytes: 0,
                pods: 0,
            }),
            extended: None,
            held_to: None,
        })
        .collect()
}

fn run(
    p: &Placement,
    total: u32,
    v: &[ClusterView<'_>],
    current: &BTreeMap<String, u32>,
) -> Decision {
    schedule(&ScheduleRequest {
        object_key: "default/web",
        placement: p,
        total_replicas: total,
        per_replica: PER,
        per_replica_extended: &NO_EXTENDED,
        clusters: v,
        current,
        allowed: None,
        peers: None,
        overflow: None,
        now_ms: 0,
        steady_spread: true,
    })
}

fn pref_of<'a>(p: &'a Placement, name: &str) -> Option<&'a ClusterPreference> {
    match p.replicas.division.as_deref() {
        Some(Division::StaticWeights { weights, .. }) => {
            weights.get(name).or_else(|| weights.get("*"))
        }
        _ => None,
    }
}

fn fits(f: &Fleet, i: usize) -> Option<u64> {
    f.cpu[i].map(|c| c / PER.cpu_millis)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn counts_respect_bounds_and_sum_to_total_when_feasible(f in fleet(), m in mode(), total in 0u32..80) {
        let p = placement(&m, &f);
        let v = views(&f);
        let d = run(&p, total, &v, &BTreeMap::new());
        let placed: u64 = d.placement.values().map(|&n| u64::from(n)).sum();
        prop_assert_eq!(placed + u64::from(d.unschedulable.as_ref().map_or(0, |s| s.replicas)), u64::from(total));
        let mut feasible_room: u64 = 0;
        let mut all_positive = true;
        let mut sum_min: u64 = 0;
        for (i, name) in f.names.iter().enumerate() {
            let got = u64::from(d.placement.get(name).copied().unwrap_or(0));
            if let Some(cap) = fits(&f, i) {
                prop_assert!(got <= cap, "{} has {} > capacity {}", name, got, cap);
            }
            match &m {
                Mode::Dynamic(_) | Mode::Aggregated(_) => {
                    prop_assert!(f.cpu[i].is_some() || got == 0);
                    feasible_room += fits(&f, i).unwrap_or(0);
                }
                Mode::Plain => feasible_room += fits(&f, i).unwrap_or(u64::MAX / 64),
                Mode::Weights(..) => {
                    let pr = pref_of(&p, name).unwrap();
                    if let Some(max) = pr.max_replicas { prop_assert!(got <= u64::from(max)); }
                    all_positive &= pr.weight > 0;
                    sum_min += u64::from(pr.min_replicas);
                    let cap = fits(&f, i).unwrap_or(u64::MAX / 64);
                    feasible_room += cap.min(pr.max_replicas.map_or(u64::MAX / 64, u64::from));
                }
            }
        }
        if let Mode::Weights(..) = &m {
            if sum_min <= u64::from(total) {
                for (i, name) in f.names.iter().enumerate() {
                    let got = u64::from(d.placement.get(name).copied().unwrap_or(0));
                    let want_min = u64::from(pref_of(&p, name).unwrap().min_replicas).min(fits(&f, i).unwrap_or(u64::MAX));
                    prop_assert!(got >= want_min, "{} below its minimum", name);
                }
            }
        }
        let feasible = feasible_room >= u64::from(total) && (all_positive || !matches!(m, Mode::Weights(..)));
        if feasible {
            prop_assert_eq!(placed, u64::from(total), "decision {:?}", d);
            prop_assert!(d.unschedulable.is_none());
        }
    }

    #[test]
    fn aggregated_placed_afresh_uses_the_fewest_clusters(f in fleet(), total in 1u32..80) {
        let p = placement(&Mode::Aggregated(true), &f);
        let d = run(&p, total, &views(&f), &BTreeMap::new());
        let mut caps: Vec<u64> = (0..f.names.len()).filter_map(|i| fits(&f, i)).collect();
        caps.sort_unstable_by(|a, b| b.cmp(a));
        let mut room = 0;
        let fewest = caps.iter().take_while(|&&c| {
            let short = room < u64::from(total);
            room += c;
            short
        }).count();
        if room >= u64::from(total) {
            prop_assert_eq!(d.placement.len(), fewest, "decision {:?}", d);
        }
    }

    #[test]
    fn result_does_not_depend_on_cluster_order(f in fleet(), m in mode(), total in 0u32..80, seed in any::<u64>()) {
        let p = placement(&m, &f);
        let v = views(&f);
        let mut shuffled = v.clone();
        // Deterministic Fisher-Yates from the seed (no RNG crate needed).
        let mut s = seed | 1;
        for i in (1..shuffled.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let cur = run(&p, total / 2, &v, &BTreeMap::new()).placement;
        prop_assert_eq!(run(&p, total, &v, &cur), run(&p, total, &shuffled, &cur));
    }

    #[test]
    fn same_input_same_output(f in fleet(), m in mode(), total in 0u32..80) {
        let p = placement(&m, &f);
        let v = views(&f);
        let a = run(&p, total, &v, &BTreeMap::new());
        let b = run(&p, total, &v, &BTreeMap::new());
        prop_assert_eq!(&a, &b);
        let again = run(&p, total, &v, &a.placement);
        let again2 = run(&p, total, &v, &a.placement);
        prop_assert_eq!(again, again2);
    }

    #[test]
    fn adding_an_unselected_cluster_moves_nothing(f in fleet(), m in mode(), total in 0u32..80) {
        let mut p = placement(&m, &f);
        p.cluster_selector = Some(Box::new(LabelSelector { match_labels: [("member".to_string(), "yes".to_string())].into(), match_expressions: vec![] }));
        let mut f = f;
        for l in f.labels.iter_mut() { l.insert("member".into(), "yes".into()); }
        let before = run(&p, total, &views(&f), &BTreeMap::new());
        let mut g = f.clone();
        g.names.push("zz-new".into());
        g.labels.push(BTreeMap::new());
        g.cpu.push(Some(100_000));
        let after = run(&p, total, &views(&g), &before.placement);
        prop_assert_eq!(&after.placement, &before.placement);
        prop_assert!(after.moved.is_empty());
    }

    #[test]
    fn adding_an_eligible_cluster_moves_nothing_without_rebalance(f in fleet(), dynamic in any::<bool>(), total in 0u32..80) {
        let m = if dynamic { Mode::Dynamic(false) } else { Mode::Plain };
        let p = placement(&m, &f);
        let before = run(&p, total, &views(&f), &BTreeMap::new());
        let mut g = f.clone();
        g.names.push("c-new".into());
        g.labels.push(BTreeMap::new());
        g.cpu.push(Some(100_000));
        let after = run(&p, total, &views(&g), &before.placement);
        if before.unschedulable.is_none() {
            prop_assert!(after.moved.is_empty(), "moved {:?}", after.moved);
        } else {
            // Only the missing replicas may land, and only on the new cluster.
            for mv in &after.moved {
                prop_assert_eq!(mv.cluster.as_str(), "c-new");
            }
        }
    }

    #[test]
    fn spread_replicas_stay_when_a_heavier_cluster_joins_and_others_are_held(
        f in fleet(),
        dynamic in any::<bool>(),
        total in 1u32..30,
        groups in 1u32..4,
        zone in 0u8..4,
        held in prop::collection::vec(any::<bool>(), 10),
    ) {
        let m = if dynamic { Mode::Dynamic(false) } else { Mode::Plain };
        let mut p = placement(&m, &f);
        // As many groups as the fleet has zones at most, and replicas to cover them.
        let zones: std::collections::BTreeSet<&String> = f.labels.iter().filter_map(|l| l.get("zone")).collect();
        let groups = groups.min(zones.len() as u32);
        let total = total.max(groups);
        p.spread_constraints = vec![SpreadConstraint {
            label_key: "zone".into(),
            min_groups: groups,
            max_groups: groups,
        }];
        let before = run(&p, total, &views(&f), &BTreeMap::new());
        if before.unschedulable.is_some() {
            // Short of room: the newcomer may rightly take what is missing.
            return Ok(());
        }
        // The newcomer sorts first by name and has the most room: a rule that picked a group's
        // required cluster afresh would pick it.
        let mut g = f.clone();
        g.names.push("c-new".into());
        g.labels.push([("zone".to_string(), format!("z{zone}"))].into());
        g.cpu.push(Some(100_000));
        let mut v = views(&g);
        for (view, h) in v.iter_mut().zip(&held) {
            if *h {
                view.health = HealthView::Held { since_ms: 0 };
            }
        }
        let after = run(&p, total, &v, &before.placement);
        prop_assert_eq!(&after.placement, &before.placement);
        prop_assert!(after.moved.is_empty(), "moved {:?}", after.moved);
    }

    #[test]
    fn losing_a_cluster_moves_only_its_replicas(f in fleet(), total in 1u32..80, pick in any::<prop::sample::Index>()) {
        let p = placement(&Mode::Plain, &f);
        let before = run(&p, total, &views(&f), &BTreeMap::new());
        let gone = pick.index(f.names.len());
        let mut g = f.clone();
        g.names.remove(gone);
        g.labels.remove(gone);
        g.cpu.remove(gone);
        if g.names.is_empty() { return Ok(()); }
        let after = run(&p, total, &views(&g), &before.placement);
        for mv in &after.moved {
            if mv.cluster != f.names[gone] {
                prop_assert!(mv.to > mv.from, "survivor {} lost replicas", mv.cluster);
            }
        }
    }
}

/// Per cluster: node shapes as (count, GPUs free per node).
fn gpu_fleet() -> impl Strategy<Value = Vec<Vec<(u32, u64)>>> {
    prop::collection::vec(prop::collection::vec((1u32..5, 0u64..9), 0..4), 1..8)
}

fn gpu_report(shapes: &[(u32, u64)]) -> ExtendedCapacity {
    let total: u64 = shapes.iter().map(|(n, g)| u64::from(*n) * g).sum();
    let sum = Extended::from_pairs([("nvidia.com/gpu", total)]);
    ExtendedCapacity {
        allocatable: sum.clone(),
        available: sum,
        nodes: shapes
            .iter()
            .map(|(count, g)| NodeShape {
                count: *count,
                free: Resources {
                    cpu_millis: 64_000,
                    memory_bytes: 1 << 40,
                    pods: 110,
                },
                extended: Extended::from_pairs([("nvidia.com/gpu", *g)]),
            })
            .collect(),
    }
}

proptest! {
    /// Whatever the mode, a cluster never receives more replicas than its nodes hold one by
    /// one, and a cluster with no node holding one replica receives none.
    #[test]
    fn gpu_replicas_fit_on_single_nodes(
        shapes in gpu_fleet(),
        per_gpu in 1u64..6,
        total in 1u32..40,
        m in mode(),
    ) {
        let names: Vec<String> = (0..shapes.len()).map(|i| format!("c{i:02}")).collect();
        let labels = BTreeMap::new();
        let reports: Vec<ExtendedCapacity> = shapes.iter().map(|s| gpu_report(s)).collect();
        let views: Vec<ClusterView<'_>> = (0..names.len())
            .map(|i| ClusterView {
                name: &names[i],
                labels: &labels,
                taints: NO_TAINTS,
                cordoned: false,
                health: HealthView::Ready,
                available: Some(Resources { cpu_millis: 1 << 40, memory_bytes: 1 << 50, pods: 1 << 20 }),
                extended: Some(ExtendedFree { report: &reports[i], free: &reports[i].available }),
                held_to: None,
            })
            .collect();
        let per_ext = Extended::from_pairs([("nvidia.com/gpu", per_gpu)]);
        let f = Fleet {
            names: names.clone(),
            labels: vec![BTreeMap::new(); names.len()],
            cpu: vec![None; names.len()],
        };
        let p = placement(&m, &f);
        let d = schedule(&ScheduleRequest {
            object_key: "ml/train",
            placement: &p,
            total_replicas: total,
            per_replica: PER,
            per_replica_extended: &per_ext,
            clusters: &views,
            current: &BTreeMap::new(),
            allowed: None,
            peers: None,
            overflow: None,
            now_ms: 0,
            steady_spread: true,
        });
        for (i, name) in names.iter().enumerate() {
            let got = u64::from(d.placement.get(name).copied().unwrap_or(0));
            let by_node: u64 = shapes[i].iter().map(|(n, g)| u64::from(*n) * (g / per_gpu)).sum();
            prop_assert!(got <= by_node, "{name}: {got} > {by_node} ({:?}, {per_gpu} each)", shapes[i]);
        }
        let placed: u32 = d.placement.values().sum();
        prop_assert!(placed <= total);
    }
}
