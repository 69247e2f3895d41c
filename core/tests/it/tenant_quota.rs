//! Tenant quotas as members see them (the `ResourceQuota` objects derived for each member where a
//! tenant's objects run), per-cluster quotas, Duplicated copies counted against cpu quotas, and
//! heartbeats placing waiting work in fair order; with the replay of entries older than them.

use std::collections::BTreeMap;

use fedraft_core::command::{Command, Heartbeat, LogEntry};
use fedraft_core::model::TenantSpec;
use fedraft_core::policy::{ClusterQuota, Extended, Resources};
use fedraft_core::state::{is_derived_key, Applied, DesiredObject, TENANT_QUOTA_NAME};
use serde_json::json;

use crate::state_support::*;

fn tenant(name: &str, namespaces: &[&str], quota: Resources) -> TenantSpec {
    TenantSpec {
        name: name.into(),
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        quota,
        slice_size: None,
        members: vec![],
    }
}

fn quotas(h: &Harness, cluster: &str) -> Vec<DesiredObject> {
    h.state
        .desired_for_cluster(cluster)
        .into_iter()
        .filter(|d| is_derived_key(&d.key))
        .collect()
}

fn limits() -> Resources {
    Resources {
        cpu_millis: 8000,
        memory_bytes: 0,
        pods: 20,
    }
}

#[test]
fn a_quota_lands_in_each_namespace_where_the_tenant_runs_and_leaves_with_it() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.ok(Command::PutTenantWithExtended {
        spec: tenant("team-a", &["ml", "web", "idle"], limits()),
        quota: Extended::from_pairs([("nvidia.com/gpu", 16)]),
    });
    h.put(
        "ml",
        "train",
        spec(deployment("train", 2, 100), divided(Some(&["dc1"]))),
    );
    h.put(
        "web",
        "site",
        spec(deployment("site", 2, 100), duplicated()),
    );
    // A tenant without a quota gets nothing pushed.
    h.ok(Command::PutTenant(tenant(
        "free",
        &["free"],
        Resources::ZERO,
    )));
    h.put(
        "free",
        "x",
        spec(deployment("x", 1, 100), divided(Some(&["dc1"]))),
    );

    let dc1 = quotas(&h, "dc1");
    let where_: Vec<&str> = dc1.iter().map(|d| d.key.namespace.as_str()).collect();
    assert_eq!(
        where_,
        vec!["ml", "web"],
        "only namespaces with objects on dc1"
    );
    let m = dc1[0].manifest.as_ref().expect("renders");
    assert_eq!(m["kind"], "ResourceQuota");
    assert_eq!(m["metadata"]["name"], TENANT_QUOTA_NAME);
    assert_eq!(m["metadata"]["namespace"], "ml");
    assert_eq!(m["metadata"]["labels"]["fedraft.io/managed-by"], "fedraft");
    assert_eq!(
        m["spec"]["hard"],
        json!({"requests.cpu": "8000m", "pods": "20", "requests.nvidia.com/gpu": "16"})
    );
    let admitted = dc1[0].admitted.as_ref().expect("identity known");
    assert_eq!(
        (admitted.kind.as_str(), admitted.name.as_str()),
        ("ResourceQuota", TENANT_QUOTA_NAME)
    );
    let dc2 = quotas(&h, "dc2");
    let where_: Vec<&str> = dc2.iter().map(|d| d.key.namespace.as_str()).collect();
    assert_eq!(where_, vec!["web"]);

    // Every rendering of the same state derives the same objects.
    assert_eq!(quotas(&h, "dc1"), dc1);

    // A lower quota changes the pushed limits; no quota at all removes them.
    h.ok(Command::PutTenant(tenant(
        "team-a",
        &["ml", "web", "idle"],
        Resources {
            cpu_millis: 4000,
            ..Resources::ZERO
        },
    )));
    let m = quotas(&h, "dc1")[0].manifest.clone().expect("renders");
    assert_eq!(m["spec"]["hard"], json!({"requests.cpu": "4000m"}));

    // Deleting the tenant's last object on a member takes its quota away there.
    h.ok(Command::DeleteObject {
        namespace: "ml".into(),
        name: "train".into(),
        expected_version: None,
    });
    let where_: Vec<String> = quotas(&h, "dc1")
        .into_iter()
        .map(|d| d.key.namespace)
        .collect();
    assert_eq!(where_, vec!["web"]);

    h.ok(Command::PutTenant(tenant(
        "team-a",
        &["ml", "web", "idle"],
        Resources::ZERO,
    )));
    assert!(quotas(&h, "dc1").is_empty());
    assert!(quotas(&h, "dc2").is_empty());
}

/// Applies `command` in an entry of an older log version, as a replayed log would carry it.
fn apply_at(h: &mut Harness, version: u16, command: Command) -> Applied {
    h.index += 1;
    let mut e = LogEntry::new("", "test", h.now_ms, command);
    e.version = version;
    h.state.apply(h.index, &e)
}

