//! GPUs and other extended resources in the state machine: per-node fit, tenant quotas on
//! extended resources, the fair wait queue, and replay of entries older than them.

use fedraft_core::command::{CapacityDetail, Command, LogEntry};
use fedraft_core::model::ObjectSpec;
use fedraft_core::policy::{Extended, ExtendedCapacity, NodeShape, Placement, Resources};
use fedraft_core::state::{RejectCode, State};

use crate::state_support::*;

const GPU: &str = "nvidia.com/gpu";

fn gpus(n: u64) -> Extended {
    Extended::from_pairs([(GPU, n)])
}

/// `nodes` nodes of `per_node` GPUs each, nothing running.
fn gpu_nodes(nodes: u32, per_node: u64) -> ExtendedCapacity {
    let total = gpus(per_node * u64::from(nodes));
    ExtendedCapacity {
        allocatable: total.clone(),
        available: total,
        nodes: vec![NodeShape {
            count: nodes,
            free: Resources {
                cpu_millis: 32_000,
                memory_bytes: 256 << 30,
                pods: 110,
            },
            extended: gpus(per_node),
        }],
    }
}

fn details(h: &mut Harness, reports: &[(&str, ExtendedCapacity)]) {
    h.ok(Command::CapacityDetails(
        reports
            .iter()
            .map(|(c, cap)| CapacityDetail {
                cluster: c.to_string(),
                capacity: cap.clone(),
            })
            .collect(),
    ));
}

/// A Deployment whose replicas each ask for `gpus` GPUs, through limits only (as most GPU
/// manifests do), with an optional priority annotation.
fn gpu_job(name: &str, replicas: u32, gpus: u64, priority: Option<i64>) -> String {
    let mut meta = serde_json::json!({"name": name});
    if let Some(p) = priority {
        meta["annotations"] = serde_json::json!({"fedraft.io/priority": p.to_string()});
    }
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{
                "name": "train",
                "image": "registry.example/train:1",
                "resources": {
                    "requests": {"cpu": "1"},
                    "limits": {GPU: gpus.to_string()}
                }
            }]}}
        }
    })
    .to_string()
}

fn put_job(h: &mut Harness, ns: &str, name: &str, replicas: u32, g: u64, placement: Placement) {
    h.put(
        ns,
        name,
        ObjectSpec {
            template: gpu_job(name, replicas, g, None),
            placement,
            overrides: vec![],
        },
    );
}

/// Three members: eight 1-GPU nodes, two 4-GPU nodes, and no GPU at all.
fn gpu_fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["ones", "fours", "plain"]);
    details(
        &mut h,
        &[("ones", gpu_nodes(8, 1)), ("fours", gpu_nodes(2, 4))],
    );
    h
}

#[test]
fn a_four_gpu_replica_lands_only_where_a_node_holds_it() {
    let mut h = gpu_fleet();
    put_job(&mut h, "ml", "big", 3, 4, divided(None));
    // "ones" has 8 GPUs in total but no node with 4; "plain" has none.
    let placed = h.placement("ml", "big");
    assert_eq!(placed.get("fours"), Some(&2), "{placed:?}");
    assert_eq!(placed.len(), 1, "{placed:?}");
    let short = h
        .obj("ml", "big")
        .status
        .shortfall
        .clone()
        .expect("one replica waits");
    assert_eq!(short.replicas, 1);

    // One-GPU replicas use the small nodes too.
    put_job(&mut h, "ml", "small", 10, 1, divided(None));
    let placed = h.placement("ml", "small");
    assert_eq!(placed.get("plain"), None, "{placed:?}");
    assert_eq!(placed.values().sum::<u32>(), 8, "{placed:?}");

    // Duplicated: every cluster that can hold it, and only those.
    put_job(&mut h, "ml", "dup", 1, 4, duplicated());
    assert!(h.placement("ml", "dup").is_empty(), "fours is full");
}

