//! Karmada's `ClusterTaintPolicy` (log version 14): a taint added when the add conditions hold
//! stays until the remove conditions hold; fedraft's own `Ready` is a condition too; deleting
//! the policy keeps its taints; two policies may not share a taint; a NoExecute taint moves a
//! workload that does not tolerate it; a cluster labelled into a policy's target is looked at
//! again (version 17); snapshots keep the tables; and a version-13 entry
//! applies as it did (the document a template, conditions refused).

use fedraft_core::audit::{explain_step, Record};
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::door::ResourceKey;
use fedraft_core::karmada::{ClusterCondition, TAINT_POLICIES_ON_LABELS_SINCE};
use fedraft_core::model::ObjectKey;
use fedraft_core::policy::{Taint, TaintEffect};
use fedraft_core::state::{Outcome, RejectCode, State};
use serde_json::{json, Value};

use crate::state_support::{cluster_spec, Harness};

const OBJECT: &str = "deployment.apps:web";

fn put(v: &Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn delete_policy(name: &str) -> Command {
    Command::DeleteResource {
        key: ResourceKey {
            group: "policy.karmada.io".into(),
            kind: "ClusterTaintPolicy".into(),
            namespace: String::new(),
            name: name.into(),
        },
        expected_version: None,
    }
}

/// A policy on `members` adding `key:effect` when `cond` is False and taking it off when True.
fn taint_policy(name: &str, members: &[&str], cond: &str, key: &str, effect: &str) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
        "metadata": {"name": name},
        "spec": {"targetClusters": {"clusterNames": members},
            "addOnConditions": [{"conditionType": cond, "operator": "In", "statusValues": ["False"]}],
            "removeOnConditions": [{"conditionType": cond, "operator": "In", "statusValues": ["True"]}],
            "taints": [{"key": key, "effect": effect}]}})
}

fn conditions(cluster: &str, pairs: &[(&str, &str)]) -> Command {
    Command::ClusterConditions {
        cluster: cluster.into(),
        conditions: pairs
            .iter()
            .map(|(t, s)| ClusterCondition {
                condition_type: t.to_string(),
                status: s.to_string(),
                reason: "Checked".into(),
                message: String::new(),
            })
            .collect(),
    }
}

fn taint_keys(h: &Harness, cluster: &str) -> Vec<String> {
    let c = h.state.cluster(cluster).expect("registered");
    c.effective_taints
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect.as_str()))
        .collect()
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["m1", "m2"]);
    h
}

#[test]
fn a_taint_added_on_a_condition_stays_until_the_remove_condition_holds() {
    let mut h = fleet();
    h.ok(put(&taint_policy(
        "kch",
        &["m1"],
        "KubeComponentsHealthy",
        "kc-bad",
        "NoSchedule",
    )));
    assert!(taint_keys(&h, "m1").is_empty(), "no such condition yet");
    h.ok(conditions("m1", &[("KubeComponentsHealthy", "False")]));
    assert_eq!(taint_keys(&h, "m1"), ["kc-bad:NoSchedule"]);
    let (_, why) = &h.state.policy_taints("m1")[0];
    assert_eq!(why.policy, "kch");
    assert_eq!(why.condition, "KubeComponentsHealthy In [False]");
    // Neither list holds: the taint stays.
    h.ok(conditions("m1", &[("KubeComponentsHealthy", "Unknown")]));
    assert_eq!(taint_keys(&h, "m1"), ["kc-bad:NoSchedule"]);
    // An untargeted cluster is left alone.
    h.ok(conditions("m2", &[("KubeComponentsHealthy", "False")]));
    assert!(taint_keys(&h, "m2").is_empty());
    h.ok(conditions("m1", &[("KubeComponentsHealthy", "True")]));
    assert!(taint_keys(&h, "m1").is_empty());
    assert!(h.state.policy_taints("m1").is_empty());
}

#[test]
fn fedraft_ready_is_a_condition_and_status_writes_may_not_set_it() {
    let mut h = fleet();
    h.ok(put(&taint_policy(
        "down",
        &["m1", "m2"],
        "Ready",
        "down",
        "NoSchedule",
    )));
    let e = h.refused(conditions("m1", &[("Ready", "False")]));
    assert_eq!(e.field.as_deref(), Some("status.conditions[0].type"));
    // m1 misses its heartbeats: Ready turns False and the policy taints it.
    for _ in 0..20 {
        h.advance(5_000);
        h.heartbeat(&["m2"], None);
    }
    assert_eq!(taint_keys(&h, "m1"), ["down:NoSchedule"]);
    assert!(taint_keys(&h, "m2").is_empty());
}

