//! Door templates under a rollout strategy: a PropagationPolicy's `fedraft.io/rollout-strategy`
//! annotation makes a Deployment's new template roll out in waves, `spec.paused` pauses and
//! resumes that rollout without entering the template, a pause with nothing under way is
//! refused (changing nothing), a policy that gains or loses the annotation moves the record's
//! strategy, and entries of version 10 replay as they did. Who last wrote a field (the door's
//! managed-fields annotation) is no revision from version 12. A restored state derives the same.

use fedraft_core::command::{Command, LogEntry, RolloutAction, WorkloadReport};
use fedraft_core::door::ROLLOUT_STRATEGY_ANNOTATION;
use fedraft_core::rollout::{Phase, RolloutType, WorkloadObservation};
use fedraft_core::state::{Outcome, RejectCode, State};
use serde_json::{json, Value};

use crate::state_support::{big_capacity, cluster_spec, Harness};

const CLUSTERS: [(&str, &str); 3] = [("eu1", "eu"), ("us1", "us"), ("zz1", "zz")];
const OBJECT: &str = "deployment.apps:web";

fn put(v: &Value) -> Command {
    Command::PutResource {
        manifest: v.to_string(),
        expected_version: None,
    }
}

fn web(image: &str, paused: Option<bool>) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]}}}});
    if let Some(p) = paused {
        d["spec"]["paused"] = json!(p);
    }
    d
}

fn policy(strategy: Option<&str>) -> Value {
    let mut p = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "web", "namespace": "app"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "placement": {"replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}});
    if let Some(s) = strategy {
        p["metadata"]["annotations"] = json!({ ROLLOUT_STRATEGY_ANNOTATION: s });
    }
    p
}

const WAVES_BY_REGION: &str = r#"{"type":"Progressive","grouping":{"label":"region"},
    "minSuccessSeconds":10,"progressDeadlineSeconds":60}"#;

/// Three Ready clusters in three regions, and every entry kept to replay.
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
        for (c, region) in CLUSTERS {
            run.ok(Command::RegisterCluster(cluster_spec(
                c,
                &[("region", region)],
            )));
        }
        run.heartbeat();
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

    fn heartbeat(&mut self) {
        let hb = CLUSTERS
            .iter()
            .map(|(c, _)| fedraft_core::command::Heartbeat {
                cluster: c.to_string(),
                capacity: Some(big_capacity()),
            })
            .collect();
        self.ok(Command::Heartbeats(hb));
    }

    fn tick(&mut self, ms: u64) {
        let mut left = ms;
        while left > 0 {
            let step = left.min(10_000);
            self.h.advance(step);
            self.heartbeat();
            left -= step;
        }
    }

    /// `cluster` runs `revision`, every replica updated and ready.
    fn healthy(&mut self, cluster: &str, revision: u32) {
        self.ok(Command::WorkloadReports(vec![WorkloadReport {
            namespace: "app".into(),
            name: OBJECT.into(),
            cluster: cluster.into(),
            observed: WorkloadObservation {
                kind: "Deployment".into(),
                revision: Some(revision),
                generation: 1,
                observed_generation: 1,
                replicas: 2,
                updated: 2,
                ready: 2,
                available: 2,
                conditions: Vec::new().into(),
                job: Default::default(),
            },
        }]));
    }

    fn phase(&self) -> Option<Phase> {
        self.h.state.rollout("app", OBJECT).map(|r| r.phase)
    }

    fn revisions(&self) -> Vec<u32> {
        let rec = self
            .h
            .state
            .rollout("app", OBJECT)
            .expect("a rollout record");
        CLUSTERS.iter().map(|(c, _)| rec.revision_for(c)).collect()
    }

    fn stored(&self) -> Value {
        let o = self
            .h
            .state
            .object("app", OBJECT)
            .expect("the template's object");
        serde_json::from_str(&o.spec.template).expect("JSON")
    }

    /// Replaying every entry at its version and time, and restoring a snapshot, give this state.
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
        assert_eq!(
            restored.rollout("app", OBJECT),
            self.h.state.rollout("app", OBJECT)
        );
    }
}

