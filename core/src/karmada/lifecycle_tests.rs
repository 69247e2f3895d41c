//! `failover`, `suspension`, `preserveResourcesOnDeletion` and `schedulePriority` as users write
//! them: read from version 12, refused to older entries as before, refusals naming the field.

use serde_json::{json, Value};

use super::*;
use crate::command::LOG_ENTRY_VERSION;

fn policy(extra: Value) -> Value {
    let mut p = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}}});
    if let (Some(spec), Some(more)) = (p["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in more {
            spec.insert(k.clone(), v.clone());
        }
    }
    p
}

fn read(extra: Value) -> PropagationSpec {
    match parse_spec(PolicyKind::Propagation, &policy(extra), LOG_ENTRY_VERSION) {
        Ok(PolicySpec::Propagation(p)) => p,
        other => panic!("expected a propagation spec, got {other:?}"),
    }
}

fn refused_at(extra: Value, version: u16) -> FieldError {
    match parse_spec(PolicyKind::Propagation, &policy(extra), version) {
        Err(e) => e,
        Ok(s) => panic!("expected a refusal, got {s:?}"),
    }
}

#[test]
fn application_failover_reads_karmadas_defaults_and_purge_modes() {
    let p = read(json!({"failover": {"application": {"decisionConditions": {}}}}));
    assert_eq!(
        p.lifecycle.failover.application,
        Some(AppFailover {
            toleration_seconds: 300,
            purge: PurgeMode::Graciously,
            grace_period_seconds: 600,
        })
    );
    let p = read(json!({"failover": {"application": {
        "decisionConditions": {"tolerationSeconds": 120}, "purgeMode": "Graciously",
        "gracePeriodSeconds": 30}}}));
    let app = p
        .lifecycle
        .failover
        .application
        .expect("application failover");
    assert_eq!(
        (app.toleration_seconds, app.purge, app.grace_period_seconds),
        (120, PurgeMode::Graciously, 30)
    );
    for (mode, want) in [
        ("Immediately", PurgeMode::Immediately),
        ("Never", PurgeMode::Never),
    ] {
        let p = read(json!({"failover": {"application": {"purgeMode": mode}}}));
        assert_eq!(
            p.lifecycle.failover.application.map(|a| a.purge),
            Some(want)
        );
    }
    assert_eq!(p.lifecycle.failover.cluster, None);
}

#[test]
fn cluster_failover_purge_modes_map_onto_fedraft() {
    let p = read(json!({"failover": {"cluster": {"purgeMode": "Directly"}}}));
    assert_eq!(p.lifecycle.failover.cluster, Some(PurgeMode::Immediately));
    let p = read(json!({"failover": {"cluster": {}}}));
    assert_eq!(
        p.lifecycle.failover.cluster,
        Some(PurgeMode::Graciously),
        "Karmada's default"
    );
    let e = refused_at(
        json!({"failover": {"cluster": {"purgeMode": "Never"}}}),
        LOG_ENTRY_VERSION,
    );
    assert_eq!(e.field, "spec.failover.cluster.purgeMode");
}

#[test]
fn bad_failover_fields_are_refused_by_name() {
    for (extra, field) in [
        (
            json!({"failover": {"application": {"statePreservation": {}}}}),
            "spec.failover.application.statePreservation",
        ),
        (
            json!({"failover": {"cluster": {"statePreservation": {"rules": [{"aliasLabelName": "a"}]}}}}),
            "spec.failover.cluster.statePreservation.rules[0]",
        ),
        (
            json!({"failover": {"application": {"purgeMode": "Sometimes"}}}),
            "spec.failover.application.purgeMode",
        ),
        (
            json!({"failover": {"application": {"purgeMode": "Never", "gracePeriodSeconds": 5}}}),
            "spec.failover.application.gracePeriodSeconds",
        ),
        (
            json!({"failover": {"application": {"gracePeriodSeconds": 0}}}),
            "spec.failover.application.gracePeriodSeconds",
        ),
        (
            json!({"failover": {"application": {"decisionConditions": {"tolerationSeconds": -1}}}}),
            "spec.failover.application.decisionConditions.tolerationSeconds",
        ),
        (json!({"failover": {"app": {}}}), "spec.failover.app"),
    ] {
        let e = refused_at(extra.clone(), LOG_ENTRY_VERSION);
        assert_eq!(e.field, field, "{extra}: {}", e.message);
    }
    let e = refused_at(
        json!({"failover": {"application": {"statePreservation": {"rules": []}}}}),
        STATE_PRESERVATION_SINCE - 1,
    );
    assert!(e.message.contains("status"), "{}", e.message);
}

