//! Karmada's `failover.{application,cluster}.statePreservation` (log version 14): executors
//! report the rules' values (`StatusValues`), and a failover that purges at once carries the
//! failed cluster's values to the newly chosen cluster as labels, and to no other. A path with
//! no value gives no label; a policy without the field renders as before; a version-13 entry
//! is refused the field and the new report as before. Replay and snapshots give the same state.

use std::collections::BTreeMap;

use fedraft_core::command::{
    Command, Heartbeat, LogEntry, ObjectStatusReport, StatusValuesReport, WorkloadReport,
};
use fedraft_core::model::ObjectKey;
use fedraft_core::rollout::{WorkloadCondition, WorkloadObservation};
use fedraft_core::state::{Outcome, State};
use serde_json::{json, Value};

use crate::state_support::{big_capacity, cluster_spec, Harness};

const CLUSTERS: [&str; 3] = ["m1", "m2", "m3"];
const OBJECT: &str = "deployment.apps:web";
const JOB_PATH: &str = "{.jobStatus.jobID}";
const ALIAS: &str = "application.karmada.io/failover-jobid";

fn key() -> ObjectKey {
    ObjectKey::new("app", OBJECT)
}

fn put(v: &Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn web() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "flink:1"}]}}}})
}

/// The job id rule and one whose path no member reports.
fn rules() -> Value {
    json!({"rules": [
        {"aliasLabelName": ALIAS, "jsonPath": "{ .jobStatus.jobID }"},
        {"aliasLabelName": "savepoint", "jsonPath": "{.jobStatus.savepoint}"}]})
}

/// One copy on one of three members (Karmada's samples' shape), with `failover`.
fn policy(failover: Value) -> Value {
    json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "failover": failover,
            "placement": {"clusterAffinity": {"clusterNames": CLUSTERS},
                "spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}]}}})
}

fn app_failover(purge: &str, preserve: bool) -> Value {
    let mut app = json!({"decisionConditions": {"tolerationSeconds": 60}, "purgeMode": purge});
    if preserve {
        app["statePreservation"] = rules();
    }
    json!({"application": app})
}

struct Run {
    h: Harness,
    log: Vec<(u16, u64, Command)>,
    version: u16,
}

impl Run {
    fn new() -> Self {
        let mut run = Run {
            h: Harness::new(),
            log: Vec::new(),
            version: fedraft_core::command::LOG_ENTRY_VERSION,
        };
        for c in CLUSTERS {
            run.ok(Command::RegisterCluster(cluster_spec(c, &[])));
        }
        run.pass(0, &CLUSTERS);
        run
    }

    fn apply(&mut self, cmd: Command) -> Outcome {
        self.log.push((self.version, self.h.now_ms, cmd.clone()));
        self.h.index += 1;
        let mut entry = LogEntry::new("", "test", self.h.now_ms, cmd);
        entry.version = self.version;
        self.h.state.apply(self.h.index, &entry).outcome
    }

    fn ok(&mut self, cmd: Command) {
        let kind = cmd.kind();
        let o = self.apply(cmd);
        assert!(o.is_accepted(), "{kind}: {o:?}");
    }

    /// `ms` of log time, heartbeats from `alive` every 5 s (at least one).
    fn pass(&mut self, ms: u64, alive: &[&str]) {
        let mut left = ms;
        loop {
            let step = left.min(5_000);
            self.h.advance(step);
            let hb = alive
                .iter()
                .map(|c| Heartbeat {
                    cluster: c.to_string(),
                    capacity: Some(big_capacity()),
                })
                .collect();
            self.ok(Command::Heartbeats(hb));
            left -= step;
            if left == 0 {
                return;
            }
        }
    }

    /// The labels of the copy `cluster` is asked to run (None: nothing there).
    fn labels(&self, cluster: &str) -> Option<BTreeMap<String, String>> {
        let d = self.h.state.desired_for_cluster(cluster);
        let o = d.iter().find(|d| d.key == key())?;
        let m = o.manifest.as_ref().expect("renders");
        let labels = m.pointer("/metadata/labels").and_then(Value::as_object)?;
        Some(
            labels
                .iter()
                .filter(|(k, _)| !k.starts_with("fedraft.io/"))
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect(),
        )
    }

    fn placed(&self) -> Vec<String> {
        self.h
            .state
            .object("app", OBJECT)
            .map(|o| o.placement_map().into_keys().collect())
            .unwrap_or_default()
    }

    fn values(&mut self, cluster: &str, job: &str) -> Outcome {
        self.apply(Command::StatusValues(vec![StatusValuesReport {
            namespace: "app".into(),
            name: OBJECT.into(),
            cluster: cluster.into(),
            values: BTreeMap::from([(JOB_PATH.to_string(), job.to_string())]),
        }]))
    }

    /// A workload report of `web` on `cluster`: healthy, or past its progress deadline.
    fn workload(&mut self, cluster: &str, healthy: bool) {
        let conditions = if healthy {
            Vec::new()
        } else {
            vec![WorkloadCondition {
                type_: "Progressing".into(),
                status: false,
                reason: "ProgressDeadlineExceeded".into(),
            }]
        };
        self.ok(Command::WorkloadReports(vec![WorkloadReport {
            namespace: "app".into(),
            name: OBJECT.into(),
            cluster: cluster.into(),
            observed: WorkloadObservation {
                kind: "Deployment".into(),
                revision: None,
                generation: 1,
                observed_generation: 1,
                replicas: 2,
                updated: 2,
                ready: if healthy { 2 } else { 0 },
                available: if healthy { 2 } else { 0 },
                conditions: conditions.into(),
                job: Default::default(),
            },
        }]));
    }

    fn report_ready(&mut self, cluster: &str) {
        self.ok(Command::StatusReports(vec![ObjectStatusReport {
            namespace: "app".into(),
            name: OBJECT.into(),
            cluster: cluster.into(),
            applied: true,
            ready_replicas: 2,
            message: None,
        }]));
    }

    fn replay_matches(&self) {
        let mut s = State::new();
        for (i, (version, t, cmd)) in self.log.iter().enumerate() {
            let mut e = LogEntry::new("", "test", *t, cmd.clone());
            e.version = *version;
            s.apply(i as u64 + 1, &e);
        }
        assert_eq!(s.state_hash(), self.h.state.state_hash());
        let restored = State::from_snapshot(&self.h.state.to_snapshot()).expect("snapshot");
        assert_eq!(restored.state_hash(), self.h.state.state_hash());
        for c in CLUSTERS {
            assert_eq!(
                restored.desired_for_cluster(c),
                self.h.state.desired_for_cluster(c)
            );
        }
    }

    /// Puts the policy and the template; the one cluster it lands on.
    fn start(&mut self, failover: Value) -> String {
        self.ok(put(&policy(failover)));
        self.ok(put(&web()));
        let first = self.placed();
        assert_eq!(first.len(), 1, "{first:?}");
        first[0].clone()
    }

    /// Unhealthy on `from` past the toleration: the application fails over.
    fn fail_app(&mut self, from: &str) -> String {
        self.workload(from, false);
        self.pass(65_000, &CLUSTERS);
        let now = self.placed();
        assert_eq!(now.len(), 1, "{now:?}");
        assert_ne!(now[0], from);
        now[0].clone()
    }
}

fn only_app_label(job: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app".to_string(), "web".to_string()),
        (ALIAS.to_string(), job.to_string()),
    ])
}

