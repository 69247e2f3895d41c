//! Cluster ownership in the log: leases renew and place clusters near their nodes and evenly,
//! owners stay while their lease is live, a lease expiring moves its clusters at that entry,
//! the health rules weigh each cluster's own owner, snapshots keep the book, and entries of
//! older versions replay as they did.

use std::collections::BTreeMap;

use crate::state_support::*;
use fedraft_core::command::{Command, Heartbeat, LogEntry, LOG_ENTRY_VERSION};
use fedraft_core::owners::{ExecutorLease, OWNERS_SINCE};
use fedraft_core::state::{Applied, State};
use proptest::prelude::*;

const S: u64 = 1000;
const LEASE: u64 = 10 * S;
const REGION: &str = "topology.kubernetes.io/region";

fn node(i: usize) -> String {
    format!("system:executor:node{i}")
}

fn as_actor(h: &mut Harness, actor: &str, version: u16, command: Command) -> Applied {
    h.index += 1;
    let mut e = LogEntry::new("", actor, h.now_ms, command);
    e.version = version;
    h.state.apply(h.index, &e)
}

fn renew(h: &mut Harness, actor: &str, region: Option<&str>) {
    let lease = ExecutorLease {
        lease_ms: LEASE,
        locality: region
            .map(|r| (REGION.to_string(), r.to_string()))
            .into_iter()
            .collect(),
    };
    let a = as_actor(h, actor, LOG_ENTRY_VERSION, Command::ExecutorLease(lease));
    assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
}

/// Renews `nodes` every 4 s until the book formed (one lease after the first renewal).
fn form(h: &mut Harness, nodes: &[(usize, Option<&str>)]) {
    for step in 0..4 {
        if step > 0 {
            h.advance(4 * S);
        }
        for (n, r) in nodes {
            renew(h, &node(*n), *r);
        }
    }
    assert!(h.state.owners().in_force());
}

fn owners(h: &Harness) -> BTreeMap<String, String> {
    h.state
        .owners()
        .clusters
        .iter()
        .map(|(c, o)| (c.clone(), o.node.clone()))
        .collect()
}

fn counts(h: &Harness) -> Vec<usize> {
    h.state.owners().counts().values().copied().collect()
}

#[test]
fn clusters_go_to_their_region_and_spread_evenly_otherwise() {
    let mut h = Harness::new();
    h.register("eu1", &[(REGION, "eu")]);
    h.register("eu2", &[(REGION, "eu")]);
    h.register("us1", &[(REGION, "us")]);
    for i in 0..3 {
        h.register(&format!("x{i}"), &[]);
    }
    // The first lease opens the forming window: nothing is assigned before every node renewed.
    renew(&mut h, &node(1), Some("eu"));
    assert!(owners(&h).is_empty() && !h.state.owners().in_force());
    form(&mut h, &[(1, Some("eu")), (2, Some("us")), (3, Some("ap"))]);
    // Clusters registered later are assigned at once.
    for i in 3..6 {
        h.register(&format!("x{i}"), &[]);
    }
    let o = owners(&h);
    assert_eq!(o["eu1"], node(1));
    assert_eq!(o["eu2"], node(1));
    assert_eq!(o["us1"], node(2));
    assert_eq!(counts(&h), vec![3, 3, 3]);
    // The token is the node and the index at which it took the cluster.
    let eu1 = &h.state.owners().clusters["eu1"];
    assert_eq!(eu1.token(), format!("node1@{}", eu1.since_index));
}

