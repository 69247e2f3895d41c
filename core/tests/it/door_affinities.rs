//! Karmada's ordered affinity groups, lazy activation and dependent overrides through the
//! door: which group places a template and when it moves on, what a lazy policy leaves alone,
//! and what waits for an override policy.

use fedraft_core::command::Command;
use fedraft_core::model::{Health, ObjectKey};
use fedraft_core::policy::{Taint, TaintEffect};
use fedraft_core::state::State;
use serde_json::{json, Value};

use crate::state_support::{cluster_spec, Harness};

const S: u64 = 1000;

fn put(v: Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn deployment(name: &str, replicas: u32, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "app", "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}})
}

fn policy(spec: Value) -> Value {
    let mut spec = spec;
    spec["resourceSelectors"] = json!([{"apiVersion": "apps/v1", "kind": "Deployment"}]);
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web-policy", "namespace": "app"}, "spec": spec})
}

/// Two groups: `primary` of `first`, `backup` of `second`.
fn groups(first: &[&str], second: &[&str]) -> Value {
    policy(json!({"placement": {"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": first},
        {"affinityName": "backup", "clusterNames": second},
    ]}}))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey {
        namespace: "app".into(),
        name: format!("deployment.apps:{name}"),
    }
}

fn clusters_of(h: &Harness, name: &str) -> Vec<String> {
    h.placement("app", &format!("deployment.apps:{name}"))
        .into_keys()
        .collect()
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2", "member3"]);
    h
}

#[test]
fn the_first_group_places_and_a_dark_group_fails_over_to_the_next() {
    let mut h = fleet();
    h.ok(put(groups(&["member1"], &["member2", "member3"])));
    h.ok(put(deployment("web", 2, "nginx:1")));
    assert_eq!(clusters_of(&h, "web"), ["member1"]);
    let cause = h.state.policy_cause(&key("web")).unwrap_or_default();
    assert!(cause.contains("affinity group primary"), "{cause}");

    // member1 falls silent: NotReady after 30 s, nothing moves in the 60 s grace period.
    for _ in 0..8 {
        h.advance(10 * S);
        h.heartbeat(&["member2", "member3"], None);
    }
    assert_eq!(
        h.state.cluster("member1").map(|c| c.status.health),
        Some(Health::NotReady)
    );
    assert_eq!(clusters_of(&h, "web"), ["member1"]);
    for _ in 0..3 {
        h.advance(10 * S);
        h.heartbeat(&["member2", "member3"], None);
    }
    assert_eq!(clusters_of(&h, "web"), ["member2", "member3"]);
    let cause = h.state.policy_cause(&key("web")).unwrap_or_default();
    assert!(cause.contains("affinity group backup"), "{cause}");

    // member1 comes back: the object stays with the group it moved to (no failback)...
    h.heartbeat(&["member1", "member2", "member3"], None);
    h.heartbeat_for(&["member1", "member2", "member3"], 40 * S, 5 * S);
    assert_eq!(clusters_of(&h, "web"), ["member2", "member3"]);
    // ...and a replay of the same log, or a restore, reads the same group.
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(
        restored.affinity_group(&key("web")).as_deref(),
        Some("backup")
    );
    // A new template starts with the first group, which is usable again.
    h.ok(put(deployment("api", 1, "nginx:1")));
    assert_eq!(clusters_of(&h, "api"), ["member1"]);
}

