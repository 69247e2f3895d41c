//! Health from several vantage points and the failover brake: a broken link between the owner
//! and one cluster holds it Ready, a second failing vantage (or a stale owner) makes it
//! NotReady with its reasons, a burst of failures pauses failover until the share drops back,
//! and entries of older versions replay as they did.

use crate::state_support::*;
use std::collections::BTreeMap;

use fedraft_core::command::{
    Command, Heartbeat, LogEntry, ReachabilityReport, LOG_ENTRY_VERSION, STEADY_SPREAD_SINCE,
};
use fedraft_core::health::{FailureKind, HealthPolicy, ProbeFailure, VANTAGE_LEASE_MS};
use fedraft_core::model::Health;
use fedraft_core::policy::SpreadConstraint;
use fedraft_core::state::{Applied, State};

const S: u64 = 1000;
const N1: &str = "system:executor:node1";
const N2: &str = "system:executor:node2";
const N3: &str = "system:executor:node3";

fn as_actor(h: &mut Harness, actor: &str, version: u16, command: Command) -> Applied {
    h.index += 1;
    let mut e = LogEntry::new("", actor, h.now_ms, command);
    e.version = version;
    let a = h.state.apply(h.index, &e);
    assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
    a
}

fn beat(h: &mut Harness, names: &[&str]) {
    let hb = names
        .iter()
        .map(|n| Heartbeat {
            cluster: n.to_string(),
            capacity: Some(big_capacity()),
        })
        .collect();
    as_actor(h, N1, 9, Command::Heartbeats(hb));
}

fn report(h: &mut Harness, actor: &str, cluster: &str, failure: Option<&str>) {
    let r = ReachabilityReport {
        cluster: cluster.into(),
        failure: failure.map(|m| ProbeFailure::new(FailureKind::Timeout, m)),
    };
    as_actor(h, actor, 9, Command::Reachability(vec![r]));
}

fn renew(h: &mut Harness, actor: &str) {
    as_actor(h, actor, 9, Command::Reachability(Vec::new()));
}

/// `steps` of 5 s where node1 and node2 renew their views and m2, m3 beat.
fn hold_on(h: &mut Harness, steps: usize) {
    for _ in 0..steps {
        h.advance(5 * S);
        beat(h, &["m2", "m3"]);
        renew(h, N1);
        renew(h, N2);
    }
}

fn health(h: &Harness, c: &str) -> Health {
    h.state.cluster(c).unwrap().status.health
}

/// Three clusters owned by node1, seen by all three nodes, one object of 6 replicas over them.
fn three() -> Harness {
    let mut h = Harness::new();
    for n in ["m1", "m2", "m3"] {
        h.register(n, &[]);
    }
    beat(&mut h, &["m1", "m2", "m3"]);
    for v in [N1, N2, N3] {
        for c in ["m1", "m2", "m3"] {
            report(&mut h, v, c, None);
        }
    }
    h.put(
        "team",
        "web",
        spec(deployment("web", 6, 100), divided(None)),
    );
    assert_eq!(h.placement("team", "web").len(), 3);
    h
}

#[test]
fn a_broken_link_holds_the_cluster_ready_until_a_second_vantage_fails() {
    let mut h = three();
    let before = h.placement("team", "web");
    // node1 loses m1 alone; node2 and node3 still reach it.
    report(
        &mut h,
        N1,
        "m1",
        Some("GET /readyz timed out after 3000 ms"),
    );
    for _ in 0..20 {
        h.advance(5 * S);
        beat(&mut h, &["m2", "m3"]);
        renew(&mut h, N1);
        renew(&mut h, N2);
        renew(&mut h, N3);
    }
    assert_eq!(
        health(&h, "m1"),
        Health::Ready,
        "a broken link is not acted on"
    );
    assert!(h.state.health().links.contains_key("m1"));
    assert_eq!(h.placement("team", "web"), before, "nothing moves");

    // node2 fails too: NotReady at the next entry, with both failures on record.
    report(&mut h, N2, "m1", Some("connection refused"));
    h.tick(S);
    let c = h.state.cluster("m1").unwrap();
    assert_eq!(c.status.health, Health::NotReady);
    assert_eq!(c.status.health_since_ms, h.now_ms);
    assert!(!h.state.health().links.contains_key("m1"));
    let (reach, fail) = h.state.health().split("m1", h.now_ms);
    assert_eq!(reach, vec![N3]);
    let failed: Vec<&str> = fail.iter().map(|(v, _)| *v).collect();
    assert_eq!(failed, vec![N1, N2]);
    // The audit view at this index says why, naming both failing nodes and their errors.
    let view = fedraft_core::audit::view::StateView::of(&h.state, None);
    let why = view
        .clusters
        .iter()
        .find(|c| c.name == "m1")
        .and_then(|c| c.condition.clone())
        .expect("a NotReady cluster has a condition");
    assert!(why.contains("node1") && why.contains("node2"), "{why}");
    assert!(why.contains("connection refused"), "{why}");
    assert!(fail[0]
        .1
        .failure
        .as_ref()
        .unwrap()
        .message
        .contains("timed out"));
}

