//! Fail-back in the state machine: with `afterRecoveryHeld: N` an object that failed over from a
//! cluster returns to it once the cluster has been Ready N seconds of log time (not before, not
//! after a flap restarted the count), make-before-break; with `never` it stays where failover put
//! it; the choice survives plain puts, replay and snapshots.

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::model::ObjectKey;
use fedraft_core::rollout::failback::FailBack;
use fedraft_core::state::State;

use crate::state_support::{deployment, divided, spec, Harness};

const HELD_S: u64 = 300;

fn key() -> ObjectKey {
    ObjectKey::new("shop", "web")
}

/// A harness that keeps every entry it applied, to replay them.
struct Run {
    h: Harness,
    log: Vec<(u64, Command)>,
}

impl Run {
    fn ok(&mut self, cmd: Command) {
        self.log.push((self.h.now_ms, cmd.clone()));
        self.h.ok(cmd);
    }

    /// Heartbeats from `names` every 5 s for `ms` of log time.
    fn beat(&mut self, names: &[&str], ms: u64) {
        let mut t = 0;
        while t < ms {
            self.h.advance(5_000);
            t += 5_000;
            self.ok(Command::Heartbeats(
                names
                    .iter()
                    .map(|n| fedraft_core::command::Heartbeat {
                        cluster: n.to_string(),
                        capacity: None,
                    })
                    .collect(),
            ));
        }
    }

    fn report_all_ready(&mut self) {
        let placed = self.h.placement("shop", "web");
        for (c, n) in placed {
            self.ok(Command::StatusReports(vec![
                fedraft_core::command::ObjectStatusReport {
                    namespace: "shop".into(),
                    name: "web".into(),
                    cluster: c,
                    applied: true,
                    ready_replicas: n,
                    message: None,
                },
            ]));
        }
    }
}

fn put(failback: FailBack) -> Command {
    Command::PutObjectWithFailBack {
        namespace: "shop".into(),
        name: "web".into(),
        spec: spec(deployment("web", 6, 100), divided(None)),
        rollout: None,
        failback,
        expected_version: None,
    }
}

/// Three Ready clusters, `web` 2/2/2 and ready, then dc3 dark long enough to fail over.
fn failed_over(failback: FailBack) -> Run {
    let mut run = Run {
        h: Harness::new(),
        log: Vec::new(),
    };
    for c in ["dc1", "dc2", "dc3"] {
        run.ok(Command::RegisterCluster(
            crate::state_support::cluster_spec(c, &[]),
        ));
    }
    run.ok(Command::Heartbeats(
        ["dc1", "dc2", "dc3"]
            .iter()
            .map(|c| fedraft_core::command::Heartbeat {
                cluster: c.to_string(),
                capacity: Some(crate::state_support::big_capacity()),
            })
            .collect(),
    ));
    run.ok(put(failback));
    run.report_all_ready();
    assert_eq!(run.h.placement("shop", "web").get("dc3"), Some(&2));
    run.beat(&["dc1", "dc2"], 150_000);
    let p = run.h.placement("shop", "web");
    assert!(!p.contains_key("dc3"), "failed over: {p:?}");
    run.report_all_ready();
    run
}

/// Log time since which dc3 is Ready (panics when it is not).
fn ready_since(h: &Harness, cluster: &str) -> u64 {
    let c = h.state.cluster(cluster).expect("registered");
    assert_eq!(c.status.health, fedraft_core::model::Health::Ready);
    c.status.health_since_ms
}

