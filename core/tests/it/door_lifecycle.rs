//! Karmada's lifecycle fields on a PropagationPolicy (log version 12): `suspension` keeps what
//! suspended clusters run while the template moves on, `preserveResourcesOnDeletion` marks a
//! deleted template's copies for release, `schedulePriority` gives the template a PriorityClass's
//! value in the wait queue, `failover.application` moves a workload off a cluster where it stays
//! unhealthy (each purge mode), `failover.cluster.purgeMode: Gracefully` keeps a failed
//! cluster's copy until the move is done. Version 11 entries are refused them as before; replay
//! and snapshots give the same state.

use fedraft_core::admission::AdmissionPolicy;
use fedraft_core::command::{Command, LogEntry, WorkloadReport};
use fedraft_core::door::ResourceKey;
use fedraft_core::model::ObjectKey;
use fedraft_core::rollout::{WorkloadCondition, WorkloadObservation};
use fedraft_core::state::{Outcome, RejectCode, State};
use serde_json::{json, Value};

use crate::state_support::{big_capacity, cluster_spec, Harness};

const CLUSTERS: [&str; 3] = ["m1", "m2", "m3"];
const OBJECT: &str = "deployment.apps:web";

fn key() -> ObjectKey {
    ObjectKey::new("app", OBJECT)
}

fn put(v: &Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn web(image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}})
}

/// A policy for `web` over `clusters`, Duplicated, with `extra` fields in its spec.
fn policy(clusters: &[&str], extra: Value) -> Value {
    let mut p = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {"clusterAffinity": {"clusterNames": clusters}}}});
    if let (Some(spec), Some(more)) = (p["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in more {
            spec.insert(k.clone(), v.clone());
        }
    }
    p
}