#[test]
fn deleting_the_policy_keeps_its_taints_and_deregistering_drops_them() {
    let mut h = fleet();
    h.ok(put(&taint_policy(
        "p",
        &["m1"],
        "Disk",
        "disk",
        "NoSchedule",
    )));
    h.ok(conditions("m1", &[("Disk", "False")]));
    h.ok(delete_policy("p"));
    assert_eq!(taint_keys(&h, "m1"), ["disk:NoSchedule"]);
    // Nothing evaluates them any more, whatever the conditions do.
    h.ok(conditions("m1", &[("Disk", "True")]));
    assert_eq!(taint_keys(&h, "m1"), ["disk:NoSchedule"]);
    // A policy carrying the same taint takes it off when its removal holds (Karmada matches taints by key and effect).
    h.ok(put(&taint_policy(
        "p2",
        &["m1"],
        "Disk",
        "disk",
        "NoSchedule",
    )));
    assert!(taint_keys(&h, "m1").is_empty());
    h.ok(conditions("m1", &[("Disk", "False")]));
    h.ok(Command::DeregisterCluster {
        name: "m1".into(),
        expected_version: None,
    });
    h.ok(Command::RegisterCluster(cluster_spec("m1", &[])));
    assert!(taint_keys(&h, "m1").is_empty());
    assert!(h.state.cluster_conditions("m1").is_none());
    let e = h.refused(delete_policy("p"));
    assert_eq!(e.code, RejectCode::NotFound);
}

#[test]
fn two_policies_may_not_share_a_taint_but_each_adds_its_own() {
    let mut h = fleet();
    h.ok(put(&taint_policy("a", &["m1"], "A", "a", "NoSchedule")));
    let e = h.refused(put(&taint_policy("b", &["m1"], "B", "a", "NoSchedule")));
    assert_eq!(e.field.as_deref(), Some("spec.taints[0]"));
    // Same key, other effect: another taint.
    h.ok(put(&taint_policy("b", &["m1"], "B", "a", "NoExecute")));
    h.ok(conditions("m1", &[("A", "False"), ("B", "False")]));
    assert_eq!(taint_keys(&h, "m1"), ["a:NoSchedule", "a:NoExecute"]);
    h.ok(conditions("m1", &[("A", "True"), ("B", "False")]));
    assert_eq!(taint_keys(&h, "m1"), ["a:NoExecute"]);
    let who: Vec<String> = h
        .state
        .policy_taints("m1")
        .into_iter()
        .map(|(_, a)| a.policy)
        .collect();
    assert_eq!(who, ["b"]);
}

#[test]
fn refusals_name_the_field() {
    let mut h = fleet();
    let mut bad = taint_policy("x", &["m1"], "A", "a", "PreferNoExecute");
    let e = h.refused(put(&bad));
    assert_eq!(e.field.as_deref(), Some("spec.taints[0].effect"));
    bad["spec"]["taints"][0]["effect"] = json!("NoSchedule");
    bad["metadata"]["namespace"] = json!("default");
    let e = h.refused(put(&bad));
    assert_eq!(e.field.as_deref(), Some("metadata.namespace"));
    let e = h.refused(conditions("nowhere", &[("A", "True")]));
    assert_eq!(e.code, RejectCode::NotFound);
    let e = h.refused(conditions("m1", &[("A", "Maybe")]));
    assert_eq!(e.field.as_deref(), Some("status.conditions[0].status"));
    let e = h.refused(conditions("m1", &[("A", "True"), ("A", "False")]));
    assert_eq!(e.field.as_deref(), Some("status.conditions[1].type"));
}

fn web() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}})
}

fn propagation(tolerations: Value) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {"clusterAffinity": {"clusterNames": ["m1", "m2"]},
                "clusterTolerations": tolerations}}})
}

/// Applies `cmd` at the next index, as the audit archive records it.
fn record(h: &mut Harness, cmd: Command) -> Record {
    h.index += 1;
    let entry = LogEntry::new("", "test", h.now_ms, cmd);
    let applied = h.state.apply(h.index, &entry);
    assert!(applied.outcome.is_accepted(), "{:?}", applied.outcome);
    Record {
        index: h.index,
        term: 1,
        entry,
        applied,
    }
}

fn placed(h: &Harness) -> Vec<String> {
    h.placement("app", OBJECT).into_keys().collect()
}

