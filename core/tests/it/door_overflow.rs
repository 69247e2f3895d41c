//! Karmada's `overflowAffinities` through the door: a Deployment bound to the published
//! "overflow from IDC GPU clusters to cloud GPU clusters" policy fills the IDC cluster first,
//! overflows to the cloud tier in order, gives the cloud replicas back first on a scale down,
//! stays put when IDC capacity returns until it is next scaled, and moves to the next affinity
//! group when neither tier can hold it; the explain names the term behind each cluster; a
//! version-13 entry is refused the field as before.

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::karmada::OVERFLOW_AFFINITIES_SINCE;
use fedraft_core::model::ObjectKey;
use fedraft_core::state::{Outcome, State};
use serde_json::{json, Value};

use crate::state_support::{big_capacity, capacity, Harness};

const S: u64 = 1000;
const NAME: &str = "deployment.apps:infer";

fn put(v: Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

/// 100m of CPU per replica: a cluster reporting `n * 100` millis holds `n` replicas.
fn deployment(replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "infer", "namespace": "ai", "labels": {"app": "infer"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "infer"}},
            "template": {"metadata": {"labels": {"app": "infer"}},
                "spec": {"containers": [{"name": "m", "image": "vllm:1",
                    "resources": {"requests": {"cpu": "100m"}}}]}}}})
}

/// The published sample, with a later disaster-recovery group.
fn policy() -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "gpu-inference-overflow", "namespace": "ai"},
        "spec": {
            "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": {
                "clusterAffinities": [
                    {"affinityName": "idc-gpu", "clusterNames": ["idc1"],
                     "overflowAffinities": [
                        {"affinityName": "cloud-gpu", "clusterNames": ["cloud1", "cloud2"]}]},
                    {"affinityName": "dr", "clusterNames": ["dr1"]}],
                "replicaScheduling": {"replicaSchedulingType": "Divided",
                    "replicaDivisionPreference": "Weighted",
                    "weightPreference": {"dynamicWeight": "AvailableReplicas"}}}}})
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["cloud1", "cloud2", "dr1", "idc1"]);
    h.heartbeat(&["idc1"], Some(capacity(400)));
    h.heartbeat(&["cloud1", "cloud2"], Some(capacity(300)));
    h
}

fn placed(h: &Harness) -> Vec<(String, u32)> {
    h.placement("ai", NAME).into_iter().collect()
}

fn on(h: &Harness, cluster: &str) -> u32 {
    h.placement("ai", NAME).get(cluster).copied().unwrap_or(0)
}

fn cause(h: &Harness) -> String {
    h.state
        .policy_cause(&ObjectKey::new("ai", NAME))
        .unwrap_or_default()
}

#[test]
fn the_idc_fills_first_and_the_cloud_takes_the_rest() {
    let mut h = fleet();
    h.ok(put(policy()));
    h.ok(put(deployment(3)));
    assert_eq!(placed(&h), [("idc1".to_string(), 3)]);
    assert!(
        cause(&h).contains("affinity group idc-gpu"),
        "{}",
        cause(&h)
    );
    assert!(!cause(&h).contains("overflow beyond"), "{}", cause(&h));

    // Beyond what the IDC holds, the cloud tier takes the rest.
    h.ok(put(deployment(8)));
    assert_eq!(on(&h, "idc1"), 4);
    assert_eq!(on(&h, "cloud1") + on(&h, "cloud2"), 4);
    assert_eq!(on(&h, "dr1"), 0);
    let c = cause(&h);
    assert!(c.contains("overflow beyond idc-gpu:"), "{c}");
    assert!(c.contains("by overflow cloud-gpu"), "{c}");
    let d = h.state.explain("ai", NAME).expect("explain");
    let terms = d.terms.as_ref().expect("terms");
    assert_eq!(terms.term("idc1"), Some(("idc-gpu", false)));
    assert_eq!(terms.term("cloud1"), Some(("cloud-gpu", true)));
    let summary = &h.obj("ai", NAME).status.decision_summary;
    assert!(summary.contains("by overflow cloud-gpu"), "{summary}");

    // A scale down gives the cloud replicas back first.
    h.ok(put(deployment(6)));
    assert_eq!(on(&h, "idc1"), 4);
    assert_eq!(on(&h, "cloud1") + on(&h, "cloud2"), 2);
    h.ok(put(deployment(10)));
    assert_eq!(
        placed(&h),
        [
            ("cloud1".to_string(), 3),
            ("cloud2".to_string(), 3),
            ("idc1".to_string(), 4)
        ]
    );

    // Capacity back in the IDC moves nothing by itself...
    h.heartbeat(&["idc1"], Some(capacity(1200)));
    h.tick(S);
    assert_eq!(on(&h, "idc1"), 4);
    // ...until the workload is next scaled: the IDC is filled first again.
    h.ok(put(deployment(11)));
    assert_eq!(placed(&h), [("idc1".to_string(), 11)]);
    assert!(!cause(&h).contains("overflow beyond"), "{}", cause(&h));

    // A replay or a restore decides the same.
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(restored.explain("ai", NAME), h.state.explain("ai", NAME));
}

#[test]
fn when_no_tier_holds_the_replicas_the_next_group_does() {
    let mut h = fleet();
    h.heartbeat(&["dr1"], Some(big_capacity()));
    h.ok(put(policy()));
    h.ok(put(deployment(9)));
    assert_eq!(on(&h, "idc1"), 4);
    assert_eq!(on(&h, "cloud1") + on(&h, "cloud2"), 5);
    // The IDC goes dark past the grace period: the cloud tier holds only 6 of 9, so the whole
    // term gives way to the next group, as Karmada moves on to the next affinity term.
    for _ in 0..12 {
        h.advance(10 * S);
        h.heartbeat(&["cloud1", "cloud2", "dr1"], None);
    }
    assert_eq!(placed(&h), [("dr1".to_string(), 9)]);
    assert!(cause(&h).contains("affinity group dr"), "{}", cause(&h));
}

#[test]
fn a_dark_primary_leaves_its_replicas_to_the_overflow_tier() {
    let mut h = fleet();
    h.ok(put(policy()));
    h.ok(put(deployment(5)));
    assert_eq!(on(&h, "idc1"), 4);
    for _ in 0..12 {
        h.advance(10 * S);
        h.heartbeat(&["cloud1", "cloud2", "dr1"], None);
    }
    assert_eq!(on(&h, "idc1"), 0);
    assert_eq!(on(&h, "cloud1") + on(&h, "cloud2"), 5);
    assert!(
        cause(&h).contains("affinity group idc-gpu"),
        "{}",
        cause(&h)
    );
}

#[test]
fn a_version_13_entry_is_refused_the_field_as_before() {
    let mut h = fleet();
    let mut old = LogEntry::new("", "root", h.now_ms, put(policy()));
    old.version = OVERFLOW_AFFINITIES_SINCE - 1;
    h.index += 1;
    let Outcome::Rejected(r) = h.state.apply(h.index, &old).outcome else {
        panic!("a version-13 entry accepted overflowAffinities");
    };
    assert_eq!(
        r.field.as_deref(),
        Some("spec.placement.clusterAffinities[0].overflowAffinities")
    );
    assert!(r.message.contains("do not overflow"), "{}", r.message);
    // The same document in a current entry is accepted.
    h.ok(put(policy()));
}
