//! Fleet changes and what they do to placement: label and taint updates, Duplicated objects
//! following their selector, two-level slices failing over only after the grace period,
//! overrides in rendered manifests, and the dry-run `explain`.

use std::collections::BTreeMap;

use crate::state_support::*;
use fedraft_core::command::Command;
use fedraft_core::model::TenantSpec;
use fedraft_core::policy::{LabelSelector, Override, Resources, Taint, TaintEffect};

const S: u64 = 1000;

fn selector(k: &str, v: &str) -> LabelSelector {
    LabelSelector {
        match_labels: BTreeMap::from([(k.to_string(), v.to_string())]),
        match_expressions: vec![],
    }
}

#[test]
fn relabelled_cluster_loses_and_gains_selected_objects() {
    let mut h = Harness::new();
    for (n, region) in [("dc1", "eu"), ("dc2", "eu"), ("dc3", "us")] {
        h.register(n, &[("region", region)]);
    }
    h.heartbeat(&["dc1", "dc2", "dc3"], Some(big_capacity()));
    let mut eu = duplicated();
    eu.cluster_selector = Some(Box::new(selector("region", "eu")));
    h.put("ns", "cache", spec(deployment("cache", 2, 10), eu));
    let mut eu_divided = divided(None);
    eu_divided.cluster_selector = Some(Box::new(selector("region", "eu")));
    h.put("ns", "web", spec(deployment("web", 4, 10), eu_divided));
    assert_eq!(
        h.placement("ns", "cache").keys().collect::<Vec<_>>(),
        ["dc1", "dc2"]
    );

    // dc2 moves to the US: both objects leave it; dc3 moves to the EU: the Duplicated one
    // gets a copy there, the Divided one (no rebalance) stays where it is.
    h.ok(Command::UpdateCluster {
        spec: cluster_spec("dc2", &[("region", "us")]),
        expected_version: None,
    });
    h.ok(Command::UpdateCluster {
        spec: cluster_spec("dc3", &[("region", "eu")]),
        expected_version: None,
    });
    assert_eq!(
        h.placement("ns", "cache").keys().collect::<Vec<_>>(),
        ["dc1", "dc3"]
    );
    assert_eq!(
        h.placement("ns", "web"),
        BTreeMap::from([("dc1".to_string(), 4)])
    );
}

#[test]
fn no_execute_taint_evicts_and_no_schedule_keeps() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 4, 10), divided(None)));
    let mut s = cluster_spec("dc1", &[]);
    s.taints.push(Taint {
        key: "maint".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    h.ok(Command::UpdateCluster {
        spec: s.clone(),
        expected_version: None,
    });
    assert_eq!(
        h.placement("ns", "web").get("dc1"),
        Some(&2),
        "NoSchedule keeps replicas"
    );
    s.taints[0].effect = TaintEffect::NoExecute;
    h.ok(Command::UpdateCluster {
        spec: s,
        expected_version: None,
    });
    assert_eq!(
        h.placement("ns", "web"),
        BTreeMap::from([("dc2".to_string(), 4)])
    );
}

#[test]
fn two_level_slices_fail_over_only_after_the_grace_period() {
    let mut h = Harness::new();
    h.register("dc1", &[]);
    h.heartbeat(&["dc1"], Some(capacity(4000)));
    h.ok(Command::PutTenant(TenantSpec {
        name: "t".into(),
        namespaces: vec!["t".into()],
        quota: Resources {
            cpu_millis: 2000,
            memory_bytes: 0,
            pods: 0,
        },
        slice_size: Some(Resources {
            cpu_millis: 1000,
            memory_bytes: 0,
            pods: 0,
        }),
        members: vec![],
    }));
    h.put("t", "w", spec(deployment("w", 2, 100), divided(None)));
    h.register("dc2", &[]);
    h.heartbeat(&["dc2"], Some(capacity(4000)));
    assert_eq!(
        h.state.tenant("t").unwrap().status.slices,
        BTreeMap::from([("dc1".to_string(), 2)])
    );
    assert_eq!(
        h.placement("t", "w"),
        BTreeMap::from([("dc1".to_string(), 2)])
    );

    // dc1 falls silent: NotReady after 30 s, but slices and replicas stay for the grace period.
    for _ in 0..8 {
        h.advance(10 * S);
        h.heartbeat(&["dc2"], None);
    }
    assert_eq!(
        h.state.tenant("t").unwrap().status.slices.get("dc1"),
        Some(&2)
    );
    assert_eq!(h.placement("t", "w").get("dc1"), Some(&2));
    for _ in 0..3 {
        h.advance(10 * S);
        h.heartbeat(&["dc2"], None);
    }
    assert_eq!(
        h.state.tenant("t").unwrap().status.slices,
        BTreeMap::from([("dc2".to_string(), 2)])
    );
    assert_eq!(
        h.placement("t", "w"),
        BTreeMap::from([("dc2".to_string(), 2)])
    );
}

#[test]
fn overrides_reach_the_rendered_manifest_of_the_targeted_cluster_only() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    let mut s = spec(deployment("web", 2, 10), duplicated());
    s.overrides.push(Override {
        cluster_name: Some("dc2".into()),
        labels: BTreeMap::from([("tier".to_string(), "edge".to_string())]),
        ..Override::default()
    });
    h.put("ns", "web", s);
    let label = |c: &str| {
        let d = h.state.desired_for_cluster(c);
        d[0].manifest.as_ref().unwrap()["metadata"]["labels"]["tier"].clone()
    };
    assert_eq!(label("dc2"), "edge");
    assert!(label("dc1").is_null());
    let d = h.state.desired_for_cluster("dc1");
    assert_eq!(
        d[0].replicas, 2,
        "Duplicated: each cluster runs the template's count"
    );
}

