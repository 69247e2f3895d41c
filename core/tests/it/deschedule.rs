//! The descheduler in the state machine: replicas a cluster reports Pending unschedulable are
//! recorded with the log time they were first seen; with `pendingSeconds: N` a Divided object's
//! share there shrinks by the stuck count after N seconds (never below its ready replicas) and
//! the rest goes elsewhere; the cluster stays held to what it could run until its capacity
//! grows, so the replicas do not come back at the next decision; without the policy, or for a
//! Duplicated object, nothing moves; entries older than version 11 record nothing; replay and
//! snapshots give the same state.

use fedraft_core::audit::{explain_step, Record};
use fedraft_core::command::{Command, LogEntry, WorkloadReport};
use fedraft_core::model::{Capacity, ObjectKey, ObjectSpec};
use fedraft_core::policy::Resources;
use fedraft_core::rollout::deschedule::{unschedulable_condition, Descheduling};
use fedraft_core::rollout::WorkloadObservation;
use fedraft_core::state::{RejectCode, State};

use crate::state_support::{big_capacity, deployment, divided, duplicated, spec, Harness};

const WAIT_S: u64 = 60;
const CLUSTERS: [&str; 2] = ["dc1", "dc2"];

fn key() -> ObjectKey {
    ObjectKey::new("shop", "web")
}

/// A harness that keeps every entry it applied, to replay them.
struct Run {
    h: Harness,
    log: Vec<(u64, Command)>,
}

impl Run {
    fn new() -> Run {
        let mut run = Run {
            h: Harness::new(),
            log: Vec::new(),
        };
        for c in CLUSTERS {
            run.ok(Command::RegisterCluster(
                crate::state_support::cluster_spec(c, &[]),
            ));
        }
        run.beat(Some(big_capacity()));
        run
    }

    fn ok(&mut self, cmd: Command) {
        self.log.push((self.h.now_ms, cmd.clone()));
        self.h.ok(cmd);
    }

    fn beat(&mut self, capacity: Option<Capacity>) {
        self.ok(Command::Heartbeats(
            CLUSTERS
                .iter()
                .map(|n| fedraft_core::command::Heartbeat {
                    cluster: n.to_string(),
                    capacity,
                })
                .collect(),
        ));
    }

    /// Log time passes in heartbeat-sized steps, so the clusters stay Ready.
    fn pass(&mut self, ms: u64) {
        let mut left = ms;
        while left > 0 {
            let step = left.min(5_000);
            self.h.advance(step);
            self.beat(None);
            left -= step;
        }
    }

    /// `cluster` runs `ready` of its share of `web` and leaves `stuck` Pending unschedulable.
    fn report(&mut self, cluster: &str, ready: u32, stuck: u32) {
        let replicas = self
            .h
            .placement("shop", "web")
            .get(cluster)
            .copied()
            .unwrap_or(0);
        self.ok(Command::WorkloadReports(vec![WorkloadReport {
            namespace: "shop".into(),
            name: "web".into(),
            cluster: cluster.into(),
            observed: observation(replicas, ready, stuck),
        }]));
    }

    fn replay(&self) -> State {
        let mut s = State::new();
        for (i, (t, cmd)) in self.log.iter().enumerate() {
            s.apply(i as u64 + 1, &LogEntry::new("", "test", *t, cmd.clone()));
        }
        s
    }

    /// What `audit explain` says of each placement change of `web`, replaying record by record.
    fn explained(&self) -> Vec<String> {
        let mut s = State::new();
        let mut out = Vec::new();
        for (i, (t, cmd)) in self.log.iter().enumerate() {
            let before = s.object("shop", "web").map(|o| o.placement_map());
            let entry = LogEntry::new("", "test", *t, cmd.clone());
            let index = i as u64 + 1;
            let applied = s.apply(index, &entry);
            let r = Record {
                index,
                term: 1,
                entry,
                applied,
            };
            if let Some(c) = explain_step(before.as_ref(), &s, &r, &key()) {
                out.push(c.explanation);
            }
        }
        out
    }
}

