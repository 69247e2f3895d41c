//! Property tests over random command sequences: determinism (same log, same hash), snapshot
//! and restore (same hash, same future), incremental indexes equal to a rebuild, replicas sum
//! to the total when feasible, capacity never overcommitted, independence from registration
//! order, and stability when an unrelated cluster joins.

use std::collections::BTreeMap;

use crate::state_support::*;
use fedraft_core::command::{Command, Heartbeat, LogEntry, ObjectStatusReport};
use fedraft_core::model::{ObjectSpec, TenantSpec};
use fedraft_core::policy::{Placement, ReplicaMode, Resources};
use fedraft_core::state::State;
use proptest::prelude::*;

const CLUSTERS: [&str; 5] = ["dc1", "dc2", "dc3", "dc4", "dc5"];
const ZONES: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Op {
    Register(usize, usize),
    Heartbeat(u8, Option<u64>),
    Advance(u64),
    Put {
        obj: usize,
        ns: usize,
        replicas: u32,
        cpu: u64,
        mode: usize,
        listed: Option<u8>,
    },
    Delete(usize, usize),
    Cordon(usize),
    Uncordon(usize),
    Drain(usize),
    Deregister(usize),
    Revoke(usize, usize),
    Report(usize, usize, usize, u32),
    Unreachable(usize),
    Tenant(Option<u64>, u64),
    /// A template through the Kubernetes-compatible door: (name, namespace, replicas,
    /// Deployment or ConfigMap).
    DoorPut(usize, usize, u32, bool),
    /// A propagation policy (namespaced in one of the namespaces, or cluster-wide) with one of
    /// a few placements; or its deletion.
    DoorPolicy(Option<usize>, usize),
    DoorDeletePolicy(Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..CLUSTERS.len();
    prop_oneof![
        1 => (c.clone(), 0..ZONES.len()).prop_map(|(a, b)| Op::Register(a, b)),
        3 => (any::<u8>(), proptest::option::of(100u64..5000)).prop_map(|(m, cap)| Op::Heartbeat(m, cap)),
        2 => (0u64..45_000).prop_map(Op::Advance),
        3 => (0..6usize, 0..2usize, 0..9u32, 0..400u64, 0..5usize, proptest::option::of(any::<u8>()))
            .prop_map(|(obj, ns, replicas, cpu, mode, listed)| Op::Put { obj, ns, replicas, cpu, mode, listed }),
        1 => (0..6usize, 0..2usize).prop_map(|(o, n)| Op::Delete(o, n)),
        1 => c.clone().prop_map(Op::Cordon),
        1 => c.clone().prop_map(Op::Uncordon),
        1 => c.clone().prop_map(Op::Drain),
        1 => c.clone().prop_map(Op::Deregister),
        1 => (0..6usize, 0..2usize).prop_map(|(o, n)| Op::Revoke(o, n)),
        1 => (0..6usize, 0..2usize, c.clone(), 0..5u32).prop_map(|(o, n, c, r)| Op::Report(o, n, c, r)),
        1 => c.prop_map(Op::Unreachable),
        1 => (proptest::option::of(200u64..2000), 0u64..6000).prop_map(|(slice, q)| Op::Tenant(slice, q)),
        2 => (0..3usize, 0..2usize, 0..7u32, any::<bool>()).prop_map(|(o, n, r, d)| Op::DoorPut(o, n, r, d)),
        1 => (proptest::option::of(0..2usize), 0..4usize).prop_map(|(n, v)| Op::DoorPolicy(n, v)),
        1 => proptest::option::of(0..2usize).prop_map(Op::DoorDeletePolicy),
    ]
}

fn mask(m: u8) -> Vec<&'static str> {
    CLUSTERS
        .iter()
        .enumerate()
        .filter(|(i, _)| m & (1 << i) != 0)
        .map(|(_, c)| *c)
        .collect()
}