#[test]
fn explain_is_a_dry_run() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 2, 10), divided(None)));
    h.ok(Command::Drain { name: "dc2".into() });
    let hash = h.state.state_hash();
    let d = h.state.explain("ns", "web").unwrap();
    assert_eq!(d.placement, h.placement("ns", "web"));
    assert!(
        d.dropped.iter().any(|x| x.cluster == "dc2"),
        "{:?}",
        d.dropped
    );
    assert_eq!(h.state.state_hash(), hash);
    assert!(h.state.explain("ns", "nope").is_none());
}

/// Puts `n` ConfigMaps on dc1, then a Deployment of 3 replicas, every entry at `version`, on a
/// cluster with room for 4 pods. Returns the replicas the Deployment got.
fn deployment_after_config_maps(version: u16, n: usize) -> u32 {
    let mut h = Harness::new();
    h.register("dc1", &[]);
    let mut room = capacity(1_000_000);
    room.available.pods = 4;
    room.allocatable.pods = 4;
    h.heartbeat(&["dc1"], Some(room));
    let put = |h: &mut Harness, name: &str, spec: fedraft_core::model::ObjectSpec| {
        h.index += 1;
        let cmd = Command::PutObject {
            namespace: "ns".into(),
            name: name.into(),
            spec,
            expected_version: None,
        };
        let mut e = fedraft_core::command::LogEntry::new("", "test", h.now_ms, cmd);
        e.version = version;
        let a = h.state.apply(h.index, &e);
        assert!(a.outcome.is_accepted(), "{name}: {:?}", a.outcome);
    };
    for i in 0..n {
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm{i}")}, "data": {"k": "v"}});
        put(
            &mut h,
            &format!("cm{i}"),
            spec(cm.to_string(), duplicated()),
        );
    }
    put(
        &mut h,
        "web",
        spec(deployment("web", 3, 10), divided(Some(&["dc1"]))),
    );
    h.placement("ns", "web").get("dc1").copied().unwrap_or(0)
}

#[test]
fn objects_that_run_no_pods_take_no_pod_room() {
    use fedraft_core::command::PODLESS_SINCE;
    assert_eq!(deployment_after_config_maps(PODLESS_SINCE, 3), 3);
    // Before, each ConfigMap booked a pod, and the log replays so: one pod left for the three.
    assert_eq!(deployment_after_config_maps(PODLESS_SINCE - 1, 3), 1);
}
