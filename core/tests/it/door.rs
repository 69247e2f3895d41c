//! Resource templates and Karmada-style policies written through the Kubernetes-compatible
//! door: binding, derived placement and overrides, refusals, and restore from a snapshot.

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::door::{PolicyKindTag, ResourceKey};
use fedraft_core::model::TenantSpec;
use fedraft_core::policy::ReplicaMode;
use fedraft_core::state::{Outcome, RejectCode, Rejection, State};
use serde_json::{json, Value};

use crate::state_support::Harness;

fn put(v: Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn as_actor(h: &mut Harness, actor: &str, command: Command) -> Outcome {
    h.index += 1;
    let e = LogEntry::new("", actor, h.now_ms, command);
    h.state.apply(h.index, &e).outcome
}

fn refused(h: &mut Harness, command: Command) -> Rejection {
    match h.apply(command).outcome {
        Outcome::Rejected(r) => r,
        other => panic!("accepted: {other:?}"),
    }
}

fn config_map(ns: &str, name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"},
            "resourceVersion": "17", "uid": "u", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "data": {"k": value}})
}

fn deployment(ns: &str, name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}]}}},
        "status": {"readyReplicas": 99}})
}

fn propagation(ns: Option<&str>, name: &str, selectors: Value, placement: Value) -> Value {
    let mut meta = json!({"name": name});
    let kind = match ns {
        Some(ns) => {
            meta["namespace"] = json!(ns);
            "PropagationPolicy"
        }
        None => "ClusterPropagationPolicy",
    };
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": kind, "metadata": meta,
        "spec": {"resourceSelectors": selectors, "placement": placement}})
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["member1", "member2", "member3"]);
    h
}

fn cm_key(name: &str) -> ResourceKey {
    ResourceKey {
        group: String::new(),
        kind: "ConfigMap".into(),
        namespace: "app".into(),
        name: name.into(),
    }
}

#[test]
fn a_template_no_policy_selects_is_stored_but_placed_nowhere() {
    let mut h = fleet();
    h.ok(put(config_map("app", "settings", "1")));
    let obj = h.obj("app", "configmap:settings");
    assert!(obj.status.clusters.is_empty());
    let stored: Value = serde_json::from_str(&obj.spec.template).unwrap_or(Value::Null);
    assert_eq!(stored["data"]["k"], "1");
    assert!(
        stored["metadata"].get("resourceVersion").is_none(),
        "server fields are dropped"
    );
    assert!(stored["metadata"].get("uid").is_none());
    let rec = &h.state.door().templates[&cm_key("settings")];
    assert_eq!(rec.generation, 1);
    assert_eq!(rec.bound_to, None);
    assert_eq!(rec.api_version, "v1");
}

#[test]
fn a_policy_places_what_it_selects_and_new_templates_bind_at_once() {
    let mut h = fleet();
    h.ok(put(config_map("app", "settings", "1")));
    h.ok(put(propagation(
        Some("app"),
        "all-config",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({}),
    )));
    // Karmada's default replica scheduling is Duplicated: every cluster gets the ConfigMap.
    assert_eq!(h.placement("app", "configmap:settings").len(), 3);
    let rec = &h.state.door().templates[&cm_key("settings")];
    assert_eq!(
        rec.bound_to.as_ref().map(|p| p.name.as_str()),
        Some("all-config")
    );
    assert_eq!(
        rec.bound_to.as_ref().map(|p| p.kind),
        Some(PolicyKindTag::Propagation)
    );

    // A template written after the policy binds when it is written.
    h.ok(put(config_map("app", "more", "1")));
    assert_eq!(h.placement("app", "configmap:more").len(), 3);
    // Another namespace is not the policy's.
    h.ok(put(config_map("other", "settings", "1")));
    assert!(h.placement("other", "configmap:settings").is_empty());
}