#[test]
fn an_expired_lease_moves_its_clusters_at_that_entry_and_live_ones_stay() {
    let mut h = Harness::new();
    for i in 0..9 {
        h.register(&format!("m{i}"), &[]);
    }
    form(&mut h, &[(1, None), (2, None), (3, None)]);
    assert_eq!(counts(&h), vec![3, 3, 3]);
    let before = owners(&h);
    let tokens_before = h.state.owners().clusters.clone();
    // node3 goes quiet; node1 and node2 renew every 4 s.
    for _ in 0..2 {
        h.advance(4 * S);
        renew(&mut h, &node(1), None);
        renew(&mut h, &node(2), None);
    }
    assert_eq!(
        owners(&h),
        before,
        "nothing moves while every lease is live"
    );
    h.advance(3 * S); // 11 s after node3's last renewal
    let a = h.tick(0);
    let after = owners(&h);
    assert!(after.values().all(|n| *n != node(3)));
    assert_eq!(
        counts(&h),
        vec![5, 4],
        "node1 and node2 share node3's three"
    );
    for (c, was) in &tokens_before {
        let now = &h.state.owners().clusters[c];
        if was.node == node(3) {
            assert_eq!(now.since_index, a.index, "{c} moved at the expiring entry");
        } else {
            assert_eq!(now, was, "{c} stayed with its live owner");
        }
    }
    // node3 comes back: it takes nothing from live owners.
    renew(&mut h, &node(3), None);
    assert_eq!(owners(&h), after);
    // Deregistered clusters leave the book.
    h.ok(Command::DeregisterCluster {
        name: "m0".into(),
        expected_version: None,
    });
    assert!(!h.state.owners().clusters.contains_key("m0"));
}

#[test]
fn each_cluster_is_weighed_with_its_own_owner() {
    use fedraft_core::command::ReachabilityReport;
    use fedraft_core::health::{FailureKind, ProbeFailure};
    let mut h = Harness::new();
    form(&mut h, &[(1, None), (2, None)]);
    h.register("a", &[]);
    h.register("b", &[]);
    let o = owners(&h);
    assert_eq!(
        (o["a"].as_str(), o["b"].as_str()),
        (node(1).as_str(), node(2).as_str())
    );
    // node2 reports "a" unreachable: not its owner, so no hint on a's health.
    let r = |c: &str| ReachabilityReport {
        cluster: c.into(),
        failure: Some(ProbeFailure::new(FailureKind::Timeout, "down")),
    };
    let a = as_actor(
        &mut h,
        &node(2),
        LOG_ENTRY_VERSION,
        Command::Reachability(vec![r("a")]),
    );
    assert!(a.outcome.is_accepted());
    assert_eq!(
        h.state.cluster("a").unwrap().status.last_unreachable_ms,
        None
    );
    // ...but its report on "b", which it owns, is the owner's hint.
    as_actor(
        &mut h,
        &node(2),
        LOG_ENTRY_VERSION,
        Command::Reachability(vec![r("b")]),
    );
    assert_eq!(
        h.state.cluster("b").unwrap().status.last_unreachable_ms,
        Some(h.now_ms)
    );
}

#[test]
fn older_entries_never_touch_the_book_and_snapshots_keep_it() {
    let mut h = Harness::new();
    let lease = ExecutorLease {
        lease_ms: LEASE,
        locality: Vec::new(),
    };
    let a = as_actor(
        &mut h,
        &node(1),
        OWNERS_SINCE - 1,
        Command::ExecutorLease(lease),
    );
    assert!(
        !a.outcome.is_accepted(),
        "a version-9 entry cannot carry a lease"
    );
    h.register("m1", &[]);
    let hb = Command::Heartbeats(vec![Heartbeat {
        cluster: "m1".into(),
        capacity: Some(big_capacity()),
    }]);
    as_actor(&mut h, &node(1), OWNERS_SINCE - 1, hb);
    assert!(h.state.owners().is_empty());
    let plain = h.state.state_hash_hex();
    // The state of a log without leases hashes and snapshots as a version-8 one did: the
    // owners' book is the last part, and empty it is two zero lengths and no forming window.
    let full = h.state.to_snapshot();
    assert_eq!(full[0], 9);
    assert_eq!(full[full.len() - 3..], [0, 0, 0]);
    let mut v8 = full[..full.len() - 3].to_vec();
    v8[0] = 8;
    let old = State::from_snapshot(&v8).expect("a version-8 snapshot decodes");
    assert_eq!(old.state_hash_hex(), plain);

    renew(&mut h, &node(1), Some("eu"));
    assert_ne!(h.state.state_hash_hex(), plain);
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.owners(), h.state.owners());
    assert_eq!(restored.state_hash_hex(), h.state.state_hash_hex());
}