/// One member running one copy: sample 04's shape.
fn one_of_three(extra: Value) -> Value {
    let mut p = policy(&CLUSTERS, extra);
    p["spec"]["placement"]["spreadConstraints"] =
        json!([{"spreadByField": "cluster", "minGroups": 1, "maxGroups": 1}]);
    p
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
        run.heartbeat(&CLUSTERS);
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

    fn refused(&mut self, cmd: Command) -> fedraft_core::state::Rejection {
        let before = self.h.state.state_hash();
        match self.apply(cmd) {
            Outcome::Rejected(r) => {
                assert_eq!(
                    self.h.state.state_hash(),
                    before,
                    "a refusal changes nothing"
                );
                r
            }
            other => panic!("accepted: {other:?}"),
        }
    }

    fn heartbeat(&mut self, clusters: &[&str]) {
        let hb = clusters
            .iter()
            .map(|c| fedraft_core::command::Heartbeat {
                cluster: c.to_string(),
                capacity: Some(big_capacity()),
            })
            .collect();
        self.ok(Command::Heartbeats(hb));
    }

    /// `ms` of log time, heartbeats from `alive` every 5 s.
    fn pass(&mut self, ms: u64, alive: &[&str]) {
        let mut left = ms;
        while left > 0 {
            let step = left.min(5_000);
            self.h.advance(step);
            self.heartbeat(alive);
            left -= step;
        }
    }

    /// The image `cluster` is asked to run (None: nothing there), as executors render it.
    fn image(&self, cluster: &str) -> Option<String> {
        let d = self.h.state.desired_for_cluster(cluster);
        let o = d.iter().find(|d| d.key == key())?;
        let m = o.manifest.as_ref().expect("renders");
        m.pointer("/spec/template/spec/containers/0/image")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn placed(&self) -> Vec<String> {
        self.h
            .state
            .object("app", OBJECT)
            .map(|o| o.placement_map().into_keys().collect())
            .unwrap_or_default()
    }

    fn rv(&self) -> u64 {
        self.h
            .state
            .object("app", OBJECT)
            .map_or(0, |o| o.resource_version)
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
        self.ok(Command::StatusReports(vec![
            fedraft_core::command::ObjectStatusReport {
                namespace: "app".into(),
                name: OBJECT.into(),
                cluster: cluster.into(),
                applied: true,
                ready_replicas: 2,
                message: None,
            },
        ]));
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
}

#[test]
fn suspended_clusters_keep_their_template_until_the_suspension_ends() {
    let mut run = Run::new();
    let on_m2 = json!({"suspension": {"dispatchingOnClusters": {"clusterNames": ["m2"]}}});
    run.ok(put(&policy(&["m1", "m2"], on_m2)));
    run.ok(put(&web("nginx:1")));
    assert_eq!(run.image("m1").as_deref(), Some("nginx:1"));
    assert_eq!(run.image("m2").as_deref(), Some("nginx:1"));

    // A new image reaches m1 only; m2's status keeps being read.
    run.ok(put(&web("nginx:2")));
    assert_eq!(run.image("m1").as_deref(), Some("nginx:2"));
    assert_eq!(run.image("m2").as_deref(), Some("nginx:1"));
    run.report_ready("m2");
    let o = run.h.state.object("app", OBJECT).expect("object");
    assert_eq!(
        o.status
            .clusters
            .iter()
            .map(|p| p.ready_replicas)
            .sum::<u32>(),
        2
    );

    // The suspension removed: m2 gets the template, and executors see the object move.
    let rv = run.rv();
    run.ok(put(&policy(&["m1", "m2"], json!({}))));
    assert_eq!(run.image("m2").as_deref(), Some("nginx:2"));
    assert!(run.rv() > rv);

    // Every cluster suspended: the next template reaches none; resuming sends it everywhere.
    let all = json!({"suspension": {"dispatching": true}});
    run.ok(put(&policy(&["m1", "m2"], all)));
    run.ok(put(&web("nginx:3")));
    assert_eq!(run.image("m1").as_deref(), Some("nginx:2"));
    assert_eq!(run.image("m2").as_deref(), Some("nginx:2"));
    run.replay_matches();
    run.ok(put(&policy(&["m1", "m2"], json!({}))));
    assert_eq!(run.image("m1").as_deref(), Some("nginx:3"));
    assert_eq!(run.image("m2").as_deref(), Some("nginx:3"));
    run.replay_matches();
}

#[test]
fn a_template_deleted_under_preserve_has_its_copies_released() {
    let mut run = Run::new();
    let web_key = ResourceKey {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "app".into(),
        name: "web".into(),
    };
    let delete = || Command::DeleteResource {
        key: web_key.clone(),
        expected_version: None,
    };
    run.ok(put(&policy(
        &["m1"],
        json!({"preserveResourcesOnDeletion": true}),
    )));
    run.ok(put(&web("nginx:1")));
    assert!(run.h.state.released().is_empty());
    run.ok(delete());
    assert!(run.h.state.object("app", OBJECT).is_none());
    assert!(run.h.state.released().contains(&key()));
    assert_eq!(
        run.image("m1"),
        None,
        "nothing desired: the executor releases it"
    );
    run.replay_matches();

    // Put again under the same name: fedraft takes the copy back.
    run.ok(put(&web("nginx:1")));
    assert!(run.h.state.released().is_empty());
    // Without the field, a delete deletes.
    run.ok(put(&policy(&["m1"], json!({}))));
    run.ok(delete());
    assert!(run.h.state.released().is_empty());
    run.replay_matches();
}

#[test]
fn schedule_priority_reads_the_priority_class() {
    let mut run = Run::new();
    run.ok(Command::SetAdmissionPolicy(AdmissionPolicy {
        cluster_scoped_kinds: vec!["scheduling.k8s.io/PriorityClass".into()],
        ..AdmissionPolicy::default()
    }));
    let high = json!({"schedulePriority": {"priorityClassSource": "KubePriorityClass",
        "priorityClassName": "high-priority"}});
    let r = run.refused(put(&policy(&["m1"], high.clone())));
    assert_eq!(r.code, RejectCode::Invalid);
    assert_eq!(
        r.field.as_deref(),
        Some("spec.schedulePriority.priorityClassName")
    );

    let class = |value: i64| {
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "high-priority"}, "value": value})
    };
    run.ok(put(&class(1000)));
    run.ok(put(&policy(&["m1"], high)));
    run.ok(put(&web("nginx:1")));
    assert_eq!(run.h.state.wait_priority(&key()), 1000);
    // The class changes: so does the priority.
    run.ok(put(&class(5)));
    assert_eq!(run.h.state.wait_priority(&key()), 5);
    // A built-in class.
    let critical = json!({"schedulePriority": {"priorityClassSource": "KubePriorityClass",
        "priorityClassName": "system-cluster-critical"}});
    run.ok(put(&policy(&["m1"], critical)));
    assert_eq!(run.h.state.wait_priority(&key()), 2_000_000_000);
    run.ok(put(&policy(&["m1"], json!({}))));
    assert_eq!(run.h.state.wait_priority(&key()), 0);
    run.replay_matches();
}