#[test]
fn replicas_return_after_the_recovered_cluster_is_held_ready() {
    let mut run = failed_over(FailBack::AfterRecoveryHeld(HELD_S));
    assert_eq!(
        run.h.state.failback_away(&key()).map(|s| s.len()),
        Some(1),
        "dc3 remembered"
    );
    // While dc3 is dark the fail-back is pending with no due time.
    let pending = run.h.state.failback_pending(&key());
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].cluster, "dc3");
    assert_eq!(
        (pending[0].ready_since_ms, pending[0].due_at_ms),
        (None, None)
    );
    // dc3 comes back; the count starts when it turns Ready.
    run.beat(&["dc1", "dc2", "dc3"], 60_000);
    let since = ready_since(&run.h, "dc3");
    let held_until = since + HELD_S * 1000;
    let pending = run.h.state.failback_pending(&key());
    assert_eq!(
        (pending[0].ready_since_ms, pending[0].due_at_ms),
        (Some(since), Some(held_until))
    );
    while run.h.now_ms + 5_000 < held_until {
        run.beat(&["dc1", "dc2", "dc3"], 5_000);
        assert!(
            !run.h.placement("shop", "web").contains_key("dc3"),
            "no fail-back before the hold at {}",
            run.h.now_ms
        );
    }
    run.beat(&["dc1", "dc2", "dc3"], 10_000);
    let p = run.h.placement("shop", "web");
    assert_eq!(p.get("dc3"), Some(&2), "failed back: {p:?}");
    assert!(run.h.state.failback_away(&key()).is_none());
    assert!(run.h.state.failback_pending(&key()).is_empty());
    let last = run
        .h
        .state
        .failback_last(&key())
        .cloned()
        .expect("recorded");
    assert_eq!(last.clusters, vec![("dc3".to_string(), since)]);
    assert_eq!(last.held_seconds, HELD_S);
    // Make-before-break: dc1 and dc2 keep their 3 until dc3's replicas are ready.
    assert_eq!(run.h.state.held_on(&key(), "dc1"), Some(3));
    assert_eq!(run.h.state.held_on(&key(), "dc2"), Some(3));
    run.report_all_ready();
    assert!(run.h.state.handover(&key()).is_none());

    // The same history replays to the same state, and a snapshot keeps the tables.
    let mut replayed = State::new();
    for (i, (t, cmd)) in run.log.iter().enumerate() {
        replayed.apply(i as u64 + 1, &LogEntry::new("", "test", *t, cmd.clone()));
    }
    assert_eq!(replayed.state_hash(), run.h.state.state_hash());
    let restored = State::from_snapshot(&run.h.state.to_snapshot()).expect("snapshot");
    assert_eq!(restored.state_hash(), run.h.state.state_hash());
    assert_eq!(restored.failback_last(&key()), Some(&last));
}

#[test]
fn never_keeps_replicas_where_failover_put_them() {
    let mut run = failed_over(FailBack::Never);
    assert!(run.h.state.failback_away(&key()).is_none());
    run.beat(&["dc1", "dc2", "dc3"], (HELD_S + 120) * 1000);
    ready_since(&run.h, "dc3");
    let p = run.h.placement("shop", "web");
    assert!(!p.contains_key("dc3"), "{p:?}");
    assert!(run.h.state.failback_last(&key()).is_none());
}

#[test]
fn a_flap_restarts_the_count_and_a_plain_put_keeps_the_choice() {
    let mut run = failed_over(FailBack::AfterRecoveryHeld(HELD_S));
    // A plain put (same spec) keeps the object's choice.
    run.ok(Command::PutObject {
        namespace: "shop".into(),
        name: "web".into(),
        spec: spec(deployment("web", 6, 100), divided(None)),
        expected_version: None,
    });
    assert_eq!(
        run.h.state.failback(&key()),
        FailBack::AfterRecoveryHeld(HELD_S)
    );
    // dc3 Ready for a while, then dark again before the hold is over.
    run.beat(&["dc1", "dc2", "dc3"], 60_000);
    let first = ready_since(&run.h, "dc3");
    run.beat(&["dc1", "dc2"], 120_000);
    assert_ne!(
        run.h.state.cluster("dc3").map(|c| c.status.health),
        Some(fedraft_core::model::Health::Ready)
    );
    // Past the first recovery's hold: dc3 is not Ready, nothing moves.
    run.beat(
        &["dc1", "dc2"],
        (first + HELD_S * 1000).saturating_sub(run.h.now_ms) + 10_000,
    );
    assert!(!run.h.placement("shop", "web").contains_key("dc3"));
    // Back again: the hold counts from the second recovery.
    run.beat(&["dc1", "dc2", "dc3"], 60_000);
    let second = ready_since(&run.h, "dc3");
    assert!(second > first);
    run.beat(&["dc1", "dc2", "dc3"], HELD_S * 1000 - 60_000);
    assert!(!run.h.placement("shop", "web").contains_key("dc3"));
    run.beat(&["dc1", "dc2", "dc3"], 70_000);
    assert_eq!(run.h.placement("shop", "web").get("dc3"), Some(&2));
}

#[test]
fn a_refused_choice_changes_nothing_and_never_forgets() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let r = h.refused(put(FailBack::AfterRecoveryHeld(8 * 24 * 3600)));
    assert_eq!(r.field.as_deref(), Some("failBack.afterRecoveryHeld"));
    assert!(h.state.object("shop", "web").is_none());
    h.ok(put(FailBack::AfterRecoveryHeld(60)));
    assert_eq!(h.state.failback(&key()), FailBack::AfterRecoveryHeld(60));
    h.ok(put(FailBack::Never));
    assert_eq!(h.state.failback(&key()), FailBack::Never);
    // Deleting the object forgets its choice.
    h.ok(put(FailBack::AfterRecoveryHeld(60)));
    h.ok(Command::DeleteObject {
        namespace: "shop".into(),
        name: "web".into(),
        expected_version: None,
    });
    assert_eq!(h.state.failback(&key()), FailBack::Never);
}