#[test]
fn application_failover_carries_the_values_to_the_new_cluster_only() {
    let mut run = Run::new();
    let from = run.start(app_failover("Immediately", true));
    assert_eq!(
        run.h.state.preserved_paths(&key()).map(|p| p.len()),
        Some(2)
    );
    // Reports from where it is not placed are skipped; from where it is, kept.
    let elsewhere = CLUSTERS
        .iter()
        .find(|c| **c != from)
        .copied()
        .unwrap_or("m1");
    assert!(run.values(elsewhere, "stray").is_accepted());
    assert_eq!(run.h.state.status_values(&key(), elsewhere), None);
    assert!(run.values(&from, "job-1").is_accepted());
    assert!(run.values(&from, "job-2").is_accepted());
    assert_eq!(
        run.h
            .state
            .status_values(&key(), &from)
            .and_then(|v| v.get(JOB_PATH))
            .map(String::as_str),
        Some("job-2")
    );
    // Nothing carried before a failover: the first copy has only its template's labels.
    let rv = run
        .h
        .state
        .object("app", OBJECT)
        .map(|o| o.resource_version);
    assert_eq!(
        run.labels(&from),
        Some(BTreeMap::from([("app".into(), "web".into())]))
    );
    assert_eq!(
        rv,
        run.h
            .state
            .object("app", OBJECT)
            .map(|o| o.resource_version),
        "a report moves nothing"
    );

    let to = run.fail_app(&from);
    // The savepoint rule's path was never reported: no label for it.
    assert_eq!(run.labels(&to), Some(only_app_label("job-2")));
    assert_eq!(run.labels(&from), None, "purged at once");
    let carried = run.h.state.carried(&key()).expect("carried");
    assert!(carried.before.contains(&from) && !carried.before.contains(&to));
    assert_eq!(
        run.h.state.status_values(&key(), &from),
        None,
        "the left cluster's values go"
    );
    run.replay_matches();

    // The new cluster's own values replace nothing until it fails in turn; then they move on.
    assert!(run.values(&to, "job-3").is_accepted());
    run.workload(&to, true);
    run.report_ready(&to);
    assert_eq!(run.labels(&to), Some(only_app_label("job-2")));
    let third = run.fail_app(&to);
    assert_eq!(run.labels(&third), Some(only_app_label("job-3")));
    assert_eq!(run.labels(&to), None);
    run.replay_matches();
}

