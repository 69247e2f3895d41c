//! Cluster health in log time: hysteresis, unreachable hints, failover after the grace period
//! at a bounded rate, recovery with and without rebalance, and stalls of the log itself.

use crate::state_support::*;
use fedraft_core::command::{
    Command, Heartbeat, LogEntry, FAILOVER_OVERDUE_SINCE, LOG_STALL_SINCE, WIDER_DRAIN_SINCE,
};
use fedraft_core::health::LOG_STALL_MS;
use fedraft_core::model::Health;
use fedraft_core::state::{reschedule_objects_per_entry, State, RESCHEDULE_OBJECTS_PER_ENTRY};

const S: u64 = 1000;

#[test]
fn registration_unknown_then_ready_on_first_heartbeat() {
    let mut h = Harness::new();
    h.register("dc1", &[]);
    assert_eq!(
        h.state.cluster("dc1").unwrap().status.health,
        Health::Unknown
    );
    h.advance(5 * S);
    let a = h.heartbeat(&["dc1"], None);
    let c = h.state.cluster("dc1").unwrap();
    assert_eq!(c.status.health, Health::Ready);
    assert_eq!(c.status.health_since_ms, T0 + 5 * S);
    assert_eq!(
        c.resource_version, a.index,
        "a health change bumps the resource version"
    );
}

#[test]
fn not_ready_only_after_failure_threshold_and_dated_at_the_deadline() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let last = h.now_ms;
    // Exactly the threshold: still Ready (a gap of the threshold is tolerated).
    h.tick(30 * S);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
    h.tick(1);
    let c = h.state.cluster("dc1").unwrap();
    assert_eq!(c.status.health, Health::NotReady);
    assert_eq!(c.status.health_since_ms, last + 30 * S);
}

#[test]
fn recovery_needs_success_threshold_of_uninterrupted_heartbeats() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    h.tick(31 * S);
    assert_eq!(
        h.state.cluster("dc1").unwrap().status.health,
        Health::NotReady
    );
    // 20 s of heartbeats, then a 40 s gap: the run breaks and starts over.
    h.heartbeat(&["dc1"], None);
    h.heartbeat_for(&["dc1"], 20 * S, 5 * S);
    h.tick(40 * S);
    h.heartbeat(&["dc1"], None);
    h.heartbeat_for(&["dc1"], 25 * S, 5 * S);
    assert_eq!(
        h.state.cluster("dc1").unwrap().status.health,
        Health::NotReady
    );
    h.heartbeat_for(&["dc1"], 5 * S, 5 * S);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
}

#[test]
fn unreachable_hint_does_not_shortcut_the_threshold_but_breaks_recovery() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    h.advance(S);
    h.ok(Command::ClusterUnreachable {
        cluster: "dc1".into(),
    });
    h.tick(20 * S);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
    h.tick(20 * S);
    assert_eq!(
        h.state.cluster("dc1").unwrap().status.health,
        Health::NotReady
    );
    h.heartbeat(&["dc1"], None);
    h.heartbeat_for(&["dc1"], 20 * S, 5 * S);
    h.ok(Command::ClusterUnreachable {
        cluster: "dc1".into(),
    });
    h.heartbeat_for(&["dc1"], 20 * S, 5 * S);
    assert_eq!(
        h.state.cluster("dc1").unwrap().status.health,
        Health::NotReady,
        "the hint restarted the 30 s run"
    );
    // The new run started at the first heartbeat after the hint: 30 s later it is Ready.
    h.heartbeat_for(&["dc1"], 15 * S, 5 * S);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
}

#[test]
fn log_time_never_goes_backwards() {
    let mut h = Harness::new();
    h.tick(10 * S);
    let t = h.state.log_time_ms();
    h.now_ms -= 5 * S;
    h.ok(Command::Tick);
    assert_eq!(h.state.log_time_ms(), t);
}

#[test]
fn short_disconnect_moves_nothing() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 4, 100), divided(None)));
    let before = h.placement("ns", "web");
    let rv = h.obj("ns", "web").resource_version;
    h.heartbeat(&["dc2"], None);
    h.tick(25 * S);
    h.heartbeat(&["dc1", "dc2"], None);
    h.tick(25 * S);
    assert_eq!(h.placement("ns", "web"), before);
    assert_eq!(h.obj("ns", "web").resource_version, rv);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
}

#[test]
fn failover_after_grace_period_then_no_move_back_without_rebalance() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 4, 100), divided(None)));
    assert_eq!(h.placement("ns", "web").len(), 2);
    // dc1 falls silent: NotReady after 30 s, replicas stay through the 60 s grace period.
    for _ in 0..8 {
        h.advance(10 * S);
        h.heartbeat(&["dc2"], None);
    }
    assert_eq!(
        h.state.cluster("dc1").unwrap().status.health,
        Health::NotReady
    );
    assert_eq!(
        h.placement("ns", "web").len(),
        2,
        "inside the grace period nothing moves"
    );
    for _ in 0..3 {
        h.advance(10 * S);
        h.heartbeat(&["dc2"], None);
    }
    let p = h.placement("ns", "web");
    assert_eq!(
        p.get("dc2"),
        Some(&4),
        "all replicas failed over to dc2: {p:?}"
    );
    // dc1 comes back: without rebalance nothing moves back.
    h.heartbeat(&["dc1", "dc2"], None);
    h.heartbeat_for(&["dc1", "dc2"], 40 * S, 5 * S);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
    assert_eq!(h.placement("ns", "web").get("dc2"), Some(&4));
}