fn observation(replicas: u32, ready: u32, stuck: u32) -> WorkloadObservation {
    WorkloadObservation {
        kind: "Deployment".into(),
        revision: None,
        generation: 1,
        observed_generation: 1,
        replicas,
        updated: replicas,
        ready,
        available: ready,
        conditions: unschedulable_condition(stuck).into_iter().collect(),
        job: Default::default(),
    }
}

fn put(spec: ObjectSpec, pending_seconds: u64) -> Command {
    Command::PutObjectWithDescheduling {
        namespace: "shop".into(),
        name: "web".into(),
        spec,
        rollout: None,
        failback: None,
        descheduling: Descheduling { pending_seconds },
        expected_version: None,
    }
}

fn web_divided() -> ObjectSpec {
    spec(deployment("web", 6, 100), divided(None))
}

#[test]
fn stuck_replicas_move_after_the_wait_and_do_not_come_back() {
    let mut run = Run::new();
    run.ok(put(web_divided(), WAIT_S));
    assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&3));
    run.report("dc1", 3, 0);
    let since = run.h.now_ms;
    run.report("dc2", 1, 2);
    let stuck = run.h.state.stuck(&key()).expect("recorded")["dc2"];
    assert_eq!((stuck.replicas, stuck.since_ms), (2, since));
    let due = since + WAIT_S * 1000;
    assert_eq!(run.h.state.deschedule_due(&key(), "dc2"), Some(due));
    // A changed count keeps the since.
    run.pass(10_000);
    run.report("dc2", 0, 3);
    assert_eq!(
        run.h.state.stuck(&key()).expect("kept")["dc2"].since_ms,
        since
    );
    run.report("dc2", 1, 2);
    // Not before the wait.
    while run.h.now_ms + 5_000 < due {
        run.pass(5_000);
        assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&3));
    }
    run.pass(5_000);
    let p = run.h.placement("shop", "web");
    assert_eq!(
        p.get("dc2"),
        Some(&1),
        "shrunk to its ready replicas: {p:?}"
    );
    assert_eq!(p.get("dc1"), Some(&5), "the rest placed elsewhere: {p:?}");
    let held = run.h.state.held(&key()).expect("held")["dc2"];
    assert_eq!(held.replicas, 1);
    let last = run.h.state.deschedule_last(&key()).expect("fired");
    assert_eq!(
        (
            last.clusters[0].from,
            last.clusters[0].to,
            last.clusters[0].stuck
        ),
        (3, 1, 2)
    );
    assert!(run.h.state.stuck(&key()).is_none(), "a new wait starts");
    let told = run.explained();
    assert!(
        told.iter().any(
            |e| e.contains("descheduled: dc2 3 -> 1 (2 Pending unschedulable since")
                && e.contains("held to 1 until its capacity grows")
        ),
        "{told:#?}"
    );

    // A decision from scratch still spares dc2: no ping-pong.
    run.ok(Command::RevokePlacement {
        namespace: "shop".into(),
        name: "web".into(),
    });
    assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&1));
    // Still stuck at its new share: nothing more to take (never below ready).
    run.report("dc2", 1, 2);
    run.pass(2 * WAIT_S * 1000);
    assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&1));

    // Replay and a snapshot give the same state.
    assert_eq!(run.replay().state_hash(), run.h.state.state_hash());
    let restored = State::from_snapshot(&run.h.state.to_snapshot()).expect("decodes");
    assert_eq!(restored.state_hash(), run.h.state.state_hash());
    assert_eq!(restored.held(&key()), run.h.state.held(&key()));

    // dc2's capacity grows: the hold ends, and a fresh decision may use it again.
    let mut more = big_capacity();
    more.available = Resources {
        cpu_millis: more.available.cpu_millis * 2,
        ..more.available
    };
    run.beat(Some(more));
    run.ok(Command::RevokePlacement {
        namespace: "shop".into(),
        name: "web".into(),
    });
    assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&3));
}

