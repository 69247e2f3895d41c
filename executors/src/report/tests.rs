//! Unit tests of the reporting rules: what each flush proposes against a state built by
//! applying real commands, and the helpers the reporter's own tests share.

use super::*;
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::health::FailureKind;
use fedraft_core::model::ClusterSpec;
use fedraft_core::policy::Resources;

fn down() -> ProbeFailure {
    ProbeFailure::new(FailureKind::Error, "connection refused")
}

fn names(r: &[ReachabilityReport]) -> Vec<&str> {
    assert!(r.iter().all(|r| r.failure == Some(down())));
    r.iter().map(|r| r.cluster.as_str()).collect()
}

pub(crate) fn state_with(clusters: &[&str]) -> State {
    let mut s = State::new();
    let mut i = 0;
    for c in clusters {
        i += 1;
        let cmd = Command::RegisterCluster(ClusterSpec::new(*c, format!("http://{c}:1")));
        s.apply(i, &LogEntry::new(format!("r{i}"), "admin", 1000, cmd));
    }
    s
}

pub(crate) fn cap(cpu: u64) -> Capacity {
    let r = Resources {
        cpu_millis: cpu,
        memory_bytes: 1,
        pods: 1,
    };
    Capacity {
        allocatable: r,
        available: r,
    }
}

#[test]
fn heartbeats_carry_capacity_only_when_new() {
    let mut s = state_with(&["dc1", "dc2", "dc3"]);
    let obs = Observations::default();
    let mut sent = Sent::default();
    let t0 = Instant::now();
    let fresh = Duration::from_secs(8);
    obs.probe_ok("dc1", Some(cap(1000)));
    obs.probe_ok("dc2", None);
    obs.probe_failed("dc3", down());
    let f = obs.take_health(&s, &mut sent, fresh, t0);
    assert_eq!(
        f.heartbeats,
        vec![
            Heartbeat {
                cluster: "dc1".into(),
                capacity: Some(cap(1000))
            },
            Heartbeat {
                cluster: "dc2".into(),
                capacity: None
            },
        ]
    );
    assert_eq!(names(&f.unreachable), vec!["dc3"]);

    // In flight: not repeated; the dark cluster is not hinted again.
    obs.probe_failed("dc3", down());
    let f = obs.take_health(&s, &mut sent, fresh, t0 + Duration::from_secs(1));
    assert_eq!(f.heartbeats[0].capacity, None);
    assert!(f.unreachable.is_empty());

    // Once the state holds it, an unchanged scan is not sent either, even after the resend
    // window.
    let hb = Command::Heartbeats(vec![Heartbeat {
        cluster: "dc1".into(),
        capacity: Some(cap(1000)),
    }]);
    s.apply(10, &LogEntry::new("hb", "x", 2000, hb));
    obs.probe_ok("dc1", Some(cap(1000)));
    let f = obs.take_health(&s, &mut sent, fresh, t0 + Duration::from_secs(2));
    assert_eq!(f.heartbeats[0].capacity, None);
    // A changed scan is.
    obs.probe_ok("dc1", Some(cap(500)));
    let f = obs.take_health(&s, &mut sent, fresh, t0 + Duration::from_secs(3));
    assert_eq!(f.heartbeats[0].capacity, Some(cap(500)));

    // A stale success is no heartbeat.
    let f = obs.take_health(
        &s,
        &mut sent,
        fresh,
        Instant::now() + Duration::from_secs(60),
    );
    assert!(f.heartbeats.is_empty());
    // Recovering then failing again hints again.
    obs.probe_ok("dc3", None);
    obs.probe_failed("dc3", down());
    let f = obs.take_health(&s, &mut sent, fresh, Instant::now());
    assert_eq!(names(&f.unreachable), vec!["dc3"]);
}

#[test]
fn short_messages() {
    assert_eq!(short_message("abc"), "abc");
    let long = "é".repeat(400);
    let cut = short_message(&long);
    assert!(cut.len() <= MAX_MESSAGE_BYTES && long.starts_with(&cut));
}