#[test]
fn recovery_moves_back_with_rebalance() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put(
        "ns",
        "web",
        spec(deployment("web", 4, 100), static_weights(&[("*", 1)], true)),
    );
    assert_eq!(h.placement("ns", "web").get("dc1"), Some(&2));
    for _ in 0..10 {
        h.advance(10 * S);
        h.heartbeat(&["dc2"], None);
    }
    assert_eq!(h.placement("ns", "web").get("dc2"), Some(&4));
    h.heartbeat(&["dc1", "dc2"], None);
    h.heartbeat_for(&["dc1", "dc2"], 35 * S, 5 * S);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
    let p = h.placement("ns", "web");
    assert_eq!((p.get("dc1"), p.get("dc2")), (Some(&2), Some(&2)), "{p:?}");
}

#[test]
fn failover_is_rate_limited_per_entry() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    let n = RESCHEDULE_OBJECTS_PER_ENTRY + 100;
    for i in 0..n {
        h.put(
            "ns",
            &format!("o{i}"),
            spec(deployment("o", 1, 10), divided(Some(&["dc1", "dc2"]))),
        );
    }
    let on_dc1 = h
        .state
        .objects()
        .filter(|o| o.replicas_on("dc1") > 0)
        .count();
    assert!(
        on_dc1 > RESCHEDULE_OBJECTS_PER_ENTRY,
        "{on_dc1} objects on dc1"
    );
    // dc1 silent for 30 s threshold + 60 s grace.
    h.advance(30 * S);
    h.heartbeat(&["dc2"], None);
    h.advance(30 * S);
    h.heartbeat(&["dc2"], None);
    h.advance(30 * S);
    h.heartbeat(&["dc2"], None);
    h.advance(2 * S);
    let a = h.heartbeat(&["dc2"], None);
    assert_eq!(a.decisions.len(), RESCHEDULE_OBJECTS_PER_ENTRY);
    assert_eq!(
        h.state.pending_reschedules(),
        on_dc1 - RESCHEDULE_OBJECTS_PER_ENTRY
    );
    let a = h.tick(S);
    assert_eq!(a.decisions.len(), on_dc1 - RESCHEDULE_OBJECTS_PER_ENTRY);
    assert_eq!(
        h.state
            .objects()
            .filter(|o| o.replicas_on("dc1") > 0)
            .count(),
        0
    );
}

/// An entry written before the wider drain re-places as many queued objects as it did when
/// it was written, so an old log replays to the same state; the next entry drains at the
/// current bound.
#[test]
fn older_entries_drain_the_queue_at_their_own_bound() {
    let old = WIDER_DRAIN_SINCE - 1;
    let (old_bound, bound) = (
        reschedule_objects_per_entry(old),
        RESCHEDULE_OBJECTS_PER_ENTRY,
    );
    assert!(old_bound < bound);
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    let n = old_bound + bound + 10;
    for i in 0..n {
        h.put(
            "ns",
            &format!("o{i}"),
            spec(deployment("o", 1, 10), divided(Some(&["dc1"]))),
        );
    }
    // dc1 silent for 30 s threshold + 60 s grace; the entry that fires the timers is an old one.
    for _ in 0..3 {
        h.advance(30 * S);
        h.heartbeat(&["dc2"], None);
    }
    h.advance(2 * S);
    h.fill_gap();
    h.index += 1;
    let beat = Heartbeat {
        cluster: "dc2".into(),
        capacity: None,
    };
    let mut entry = LogEntry::new("", "test", h.now_ms, Command::Heartbeats(vec![beat]));
    entry.version = old;
    let a = h.state.apply(h.index, &entry);
    assert_eq!(a.decisions.len(), old_bound);
    assert_eq!(h.state.pending_reschedules(), n - old_bound);
    let a = h.tick(S);
    assert_eq!(a.decisions.len(), bound);
    assert_eq!(h.tick(S).decisions.len(), 10);
    assert_eq!(h.state.pending_reschedules(), 0);
}

#[test]
fn heartbeat_without_health_change_makes_no_decisions_and_no_changes() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    for i in 0..50 {
        h.put(
            "ns",
            &format!("o{i}"),
            spec(deployment("o", 2, 10), divided(None)),
        );
    }
    h.advance(5 * S);
    let a = h.heartbeat(&["dc1", "dc2"], Some(big_capacity()));
    assert!(a.decisions.is_empty());
    assert!(a.changes.is_empty());
}