#[test]
fn cluster_failover_directly_carries_the_values_gracefully_does_not() {
    for (mode, carries) in [("Directly", true), ("Gracefully", false)] {
        let mut run = Run::new();
        let failover = json!({"cluster": {"purgeMode": mode, "statePreservation": rules()}});
        let from = run.start(failover);
        assert!(run.values(&from, "job-1").is_accepted());
        run.report_ready(&from);
        let alive: Vec<&str> = CLUSTERS.iter().copied().filter(|c| *c != from).collect();
        run.pass(240_000, &alive);
        let now = run.placed();
        assert_eq!(now.len(), 1, "{mode}: {now:?}");
        assert_ne!(now[0], from, "{mode}");
        let to = now[0].clone();
        let want = if carries {
            only_app_label("job-1")
        } else {
            BTreeMap::from([("app".into(), "web".into())])
        };
        assert_eq!(run.labels(&to), Some(want), "{mode}");
        for c in alive.iter().filter(|c| **c != to) {
            assert_eq!(run.labels(c), None, "{mode}: {c} runs nothing");
        }
        run.replay_matches();
    }
}

#[test]
fn without_state_preservation_nothing_is_kept_or_carried() {
    let mut run = Run::new();
    let from = run.start(app_failover("Immediately", false));
    assert_eq!(run.h.state.preserved_paths(&key()), None);
    assert!(run.values(&from, "job-1").is_accepted());
    assert_eq!(run.h.state.status_values(&key(), &from), None);
    let to = run.fail_app(&from);
    assert_eq!(
        run.labels(&to),
        Some(BTreeMap::from([("app".into(), "web".into())]))
    );
    assert_eq!(run.h.state.carried(&key()), None);
    run.replay_matches();
}

#[test]
fn a_failover_that_keeps_the_old_copy_carries_nothing() {
    // Karmada injects the labels only when the failed copy is purged at once.
    let mut run = Run::new();
    let from = run.start(app_failover("Never", true));
    assert!(run.values(&from, "job-1").is_accepted());
    let to = run.fail_app(&from);
    assert_eq!(
        run.labels(&to),
        Some(BTreeMap::from([("app".into(), "web".into())]))
    );
    assert_eq!(run.h.state.carried(&key()), None);
    run.replay_matches();
}

#[test]
fn deleting_the_template_drops_what_was_kept() {
    let mut run = Run::new();
    let from = run.start(app_failover("Immediately", true));
    assert!(run.values(&from, "job-1").is_accepted());
    run.fail_app(&from);
    assert!(run.h.state.carried(&key()).is_some());
    run.ok(Command::DeleteResource {
        key: fedraft_core::door::ResourceKey {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "app".into(),
            name: "web".into(),
        },
        expected_version: None,
    });
    assert_eq!(run.h.state.carried(&key()), None);
    run.replay_matches();
}

#[test]
fn bad_value_reports_are_refused_naming_the_field() {
    let mut run = Run::new();
    let from = run.start(app_failover("Immediately", true));
    match run.values(&from, "not a label value!") {
        Outcome::Rejected(r) => assert_eq!(r.field.as_deref(), Some("reports[0].values")),
        other => panic!("accepted: {other:?}"),
    }
    run.replay_matches();
}

#[test]
fn version_13_entries_are_refused_the_field_and_the_report_as_before() {
    let mut run = Run::new();
    run.version = 13;
    for failover in [
        app_failover("Immediately", true),
        json!({"cluster": {"purgeMode": "Directly", "statePreservation": rules()}}),
    ] {
        match run.apply(put(&policy(failover.clone()))) {
            Outcome::Rejected(r) => {
                assert!(
                    r.field
                        .as_deref()
                        .is_some_and(|f| f.ends_with("statePreservation")),
                    "{failover}: {r:?}"
                );
                assert!(
                    r.message.contains("arbitrary status fields"),
                    "{}",
                    r.message
                );
            }
            other => panic!("{failover}: accepted {other:?}"),
        }
    }
    // Without the field the same entry is accepted, as it was.
    run.ok(put(&policy(app_failover("Immediately", false))));
    run.ok(put(&web()));
    let from = run.placed()[0].clone();
    assert!(!run.values(&from, "job-1").is_accepted());
    run.replay_matches();
}