fn placement_for(mode: usize, listed: Option<u8>) -> Placement {
    let mut p = match mode {
        0 => divided(None),
        1 => static_weights(&[("*", 1), ("dc1", 3)], false),
        2 => static_weights(&[("*", 2)], true),
        3 => dynamic(false),
        _ => duplicated(),
    };
    p.clusters = listed.map(|m| mask(m).into_iter().map(String::from).collect());
    p
}

fn to_command(op: &Op) -> (u64, Command) {
    let ns = |n: usize| ["ns-a", "ns-b"][n].to_string();
    let name = |o: usize| format!("obj{o}");
    let cmd = match op {
        Op::Register(c, z) => {
            Command::RegisterCluster(cluster_spec(CLUSTERS[*c], &[("zone", ZONES[*z])]))
        }
        Op::Heartbeat(m, cap) => Command::Heartbeats(
            mask(*m)
                .into_iter()
                .map(|c| Heartbeat {
                    cluster: c.into(),
                    capacity: cap.map(capacity),
                })
                .collect(),
        ),
        Op::Advance(ms) => return (*ms, Command::Tick),
        Op::Put {
            obj,
            ns: n,
            replicas,
            cpu,
            mode,
            listed,
        } => Command::PutObject {
            namespace: ns(*n),
            name: name(*obj),
            spec: ObjectSpec {
                template: deployment(&name(*obj), *replicas, *cpu),
                placement: placement_for(*mode, *listed),
                overrides: vec![],
            },
            expected_version: None,
        },
        Op::Delete(o, n) => Command::DeleteObject {
            namespace: ns(*n),
            name: name(*o),
            expected_version: None,
        },
        Op::Cordon(c) => Command::Cordon {
            name: CLUSTERS[*c].into(),
        },
        Op::Uncordon(c) => Command::Uncordon {
            name: CLUSTERS[*c].into(),
        },
        Op::Drain(c) => Command::Drain {
            name: CLUSTERS[*c].into(),
        },
        Op::Deregister(c) => Command::DeregisterCluster {
            name: CLUSTERS[*c].into(),
            expected_version: None,
        },
        Op::Revoke(o, n) => Command::RevokePlacement {
            namespace: ns(*n),
            name: name(*o),
        },
        Op::Report(o, n, c, r) => Command::StatusReports(vec![ObjectStatusReport {
            namespace: ns(*n),
            name: name(*o),
            cluster: CLUSTERS[*c].into(),
            applied: *r > 0,
            ready_replicas: *r,
            message: None,
        }]),
        Op::Unreachable(c) => Command::ClusterUnreachable {
            cluster: CLUSTERS[*c].into(),
        },
        Op::Tenant(slice, quota) => Command::PutTenant(TenantSpec {
            name: "team-b".into(),
            namespaces: vec!["ns-b".into()],
            quota: Resources {
                cpu_millis: *quota,
                memory_bytes: 0,
                pods: 0,
            },
            slice_size: slice.map(|cpu_millis| Resources {
                cpu_millis,
                memory_bytes: 0,
                pods: 0,
            }),
            members: vec![],
        }),
        Op::DoorPut(o, n, replicas, deploy) => {
            let manifest = if *deploy {
                serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": format!("t{o}"), "namespace": ns(*n)},
                    "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                        {"name": "c", "image": "c:1",
                         "resources": {"requests": {"cpu": "100m"}}}]}}}})
            } else {
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("t{o}"), "namespace": ns(*n)},
                    "data": {"v": replicas.to_string()}})
            };
            Command::PutResource {
                manifest: manifest.to_string(),
                expected_version: None,
            }
        }
        Op::DoorPolicy(n, variant) => {
            let placement = match variant {
                0 => serde_json::json!({}),
                1 => serde_json::json!({"clusterAffinity": {"clusterNames": ["dc1", "dc2"]}}),
                2 => serde_json::json!({"replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}),
                _ => serde_json::json!({"clusterAffinity": {"labelSelector":
                    {"matchLabels": {"zone": "a"}}},
                    "replicaScheduling": {"replicaSchedulingType": "Divided"}}),
            };
            let (kind, meta) = match n {
                Some(n) => (
                    "PropagationPolicy",
                    serde_json::json!({"name": "p", "namespace": ns(*n)}),
                ),
                None => ("ClusterPropagationPolicy", serde_json::json!({"name": "p"})),
            };
            Command::PutResource {
                manifest: serde_json::json!({"apiVersion": "policy.karmada.io/v1alpha1",
                    "kind": kind, "metadata": meta,
                    "spec": {"resourceSelectors": [
                        {"apiVersion": "apps/v1", "kind": "Deployment"},
                        {"apiVersion": "v1", "kind": "ConfigMap"}],
                        "placement": placement}})
                .to_string(),
                expected_version: None,
            }
        }
        Op::DoorDeletePolicy(n) => Command::DeleteResource {
            key: fedraft_core::door::ResourceKey {
                group: "policy.karmada.io".into(),
                kind: if n.is_some() {
                    "PropagationPolicy"
                } else {
                    "ClusterPropagationPolicy"
                }
                .into(),
                namespace: n.map(ns).unwrap_or_default(),
                name: "p".into(),
            },
            expected_version: None,
        },
    };
    (0, cmd)
}