#[test]
fn duplicated_gpu_copies_skip_clusters_without_a_big_enough_node() {
    let mut h = gpu_fleet();
    put_job(&mut h, "ml", "dup", 1, 2, duplicated());
    let placed = h.placement("ml", "dup");
    assert_eq!(
        placed.keys().collect::<Vec<_>>(),
        vec!["fours"],
        "{placed:?}"
    );
}

#[test]
fn tenant_gpu_quota_refuses_the_over_quota_write_naming_the_resource() {
    let mut h = gpu_fleet();
    let spec = tenant_spec("team-a", &["ml"]);
    h.ok(Command::PutTenantWithExtended {
        spec,
        quota: gpus(8),
    });
    put_job(&mut h, "ml", "first", 1, 4, divided(None));
    let r = h.refused(Command::PutObject {
        namespace: "ml".into(),
        name: "second".into(),
        spec: ObjectSpec {
            template: gpu_job("second", 2, 4, None),
            placement: divided(None),
            overrides: vec![],
        },
        expected_version: None,
    });
    assert_eq!(r.code, RejectCode::FailedPrecondition);
    assert!(
        r.message.contains("nvidia.com/gpu: needs 12, quota 8"),
        "{}",
        r.message
    );
    assert!(
        r.field.as_deref().unwrap_or("").contains(GPU),
        "{:?}",
        r.field
    );
    let (quota, used) = h.state.tenant_extended("team-a");
    assert_eq!((quota, used), (gpus(8), gpus(4)));

    // Duplicated copies count once per cluster they run in: 2 GPUs on "fours" and "ones".
    put_job(&mut h, "ml", "dup", 1, 1, duplicated());
    assert_eq!(h.state.tenant_extended("team-a").1, gpus(6));

    // A plain PutTenant replaces the tenant whole: no extended quota any more.
    h.ok(Command::PutTenant(tenant_spec("team-a", &["ml"])));
    assert_eq!(h.state.tenant_extended("team-a").0, Extended::new());
}

#[test]
fn the_queue_places_waiting_work_in_fair_order_when_capacity_frees() {
    let mut h = Harness::new();
    h.fleet(&["fours"]);
    details(&mut h, &[("fours", gpu_nodes(2, 4))]);
    h.ok(Command::PutTenant(tenant_spec("a", &["team-a"])));
    h.ok(Command::PutTenant(tenant_spec("b", &["team-b"])));
    put_job(&mut h, "team-a", "a0", 1, 4, divided(None));
    put_job(&mut h, "team-a", "a1", 1, 4, divided(None));
    // The cluster is full: both wait, a2 first, b1 later.
    put_job(&mut h, "team-a", "a2", 1, 4, divided(None));
    put_job(&mut h, "team-b", "b1", 1, 4, divided(None));
    let queue = h.state.waiting(None);
    let names: Vec<&str> = queue.iter().map(|w| w.name.as_str()).collect();
    // Tenant b holds nothing, tenant a half the GPUs: b's work comes first.
    assert_eq!(names, vec!["b1", "a2"]);
    let mine = h.state.waiting(Some("b"));
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].position, 1);
    assert!(
        mine[0].waiting_for.contains("nvidia.com/gpu 4 on one node"),
        "{}",
        mine[0].waiting_for
    );

    h.ok(Command::DeleteObject {
        namespace: "team-a".into(),
        name: "a1".into(),
        expected_version: None,
    });
    h.tick(1000);
    assert_eq!(h.placement("team-b", "b1").get("fours"), Some(&1));
    assert!(h.placement("team-a", "a2").is_empty());
    let left = h.state.waiting(None);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].name, "a2");
    assert!(left[0].since_index > 0);
}