#[test]
fn a_hold_ends_after_its_time() {
    let mut run = Run::new();
    run.ok(put(web_divided(), WAIT_S));
    run.report("dc2", 0, 3);
    run.pass(WAIT_S * 1000 + 5_000);
    assert_eq!(run.h.placement("shop", "web").get("dc2"), None);
    assert!(run.h.state.held(&key()).is_some());
    let until = run.h.state.held(&key()).expect("held")["dc2"].until_ms;
    while run.h.now_ms < until {
        run.pass(60_000);
    }
    assert!(run.h.state.held(&key()).is_none(), "expired");
    run.ok(Command::RevokePlacement {
        namespace: "shop".into(),
        name: "web".into(),
    });
    assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&3));
    assert_eq!(run.replay().state_hash(), run.h.state.state_hash());
}

#[test]
fn nothing_moves_without_the_policy_and_duplicated_is_only_reported() {
    let mut run = Run::new();
    run.ok(Command::PutObject {
        namespace: "shop".into(),
        name: "web".into(),
        spec: web_divided(),
        expected_version: None,
    });
    let since = run.h.now_ms;
    run.report("dc2", 1, 2);
    run.pass(10 * WAIT_S * 1000);
    assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&3));
    let stuck = run.h.state.stuck(&key()).expect("reported all the same")["dc2"];
    assert_eq!((stuck.replicas, stuck.since_ms), (2, since));
    assert_eq!(run.h.state.deschedule_due(&key(), "dc2"), None);

    // Duplicated with the policy on: reported, never moved.
    run.ok(put(spec(deployment("web", 3, 100), duplicated()), WAIT_S));
    run.report("dc2", 1, 2);
    run.pass(10 * WAIT_S * 1000);
    assert_eq!(run.h.placement("shop", "web").get("dc2"), Some(&3));
    assert!(run.h.state.stuck(&key()).is_some());
    assert_eq!(run.h.state.deschedule_due(&key(), "dc2"), None);
    assert!(run.h.state.held(&key()).is_none());

    // A plain put keeps the policy; 0 turns it off.
    run.ok(Command::PutObject {
        namespace: "shop".into(),
        name: "web".into(),
        spec: web_divided(),
        expected_version: None,
    });
    assert_eq!(run.h.state.descheduling(&key()).pending_seconds, WAIT_S);
    run.ok(put(web_divided(), 0));
    assert!(run.h.state.descheduling(&key()).is_off());
    // Deleting the object forgets everything.
    run.ok(Command::DeleteObject {
        namespace: "shop".into(),
        name: "web".into(),
        expected_version: None,
    });
    assert!(run.h.state.stuck(&key()).is_none());
    assert_eq!(run.replay().state_hash(), run.h.state.state_hash());
}

#[test]
fn a_bad_policy_is_refused_naming_the_field_and_changes_nothing() {
    let mut h = Harness::new();
    h.fleet(&CLUSTERS);
    let before = h.state.state_hash();
    let r = h.refused(put(web_divided(), 10 * 86_400));
    assert_eq!(r.code, RejectCode::Invalid);
    assert_eq!(r.field.as_deref(), Some("descheduling.pendingSeconds"));
    assert!(h.state.object("shop", "web").is_none());
    assert_eq!(h.state.state_hash(), before);
}

#[test]
fn version_10_reports_record_nothing() {
    let mut h = Harness::new();
    h.fleet(&CLUSTERS);
    h.ok(put(web_divided(), WAIT_S));
    let report = Command::WorkloadReports(vec![WorkloadReport {
        namespace: "shop".into(),
        name: "web".into(),
        cluster: "dc2".into(),
        observed: observation(3, 1, 2),
    }]);
    let mut old = LogEntry::new("", "test", h.now_ms, report);
    old.version = 10;
    h.index += 1;
    let a = h.state.apply(h.index, &old);
    assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
    assert!(h.state.stuck(&key()).is_none());
    assert!(h.state.workload_status("shop", "web").is_some());
}