#[test]
fn suspension_reads_all_or_named_clusters() {
    let p = read(json!({"suspension": {"dispatching": true}}));
    assert!(p.lifecycle.suspension.all && p.lifecycle.suspension.holds("anything"));
    let p = read(json!({"suspension": {"dispatchingOnClusters": {"clusterNames": ["member2"]}}}));
    assert!(p.lifecycle.suspension.holds("member2") && !p.lifecycle.suspension.holds("member1"));
    let p = read(json!({"suspension": {"dispatching": false}}));
    assert!(p.lifecycle.suspension.is_none());
    let p = read(json!({}));
    assert!(
        p.lifecycle.suspension.is_none()
            && !p.lifecycle.preserve_on_deletion
            && p.lifecycle.priority_class.is_none()
    );
    for (extra, field) in [
        (
            json!({"suspension": {"dispatching": true,
                "dispatchingOnClusters": {"clusterNames": ["member2"]}}}),
            "spec.suspension.dispatchingOnClusters",
        ),
        (
            json!({"suspension": {"dispatchingOnClusters": {"clusterNames": ["Bad_Name"]}}}),
            "spec.suspension.dispatchingOnClusters.clusterNames[0]",
        ),
    ] {
        assert_eq!(refused_at(extra, LOG_ENTRY_VERSION).field, field);
    }
}

#[test]
fn preserve_and_schedule_priority_are_read() {
    assert!(
        read(json!({"preserveResourcesOnDeletion": true}))
            .lifecycle
            .preserve_on_deletion
    );
    assert!(
        !read(json!({"preserveResourcesOnDeletion": false}))
            .lifecycle
            .preserve_on_deletion
    );
    let p = read(
        json!({"schedulePriority": {"priorityClassSource": "KubePriorityClass",
        "priorityClassName": "high-priority"}}),
    );
    assert_eq!(p.lifecycle.priority_class.as_deref(), Some("high-priority"));
    for (extra, field) in [
        (
            json!({"schedulePriority": {"priorityClassSource": "PodPriorityClass",
                "priorityClassName": "x"}}),
            "spec.schedulePriority.priorityClassSource",
        ),
        (
            json!({"schedulePriority": {"priorityClassSource": "KubePriorityClass"}}),
            "spec.schedulePriority.priorityClassName",
        ),
    ] {
        assert_eq!(refused_at(extra, LOG_ENTRY_VERSION).field, field);
    }
}

#[test]
fn entries_before_version_12_are_refused_as_they_were() {
    for (extra, field) in [
        (
            json!({"failover": {"application": {"purgeMode": "Never"}}}),
            "spec.failover",
        ),
        (
            json!({"suspension": {"dispatching": true}}),
            "spec.suspension",
        ),
        (
            json!({"schedulePriority": {"priorityClassSource": "KubePriorityClass",
                "priorityClassName": "system-node-critical"}}),
            "spec.schedulePriority",
        ),
        (
            json!({"preserveResourcesOnDeletion": true}),
            "spec.preserveResourcesOnDeletion",
        ),
        // Even a malformed one: the old refusal, not a parse error.
        (json!({"failover": {"nonsense": 1}}), "spec.failover"),
    ] {
        let e = refused_at(extra.clone(), PEER_WIDENED_SINCE - 1);
        assert_eq!(e.field, field, "{extra}");
        assert_eq!(
            e.message, "not supported by fedraft: not implemented yet",
            "{extra}"
        );
    }
    // `preserveResourcesOnDeletion: false` was accepted then, and still is.
    assert!(parse_spec(
        PolicyKind::Propagation,
        &policy(json!({"preserveResourcesOnDeletion": false})),
        PEER_WIDENED_SINCE - 1
    )
    .is_ok());
    // activationPreference: Lazy is read by the placement from version 12 on.
    assert!(parse_spec(
        PolicyKind::Propagation,
        &policy(json!({"activationPreference": "Lazy"})),
        LOG_ENTRY_VERSION
    )
    .is_ok());
}
