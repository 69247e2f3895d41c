//! Every kind of bad input, for every command kind that can refuse, is refused with the right
//! code and field, and changes nothing: the state hash is the same before and after.

use crate::state_support::*;
use fedraft_core::command::{Command, Heartbeat, ObjectStatusReport};
use fedraft_core::model::TenantSpec;
use fedraft_core::policy::{Override, Resources, SpreadConstraint, Taint, TaintEffect};
use fedraft_core::state::{RejectCode, MAX_BATCH_ITEMS};

fn base() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.ok(Command::PutTenant(TenantSpec {
        name: "team".into(),
        namespaces: vec!["team-ns".into()],
        quota: Resources {
            cpu_millis: 500,
            memory_bytes: 0,
            pods: 100,
        },
        slice_size: None,
        members: vec![],
    }));
    h.put("ns", "web", spec(deployment("web", 2, 100), divided(None)));
    h.put(
        "team-ns",
        "small",
        spec(deployment("small", 1, 100), divided(None)),
    );
    h
}

fn put(ns: &str, name: &str, template: String) -> Command {
    Command::PutObject {
        namespace: ns.into(),
        name: name.into(),
        spec: spec(template, divided(None)),
        expected_version: None,
    }
}

fn put_spec(s: fedraft_core::model::ObjectSpec) -> Command {
    Command::PutObject {
        namespace: "ns".into(),
        name: "x".into(),
        spec: s,
        expected_version: None,
    }
}

fn tenant(name: &str, namespaces: &[&str]) -> TenantSpec {
    TenantSpec {
        name: name.into(),
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        quota: Resources::default(),
        slice_size: None,
        members: vec![],
    }
}