fn cpu(millis: u64) -> Resources {
    Resources {
        cpu_millis: millis,
        ..Resources::ZERO
    }
}

fn per_cluster(entries: &[(&str, Resources, Extended)]) -> BTreeMap<String, ClusterQuota> {
    entries
        .iter()
        .map(|(c, base, extended)| {
            (
                c.to_string(),
                ClusterQuota {
                    base: *base,
                    extended: extended.clone(),
                },
            )
        })
        .collect()
}

#[test]
fn a_per_cluster_quota_caps_placement_and_is_what_the_member_gets() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    let whole = tenant("team-a", &["ml"], cpu(8000));
    h.ok(Command::PutTenantWithQuotas {
        spec: whole.clone(),
        quota: Extended::new(),
        per_cluster: per_cluster(&[("dc1", cpu(1000), Extended::new())]),
    });
    h.put("ml", "web", spec(deployment("web", 6, 500), divided(None)));
    let placed = h.placement("ml", "web");
    assert_eq!(placed.get("dc1"), Some(&2), "{placed:?}");
    assert_eq!(total(&placed), 6, "{placed:?}");
    assert!(h.obj("ml", "web").status.shortfall.is_none());

    // dc1 gets its per-cluster quota, dc2 the tenant's whole quota.
    let hard =
        |c: &str| quotas(&h, c)[0].manifest.as_ref().expect("renders")["spec"]["hard"].clone();
    assert_eq!(hard("dc1"), json!({"requests.cpu": "1000m"}));
    assert_eq!(hard("dc2"), json!({"requests.cpu": "8000m"}));
    assert_eq!(h.state.tenant_per_cluster("team-a").len(), 1);

    // Only dc1 may hold the tenant: in a version-9 entry what does not fit its quota waits
    // (from version 10 the put is refused: `a_write_no_usable_cluster_has_quota_room_for_...`).
    let pinned_put = Command::PutObject {
        namespace: "ml".into(),
        name: "pinned".into(),
        spec: spec(deployment("pinned", 3, 500), divided(Some(&["dc1"]))),
        expected_version: None,
    };
    assert!(apply_at(&mut h, 9, pinned_put).outcome.is_accepted());
    let pinned = h.obj("ml", "pinned");
    assert_eq!(h.placement("ml", "pinned").get("dc1"), None);
    assert_eq!(
        pinned.status.shortfall.as_ref().map(|s| s.replicas),
        Some(3)
    );

    // A plain put replaces the tenant whole: no per-cluster quota any more, and the waiting
    // object is placed.
    h.ok(Command::PutTenant(whole));
    assert!(h.state.tenant_per_cluster("team-a").is_empty());
    h.tick(1000);
    assert_eq!(h.placement("ml", "pinned").get("dc1"), Some(&3));
}

#[test]
fn a_per_cluster_limit_above_the_tenant_quota_is_refused_naming_it() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let r = h.refused(Command::PutTenantWithQuotas {
        spec: tenant("team-a", &["ml"], cpu(1000)),
        quota: Extended::from_pairs([("nvidia.com/gpu", 4)]),
        per_cluster: per_cluster(&[(
            "dc1",
            Resources::ZERO,
            Extended::from_pairs([("nvidia.com/gpu", 8)]),
        )]),
    });
    assert_eq!(
        r.field.as_deref(),
        Some("spec.perCluster.dc1.nvidia.com/gpu")
    );
    assert!(
        r.message.contains("more than the tenant's quota 4"),
        "{}",
        r.message
    );
    assert!(h.state.tenant("team-a").is_none(), "nothing was written");
}

#[test]
fn duplicated_copies_count_per_cluster_against_cpu_quotas_from_version_9() {
    let put = |name: &str| Command::PutObject {
        namespace: "web".into(),
        name: name.into(),
        spec: spec(deployment(name, 1, 400), duplicated()),
        expected_version: None,
    };
    // Two clusters: each Duplicated replica of 400m counts 800m against a 1000m quota.
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.ok(Command::PutTenant(tenant("t", &["web"], cpu(1000))));
    h.ok(put("one"));
    // What the tenant shows as used is what the check counted: 800m, not the 400m stored.
    assert_eq!(h.state.tenant_used("t").map(|u| u.cpu_millis), Some(800));
    assert_eq!(
        h.state.tenant("t").map(|t| t.status.used.cpu_millis),
        Some(400)
    );
    assert_eq!(h.state.tenant_used("nobody"), None);
    let r = h.refused(put("two"));
    assert!(
        r.message.contains("cpu millis: needs 1600, quota 1000"),
        "{}",
        r.message
    );

    // A version-8 entry counted each object once, and still does.
    let mut old = Harness::new();
    old.fleet(&["dc1", "dc2"]);
    old.ok(Command::PutTenant(tenant("t", &["web"], cpu(1000))));
    assert!(apply_at(&mut old, 8, put("one")).outcome.is_accepted());
    assert!(apply_at(&mut old, 8, put("two")).outcome.is_accepted());
}