#[test]
fn a_policy_strategy_rolls_a_template_out_in_waves_and_spec_paused_pauses_it() {
    let mut run = Run::new();
    run.ok(put(&policy(Some(WAVES_BY_REGION))));
    run.ok(put(&web("nginx:1", None)));
    let rec = run
        .h
        .state
        .rollout("app", OBJECT)
        .expect("a record from the policy");
    assert_eq!(rec.strategy.type_, RolloutType::Progressive);
    assert_eq!(run.phase(), Some(Phase::Complete));

    // A new image: the first region's wave only.
    run.ok(put(&web("nginx:2", None)));
    assert_eq!(run.phase(), Some(Phase::Progressing));
    assert_eq!(run.revisions(), vec![2, 1, 1]);

    // kubectl rollout pause: the rendered object with spec.paused set, patched back.
    let rv = run
        .h
        .state
        .object("app", OBJECT)
        .map(|o| o.resource_version);
    run.ok(put(&web("nginx:2", Some(true))));
    assert_eq!(run.phase(), Some(Phase::Paused));
    let rec = run.h.state.rollout("app", OBJECT).expect("record");
    assert_eq!(rec.reason, "paused by test (spec.paused)");
    assert_eq!(rec.latest().number, 2, "a pause is not a revision");
    assert!(
        run.stored()["spec"].get("paused").is_none(),
        "{}",
        run.stored()
    );
    assert_ne!(
        run.h
            .state
            .object("app", OBJECT)
            .map(|o| o.resource_version),
        rv,
        "watchers see the pause"
    );

    // While paused, the wave's gate does not move the rollout on.
    run.healthy("eu1", 2);
    run.tick(20_000);
    assert_eq!(run.revisions(), vec![2, 1, 1]);

    // A write that keeps spec.paused keeps the pause; one that clears it resumes.
    run.ok(put(&web("nginx:2", Some(true))));
    assert_eq!(run.phase(), Some(Phase::Paused));
    run.ok(put(&web("nginx:2", Some(false))));
    assert_eq!(run.phase(), Some(Phase::Progressing));
    run.healthy("eu1", 2);
    run.tick(20_000);
    assert_eq!(run.revisions(), vec![2, 2, 1]);
    run.healthy("us1", 2);
    run.tick(20_000);
    run.healthy("zz1", 2);
    run.tick(20_000);
    assert_eq!(run.phase(), Some(Phase::Complete));
    assert_eq!(run.revisions(), vec![2, 2, 2]);

    // Nothing under way: the pause is refused, naming the field, and changes nothing.
    let before = run.h.state.state_hash();
    let out = run.apply(put(&web("nginx:2", Some(true))));
    let Outcome::Rejected(r) = out else {
        panic!("a pause of a complete rollout was accepted: {out:?}")
    };
    assert_eq!(r.code, RejectCode::FailedPrecondition);
    assert_eq!(r.field.as_deref(), Some("spec.paused"));
    assert_eq!(run.h.state.state_hash(), before);

    // A pause with a new template: the new rollout starts and stops at once.
    run.ok(put(&web("nginx:3", Some(true))));
    assert_eq!(run.phase(), Some(Phase::Paused));
    // kubectl rollout restart while paused: a new revision, still paused.
    let mut restarted = web("nginx:3", Some(true));
    restarted["spec"]["template"]["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/restartedAt": "2026-12-02T19:00:00Z"});
    run.ok(put(&restarted));
    assert_eq!(run.phase(), Some(Phase::Paused));
    assert_eq!(
        run.h.state.rollout("app", OBJECT).map(|r| r.target),
        Some(4)
    );
    // The native moves name the template's object.
    run.ok(Command::Rollout {
        namespace: "app".into(),
        name: OBJECT.into(),
        action: RolloutAction::Promote,
    });
    assert_eq!(run.phase(), Some(Phase::Complete));
    assert_eq!(run.revisions(), vec![4, 4, 4]);
    run.replay_matches();
}

#[test]
fn the_policy_annotation_follows_policy_writes_and_is_checked() {
    let mut run = Run::new();
    run.ok(put(&policy(None)));
    run.ok(put(&web("nginx:1", None)));
    assert!(run.h.state.rollout("app", OBJECT).is_none());
    // Without a strategy spec.paused is the members' own, kept in the template.
    run.ok(put(&web("nginx:1", Some(true))));
    assert_eq!(run.stored()["spec"]["paused"], json!(true));
    run.ok(put(&web("nginx:1", None)));

    // The policy gains a strategy: the template's record starts with what it runs now.
    run.ok(put(&policy(Some(WAVES_BY_REGION))));
    let rec = run.h.state.rollout("app", OBJECT).expect("a record");
    assert_eq!((rec.latest().number, rec.phase), (1, Phase::Complete));
    run.ok(put(&web("nginx:2", None)));
    assert_eq!(run.revisions(), vec![2, 1, 1]);

    // The policy drops it: the rest goes all at once from the next template on.
    run.ok(put(&policy(None)));
    let rec = run
        .h
        .state
        .rollout("app", OBJECT)
        .expect("the record stays");
    assert_eq!(rec.strategy.type_, RolloutType::All);
    run.ok(put(&web("nginx:3", None)));
    assert_eq!(run.revisions(), vec![3, 3, 3]);

    // A strategy that is not one is refused, naming the annotation and the field in it.
    let before = run.h.state.state_hash();
    for (bad, field) in [
        (
            "{not json",
            "metadata.annotations[fedraft.io/rollout-strategy]",
        ),
        (
            r#"{"type":"Progressive","maxConcurrency":{"percent":0}}"#,
            "metadata.annotations[fedraft.io/rollout-strategy].maxConcurrency.percent",
        ),
        (
            r#"{"type":"Sometimes"}"#,
            "metadata.annotations[fedraft.io/rollout-strategy].type",
        ),
    ] {
        let out = run.apply(put(&policy(Some(bad))));
        let Outcome::Rejected(r) = out else {
            panic!("{bad} accepted: {out:?}")
        };
        assert_eq!(r.field.as_deref(), Some(field), "{bad}: {}", r.message);
    }
    assert_eq!(run.h.state.state_hash(), before);
    run.replay_matches();
}