#[test]
fn a_stale_owner_does_not_hold_the_cluster() {
    let mut h = three();
    report(&mut h, N1, "m1", Some("timeout"));
    hold_on(&mut h, 8);
    assert_eq!(health(&h, "m1"), Health::Ready);
    // node1 stops renewing (its node is gone): once its report is stale, m1 is NotReady.
    h.advance(VANTAGE_LEASE_MS);
    renew(&mut h, N2);
    h.tick(S);
    assert_eq!(health(&h, "m1"), Health::NotReady);
}

#[test]
fn the_owner_heartbeating_again_heals_the_link() {
    let mut h = three();
    report(&mut h, N1, "m1", Some("timeout"));
    hold_on(&mut h, 8);
    assert!(h.state.health().links.contains_key("m1"));
    beat(&mut h, &["m1", "m2", "m3"]);
    assert!(h.state.health().links.is_empty());
    let own = &h.state.health().reach["m1"][N1];
    assert!(own.reachable());
}

/// `n` clusters with regions, Ready, one Divided object of `n` replicas.
fn fleet(n: usize) -> (Harness, Vec<String>) {
    let mut h = Harness::new();
    let names: Vec<String> = (0..n).map(|i| format!("c{i:02}")).collect();
    for (i, name) in names.iter().enumerate() {
        let region = if i < n / 2 { "east" } else { "west" };
        h.register(name, &[("topology.kubernetes.io/region", region)]);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    h.heartbeat(&refs, Some(big_capacity()));
    h.put(
        "team",
        "web",
        spec(deployment("web", n as u32, 100), divided(None)),
    );
    (h, names)
}

#[test]
fn a_burst_of_failures_pauses_failover_until_the_share_drops_back() {
    let (mut h, names) = fleet(12);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let before = h.placement("team", "web");
    // 7 of 12 (58 %) fall silent at once; the others keep beating.
    let (dark, alive) = refs.split_at(7);
    for _ in 0..40 {
        h.advance(5 * S);
        h.heartbeat(alive, None);
    }
    assert!(dark.iter().all(|c| health(&h, c) == Health::NotReady));
    let brake = &h.state.health().brake;
    let e = brake.fleet.as_ref().expect("the brake holds the fleet");
    assert_eq!((e.not_ready, e.total), (7, 12));
    assert_eq!(
        h.placement("team", "web"),
        before,
        "200 s after failing, far past the 60 s grace, nothing moved"
    );

    // Two recover: 5 of 12 is under the share, the brake releases and failover proceeds.
    let mut back = alive.to_vec();
    back.extend(&dark[..2]);
    for _ in 0..8 {
        h.advance(5 * S);
        h.heartbeat(&back, None);
    }
    assert!(h.state.health().brake.fleet.is_none());
    for _ in 0..5 {
        h.tick(S);
    }
    let after = h.placement("team", "web");
    assert!(
        dark[2..].iter().all(|c| !after.contains_key(*c)),
        "{after:?}"
    );
    assert_eq!(total(&after), 12);
}

/// Eight east clusters and "w5" in the west, Ready; a Deployment of 4 spread over exactly two
/// regions placed there; then "w1" joins the west (first by name, so the heaviest-then-first
/// choice would now pick it). Returns the placement before and after the east goes dark for
/// 200 s with every entry of that time at envelope `version`: the brake holds the fleet, and
/// the failover timers re-place the object with the east held.
fn spread_object_through_a_held_region(
    version: u16,
) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
    const REGION: &str = "topology.kubernetes.io/region";
    let mut h = Harness::new();
    let east: Vec<String> = (0..8).map(|i| format!("e{i}")).collect();
    for name in &east {
        h.register(name, &[(REGION, "east")]);
    }
    h.register("w5", &[(REGION, "west")]);
    let mut all: Vec<&str> = east.iter().map(String::as_str).collect();
    all.push("w5");
    h.heartbeat(&all, Some(big_capacity()));
    let mut p = divided(None);
    p.spread_constraints = vec![SpreadConstraint {
        label_key: REGION.into(),
        min_groups: 2,
        max_groups: 2,
    }];
    h.put("team", "web", spec(deployment("web", 4, 100), p));
    h.register("w1", &[(REGION, "west")]);
    h.heartbeat(&["w1"], Some(big_capacity()));
    let before = h.placement("team", "web");
    for _ in 0..40 {
        h.advance(5 * S);
        let hb = ["w1", "w5"]
            .iter()
            .map(|n| Heartbeat {
                cluster: n.to_string(),
                capacity: None,
            })
            .collect();
        as_actor(&mut h, "test", version, Command::Heartbeats(hb));
    }
    assert!(east.iter().all(|c| health(&h, c) == Health::NotReady));
    assert!(h.state.health().brake.fleet.is_some(), "the brake holds");
    assert_eq!(h.state.failover_timers_pending(), 0, "every timer fired");
    (before, h.placement("team", "web"))
}