#[test]
fn a_group_that_cannot_place_is_skipped_at_once() {
    let mut h = fleet();
    // `ghost` is no cluster; an evicting taint empties member1 for the second policy.
    h.ok(put(groups(&["ghost"], &["member3"])));
    h.ok(put(deployment("web", 2, "nginx:1")));
    assert_eq!(clusters_of(&h, "web"), ["member3"]);
    assert_eq!(
        h.state.affinity_group(&key("web")).as_deref(),
        Some("backup")
    );

    h.ok(put(groups(&["member1"], &["member2"])));
    assert_eq!(
        clusters_of(&h, "web"),
        ["member1"],
        "a policy change starts over"
    );
    let mut spec = cluster_spec("member1", &[]);
    spec.taints = vec![Taint {
        key: "broken".into(),
        value: String::new(),
        effect: TaintEffect::NoExecute,
    }];
    h.ok(Command::UpdateCluster {
        spec,
        expected_version: None,
    });
    h.tick(S);
    assert_eq!(clusters_of(&h, "web"), ["member2"]);
}

/// Every pattern of dark clusters over three groups: the object is placed by the first group
/// with a Ready cluster, or, when none has one, evicted like any object whose every cluster
/// is gone.
#[test]
fn the_group_in_use_is_the_first_that_can_place() {
    let all = ["member1", "member2", "member3"];
    for dark in 0u8..8 {
        let mut h = fleet();
        h.ok(put(policy(json!({"placement": {"clusterAffinities": [
            {"affinityName": "g1", "clusterNames": ["member1"]},
            {"affinityName": "g2", "clusterNames": ["member2"]},
            {"affinityName": "g3", "clusterNames": ["member3"]},
        ]}}))));
        h.ok(put(deployment("web", 1, "nginx:1")));
        let live: Vec<&str> = (0..3)
            .filter(|i| dark & (1 << i) == 0)
            .map(|i| all[i])
            .collect();
        for _ in 0..12 {
            h.advance(10 * S);
            h.heartbeat(&live, None);
        }
        let expect: Vec<String> = live.first().map(|c| c.to_string()).into_iter().collect();
        assert_eq!(clusters_of(&h, "web"), expect, "dark {dark:03b}");
    }
}

#[test]
fn a_lazy_policy_change_waits_for_the_template_to_change() {
    let mut h = fleet();
    let lazy = |cluster: &str| {
        policy(json!({"activationPreference": "Lazy",
            "placement": {"clusterAffinity": {"clusterNames": [cluster]}}}))
    };
    h.ok(put(lazy("member1")));
    h.ok(put(deployment("web", 1, "nginx:1")));
    assert_eq!(clusters_of(&h, "web"), ["member1"]);
    h.ok(put(lazy("member2")));
    assert_eq!(
        clusters_of(&h, "web"),
        ["member1"],
        "the policy change waits"
    );
    // A new template is placed at once by the policy as it is now.
    h.ok(put(deployment("api", 1, "nginx:1")));
    assert_eq!(clusters_of(&h, "api"), ["member2"]);
    // The template changes: now it follows the policy.
    h.ok(put(deployment("web", 1, "nginx:2")));
    assert_eq!(clusters_of(&h, "web"), ["member2"]);
}

#[test]
fn templates_wait_for_the_override_policies_their_policy_depends_on() {
    let mut h = fleet();
    h.ok(put(policy(json!({"dependentOverrides": ["web-override"],
        "placement": {"clusterAffinity": {"clusterNames": ["member1"]}}}))));
    h.ok(put(deployment("web", 1, "nginx:1")));
    assert!(clusters_of(&h, "web").is_empty(), "waits for its override");
    let cause = h.state.policy_cause(&key("web")).unwrap_or_default();
    assert!(
        cause.contains("waiting for OverridePolicy web-override"),
        "{cause}"
    );

    h.ok(put(
        json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "web-override", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "overrideRules": [{"overriders": {"imageOverrider":
                [{"component": "Tag", "operator": "replace", "value": "2"}]}}]}}),
    ));
    assert_eq!(clusters_of(&h, "web"), ["member1"]);
    let obj = h.obj("app", "deployment.apps:web");
    assert_eq!(obj.spec.overrides.len(), 1, "placed with its override");
    let cause = h.state.policy_cause(&key("web")).unwrap_or_default();
    assert!(!cause.contains("waiting"), "{cause}");
}