#[test]
fn divided_weights_and_overrides_reach_the_object() {
    let mut h = fleet();
    h.ok(put(deployment("app", "web", 6)));
    h.ok(put(propagation(
        Some("app"),
        "web",
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}]),
        json!({"clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "replicaScheduling": {"replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": ["member1"]}, "weight": 2},
                    {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}}),
    )));
    let placed = h.placement("app", "deployment.apps:web");
    assert_eq!(placed.get("member1"), Some(&4));
    assert_eq!(placed.get("member2"), Some(&2));
    assert_eq!(
        h.obj("app", "deployment.apps:web")
            .spec
            .placement
            .replicas
            .mode,
        ReplicaMode::Divided
    );

    h.ok(put(json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "OverridePolicy",
        "metadata": {"name": "mirror", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "overrideRules": [{"targetCluster": {"clusterNames": ["member2"]},
                "overriders": {"imageOverrider": [
                    {"component": "Registry", "operator": "replace", "value": "mirror.example.com"}]}}]}})));
    let obj = h.obj("app", "deployment.apps:web");
    assert_eq!(obj.spec.overrides.len(), 1);
    assert_eq!(
        obj.spec.overrides[0].cluster_name.as_deref(),
        Some("member2")
    );
    // The placement did not move for an override.
    assert_eq!(
        h.placement("app", "deployment.apps:web").get("member1"),
        Some(&4)
    );
}

#[test]
fn the_best_policy_wins_and_a_bound_template_stays_unless_preempted() {
    let mut h = fleet();
    h.ok(put(config_map("app", "settings", "1")));
    h.ok(put(propagation(
        Some("app"),
        "by-kind",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({"clusterAffinity": {"clusterNames": ["member1"]}}),
    )));
    let bound = |h: &Harness| {
        h.state.door().templates[&cm_key("settings")]
            .bound_to
            .as_ref()
            .map(|p| p.name.clone())
    };
    assert_eq!(bound(&h).as_deref(), Some("by-kind"));
    // A better match without preemption does not take the template over (Karmada's default).
    h.ok(put(propagation(
        Some("app"),
        "by-name",
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"}]),
        json!({"clusterAffinity": {"clusterNames": ["member2"]}}),
    )));
    assert_eq!(bound(&h).as_deref(), Some("by-kind"));
    // With preemption it does, and the placement follows.
    let mut preempting = propagation(
        Some("app"),
        "by-name",
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"}]),
        json!({"clusterAffinity": {"clusterNames": ["member2"]}}),
    );
    preempting["spec"]["preemption"] = json!("Always");
    h.ok(put(preempting));
    assert_eq!(bound(&h).as_deref(), Some("by-name"));
    assert_eq!(
        h.placement("app", "configmap:settings")
            .keys()
            .collect::<Vec<_>>(),
        ["member2"]
    );
    // A template written now goes to the best policy straight away.
    h.ok(put(config_map("app", "fresh", "1")));
    assert_eq!(
        h.state.door().templates[&cm_key("fresh")]
            .bound_to
            .as_ref()
            .map(|p| p.name.as_str()),
        Some("by-kind"),
        "by-name selects only `settings`"
    );
}

#[test]
fn deleting_the_bound_policy_keeps_the_last_placement() {
    let mut h = fleet();
    h.ok(put(config_map("app", "settings", "1")));
    h.ok(put(propagation(
        None,
        "everywhere",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({}),
    )));
    assert_eq!(h.placement("app", "configmap:settings").len(), 3);
    h.ok(Command::DeleteResource {
        key: ResourceKey {
            group: "policy.karmada.io".into(),
            kind: "ClusterPropagationPolicy".into(),
            namespace: String::new(),
            name: "everywhere".into(),
        },
        expected_version: None,
    });
    assert!(h.state.door().policies.is_empty());
    assert_eq!(h.state.door().templates[&cm_key("settings")].bound_to, None);
    assert_eq!(h.placement("app", "configmap:settings").len(), 3);
}

#[test]
fn generation_counts_spec_changes_and_a_delete_removes_the_object() {
    let mut h = fleet();
    h.ok(put(config_map("app", "settings", "1")));
    let mut relabelled = config_map("app", "settings", "1");
    relabelled["metadata"]["labels"]["tier"] = json!("x");
    h.ok(put(relabelled));
    assert_eq!(h.state.door().templates[&cm_key("settings")].generation, 1);
    h.ok(put(config_map("app", "settings", "2")));
    assert_eq!(h.state.door().templates[&cm_key("settings")].generation, 2);

    h.ok(Command::DeleteResource {
        key: cm_key("settings"),
        expected_version: None,
    });
    assert!(h.state.object("app", "configmap:settings").is_none());
    assert!(h.state.door().templates.is_empty());
    let r = refused(
        &mut h,
        Command::DeleteResource {
            key: cm_key("settings"),
            expected_version: None,
        },
    );
    assert_eq!(r.code, RejectCode::NotFound);
}