#[test]
fn capacity_growth_from_heartbeats_places_waiting_work_in_fair_order_from_version_9() {
    let run = |version: u16| -> (u32, u32) {
        let mut h = Harness::new();
        h.register("dc1", &[]);
        h.heartbeat(&["dc1"], Some(capacity(2000)));
        h.ok(Command::PutTenant(tenant(
            "a",
            &["team-a"],
            Resources::ZERO,
        )));
        h.ok(Command::PutTenant(tenant(
            "b",
            &["team-b"],
            Resources::ZERO,
        )));
        h.put(
            "team-a",
            "a0",
            spec(deployment("a0", 1, 2000), divided(None)),
        );
        h.put(
            "team-a",
            "a1",
            spec(deployment("a1", 1, 1000), divided(None)),
        );
        h.put(
            "team-b",
            "b1",
            spec(deployment("b1", 1, 1000), divided(None)),
        );
        let beat = Command::Heartbeats(vec![Heartbeat {
            cluster: "dc1".into(),
            capacity: Some(capacity(3000)),
        }]);
        assert!(apply_at(&mut h, version, beat).outcome.is_accepted());
        h.tick(1000);
        (
            total(&h.placement("team-a", "a1")),
            total(&h.placement("team-b", "b1")),
        )
    };
    // Tenant b holds nothing, tenant a the whole cluster: b's work takes the new room.
    assert_eq!(run(9), (0, 1));
    // Before version 9 a heartbeat queued the waiting objects in key order.
    assert_eq!(run(8), (1, 0));
}

#[test]
fn a_write_no_usable_cluster_has_quota_room_for_is_refused_from_version_10() {
    let put = |name: &str, replicas: u32, clusters: Option<&[&str]>| Command::PutObject {
        namespace: "ml".into(),
        name: name.into(),
        spec: spec(deployment(name, replicas, 500), divided(clusters)),
        expected_version: None,
    };
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.ok(Command::PutTenantWithQuotas {
        spec: tenant("team-a", &["ml"], cpu(8000)),
        quota: Extended::new(),
        per_cluster: per_cluster(&[("dc1", cpu(1000), Extended::new())]),
    });
    // dc2 has no per-cluster quota: never refused for dc1's.
    h.ok(put("web", 6, None));
    assert_eq!(total(&h.placement("ml", "web")), 6);
    // Only dc1 is usable and web holds its whole quota there: refused, as over-quota writes are.
    let before = h.state.state_hash_hex();
    let r = h.refused(put("pinned", 3, Some(&["dc1"])));
    assert_eq!(r.field.as_deref(), Some("spec"));
    assert!(
        r.message.contains("exceeds the quota of tenant \"team-a\"")
            && r.message.contains("leave room for 0 of 3 replicas")
            && r.message.contains("cpu millis"),
        "{}",
        r.message
    );
    assert_eq!(
        h.state.state_hash_hex(),
        before,
        "a refusal changes nothing"
    );
    // A version-9 entry waits instead.
    assert!(apply_at(&mut h, 9, put("pinned", 3, Some(&["dc1"])))
        .outcome
        .is_accepted());
    // Put again asking no more, where it did: not refused; asking more is.
    h.ok(put("pinned", 3, Some(&["dc1"])));
    let r = h.refused(put("pinned", 4, Some(&["dc1"])));
    assert!(r.message.contains("room for 0 of 4"), "{}", r.message);

    // Both clusters quota'd: the rooms add up for a Divided object.
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.ok(Command::PutTenantWithQuotas {
        spec: tenant("team-a", &["ml"], Resources::ZERO),
        quota: Extended::new(),
        per_cluster: per_cluster(&[
            ("dc1", cpu(1000), Extended::new()),
            ("dc2", cpu(1000), Extended::new()),
        ]),
    });
    h.ok(put("four", 4, None));
    assert_eq!(total(&h.placement("ml", "four")), 4);
    let r = h.refused(put("one-more", 1, None));
    assert!(r.message.contains("room for 0 of 1"), "{}", r.message);

    // A capacity shortfall waits: the quota has room, the cluster has not.
    let mut h = Harness::new();
    h.register("dc1", &[]);
    h.heartbeat(&["dc1"], Some(capacity(500)));
    h.ok(Command::PutTenantWithQuotas {
        spec: tenant("team-a", &["ml"], Resources::ZERO),
        quota: Extended::new(),
        per_cluster: per_cluster(&[("dc1", cpu(4000), Extended::new())]),
    });
    h.ok(Command::PutObject {
        namespace: "ml".into(),
        name: "waits".into(),
        spec: spec(deployment("waits", 2, 500), dynamic(false)),
        expected_version: None,
    });
    let shortfall = h
        .obj("ml", "waits")
        .status
        .shortfall
        .as_ref()
        .map(|s| s.replicas);
    assert_eq!(shortfall, Some(1));
}