#[test]
fn version_10_entries_ignore_the_annotation_and_keep_spec_paused() {
    let mut run = Run::new();
    run.version = 10;
    run.ok(put(&policy(Some("{not json"))));
    run.ok(put(&web("nginx:1", None)));
    run.ok(put(&web("nginx:2", Some(true))));
    assert!(run.h.state.rollout("app", OBJECT).is_none());
    assert_eq!(run.stored()["spec"]["paused"], json!(true));
    let out = run.apply(Command::Rollout {
        namespace: "app".into(),
        name: OBJECT.into(),
        action: RolloutAction::Pause,
    });
    let Outcome::Rejected(r) = out else {
        panic!("a version-10 rollout move on a template's object was accepted: {out:?}")
    };
    assert_eq!(r.field.as_deref(), Some("metadata.name"));
    run.replay_matches();

    // The same policy with a valid strategy, written at 10 and used at 11: the strategy counts
    // from the first version-11 write on, identically after a restore.
    run.ok(put(&policy(Some(WAVES_BY_REGION))));
    assert!(run.h.state.rollout("app", OBJECT).is_none());
    run.version = 11;
    run.ok(put(&web("nginx:3", None)));
    assert_eq!(run.phase(), Some(Phase::Progressing));
    assert!(run.stored()["spec"].get("paused").is_none());
    run.replay_matches();
}

/// `web` as the door stores it after a write by `manager`: its managedFields in their annotation.
fn web_managed(image: &str, paused: Option<bool>, manager: &str) -> Value {
    let mut d = web(image, paused);
    let managed = json!([{"manager": manager, "operation": "Update", "apiVersion": "apps/v1"}]);
    d["metadata"]["annotations"] =
        json!({ fedraft_core::door::MANAGED_FIELDS_ANNOTATION: managed.to_string() });
    d
}

#[test]
fn who_wrote_a_field_is_no_revision_and_pauses_nothing() {
    let mut run = Run::new();
    run.ok(put(&policy(Some(WAVES_BY_REGION))));
    run.ok(put(&web_managed(
        "nginx:1",
        None,
        "kubectl-client-side-apply",
    )));
    let latest = |run: &Run| {
        run.h
            .state
            .rollout("app", OBJECT)
            .map(|r| r.latest().number)
    };
    assert_eq!(latest(&run), Some(1));
    // Another manager writes the same template: no revision, nothing rolls out.
    run.ok(put(&web_managed("nginx:1", None, "kubectl-edit")));
    assert_eq!(latest(&run), Some(1));
    assert_eq!(run.phase(), Some(Phase::Complete));
    // kubectl rollout pause records its manager too; with nothing under way it is refused.
    let before = run.h.state.state_hash();
    let out = run.apply(put(&web_managed("nginx:1", Some(true), "kubectl-rollout")));
    let Outcome::Rejected(r) = out else {
        panic!("a pause of a complete rollout was accepted: {out:?}")
    };
    assert_eq!(r.field.as_deref(), Some("spec.paused"));
    assert_eq!(run.h.state.state_hash(), before);
    // A real change still rolls out, whoever wrote it.
    run.ok(put(&web_managed("nginx:2", None, "kubectl-edit")));
    assert_eq!(latest(&run), Some(2));
    assert_eq!(run.phase(), Some(Phase::Progressing));
    run.replay_matches();
}

#[test]
fn before_version_12_the_annotation_was_part_of_the_revision() {
    let mut run = Run::new();
    run.version = fedraft_core::door::MANAGED_FIELDS_SINCE - 1;
    run.ok(put(&policy(Some(WAVES_BY_REGION))));
    run.ok(put(&web_managed("nginx:1", None, "a")));
    run.ok(put(&web_managed("nginx:1", None, "b")));
    let rec = run.h.state.rollout("app", OBJECT).expect("record");
    assert_eq!(
        rec.latest().number,
        2,
        "any annotation change was a revision"
    );
    run.replay_matches();
}