#[test]
fn a_no_execute_taint_moves_a_workload_that_does_not_tolerate_it() {
    for (tolerations, stays) in [
        (json!([]), false),
        (
            json!([{"key": "net", "operator": "Exists", "effect": "NoExecute"}]),
            true,
        ),
    ] {
        let mut h = fleet();
        h.ok(put(&propagation(tolerations)));
        h.ok(put(&web()));
        assert_eq!(placed(&h), ["m1", "m2"]);
        h.ok(put(&taint_policy(
            "net",
            &["m1"],
            "Network",
            "net",
            "NoExecute",
        )));
        let before = h.placement("app", OBJECT);
        let record = record(&mut h, conditions("m1", &[("Network", "False")]));
        let expected: &[&str] = if stays { &["m1", "m2"] } else { &["m2"] };
        assert_eq!(placed(&h), expected, "tolerated: {stays}");
        // The audit's explanation names the policy and the condition that tainted m1.
        let key = ObjectKey::new("app", OBJECT);
        match explain_step(Some(&before), &h.state, &record, &key) {
            Some(change) => assert!(
                change.explanation.contains(
                    "m1 tainted net:NoExecute by ClusterTaintPolicy net (Network In [False])"
                ),
                "{}",
                change.explanation
            ),
            None => assert!(stays, "the move is explained"),
        }
        // The taint lifted, the workload may come back.
        h.ok(conditions("m1", &[("Network", "True")]));
        assert_eq!(placed(&h), ["m1", "m2"]);
    }
}

#[test]
fn snapshots_keep_conditions_and_added_taints() {
    let mut h = fleet();
    h.ok(put(&taint_policy(
        "p",
        &["m1"],
        "Disk",
        "disk",
        "NoExecute",
    )));
    h.ok(conditions("m1", &[("Disk", "False"), ("Other", "True")]));
    let restored = State::from_snapshot(&h.state.to_snapshot()).expect("decodes");
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(restored.policy_taints("m1"), h.state.policy_taints("m1"));
    assert_eq!(
        restored.cluster("m1").map(|c| c.effective_taints.clone()),
        Some(vec![Taint {
            key: "disk".into(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
        }])
    );
}

/// A policy adding `kc-bad` on clusters labelled `tier: edge` while KubeComponentsHealthy is
/// False; m1's condition is False before it has the label. Returns m1's taints after the label
/// arrives by an update of envelope `version`.
fn labelled_into_a_policy(version: u16) -> Vec<String> {
    let mut h = fleet();
    let mut doc = taint_policy("kch", &[], "KubeComponentsHealthy", "kc-bad", "NoSchedule");
    doc["spec"]["targetClusters"] = json!({"labelSelector": {"matchLabels": {"tier": "edge"}}});
    h.ok(put(&doc));
    h.ok(conditions("m1", &[("KubeComponentsHealthy", "False")]));
    assert!(taint_keys(&h, "m1").is_empty(), "not targeted yet");
    let update = Command::UpdateCluster {
        spec: cluster_spec("m1", &[("tier", "edge")]),
        expected_version: None,
    };
    assert!(apply_at(&mut h, version, update).is_accepted());
    taint_keys(&h, "m1")
}

#[test]
fn a_cluster_labelled_into_a_policys_target_is_tainted_at_once() {
    assert_eq!(
        labelled_into_a_policy(TAINT_POLICIES_ON_LABELS_SINCE),
        ["kc-bad:NoSchedule"]
    );
    // Before that version it waited for its next condition change.
    assert!(labelled_into_a_policy(TAINT_POLICIES_ON_LABELS_SINCE - 1).is_empty());
}

fn apply_at(h: &mut Harness, version: u16, cmd: Command) -> Outcome {
    h.index += 1;
    let mut entry = LogEntry::new("", "test", h.now_ms, cmd);
    entry.version = version;
    h.state.apply(h.index, &entry).outcome
}

#[test]
fn a_version_13_entry_applies_as_it_did() {
    let mut h = fleet();
    let doc = taint_policy("kch", &["m1"], "Ready", "down", "NoExecute");
    // Then a ClusterTaintPolicy was an ordinary cluster-scoped resource template, which the
    // default admission policy refuses; no policy is kept.
    match apply_at(&mut h, 13, put(&doc)) {
        Outcome::Rejected(r) => assert_eq!(r.field.as_deref(), Some("spec.template.kind")),
        other => panic!("accepted: {other:?}"),
    }
    assert!(h.state.door().policies.is_empty());
    assert!(h.state.door().templates.is_empty());
    // Its delete was refused as no policy kind, and conditions could not be written.
    assert!(!apply_at(&mut h, 13, delete_policy("kch")).is_accepted());
    assert!(!apply_at(&mut h, 13, conditions("m1", &[("A", "False")])).is_accepted());
    // Ready turning False taints nothing.
    for _ in 0..20 {
        h.advance(5_000);
        assert!(apply_at(&mut h, 13, Command::Tick).is_accepted());
    }
    assert!(taint_keys(&h, "m1").is_empty());
    assert!(h.state.policy_taints("m1").is_empty());
}
