//! What a placement without a replica mode means: kinds that carry replicas are divided, every
//! other kind goes to every selected cluster; explicit modes and older entries keep their meaning.

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::policy::{ClusterPreference, Division, Placement, ReplicaMode, ReplicaPolicy};
use serde_json::json;

use crate::state_support::{deployment, divided, spec, Harness};

fn config_map(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {"k": "v"}})
    .to_string()
}

fn fleet() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2", "dc3"]);
    h
}

#[test]
fn kinds_without_replicas_go_to_every_selected_cluster() {
    let mut h = fleet();
    h.put(
        "app",
        "settings",
        spec(config_map("settings"), Placement::default()),
    );
    let placed = h.placement("app", "settings");
    assert_eq!(
        placed.into_iter().collect::<Vec<_>>(),
        [("dc1".into(), 1), ("dc2".into(), 1), ("dc3".into(), 1)]
    );
    // Stored resolved: the scheduler, the executors and a reader see what was decided.
    let stored = &h.obj("app", "settings").spec.placement.replicas;
    assert_eq!(stored.mode, ReplicaMode::Duplicated);

    // A selection still narrows it.
    let only_two = Placement {
        clusters: Some(vec!["dc1".into(), "dc3".into()]),
        ..Placement::default()
    };
    h.put("app", "narrow", spec(config_map("narrow"), only_two));
    assert_eq!(h.placement("app", "narrow").len(), 2);

    // The same goes for a DaemonSet, a Job or a Service: any kind without a replica count.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
        "spec": {"template": {"spec": {"containers": [{"name": "m", "image": "m:1"}]}}}})
    .to_string();
    h.put("app", "migrate", spec(job, Placement::default()));
    assert_eq!(h.placement("app", "migrate").len(), 3);
}

#[test]
fn kinds_with_replicas_are_divided() {
    let mut h = fleet();
    h.put(
        "app",
        "web",
        spec(deployment("web", 6, 100), Placement::default()),
    );
    let placed = h.placement("app", "web");
    assert_eq!(placed.values().sum::<u32>(), 6);
    assert_eq!(
        h.obj("app", "web").spec.placement.replicas.mode,
        ReplicaMode::Divided
    );
    // A Deployment without spec.replicas is still a replica-bearing kind (Kubernetes: 1).
    let bare = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bare"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "c:1"}]}}}})
    .to_string();
    h.put("app", "bare", spec(bare, Placement::default()));
    assert_eq!(h.placement("app", "bare").values().sum::<u32>(), 1);
    // Any kind with a spec.replicas (a custom resource) is divided too.
    let cr = json!({"apiVersion": "example.com/v1", "kind": "Worker",
        "metadata": {"name": "w", "namespace": "app"},
        "spec": {"replicas": 4}})
    .to_string();
    h.put("app", "w", spec(cr, Placement::default()));
    assert_eq!(h.placement("app", "w").values().sum::<u32>(), 4);
}

#[test]
fn an_explicit_mode_or_a_division_is_kept() {
    let mut h = fleet();
    h.put("app", "one", spec(config_map("one"), divided(None)));
    assert_eq!(h.placement("app", "one").values().sum::<u32>(), 1);

    let weighted = Placement {
        replicas: ReplicaPolicy {
            mode: ReplicaMode::ByKind,
            division: Some(Box::new(Division::StaticWeights {
                weights: [(
                    "dc2".to_string(),
                    ClusterPreference {
                        weight: 1,
                        ..ClusterPreference::default()
                    },
                )]
                .into(),
                rebalance: false,
            })),
        },
        ..Placement::default()
    };
    h.put("app", "weighted", spec(config_map("weighted"), weighted));
    assert_eq!(
        h.placement("app", "weighted")
            .into_iter()
            .collect::<Vec<_>>(),
        [("dc2".into(), 1)],
        "a division asks for dividing whatever the kind"
    );
}

#[test]
fn putting_the_same_unresolved_spec_again_changes_nothing() {
    let mut h = fleet();
    h.put(
        "app",
        "settings",
        spec(config_map("settings"), Placement::default()),
    );
    let written_at = h.index;
    h.put(
        "app",
        "settings",
        spec(config_map("settings"), Placement::default()),
    );
    assert_eq!(h.obj("app", "settings").resource_version, written_at);
}

#[test]
fn an_omitted_mode_reads_as_by_kind_and_older_entries_carry_divided() {
    let p: Placement = serde_json::from_str("{}").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.replicas.mode, ReplicaMode::ByKind);
    let p: Placement = serde_json::from_str(r#"{"replicas": {"mode": "Divided"}}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.replicas.mode, ReplicaMode::Divided);

    // What a version-2 client logged for an omitted mode was Divided, and it replays so.
    let mut h = fleet();
    let mut old = LogEntry::new(
        "",
        "test",
        h.now_ms,
        Command::PutObject {
            namespace: "app".into(),
            name: "legacy".into(),
            spec: spec(config_map("legacy"), divided(None)),
            expected_version: None,
        },
    );
    old.version = 2;
    h.index += 1;
    assert!(h.state.apply(h.index, &old).outcome.is_accepted());
    assert_eq!(h.placement("app", "legacy").len(), 1);

    // And an entry of this binary (version 3 or later) round-trips the new mode through the log
    // encoding.
    let entry = LogEntry::new(
        "",
        "test",
        h.now_ms,
        Command::PutObject {
            namespace: "app".into(),
            name: "new".into(),
            spec: spec(config_map("new"), Placement::default()),
            expected_version: None,
        },
    );
    let bytes = entry.encode();
    let back = LogEntry::decode(&bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, entry);
    assert!(back.version >= 3, "{}", back.version);
}