#[derive(Debug, Clone)]
enum Op {
    Renew(usize),
    Register(u8),
    Deregister(u8),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1..=3usize).prop_map(Op::Renew),
        3 => any::<u8>().prop_map(|c| Op::Register(c % 24)),
        1 => any::<u8>().prop_map(|c| Op::Deregister(c % 24)),
        2 => (0..8u64).prop_map(|s| Op::Advance(s * S)),
    ]
}

fn run(ops: &[Op]) -> Harness {
    let mut h = Harness::new();
    for op in ops {
        match op {
            Op::Renew(n) => renew(&mut h, &node(*n), None),
            Op::Register(c) => {
                let name = format!("c{c}");
                if h.state.cluster(&name).is_none() {
                    h.register(&name, &[]);
                }
            }
            Op::Deregister(c) => {
                let _ = h.apply(Command::DeregisterCluster {
                    name: format!("c{c}"),
                    expected_version: None,
                });
            }
            Op::Advance(ms) => {
                h.tick(*ms);
            }
        }
    }
    h
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Deterministic; every registered cluster has exactly one owner among the live nodes
    /// (none while no lease is live); owners whose lease stays live never change.
    #[test]
    fn ownership_is_deterministic_total_and_sticky(ops in proptest::collection::vec(op(), 1..80)) {
        let a = run(&ops);
        let b = run(&ops);
        prop_assert_eq!(a.state.state_hash_hex(), b.state.state_hash_hex());
        let book = a.state.owners();
        let now = a.state.log_time_ms();
        for (n, l) in &book.nodes {
            prop_assert!(now <= l.expires_ms(), "{} is held past its lease", n);
        }
        let names: Vec<&str> = a.state.clusters().map(|c| c.spec.name.as_str()).collect();
        if !book.in_force() {
            prop_assert!(book.clusters.is_empty());
        } else {
            prop_assert_eq!(book.clusters.len(), names.len());
            for c in names {
                let o = &book.clusters[c];
                prop_assert!(book.nodes.contains_key(&o.node));
            }
        }
        // Sticky: one more renewal by every live node moves nothing.
        let mut c = run(&ops);
        let before = c.state.owners().clusters.clone();
        let live: Vec<String> = c.state.owners().nodes.keys().cloned().collect();
        for n in &live {
            renew(&mut c, n, None);
        }
        prop_assert_eq!(&c.state.owners().clusters, &before);
    }

    /// With every node renewing from the start and no locality, clusters registered one after
    /// another, and then one node lost, stay balanced within one.
    #[test]
    fn balanced_within_one(n in 1usize..40, lost in 1..=3usize) {
        let mut h = Harness::new();
        for i in 0..n / 2 {
            h.register(&format!("c{i}"), &[]);
        }
        form(&mut h, &[(1, None), (2, None), (3, None)]);
        for i in n / 2..n {
            h.register(&format!("c{i}"), &[]);
        }
        let spread = |h: &Harness| {
            let c = counts(h);
            c.iter().max().copied().unwrap_or(0) - c.iter().min().copied().unwrap_or(0)
        };
        prop_assert!(spread(&h) <= 1, "{:?}", counts(&h));
        for _ in 0..3 {
            h.advance(4 * S);
            for i in (1..=3).filter(|i| *i != lost) {
                renew(&mut h, &node(i), None);
            }
        }
        prop_assert!(!h.state.owners().nodes.contains_key(&node(lost)));
        prop_assert_eq!(h.state.owners().clusters.len(), n);
        prop_assert!(spread(&h) <= 1, "{:?}", counts(&h));
    }
}