#[test]
fn priority_orders_waiting_work_within_a_tenant() {
    let mut h = Harness::new();
    h.fleet(&["fours"]);
    details(&mut h, &[("fours", gpu_nodes(1, 4))]);
    h.ok(Command::PutTenant(tenant_spec("a", &["team-a"])));
    put_job(&mut h, "team-a", "running", 1, 4, divided(None));
    for (name, p) in [("low", 1), ("high", 9)] {
        h.put(
            "team-a",
            name,
            ObjectSpec {
                template: gpu_job(name, 1, 4, Some(p)),
                placement: divided(None),
                overrides: vec![],
            },
        );
    }
    let names: Vec<String> = h
        .state
        .waiting(Some("a"))
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert_eq!(names, vec!["high", "low"]);
    h.ok(Command::DeleteObject {
        namespace: "team-a".into(),
        name: "running".into(),
        expected_version: None,
    });
    h.tick(1000);
    assert_eq!(h.placement("team-a", "high").get("fours"), Some(&1));
    assert!(h.placement("team-a", "low").is_empty());
}

#[test]
fn version_five_entries_replay_without_extended_requests() {
    let mut h = Harness::new();
    h.fleet(&["plain"]);
    h.index += 1;
    let mut old = LogEntry::new(
        "",
        "test",
        h.now_ms,
        Command::PutObject {
            namespace: "ml".into(),
            name: "old".into(),
            spec: ObjectSpec {
                template: gpu_job("old", 2, 4, None),
                placement: divided(None),
                overrides: vec![],
            },
            expected_version: None,
        },
    );
    old.version = 5;
    assert!(h.state.apply(h.index, &old).outcome.is_accepted());
    // As before GPUs counted: placed on a cluster that reports none.
    assert_eq!(h.placement("ml", "old").get("plain"), Some(&2));
    assert_eq!(h.state.object_extended("ml", "old"), Extended::new());
    // The same put today waits for a GPU node.
    put_job(&mut h, "ml", "new", 2, 4, divided(None));
    assert!(h.placement("ml", "new").is_empty());
}

#[test]
fn extended_tables_survive_a_snapshot_and_leave_an_empty_state_hash_alone() {
    let mut empty = Harness::new();
    empty.fleet(&["x"]);
    let before = State::from_snapshot(&empty.state.to_snapshot()).unwrap();
    assert_eq!(before.state_hash_hex(), empty.state.state_hash_hex());

    let mut h = gpu_fleet();
    h.ok(Command::PutTenantWithExtended {
        spec: tenant_spec("t", &["ml"]),
        quota: gpus(64),
    });
    put_job(&mut h, "ml", "big", 3, 4, divided(None));
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.state_hash_hex(), h.state.state_hash_hex());
    assert_eq!(
        restored.cluster_extended("fours"),
        h.state.cluster_extended("fours")
    );
    assert_eq!(restored.waiting(None), h.state.waiting(None));
    assert_eq!(restored.object_extended("ml", "big"), gpus(4));
}

#[test]
fn bad_extended_names_are_refused_naming_the_field() {
    let mut h = gpu_fleet();
    let r = h.refused(Command::PutTenantWithExtended {
        spec: tenant_spec("t", &["ml"]),
        quota: Extended::from_pairs([("gpu", 1)]),
    });
    assert_eq!(r.field.as_deref(), Some("spec.quota.gpu"));
    let bad = CapacityDetail {
        cluster: "ones".into(),
        capacity: ExtendedCapacity {
            available: Extended::from_pairs([("kubernetes.io/gpu", 1)]),
            ..ExtendedCapacity::default()
        },
    };
    let r = h.refused(Command::CapacityDetails(vec![bad]));
    assert!(r.field.unwrap_or_default().contains("kubernetes.io/gpu"));
}

fn tenant_spec(name: &str, namespaces: &[&str]) -> fedraft_core::model::TenantSpec {
    fedraft_core::model::TenantSpec {
        name: name.into(),
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        quota: Resources::ZERO,
        slice_size: None,
        members: vec![],
    }
}