/// The log a sequence of ops turns into: (index, entry), one second apart plus advances.
/// A prologue registers every cluster and makes it Ready so most ops have something to act on.
fn log(ops: &[Op]) -> Vec<(u64, LogEntry)> {
    let prologue = (0..CLUSTERS.len())
        .map(|c| Op::Register(c, c % ZONES.len()))
        .chain([Op::Heartbeat(0xff, Some(3000))]);
    let mut now = T0;
    prologue
        .chain(ops.iter().cloned())
        .enumerate()
        .map(|(i, op)| {
            let (advance, cmd) = to_command(&op);
            now += 1000 + advance;
            // Every tenth entry reuses the previous entry's request id: a retry.
            let id = format!("r{}", if i % 10 == 9 { i - 1 } else { i });
            (i as u64 + 1, LogEntry::new(id, "prop", now, cmd))
        })
        .collect()
}

/// Invariants that must hold after every entry.
fn check(state: &State) -> Result<(), TestCaseError> {
    state.check_consistency().map_err(TestCaseError::fail)?;
    let mut booked: BTreeMap<&str, u64> = BTreeMap::new();
    for o in state.objects() {
        for p in &o.status.clusters {
            prop_assert!(
                state.cluster(&p.cluster).is_some(),
                "{} placed on unknown {}",
                o.name,
                p.cluster
            );
            prop_assert!(p.replicas > 0);
            *booked.entry(&*p.cluster).or_default() +=
                o.template_info.per_replica.cpu_millis * u64::from(p.replicas);
        }
        let sum: u32 = o.status.clusters.iter().map(|p| p.replicas).sum();
        if o.spec.placement.replicas.mode == ReplicaMode::Divided && o.status.shortfall.is_none() {
            prop_assert_eq!(
                sum,
                o.template_info.replicas,
                "{} without shortfall must be whole",
                o.name
            );
        }
        if o.status.shortfall.is_some() && o.spec.placement.replicas.mode == ReplicaMode::Divided {
            prop_assert!(sum < o.template_info.replicas);
        }
    }
    for t in state.tenants() {
        let used: u64 = t
            .spec
            .namespaces
            .iter()
            .flat_map(|ns| state.objects_in(ns))
            .map(|o| o.template_info.per_replica.cpu_millis * u64::from(o.template_info.replicas))
            .sum();
        prop_assert_eq!(t.status.used.cpu_millis, used, "tenant usage drifted");
    }
    for c in state.clusters() {
        // The executors' index-backed scan sees exactly the objects a full scan would.
        let name = c.spec.name.as_str();
        let indexed: Vec<_> = state.objects_on(name).iter().map(|o| o.key()).collect();
        let mut scanned: Vec<_> = state
            .objects()
            .filter(|o| state.runs_on(o, name))
            .map(|o| o.key())
            .collect();
        scanned.sort();
        prop_assert_eq!(indexed, scanned, "objects_on({}) drifted", name);
        let b = state
            .booked(&c.spec.name)
            .unwrap_or(Resources::ZERO)
            .cpu_millis;
        prop_assert_eq!(b, booked.get(c.spec.name.as_str()).copied().unwrap_or(0));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn same_log_same_hash_and_snapshot_restores_the_same_future(
        ops in proptest::collection::vec(op(), 20..120),
        cut in 0usize..126,
    ) {
        let entries = log(&ops);
        let cut = cut.min(entries.len());
        let mut a = State::new();
        let mut b = State::new();
        // An image taken at the cut, and the snapshot it must still encode to at the end,
        // however much of what it shares with `a` changed since.
        let mut image = None;
        for (i, (index, e)) in entries.iter().enumerate() {
            let ra = a.apply(*index, e);
            let rb = b.apply(*index, e);
            prop_assert_eq!(&ra, &rb);
            check(&a)?;
            if i + 1 == cut {
                let snap = a.to_snapshot();
                image = Some((a.image(), snap.clone()));
                b = State::from_snapshot(&snap).expect("snapshot decodes");
                prop_assert_eq!(b.state_hash(), a.state_hash());
                prop_assert_eq!(b.applied_index(), a.applied_index());
                b.check_consistency().map_err(TestCaseError::fail)?;
            }
        }
        if let Some((image, snap)) = image {
            prop_assert_eq!(image.applied_index(), State::from_snapshot(&snap).unwrap().applied_index());
            prop_assert!(image.to_snapshot() == snap, "the image changed with the state");
        }
        prop_assert_eq!(a.state_hash(), b.state_hash());
        let mut c = State::new();
        for (index, e) in &entries {
            c.apply(*index, e);
        }
        prop_assert_eq!(a.state_hash(), c.state_hash());
    }

    #[test]
    fn placement_does_not_depend_on_registration_order(
        caps in proptest::collection::vec(500u64..4000, 5),
        zones in proptest::collection::vec(0..ZONES.len(), 5),
        objects in proptest::collection::vec((1..9u32, 0..300u64, 0..4usize), 1..8),
        seed in any::<u64>(),
    ) {
        let mut order: Vec<usize> = (0..CLUSTERS.len()).collect();
        // A seeded Fisher-Yates shuffle keeps the case replayable from its inputs.
        let mut x = seed | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let run = |order: &[usize]| {
            let mut h = Harness::new();
            for &i in order {
                h.register(CLUSTERS[i], &[("zone", ZONES[zones[i]])]);
            }
            h.ok(Command::Heartbeats(order.iter().map(|&i| Heartbeat {
                cluster: CLUSTERS[i].into(),
                capacity: Some(capacity(caps[i])),
            }).collect()));
            for (k, (replicas, cpu, mode)) in objects.iter().enumerate() {
                let name = format!("o{k}");
                h.put("ns", &name, spec(deployment(&name, *replicas, *cpu), placement_for(*mode, None)));
            }
            h.state.objects().map(|o| (o.name.clone(), o.placement_map())).collect::<Vec<_>>()
        };
        prop_assert_eq!(run(&[0, 1, 2, 3, 4]), run(&order));
    }

    #[test]
    fn an_unrelated_cluster_joining_moves_nothing_without_rebalance(
        objects in proptest::collection::vec((1..9u32, 0..100u64, prop_oneof![Just(0usize), Just(1), Just(3)]), 1..8),
    ) {
        let mut h = Harness::new();
        h.fleet(&["dc1", "dc2", "dc3"]);
        for (k, (replicas, cpu, mode)) in objects.iter().enumerate() {
            let name = format!("o{k}");
            h.put("ns", &name, spec(deployment(&name, *replicas, *cpu), placement_for(*mode, None)));
        }
        let before: Vec<_> = h.state.objects().map(|o| o.placement_map()).collect();
        h.fleet(&["dc4"]);
        h.tick(1000);
        let after: Vec<_> = h.state.objects().map(|o| o.placement_map()).collect();
        prop_assert_eq!(before, after);
    }
}