/// dc1 of `[dc1, dc2]` falls silent with `web` (4 replicas, failover grace 0 s) on both; the
/// tick that finds it NotReady carries log version `version`. Returns web's placement after it.
fn silent_with_no_grace(version: u16) -> std::collections::BTreeMap<String, u32> {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    let mut s = spec(deployment("web", 4, 100), divided(None));
    s.placement.failover.grace_period_seconds = 0;
    h.put("ns", "web", s);
    assert_eq!(h.placement("ns", "web").len(), 2);
    for _ in 0..3 {
        h.advance(10 * S);
        h.heartbeat(&["dc2"], None);
    }
    h.advance(S);
    h.index += 1;
    let mut tick = LogEntry::new("", "test", h.now_ms, Command::Tick);
    tick.version = version;
    h.state.apply(h.index, &tick);
    assert_eq!(
        h.state.cluster("dc1").unwrap().status.health,
        Health::NotReady
    );
    h.placement("ns", "web")
}

#[test]
fn a_grace_shorter_than_detection_fails_over_at_once() {
    // NotReady is dated at the deadline, 30 s after the last heartbeat, and noticed 1 s later:
    // the grace of 0 s had run out before anyone knew, so no timer is left to fire.
    let p = silent_with_no_grace(FAILOVER_OVERDUE_SINCE);
    assert_eq!(p.get("dc2"), Some(&4), "failed over at once: {p:?}");
    assert_eq!(p.get("dc1"), None, "{p:?}");
    // Before version 10 such an object waited for its next placement change, and replays so.
    let p = silent_with_no_grace(FAILOVER_OVERDUE_SINCE - 1);
    assert_eq!(p.get("dc1"), Some(&2), "{p:?}");
}

#[test]
fn a_stalled_log_restarts_every_failure_threshold_at_its_end() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let last = h.now_ms;
    h.advance(10 * S);
    h.tick(0);
    // 25 s in which nothing committed: 35 s since the heartbeat, 30 s threshold, still Ready.
    h.stall(25 * S);
    h.tick(0);
    let resumed = h.now_ms;
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
    let stall = h.state.health().stall.expect("the stall is recorded");
    assert_eq!((stall.from_ms, stall.to_ms), (last + 10 * S, resumed));
    // A live log counts again from the end of the stall: the whole threshold, then NotReady,
    // dated at that deadline.
    h.tick(30 * S);
    assert_eq!(h.state.cluster("dc1").unwrap().status.health, Health::Ready);
    h.tick(1);
    let c = h.state.cluster("dc1").unwrap();
    assert_eq!(c.status.health, Health::NotReady);
    assert_eq!(c.status.health_since_ms, resumed + 30 * S);
    assert_eq!(
        c.status.last_heartbeat_ms,
        Some(last),
        "the record stays true"
    );
    h.state.check_consistency().unwrap();
}

#[test]
fn a_gap_of_the_stall_limit_is_a_live_log() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let last = h.now_ms;
    for _ in 0..6 {
        h.stall(LOG_STALL_MS);
        h.tick(0);
    }
    assert!(h.state.health().stall.is_none());
    h.stall(1);
    h.tick(0);
    let c = h.state.cluster("dc1").unwrap();
    assert_eq!(c.status.health, Health::NotReady);
    assert_eq!(c.status.health_since_ms, last + 30 * S);
}

#[test]
fn entries_older_than_the_stall_rule_count_the_stall_against_clusters() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let last = h.now_ms;
    h.stall(31 * S);
    h.index += 1;
    let mut tick = LogEntry::new("", "test", h.now_ms, Command::Tick);
    tick.version = LOG_STALL_SINCE - 1;
    h.state.apply(h.index, &tick);
    let c = h.state.cluster("dc1").unwrap();
    assert_eq!(c.status.health, Health::NotReady);
    assert_eq!(c.status.health_since_ms, last + 30 * S);
    assert!(h.state.health().stall.is_none());
}

#[test]
fn a_snapshot_keeps_the_stall_and_its_deadlines() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    let before = h.state.state_hash_hex();
    h.stall(40 * S);
    h.tick(0);
    assert_ne!(
        h.state.state_hash_hex(),
        before,
        "the stall is replicated state"
    );
    let mut restored = Harness {
        state: State::from_snapshot(&h.state.to_snapshot()).expect("the snapshot decodes"),
        index: h.index,
        now_ms: h.now_ms,
        stalled: false,
    };
    assert_eq!(restored.state.state_hash_hex(), h.state.state_hash_hex());
    restored.state.check_consistency().unwrap();
    // Both expire dc1 and dc2 at the same entry, 30 s after the stall ended.
    for _ in 0..31 {
        let a = h.tick(S);
        let b = restored.tick(S);
        assert_eq!(a.changes, b.changes);
        assert_eq!(h.state.state_hash_hex(), restored.state.state_hash_hex());
    }
    assert_eq!(
        h.state.cluster("dc2").unwrap().status.health,
        Health::NotReady
    );
}
