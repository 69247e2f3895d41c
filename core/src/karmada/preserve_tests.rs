//! `failover.{application,cluster}.statePreservation` as users write it: read from
//! `STATE_PRESERVATION_SINCE` (Karmada's published samples among them), refused to older entries
//! exactly as before, bad rules refused naming the field.

use serde_json::{json, Value};

use super::jsonpath::JsonPath;
use super::*;
use crate::command::LOG_ENTRY_VERSION;

fn policy(failover: Value) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "flink", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "flink.apache.org/v1beta1",
                "kind": "FlinkDeployment", "name": "foo"}],
            "failover": failover,
            "placement": {"clusterAffinity": {"clusterNames": ["member1", "member2"]}}}})
}

fn parse(failover: Value, version: u16) -> Result<PropagationSpec, FieldError> {
    match parse_spec(PolicyKind::Propagation, &policy(failover), version)? {
        PolicySpec::Propagation(p) => Ok(p),
        other => panic!("expected a propagation spec, got {other:?}"),
    }
}

fn rules(alias: &str, path: &str) -> Value {
    json!({"rules": [{"aliasLabelName": alias, "jsonPath": path}]})
}

fn rule(alias: &str, path: &str) -> PreserveRule {
    PreserveRule {
        alias: alias.to_string(),
        path: JsonPath::parse(path).unwrap(),
    }
}

#[test]
fn both_kinds_of_rules_are_read() {
    let app = json!({"application": {"decisionConditions": {"tolerationSeconds": 60},
        "purgeMode": "Immediately",
        "statePreservation": rules("application.karmada.io/failover-jobid", "{ .jobStatus.jobID }")}});
    let p = parse(app, LOG_ENTRY_VERSION).expect("accepted");
    let f = &p.lifecycle.failover;
    assert_eq!(
        f.application_preserve,
        vec![rule(
            "application.karmada.io/failover-jobid",
            "{.jobStatus.jobID}"
        )]
    );
    assert!(f.cluster_preserve.is_empty());
    assert_eq!(f.application.map(|a| a.purge), Some(PurgeMode::Immediately));

    let cluster = json!({"cluster": {"purgeMode": "Directly",
        "statePreservation": {"rules": [
            {"aliasLabelName": "cluster-failover-jobid", "jsonPath": "{.jobStatus.jobID}"},
            {"aliasLabelName": "state", "jsonPath": "{.jobStatus['state']}"}]}}});
    let p = parse(cluster, LOG_ENTRY_VERSION).expect("accepted");
    let f = &p.lifecycle.failover;
    assert_eq!(f.cluster, Some(PurgeMode::Immediately));
    assert_eq!(f.cluster_preserve.len(), 2);
    // The paths executors report, once each.
    let paths: Vec<String> = f.preserved_paths().iter().map(|p| p.to_string()).collect();
    assert_eq!(paths, ["{.jobStatus.jobID}", "{.jobStatus.state}"]);

    // No rules is no preservation; null is as if absent.
    let p = parse(
        json!({"cluster": {"statePreservation": {"rules": []}}}),
        LOG_ENTRY_VERSION,
    );
    assert!(p
        .expect("accepted")
        .lifecycle
        .failover
        .preserved_paths()
        .is_empty());
    let p = parse(
        json!({"application": {"statePreservation": null}}),
        LOG_ENTRY_VERSION,
    );
    assert!(p
        .expect("accepted")
        .lifecycle
        .failover
        .application_preserve
        .is_empty());
}

#[test]
fn bad_rules_are_refused_naming_the_field() {
    let f = "spec.failover.application.statePreservation";
    let app =
        |sp: Value| json!({"application": {"purgeMode": "Immediately", "statePreservation": sp}});
    let many: Vec<Value> = (0..=MAX_PRESERVE_RULES)
        .map(|i| json!({"aliasLabelName": format!("l{i}"), "jsonPath": "{.a}"}))
        .collect();
    for (sp, field, says) in [
        (
            rules("bad key!", "{.a}"),
            format!("{f}.rules[0].aliasLabelName"),
            "label key",
        ),
        (
            rules("", "{.a}"),
            format!("{f}.rules[0].aliasLabelName"),
            "label key",
        ),
        (
            rules("fedraft.io/x", "{.a}"),
            format!("{f}.rules[0].aliasLabelName"),
            "fedraft's own",
        ),
        (
            rules("a", "{.items[*].id}"),
            format!("{f}.rules[0].jsonPath"),
            "wildcard",
        ),
        (
            rules("a", ".jobStatus.jobID"),
            format!("{f}.rules[0].jsonPath"),
            "{...}",
        ),
        (
            rules("a", "{..jobID}"),
            format!("{f}.rules[0].jsonPath"),
            "recursive",
        ),
        (json!({"rules": many}), format!("{f}.rules"), "at most"),
        (json!({}), f.to_string(), "rules"),
        (
            json!({"rules": [{"jsonPath": "{.a}"}]}),
            format!("{f}.rules[0]"),
            "aliasLabelName",
        ),
        (
            json!({"rules": [], "other": 1}),
            format!("{f}.other"),
            "unknown",
        ),
    ] {
        let e = parse(app(sp.clone()), LOG_ENTRY_VERSION).expect_err(&sp.to_string());
        assert_eq!(e.field, field, "{sp}: {}", e.message);
        assert!(e.message.contains(says), "{sp}: {}", e.message);
    }
    let e = parse(
        json!({"cluster": {"statePreservation": rules("a", "{.x[?(@.y)]}")}}),
        LOG_ENTRY_VERSION,
    )
    .expect_err("a filter");
    assert_eq!(
        e.field,
        "spec.failover.cluster.statePreservation.rules[0].jsonPath"
    );
}

