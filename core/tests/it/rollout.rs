//! Progressive rollouts in the state machine: waves by region, gates from workload reports and
//! log time, automatic pause on a failed gate, undo, promote, and replay of the entries.

use fedraft_core::audit::{rollout_steps, Record};
use fedraft_core::command::{Command, RolloutAction, WorkloadReport};
use fedraft_core::model::ObjectSpec;
use fedraft_core::policy::{Placement, ReplicaMode, ReplicaPolicy};
use fedraft_core::rollout::{
    Concurrency, Phase, RolloutStrategy, RolloutType, Verdict, WaveGrouping, WorkloadObservation,
    REVISION_ANNOTATION,
};
use fedraft_core::state::{RejectCode, State};

use crate::state_support::{big_capacity, Harness};

const CLUSTERS: [&str; 3] = ["eu1", "us1", "zz1"];

fn template(image: &str) -> String {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "app", "image": image}]}}}
    })
    .to_string()
}

fn spec(image: &str) -> ObjectSpec {
    ObjectSpec {
        template: template(image),
        placement: Placement {
            replicas: ReplicaPolicy {
                mode: ReplicaMode::Duplicated,
                ..Default::default()
            },
            ..Default::default()
        },
        overrides: Vec::new(),
    }
}

fn strategy() -> RolloutStrategy {
    RolloutStrategy {
        type_: RolloutType::Progressive,
        grouping: WaveGrouping::Label("region".into()),
        max_concurrency: Concurrency::Count(0),
        canary: 0,
        min_success_seconds: 10,
        progress_deadline_seconds: 60,
        max_failures: 0,
        auto_rollback: false,
        health_rule: None,
    }
}

/// A harness that also keeps every entry it applied, to replay them.
struct Run {
    h: Harness,
    log: Vec<Command>,
    times: Vec<u64>,
}

impl Run {
    fn new() -> Self {
        let mut run = Run {
            h: Harness::new(),
            log: Vec::new(),
            times: Vec::new(),
        };
        for (c, region) in CLUSTERS.iter().zip(["eu", "us", "zz"]) {
            run.ok(Command::RegisterCluster(
                crate::state_support::cluster_spec(c, &[("region", region)]),
            ));
        }
        run.heartbeat();
        run
    }

    fn apply(&mut self, cmd: Command) -> fedraft_core::state::Applied {
        for t in self.h.fill_gap() {
            self.log.push(Command::Tick);
            self.times.push(t);
        }
        self.log.push(cmd.clone());
        self.times.push(self.h.now_ms);
        self.h.apply(cmd)
    }

    fn ok(&mut self, cmd: Command) {
        let kind = cmd.kind();
        let a = self.apply(cmd);
        assert!(a.outcome.is_accepted(), "{kind}: {:?}", a.outcome);
    }

    fn heartbeat(&mut self) {
        let hb = CLUSTERS
            .iter()
            .map(|c| fedraft_core::command::Heartbeat {
                cluster: c.to_string(),
                capacity: Some(big_capacity()),
            })
            .collect();
        self.ok(Command::Heartbeats(hb));
    }

    /// Log time passes in heartbeat-sized steps, so the clusters stay Ready (and no gap is
    /// long enough for the harness to fill it with ticks).
    fn tick(&mut self, ms: u64) {
        let mut left = ms;
        while left > 0 {
            let step = left.min(fedraft_core::health::LOG_STALL_MS);
            self.h.advance(step);
            self.heartbeat();
            left -= step;
        }
    }

    fn control(&mut self, action: RolloutAction) -> fedraft_core::state::Applied {
        self.apply(Command::Rollout {
            namespace: "ns".into(),
            name: "web".into(),
            action,
        })
    }

    /// `cluster` reports running `revision`, healthy or never ready.
    fn report(&mut self, cluster: &str, revision: u32, healthy: bool) {
        self.ok(Command::WorkloadReports(vec![WorkloadReport {
            namespace: "ns".into(),
            name: "web".into(),
            cluster: cluster.into(),
            observed: observed(revision, healthy),
        }]));
    }