#[test]
fn a_held_failover_leaves_the_healthy_regions_replica_where_it_runs() {
    let (before, after) = spread_object_through_a_held_region(LOG_ENTRY_VERSION);
    assert_eq!(before.get("w5"), Some(&1), "{before:?}");
    assert_eq!(after, before, "nothing moved while the brake held");
}

#[test]
fn entries_before_version_17_move_a_spread_replica_to_the_heaviest_cluster_as_they_did() {
    let (before, after) = spread_object_through_a_held_region(STEADY_SPREAD_SINCE - 1);
    assert_eq!(before.get("w5"), Some(&1), "{before:?}");
    assert_eq!(after.get("w1"), Some(&1), "{after:?}");
    assert!(!after.contains_key("w5"), "{after:?}");
}

#[test]
fn a_slow_failure_or_a_small_fleet_fails_over_as_before() {
    let (mut h, names) = fleet(6);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (dark, alive) = refs.split_at(4);
    for _ in 0..25 {
        h.advance(5 * S);
        h.heartbeat(alive, None);
    }
    assert!(
        !h.state.health().brake.is_engaged(),
        "6 clusters are too few"
    );
    let after = h.placement("team", "web");
    assert!(dark.iter().all(|c| !after.contains_key(*c)), "{after:?}");
}

#[test]
fn region_brake_holds_one_region_and_policy_is_admin_only() {
    let (mut h, names) = fleet(12);
    let policy = HealthPolicy {
        fleet_percent: 0,
        region_percent: 50,
        ..HealthPolicy::default()
    };
    h.ok(Command::SetHealthPolicy(HealthPolicy {
        min_clusters: 4,
        ..policy.clone()
    }));
    assert_eq!(h.state.health().policy.region_percent, 50);
    // 4 of east's 6 fall silent: east brakes, west does not.
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let alive: Vec<&str> = refs[4..].to_vec();
    for _ in 0..10 {
        h.advance(5 * S);
        h.heartbeat(&alive, None);
    }
    let b = &h.state.health().brake;
    assert!(b.fleet.is_none() && b.regions.contains_key("east") && b.regions.len() == 1);

    let mut t = Harness::new();
    t.index = 0;
    t.index += 1;
    let e = LogEntry::new(
        "",
        "tenant:a/bob",
        t.now_ms,
        Command::SetHealthPolicy(policy),
    );
    assert!(!t.state.apply(t.index, &e).outcome.is_accepted());
    let bad = HealthPolicy {
        fleet_percent: 101,
        ..HealthPolicy::default()
    };
    assert!(!t.apply(Command::SetHealthPolicy(bad)).outcome.is_accepted());
}

#[test]
fn entries_before_version_9_never_hold_or_brake() {
    let (mut h, names) = fleet(12);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let alive: Vec<&str> = refs[7..].to_vec();
    for _ in 0..40 {
        h.advance(5 * S);
        let hb = alive
            .iter()
            .map(|n| Heartbeat {
                cluster: n.to_string(),
                capacity: None,
            })
            .collect();
        as_actor(&mut h, "test", 8, Command::Heartbeats(hb));
    }
    assert!(!h.state.health().brake.is_engaged());
    assert!(h.state.health().is_trivial());
    let after = h.placement("team", "web");
    assert!(refs[..7].iter().all(|c| !after.contains_key(*c)));
}

#[test]
fn the_health_book_survives_a_snapshot() {
    let mut h = three();
    report(&mut h, N1, "m1", Some("timeout"));
    hold_on(&mut h, 8);
    assert!(!h.state.health().is_trivial());
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.health(), h.state.health());
    assert_eq!(restored.state_hash_hex(), h.state.state_hash_hex());
    restored.check_consistency().unwrap();
}