/// A state with clusters `a` and `b`, both up, and a ConfigMap `ns/cm-{c}` placed on each.
fn state_with_one_object_per_cluster() -> State {
    let mut s = state_with(&["a", "b"]);
    let mut i = 10;
    for c in ["a", "b"] {
        i += 1;
        let up = Command::Heartbeats(vec![Heartbeat {
            cluster: c.into(),
            capacity: Some(cap(1000)),
        }]);
        s.apply(i, &LogEntry::new(format!("up{i}"), "executor", 1500, up));
        let spec = serde_json::from_value(serde_json::json!({
            "template": serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{c}")}, "data": {"k": "v"}}).to_string(),
            "placement": {"clusters": [c]},
        }))
        .expect("an object spec");
        i += 1;
        let put = Command::PutObject {
            namespace: "ns".into(),
            name: format!("cm-{c}"),
            spec,
            expected_version: None,
        };
        let applied = s.apply(i, &LogEntry::new(format!("put{i}"), "admin", 2000, put));
        assert!(applied.outcome.is_accepted(), "{:?}", applied.outcome);
    }
    s
}

fn applied_report(c: &str) -> HeldStatus {
    let key = fedraft_core::model::ObjectKey::new("ns", format!("cm-{c}"));
    object_report(&std::sync::Arc::new(key), true, 0, None)
}

fn clusters_of(batch: &[StatusReportAt]) -> Vec<&str> {
    batch.iter().map(|r| r.report.cluster.as_str()).collect()
}

#[test]
fn a_changed_sweep_compares_only_clusters_reported_on_since_and_a_full_one_all() {
    let s = state_with_one_object_per_cluster();
    let obs = Observations::default();
    let mut sent = Sent::default();
    let t0 = Instant::now();
    obs.set_statuses("a", 20, vec![applied_report("a")], Vec::new());
    obs.set_statuses("b", 20, vec![applied_report("b")], Vec::new());
    let first = obs.take_statuses(&s, &mut sent, t0, Sweep::Changed);
    assert_eq!(clusters_of(&first), ["a", "b"], "both were reported on");
    // Nothing new, and both guarded while in flight: a changed sweep looks at nothing.
    let t1 = t0 + RESEND_AFTER * 2;
    assert!(obs
        .take_statuses(&s, &mut sent, t1, Sweep::Changed)
        .is_empty());
    // A full sweep past the guard sends both again: their proposals never committed.
    let again = obs.take_statuses(&s, &mut sent, t1, Sweep::Full);
    assert_eq!(clusters_of(&again), ["a", "b"]);
    // A pass on `b` alone: a changed sweep past the guard looks at `b` only.
    obs.set_statuses("b", 21, vec![applied_report("b")], Vec::new());
    let t2 = t1 + RESEND_AFTER * 2;
    let changed = obs.take_statuses(&s, &mut sent, t2, Sweep::Changed);
    assert_eq!(clusters_of(&changed), ["b"]);
    assert_eq!(changed[0].as_of, 21);
}

#[test]
fn a_guard_goes_once_the_state_holds_its_report() {
    let mut s = state_with_one_object_per_cluster();
    let obs = Observations::default();
    let mut sent = Sent::default();
    let now = Instant::now();
    obs.set_statuses("a", 20, vec![applied_report("a")], Vec::new());
    let batch = obs.take_statuses(&s, &mut sent, now, Sweep::Full);
    assert_eq!(clusters_of(&batch), ["a"]);
    assert_eq!(sent.statuses.len(), 1, "guarded while in flight");
    let entry = LogEntry::new("st", "executor", 2500, Command::StatusReportsAt(batch));
    let applied = s.apply(30, &entry);
    assert!(applied.outcome.is_accepted(), "{:?}", applied.outcome);
    assert!(obs
        .take_statuses(&s, &mut sent, now, Sweep::Full)
        .is_empty());
    assert!(
        sent.statuses.is_empty(),
        "the state holds it: no guard left"
    );
    // The object's status changes under it (say, another report): the same report differs
    // again and goes out at once, no guard in its way.
    let mut stale = applied_report("a");
    stale.applied = false;
    let other = LogEntry::new(
        "st2",
        "executor",
        2600,
        Command::StatusReportsAt(vec![StatusReportAt {
            report: stale.on("a"),
            as_of: 30,
        }]),
    );
    s.apply(31, &other);
    let resent = obs.take_statuses(&s, &mut sent, now, Sweep::Full);
    assert_eq!(clusters_of(&resent), ["a"]);
}