fn cases() -> Vec<(Command, RejectCode, Option<&'static str>)> {
    use RejectCode::*;
    let mut bad_label = cluster_spec("dc9", &[("bad key!", "v")]);
    bad_label.labels.insert("bad key!".into(), "v".into());
    let mut bad_taint = cluster_spec("dc9", &[]);
    bad_taint.taints.push(Taint {
        key: "k".into(),
        value: "bad value!".into(),
        effect: TaintEffect::NoSchedule,
    });
    let mut bad_endpoint = cluster_spec("dc9", &[]);
    bad_endpoint.api_endpoint = "ftp://x".into();
    let mut zero_threshold = cluster_spec("dc9", &[]);
    zero_threshold.failure_threshold_seconds = 0;
    let mut spread = divided(None);
    spread.spread_constraints.push(SpreadConstraint {
        label_key: "zone".into(),
        min_groups: 3,
        max_groups: 2,
    });
    let bad_override = Override {
        cluster_name: Some("Bad_Name".into()),
        ..Override::default()
    };
    let mut with_override = spec(deployment("x", 1, 1), divided(None));
    with_override.overrides.push(bad_override);
    let mut slices = tenant("t2", &["t2"]);
    slices.slice_size = Some(Resources::ZERO);
    let mut too_many_slices = tenant("t2", &["t2"]);
    too_many_slices.quota.cpu_millis = 1_000_000;
    too_many_slices.slice_size = Some(Resources {
        cpu_millis: 1,
        memory_bytes: 0,
        pods: 0,
    });
    let report = |ns: &str, name: &str, cluster: &str| ObjectStatusReport {
        namespace: ns.into(),
        name: name.into(),
        cluster: cluster.into(),
        applied: true,
        ready_replicas: 1,
        message: None,
    };
    vec![
        // Clusters.
        (
            Command::RegisterCluster(cluster_spec("DC_1", &[])),
            Invalid,
            Some("spec.name"),
        ),
        (
            Command::RegisterCluster(bad_label),
            Invalid,
            Some("spec.labels.bad key!"),
        ),
        (
            Command::RegisterCluster(bad_taint),
            Invalid,
            Some("spec.taints[0].value"),
        ),
        (
            Command::RegisterCluster(bad_endpoint),
            Invalid,
            Some("spec.apiEndpoint"),
        ),
        (
            Command::RegisterCluster(zero_threshold),
            Invalid,
            Some("spec.failureThresholdSeconds"),
        ),
        (
            Command::RegisterCluster(cluster_spec("dc1", &[])),
            AlreadyExists,
            Some("spec.name"),
        ),
        (
            Command::UpdateCluster {
                spec: cluster_spec("dc9", &[]),
                expected_version: None,
            },
            NotFound,
            Some("spec.name"),
        ),
        (
            Command::UpdateCluster {
                spec: cluster_spec("dc1", &[("a", "b")]),
                expected_version: Some(999),
            },
            Conflict,
            Some("metadata.resourceVersion"),
        ),
        (
            Command::DeregisterCluster {
                name: "dc9".into(),
                expected_version: None,
            },
            NotFound,
            Some("name"),
        ),
        (
            Command::DeregisterCluster {
                name: "dc1".into(),
                expected_version: Some(999),
            },
            Conflict,
            Some("metadata.resourceVersion"),
        ),
        (
            Command::Cordon { name: "dc9".into() },
            NotFound,
            Some("name"),
        ),
        (Command::Uncordon { name: "".into() }, Invalid, Some("name")),
        (
            Command::Drain { name: "dc9".into() },
            NotFound,
            Some("name"),
        ),
        // Objects.
        (
            put("Bad", "x", deployment("x", 1, 1)),
            Invalid,
            Some("metadata.namespace"),
        ),
        (
            put("ns", "x_y", deployment("x", 1, 1)),
            Invalid,
            Some("metadata.name"),
        ),
        (
            put("ns", "x", "not json".into()),
            Invalid,
            Some("spec.template"),
        ),
        (put("ns", "x", "[]".into()), Invalid, Some("spec.template")),
        (
            put("ns", "x", r#"{"kind":"A","metadata":{"name":"x"}}"#.into()),
            Invalid,
            Some("spec.template.apiVersion"),
        ),
        (
            put(
                "ns",
                "x",
                r#"{"apiVersion":"v1","metadata":{"name":"x"}}"#.into(),
            ),
            Invalid,
            Some("spec.template.kind"),
        ),
        (
            put(
                "ns",
                "x",
                r#"{"apiVersion":"v1","kind":"A","metadata":{}}"#.into(),
            ),
            Invalid,
            Some("spec.template.metadata.name"),
        ),
        (
            put("ns", "x", deployment("x", 1, 1).replace("1m", "lots")),
            Invalid,
            Some("spec.template"),
        ),
        (
            put(
                "ns",
                "x",
                format!(
                    r#"{{"apiVersion":"v1","kind":"A","metadata":{{"name":"x"}},"pad":"{}"}}"#,
                    "p".repeat(1 << 20)
                ),
            ),
            Invalid,
            Some("spec.template"),
        ),
        (
            put_spec(spec(deployment("x", 1, 1), divided(Some(&["Not-A-Label"])))),
            Invalid,
            Some("spec.placement.clusters[0]"),
        ),
        (
            put_spec(spec(deployment("x", 1, 1), spread)),
            Invalid,
            Some("spec.placement.spreadConstraints[0].minGroups"),
        ),
        (
            put_spec(with_override),
            Invalid,
            Some("spec.overrides[0].clusterName"),
        ),
        (
            Command::PutObject {
                namespace: "ns".into(),
                name: "web".into(),
                spec: spec(deployment("web", 3, 100), divided(None)),
                expected_version: Some(0),
            },
            Conflict,
            Some("metadata.resourceVersion"),
        ),
        (
            Command::PutObject {
                namespace: "ns".into(),
                name: "new".into(),
                spec: spec(deployment("new", 3, 100), divided(None)),
                expected_version: Some(5),
            },
            Conflict,
            Some("metadata.resourceVersion"),
        ),
        (
            put("team-ns", "big", deployment("big", 5, 100)),
            FailedPrecondition,
            Some("spec"),
        ),
        (
            Command::DeleteObject {
                namespace: "ns".into(),
                name: "nope".into(),
                expected_version: None,
            },
            NotFound,
            Some("metadata.name"),
        ),
        (
            Command::DeleteObject {
                namespace: "ns".into(),
                name: "web".into(),
                expected_version: Some(1),
            },
            Conflict,
            Some("metadata.resourceVersion"),
        ),
        (
            Command::RevokePlacement {
                namespace: "ns".into(),
                name: "nope".into(),
            },
            NotFound,
            Some("metadata.name"),
        ),
        // Tenants.
        (
            Command::PutTenant(tenant("Bad", &[])),
            Invalid,
            Some("spec.name"),
        ),
        (
            Command::PutTenant(tenant("t2", &["team-ns"])),
            AlreadyExists,
            Some("spec.namespaces[0]"),
        ),
        (
            Command::PutTenant(tenant("t2", &["a", "a"])),
            Invalid,
            Some("spec.namespaces[1]"),
        ),
        (Command::PutTenant(slices), Invalid, Some("spec.sliceSize")),
        (
            Command::PutTenant(too_many_slices),
            Invalid,
            Some("spec.sliceSize"),
        ),
        (
            Command::DeleteTenant {
                name: "nope".into(),
                expected_version: None,
            },
            NotFound,
            Some("name"),
        ),
        (
            Command::DeleteTenant {
                name: "team".into(),
                expected_version: None,
            },
            FailedPrecondition,
            Some("name"),
        ),
        (
            Command::DeleteTenant {
                name: "team".into(),
                expected_version: Some(1),
            },
            Conflict,
            Some("metadata.resourceVersion"),
        ),
        // Events.
        (
            Command::Heartbeats(vec![
                Heartbeat {
                    cluster: "dc1".into(),
                    capacity: None,
                },
                Heartbeat {
                    cluster: "BAD".into(),
                    capacity: None,
                },
            ]),
            Invalid,
            Some("heartbeats[1].cluster"),
        ),
        (
            Command::Heartbeats(vec![
                Heartbeat {
                    cluster: "dc1".into(),
                    capacity: None
                };
                MAX_BATCH_ITEMS + 1
            ]),
            Invalid,
            Some("heartbeats"),
        ),
        (
            Command::ClusterUnreachable {
                cluster: "dc9".into(),
            },
            NotFound,
            Some("cluster"),
        ),
        (
            Command::StatusReports(vec![report("ns", "web", "dc1"), report("ns", "web", "Bad")]),
            Invalid,
            Some("reports[1].cluster"),
        ),
        (
            Command::StatusReports(vec![report("ns", "web", "dc1"); MAX_BATCH_ITEMS + 1]),
            Invalid,
            Some("reports"),
        ),
    ]
}

#[test]
fn every_bad_input_is_refused_and_changes_nothing() {
    let mut h = base();
    for (i, (cmd, code, field)) in cases().into_iter().enumerate() {
        let hash = h.state.state_hash();
        let time = h.state.log_time_ms();
        let kind = cmd.kind();
        let applied = h.apply(cmd);
        let r = applied
            .outcome
            .rejection()
            .unwrap_or_else(|| panic!("case {i} ({kind}) accepted"));
        assert_eq!(
            (r.code, r.field.as_deref()),
            (code, field),
            "case {i} ({kind}): {}",
            r.message
        );
        assert!(!r.message.is_empty());
        assert!(
            applied.changes.is_empty() && applied.decisions.is_empty(),
            "case {i}"
        );
        assert_eq!(
            h.state.state_hash(),
            hash,
            "case {i} ({kind}) changed the state"
        );
        assert_eq!(h.state.log_time_ms(), time);
        assert_eq!(
            h.state.applied_index(),
            h.index,
            "the applied index still advances"
        );
    }
}

#[test]
fn every_command_kind_that_can_refuse_is_covered() {
    let kinds: std::collections::BTreeSet<&str> =
        cases().iter().map(|(c, _, _)| c.kind()).collect();
    for k in [
        "RegisterCluster",
        "UpdateCluster",
        "DeregisterCluster",
        "Cordon",
        "Uncordon",
        "Drain",
        "PutObject",
        "DeleteObject",
        "RevokePlacement",
        "PutTenant",
        "DeleteTenant",
        "Heartbeats",
        "ClusterUnreachable",
        "StatusReports",
    ] {
        assert!(kinds.contains(k), "no refusal case for {k}");
    }
}