    fn revisions(&self) -> Vec<u32> {
        let rec = self.h.state.rollout("ns", "web").expect("record");
        CLUSTERS.iter().map(|c| rec.revision_for(c)).collect()
    }

    fn phase(&self) -> Phase {
        self.h.state.rollout("ns", "web").expect("record").phase
    }

    /// Replays every command as the audit archive does and collects what explain says of the
    /// object's rollouts, record by record (the whole story, not the bounded one in the state).
    fn explained(&self) -> Vec<String> {
        let key = fedraft_core::model::ObjectKey::new("ns", "web");
        let mut s = State::new();
        let mut out = Vec::new();
        for (i, (cmd, t)) in self.log.iter().zip(&self.times).enumerate() {
            let entry = fedraft_core::command::LogEntry::new("", "test", *t, cmd.clone());
            let index = i as u64 + 1;
            let applied = s.apply(index, &entry);
            let r = Record {
                index,
                term: 1,
                entry,
                applied,
            };
            for c in rollout_steps(&s, &r, &key) {
                assert!(c.moves.is_empty() && c.before == c.after, "{c:?}");
                out.push(format!("{} {}", c.command, c.explanation));
            }
        }
        out
    }

    /// Replays every command from scratch at the same indexes and times: the same state.
    fn replay_matches(&self) {
        let mut s = State::new();
        for (i, (cmd, t)) in self.log.iter().zip(&self.times).enumerate() {
            let e = fedraft_core::command::LogEntry::new("", "test", *t, cmd.clone());
            s.apply(i as u64 + 1, &e);
        }
        assert_eq!(s.state_hash(), self.h.state.state_hash());
        assert_eq!(s.rollout("ns", "web"), self.h.state.rollout("ns", "web"));
        let restored = State::from_snapshot(&self.h.state.to_snapshot()).expect("snapshot");
        assert_eq!(restored.state_hash(), self.h.state.state_hash());
    }
}

/// The web Deployment as a cluster running `revision` sees it, healthy or never ready, with no
/// conditions.
fn observed(revision: u32, healthy: bool) -> WorkloadObservation {
    let ready = if healthy { 2 } else { 1 };
    WorkloadObservation {
        kind: "Deployment".into(),
        revision: Some(revision),
        generation: i64::from(revision),
        observed_generation: i64::from(revision),
        replicas: 2,
        updated: 2,
        ready,
        available: ready,
        conditions: Vec::new().into(),
        job: Default::default(),
    }
}

fn put(run: &mut Run, image: &str) {
    run.ok(Command::PutObjectWithRollout {
        namespace: "ns".into(),
        name: "web".into(),
        spec: spec(image),
        rollout: strategy(),
        expected_version: None,
    });
}