#[test]
fn version_13_entries_refuse_it_as_before() {
    let before = STATE_PRESERVATION_SINCE - 1;
    for (failover, field) in [
        (
            json!({"application": {"statePreservation": rules("a", "{.a}")}}),
            "spec.failover.application.statePreservation",
        ),
        (
            json!({"cluster": {"purgeMode": "Directly", "statePreservation": rules("a", "{.a}")}}),
            "spec.failover.cluster.statePreservation",
        ),
        // Even the rules a version-14 entry would refuse are refused as before.
        (
            json!({"application": {"statePreservation": {"rules": "x"}}}),
            "spec.failover.application.statePreservation",
        ),
    ] {
        let e = parse(failover.clone(), before).expect_err(&failover.to_string());
        assert_eq!(e.field, field);
        assert!(
            e.message.contains("not supported by fedraft"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("arbitrary status fields"),
            "{}",
            e.message
        );
    }
    // Without the field, a version-13 policy reads as it did.
    let p = parse(json!({"cluster": {"purgeMode": "Directly"}}), before).expect("accepted");
    assert_eq!(p.lifecycle.failover.cluster, Some(PurgeMode::Immediately));
}

/// The statePreservation parts of Karmada's two published samples (application and cluster
/// failover of a FlinkDeployment), as their documentation writes them.
const APP_SAMPLE: &str = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: foo}
spec:
  resourceSelectors:
    - {apiVersion: flink.apache.org/v1beta1, kind: FlinkDeployment, name: foo}
  failover:
    application:
      decisionConditions: {tolerationSeconds: 60}
      purgeMode: Immediately
      statePreservation:
        rules:
          - aliasLabelName: application.karmada.io/failover-jobid
            jsonPath: "{ .jobStatus.jobID }"
  placement:
    clusterAffinity: {clusterNames: [member1, member2, member3]}
    spreadConstraints: [{maxGroups: 1, minGroups: 1, spreadByField: cluster}]
"#;

const CLUSTER_SAMPLE: &str = r#"
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata: {name: flink-propagation}
spec:
  resourceSelectors:
    - {apiVersion: flink.apache.org/v1beta1, kind: FlinkDeployment, name: flink-app}
  failover:
    cluster:
      purgeMode: Directly
      statePreservation:
        rules:
          - aliasLabelName: application.karmada.io/cluster-failover-jobid
            jsonPath: "{ .jobStatus.jobID }"
  placement:
    clusterAffinity: {clusterNames: [member1, member2]}
    spreadConstraints: [{maxGroups: 1, minGroups: 1, spreadByField: cluster}]
"#;

#[test]
fn karmadas_published_samples_are_read() {
    for (text, app) in [(APP_SAMPLE, true), (CLUSTER_SAMPLE, false)] {
        let doc: Value = serde_yaml::from_str(text).expect("yaml");
        let spec = match parse_spec(PolicyKind::Propagation, &doc, LOG_ENTRY_VERSION) {
            Ok(PolicySpec::Propagation(p)) => p,
            other => panic!("{other:?}"),
        };
        let f = &spec.lifecycle.failover;
        let (rules, alias) = if app {
            (
                &f.application_preserve,
                "application.karmada.io/failover-jobid",
            )
        } else {
            (
                &f.cluster_preserve,
                "application.karmada.io/cluster-failover-jobid",
            )
        };
        assert_eq!(rules, &vec![rule(alias, "{.jobStatus.jobID}")]);
        // And a version-13 entry refuses each, as it did.
        let e = parse_spec(PolicyKind::Propagation, &doc, STATE_PRESERVATION_SINCE - 1)
            .expect_err("refused before");
        assert!(e.field.ends_with("statePreservation"), "{}", e.field);
    }
}