#[test]
fn bad_documents_are_refused_naming_the_field_and_change_nothing() {
    let mut h = fleet();
    h.ok(put(config_map("app", "settings", "1")));
    let before = h.state.state_hash();
    let mut bad = propagation(
        Some("app"),
        "p",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        // Groups and a single affinity at once: Karmada refuses it too.
        json!({"clusterAffinities": [{"affinityName": "a", "clusterNames": ["member1"]}],
            "clusterAffinity": {"clusterNames": ["member2"]}}),
    );
    let r = refused(&mut h, put(bad.clone()));
    assert_eq!(r.field.as_deref(), Some("spec.placement.clusterAffinities"));
    bad["spec"]["placement"] = json!({});
    bad["metadata"]["namespace"] = json!(null);
    let r = refused(&mut h, put(bad));
    assert_eq!(r.field.as_deref(), Some("metadata.namespace"));
    // Before cluster-scoped templates (log version 9), a template without a namespace was
    // refused, and replays so.
    let cluster_scoped = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "x"}});
    h.index += 1;
    let mut old = LogEntry::new("", "admin", h.now_ms, put(cluster_scoped));
    old.version = 8;
    let Outcome::Rejected(r) = h.state.apply(h.index, &old).outcome else {
        panic!("a version-8 cluster-scoped template was accepted");
    };
    assert_eq!(r.field.as_deref(), Some("metadata.namespace"));
    let r = refused(
        &mut h,
        Command::PutResource {
            manifest: "[1]".into(),
            expected_version: None,
        },
    );
    assert_eq!(r.field.as_deref(), Some("manifest"));
    let r = refused(
        &mut h,
        put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "Bad_Name", "namespace": "app"}})),
    );
    assert_eq!(r.field.as_deref(), Some("metadata.name"));
    assert_eq!(h.state.state_hash(), before);
}

#[test]
fn tenants_write_policies_only_in_their_namespaces() {
    let mut h = fleet();
    h.ok(Command::PutTenant(TenantSpec {
        name: "acme".into(),
        namespaces: vec!["app".into()],
        quota: Default::default(),
        slice_size: None,
        members: vec!["alice".into()],
    }));
    let alice = "tenant:acme/alice";
    let own = propagation(
        Some("app"),
        "mine",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({}),
    );
    assert!(as_actor(&mut h, alice, put(own)).is_accepted());
    let theirs = propagation(
        Some("other"),
        "theirs",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({}),
    );
    let Outcome::Rejected(r) = as_actor(&mut h, alice, put(theirs)) else {
        panic!("a tenant wrote a policy in a namespace it does not own");
    };
    assert_eq!(r.code, RejectCode::Forbidden);
    let global = propagation(
        None,
        "global",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({}),
    );
    let Outcome::Rejected(r) = as_actor(&mut h, alice, put(global)) else {
        panic!("a tenant wrote a cluster-wide policy");
    };
    assert_eq!(r.code, RejectCode::Forbidden);
}

#[test]
fn a_restored_state_keeps_templates_policies_and_bindings() {
    let mut h = fleet();
    h.ok(put(config_map("app", "settings", "1")));
    h.ok(put(propagation(
        Some("app"),
        "p",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({"clusterAffinity": {"clusterNames": ["member1"]}}),
    )));
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(restored.door(), h.state.door());
    // The parsed policies came back too: a new template binds on the restored state.
    h.state = restored;
    h.ok(put(config_map("app", "after", "1")));
    assert_eq!(
        h.placement("app", "configmap:after")
            .keys()
            .collect::<Vec<_>>(),
        ["member1"]
    );

    let entry = LogEntry::new("", "test", 1, put(config_map("app", "x", "1")));
    assert_eq!(LogEntry::decode(&entry.encode()).ok(), Some(entry));
}