#[test]
fn three_waves_pause_on_the_bad_wave_then_undo_and_promote() {
    let mut run = Run::new();
    put(&mut run, "app:1");
    assert_eq!(run.revisions(), vec![1, 1, 1]);
    for c in CLUSTERS {
        run.report(c, 1, true);
    }

    // Revision 2: wave 1 (region eu) moves alone.
    put(&mut run, "app:2");
    assert_eq!(run.phase(), Phase::Progressing);
    assert_eq!(run.revisions(), vec![2, 1, 1]);
    let eu1 = run.h.state.desired_for_cluster("eu1");
    let ann = &eu1[0].manifest.as_ref().expect("renders")["metadata"]["annotations"];
    assert_eq!(ann[REVISION_ANNOTATION], "2");
    assert!(eu1[0]
        .manifest
        .as_ref()
        .expect("renders")
        .to_string()
        .contains("app:2"));
    let us1 = run.h.state.desired_for_cluster("us1");
    assert!(us1[0]
        .manifest
        .as_ref()
        .expect("renders")
        .to_string()
        .contains("app:1"));

    // Healthy, but not yet for minSuccessSeconds: the gate holds.
    run.report("eu1", 2, true);
    run.tick(5_000);
    assert_eq!(run.revisions(), vec![2, 1, 1]);
    run.tick(6_000);
    assert_eq!(run.revisions(), vec![2, 2, 1], "wave 2 after the gate");

    // us1 never gets ready: past the progress deadline the rollout pauses and zz1 stays old.
    run.report("us1", 2, false);
    let status = &run
        .h
        .state
        .workload_status("ns", "web")
        .expect("status")
        .get("us1")
        .expect("us1");
    assert_eq!(status.verdict, Verdict::Progressing);
    run.tick(30_000);
    assert_eq!(run.phase(), Phase::Progressing);
    run.tick(31_000);
    assert_eq!(run.phase(), Phase::Paused);
    let rec = run.h.state.rollout("ns", "web").expect("record");
    assert!(rec.reason.contains("us1"), "{}", rec.reason);
    run.tick(120_000);
    assert_eq!(
        run.revisions(),
        vec![2, 2, 1],
        "paused: zz1 keeps the old revision"
    );

    // A pause of a paused rollout is refused; undo sends the updated clusters back.
    let refused = run.control(RolloutAction::Pause);
    assert!(
        matches!(&refused.outcome, fedraft_core::state::Outcome::Rejected(r) if r.code == RejectCode::FailedPrecondition)
    );
    run.ok(Command::Rollout {
        namespace: "ns".into(),
        name: "web".into(),
        action: RolloutAction::Undo,
    });
    assert_eq!(run.phase(), Phase::RolledBack);
    assert_eq!(run.revisions(), vec![1, 1, 1]);

    // Revision 3, then promote: every cluster at once.
    put(&mut run, "app:3");
    let rec = run.h.state.rollout("ns", "web").expect("record");
    assert_eq!(run.revisions(), vec![3, 1, 1], "{:#?}", rec.events);
    run.ok(Command::Rollout {
        namespace: "ns".into(),
        name: "web".into(),
        action: RolloutAction::Promote,
    });
    assert_eq!(run.phase(), Phase::Complete);
    assert_eq!(run.revisions(), vec![3, 3, 3]);
    let rec = run.h.state.rollout("ns", "web").expect("record");
    let story: Vec<&str> = rec.events.iter().map(|e| e.message.as_str()).collect();
    for needle in [
        "wave 1/3 started",
        "wave 1/3 passed its gate",
        "paused: wave 2/3 failed on us1",
        "rolled back to revision 1",
        "promoted by test",
    ] {
        assert!(
            story.iter().any(|s| s.contains(needle)),
            "{needle}: {story:#?}"
        );
    }
    // Explain tells the same story, each step at the entry that took it.
    let explained = run.explained();
    assert_eq!(explained.len(), story.len(), "{explained:#?}");
    for (line, needle) in [
        ("PutObjectWithRollout", "wave 1/3 started"),
        ("Heartbeats", "wave 1/3 passed its gate"),
        ("Rollout", "rolled back to revision 1"),
        ("Rollout", "promoted by test"),
    ] {
        assert!(
            explained
                .iter()
                .any(|e| e.starts_with(line) && e.contains(needle)),
            "{line} {needle}: {explained:#?}"
        );
    }
    run.replay_matches();
}