#[test]
fn an_unhealthy_workload_fails_over_after_its_toleration() {
    for (purge, grace) in [
        ("Graciously", true),
        ("Immediately", false),
        ("Never", false),
    ] {
        let mut run = Run::new();
        let mut app = json!({"decisionConditions": {"tolerationSeconds": 60}, "purgeMode": purge});
        if grace {
            app["gracePeriodSeconds"] = json!(120);
        }
        run.ok(put(&one_of_three(
            json!({"failover": {"application": app}}),
        )));
        run.ok(put(&web("nginx:1")));
        let first = run.placed();
        assert_eq!(first.len(), 1, "{first:?}");
        let from = first[0].clone();

        // Unhealthy, then healthy again before the toleration: nothing moves.
        run.workload(&from, false);
        run.pass(30_000, &CLUSTERS);
        run.workload(&from, true);
        run.pass(60_000, &CLUSTERS);
        assert_eq!(run.placed(), first, "{purge}");

        // Unhealthy for the toleration: moved elsewhere.
        run.workload(&from, false);
        run.pass(55_000, &CLUSTERS);
        assert_eq!(run.placed(), first, "{purge}: before the toleration");
        run.pass(10_000, &CLUSTERS);
        let now = run.placed();
        assert_eq!(now.len(), 1, "{purge}: {now:?}");
        assert_ne!(now, first, "{purge}");
        let to = now[0].clone();
        assert_eq!(run.image(&to).as_deref(), Some("nginx:1"));
        match purge {
            "Immediately" => assert_eq!(run.image(&from), None, "{purge}"),
            "Graciously" => {
                assert_eq!(run.image(&from).as_deref(), Some("nginx:1"), "kept a while");
                run.pass(125_000, &CLUSTERS);
                assert_eq!(run.image(&from), None, "gone after the grace period");
            }
            _ => {
                run.pass(700_000, &CLUSTERS);
                assert_eq!(run.image(&from).as_deref(), Some("nginx:1"), "Never purged");
                // A new template lets the kept copy go.
                run.ok(put(&web("nginx:2")));
                assert_eq!(run.image(&from), None);
            }
        }
        run.replay_matches();
    }
}

#[test]
fn cluster_failover_gracefully_keeps_the_failed_copy_until_the_move_is_done() {
    for (mode, kept) in [("Gracefully", true), ("Directly", false)] {
        let mut run = Run::new();
        let failover = json!({"failover": {"cluster": {"purgeMode": mode}}});
        run.ok(put(&one_of_three(failover)));
        run.ok(put(&web("nginx:1")));
        let first = run.placed();
        let from = first[0].clone();
        run.report_ready(&from);
        let alive: Vec<&str> = CLUSTERS.iter().copied().filter(|c| *c != from).collect();
        // The cluster goes dark: after the failover grace period the copy goes elsewhere.
        run.pass(240_000, &alive);
        let now = run.placed();
        assert_ne!(now, first, "{mode}");
        assert_eq!(
            run.image(&from).is_some(),
            kept,
            "{mode}: the failed cluster's copy"
        );
        if kept {
            // The new copy ready: the failed cluster's goes.
            let to = now[0].clone();
            run.report_ready(&to);
            assert_eq!(run.image(&from), None);
        }
        run.replay_matches();
    }
}

#[test]
fn version_11_entries_are_refused_the_fields_as_before() {
    let mut run = Run::new();
    run.version = 11;
    for extra in [
        json!({"suspension": {"dispatching": true}}),
        json!({"preserveResourcesOnDeletion": true}),
        json!({"failover": {"cluster": {"purgeMode": "Directly"}}}),
        json!({"schedulePriority": {"priorityClassSource": "KubePriorityClass",
            "priorityClassName": "system-node-critical"}}),
    ] {
        let r = run.refused(put(&policy(&["m1"], extra.clone())));
        assert!(
            r.message.contains("not implemented yet"),
            "{extra}: {}",
            r.message
        );
    }
    run.replay_matches();
}