#[test]
fn exclusion_and_cluster_spread_place_from_log_entry_version_4_and_not_before() {
    let mut h = fleet();
    let excluding = propagation(
        Some("app"),
        "all-but-two",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({"clusterAffinity": {"exclude": ["member2"]}}),
    );
    // Written by a binary of version 3, the same document was refused, and replays refused.
    h.index += 1;
    let mut old = LogEntry::new("", "admin", h.now_ms, put(excluding.clone()));
    old.version = 3;
    let outcome = h.state.apply(h.index, &old).outcome;
    let Outcome::Rejected(r) = outcome else {
        panic!("a version-3 entry was accepted: {outcome:?}");
    };
    assert_eq!(
        r.field.as_deref(),
        Some("spec.placement.clusterAffinity.exclude")
    );

    h.ok(put(excluding));
    h.ok(put(config_map("app", "settings", "1")));
    assert_eq!(
        h.placement("app", "configmap:settings")
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        ["member1", "member3"]
    );

    // Two clusters at most, by spreading over the clusters themselves.
    h.ok(put(propagation(
        Some("app"),
        "two-clusters",
        json!([{"apiVersion": "apps/v1", "kind": "Deployment"}]),
        json!({"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2, "minGroups": 2}],
            "replicaScheduling": {"replicaSchedulingType": "Divided"}}),
    )));
    h.ok(put(deployment("app", "web", 4)));
    let placed = h.placement("app", "deployment.apps:web");
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert_eq!(placed.values().sum::<u32>(), 4);
}

#[test]
fn a_dividing_policy_duplicates_templates_without_replicas_from_version_13() {
    let divided = propagation(
        Some("app"),
        "web",
        json!([{"apiVersion": "apps/v1", "kind": "Deployment"},
            {"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({"clusterAffinity": {"clusterNames": ["member1", "member2"]},
            "replicaScheduling": {"replicaSchedulingType": "Divided",
                "replicaDivisionPreference": "Weighted",
                "weightPreference": {"staticWeightList": [
                    {"targetCluster": {"clusterNames": ["member1"]}, "weight": 1},
                    {"targetCluster": {"clusterNames": ["member2"]}, "weight": 1}]}}}),
    );
    let since = fedraft_core::door::UNDIVIDED_WITHOUT_REPLICAS_SINCE;
    let at = |h: &mut Harness, version: u16, v: Value| {
        h.index += 1;
        let mut e = LogEntry::new("", "admin", h.now_ms, put(v));
        e.version = version;
        assert!(h.state.apply(h.index, &e).outcome.is_accepted());
    };
    // As entries of the version before, a ConfigMap took one replica's place on one cluster,
    // and replays so.
    let mut old = fleet();
    at(&mut old, since - 1, divided.clone());
    at(&mut old, since - 1, config_map("app", "settings", "1"));
    assert_eq!(old.placement("app", "configmap:settings").len(), 1);

    // Now, as Karmada schedules it: every selected cluster holds the ConfigMap, while the
    // Deployment's replicas are still divided.
    let mut h = fleet();
    h.ok(put(divided));
    h.ok(put(config_map("app", "settings", "1")));
    h.ok(put(deployment("app", "web", 4)));
    let settings = h.placement("app", "configmap:settings");
    assert_eq!(
        settings.keys().cloned().collect::<Vec<_>>(),
        ["member1", "member2"]
    );
    assert_eq!(
        h.obj("app", "configmap:settings")
            .spec
            .placement
            .replicas
            .mode,
        ReplicaMode::Duplicated
    );
    let web = h.placement("app", "deployment.apps:web");
    assert_eq!(web.values().sum::<u32>(), 4, "{web:?}");
    assert_eq!(web.get("member1"), Some(&2));
    // A policy change re-derives the same way.
    h.ok(put(propagation(
        Some("app"),
        "web",
        json!([{"apiVersion": "v1", "kind": "ConfigMap"}]),
        json!({"replicaScheduling": {"replicaSchedulingType": "Divided"}}),
    )));
    assert_eq!(h.placement("app", "configmap:settings").len(), 3);
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.state_hash(), h.state.state_hash());
}