#[test]
fn all_at_once_keeps_the_plain_put_and_undo_works() {
    let mut run = Run::new();
    let mut all = strategy();
    all.type_ = RolloutType::All;
    let put_all = |run: &mut Run, image: &str| {
        run.ok(Command::PutObjectWithRollout {
            namespace: "ns".into(),
            name: "web".into(),
            spec: spec(image),
            rollout: all.clone(),
            expected_version: None,
        })
    };
    put_all(&mut run, "app:1");
    put_all(&mut run, "app:2");
    assert_eq!(run.revisions(), vec![2, 2, 2]);
    // A plain put keeps the strategy and records a revision.
    run.ok(Command::PutObject {
        namespace: "ns".into(),
        name: "web".into(),
        spec: spec("app:3"),
        expected_version: None,
    });
    assert_eq!(run.revisions(), vec![3, 3, 3]);
    run.ok(Command::Rollout {
        namespace: "ns".into(),
        name: "web".into(),
        action: RolloutAction::Undo,
    });
    assert_eq!(run.revisions(), vec![2, 2, 2]);
    // Objects without a record: a rollout command is NotFound, and nothing is stamped.
    run.ok(Command::PutObject {
        namespace: "ns".into(),
        name: "plain".into(),
        spec: spec("app:1"),
        expected_version: None,
    });
    let r = run.apply(Command::Rollout {
        namespace: "ns".into(),
        name: "plain".into(),
        action: RolloutAction::Pause,
    });
    assert!(
        matches!(&r.outcome, fedraft_core::state::Outcome::Rejected(r) if r.code == RejectCode::NotFound)
    );
    let desired = run.h.state.desired_for_cluster("eu1");
    let plain = desired
        .iter()
        .find(|d| d.key.name == "plain")
        .expect("placed");
    let meta = &plain.manifest.as_ref().expect("renders")["metadata"];
    assert!(
        meta["annotations"].get(REVISION_ANNOTATION).is_none(),
        "{meta}"
    );
    run.replay_matches();
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8),
        Report(usize, u8, bool),
        Tick(u64),
        Control(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..4).prop_map(Op::Put),
            (0usize..3, 1u8..6, any::<bool>()).prop_map(|(c, r, h)| Op::Report(c, r, h)),
            (1u64..30_000).prop_map(Op::Tick),
            (0u8..5).prop_map(Op::Control),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any sequence of puts, reports, time and moves: the replayed entries reproduce the
        /// state (hash and record), a snapshot restores it, and every cluster's revision is kept.
        #[test]
        fn replay_reproduces_a_rollout(ops in proptest::collection::vec(op(), 1..40)) {
            let mut run = Run::new();
            put(&mut run, "app:0");
            for o in ops {
                match o {
                    Op::Put(i) => put(&mut run, &format!("app:{i}")),
                    Op::Report(c, r, healthy) => run.report(CLUSTERS[c], u32::from(r), healthy),
                    Op::Tick(ms) => run.tick(ms),
                    Op::Control(a) => {
                        let action = [
                            RolloutAction::Pause,
                            RolloutAction::Resume,
                            RolloutAction::Abort,
                            RolloutAction::Undo,
                            RolloutAction::Promote,
                        ][usize::from(a)];
                        run.control(action);
                    }
                }
                let rec = run.h.state.rollout("ns", "web").expect("record");
                for c in CLUSTERS {
                    prop_assert!(rec.revision(rec.revision_for(c)).is_some());
                }
                prop_assert!(rec.revisions.len() <= fedraft_core::rollout::MAX_REVISIONS);
            }
            run.replay_matches();
        }
    }
}

/// Statuses that report the same conditions hold one copy of them, also once restored from a
/// snapshot, and a status keeps what its own report said.
#[test]
fn equal_condition_lists_are_held_once() {
    use fedraft_core::rollout::WorkloadCondition;
    let mut run = Run::new();
    put(&mut run, "app:1");
    let condition = |reason: &str| WorkloadCondition {
        type_: "Available".into(),
        status: true,
        reason: reason.to_string().into(),
    };
    let reports = CLUSTERS
        .iter()
        .map(|c| WorkloadReport {
            namespace: "ns".into(),
            name: "web".into(),
            cluster: c.to_string(),
            observed: WorkloadObservation {
                // Each report decodes its own list, as reports from the log do.
                conditions: vec![condition(if *c == "zz1" { "Other" } else { "Same" })].into(),
                ..observed(1, true)
            },
        })
        .collect();
    run.ok(Command::WorkloadReports(reports));
    let lists = |s: &State| -> Vec<_> {
        let per = s.workload_status("ns", "web").expect("statuses");
        CLUSTERS
            .iter()
            .map(|c| per.get(*c).expect("status").observed.conditions.clone())
            .collect()
    };
    let held = lists(&run.h.state);
    assert!(std::sync::Arc::ptr_eq(&held[0], &held[1]));
    assert_eq!(*held[2], [condition("Other")]);
    assert_eq!(*held[0], [condition("Same")]);
    let restored = State::from_snapshot(&run.h.state.to_snapshot()).expect("restore");
    let again = lists(&restored);
    assert_eq!(again, held);
    assert!(std::sync::Arc::ptr_eq(&again[0], &again[1]));
    assert!(!std::sync::Arc::ptr_eq(&again[0], &again[2]));
}
