//! Exact status reports (`StatusReportsAt`, version 11): "applied" means the member holds what
//! the state asks of it now. A report read against an older state of the object, from a node
//! that does not own the cluster, or from before its owner took the cluster, changes nothing;
//! a new template or a staying cluster's new replica count is not applied until reported; and
//! entries of older versions replay as they did.

use std::collections::BTreeMap;

use crate::state_support::*;
use fedraft_core::command::{
    Command, LogEntry, ObjectStatusReport, StatusReportAt, EXACT_REPORTS_SINCE,
};
use fedraft_core::owners::ExecutorLease;
use fedraft_core::state::Applied;
use proptest::prelude::*;

const NODE1: &str = "system:executor:node1";
const NODE2: &str = "system:executor:node2";

fn as_actor(h: &mut Harness, actor: &str, version: u16, command: Command) -> Applied {
    h.index += 1;
    let mut e = LogEntry::new("", actor, h.now_ms, command);
    e.version = version;
    h.state.apply(h.index, &e)
}

fn at(cluster: &str, applied: bool, ready: u32, as_of: u64) -> StatusReportAt {
    StatusReportAt {
        report: ObjectStatusReport {
            namespace: "ns".into(),
            name: "web".into(),
            cluster: cluster.into(),
            applied,
            ready_replicas: ready,
            message: None,
        },
        as_of,
    }
}

/// Sends one exact report as `actor`; it must be accepted as a command (counted or not).
fn report_at(h: &mut Harness, actor: &str, r: StatusReportAt) {
    let a = as_actor(
        h,
        actor,
        EXACT_REPORTS_SINCE,
        Command::StatusReportsAt(vec![r]),
    );
    assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
}

/// (applied, ready) of `web` on `cluster`.
fn seen(h: &Harness, cluster: &str) -> (bool, u32) {
    let o = h.obj("ns", "web");
    let p = o.status.clusters.iter().find(|p| &*p.cluster == cluster);
    p.map_or((false, 0), |p| (p.applied, p.ready_replicas))
}

fn web(h: &mut Harness, replicas: u32) {
    h.put(
        "ns",
        "web",
        spec(
            deployment("web", replicas, 100),
            static_weights(&[("dc1", 1), ("dc2", 1)], true),
        ),
    );
}

#[test]
fn a_report_read_before_the_object_changed_does_not_count() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    web(&mut h, 4);
    assert_eq!(h.placement("ns", "web").get("dc1"), Some(&2));
    let read = h.index;
    report_at(&mut h, "x", at("dc1", true, 2, read));
    assert_eq!(seen(&h, "dc1"), (true, 2));

    // Scaled down: dc1 must now run 1, which no member has confirmed.
    web(&mut h, 2);
    assert_eq!(h.placement("ns", "web").get("dc1"), Some(&1));
    assert_eq!(
        seen(&h, "dc1"),
        (false, 2),
        "a new replica count is not applied"
    );
    let changed = h.index;

    // The pass that read the old count reports late: it says nothing of the new one.
    report_at(&mut h, "x", at("dc1", true, 2, read));
    assert_eq!(seen(&h, "dc1"), (false, 2));
    report_at(&mut h, "x", at("dc1", true, 1, changed - 1));
    assert_eq!(seen(&h, "dc1"), (false, 2));
    // A pass that read the change does.
    report_at(&mut h, "x", at("dc1", true, 1, changed));
    assert_eq!(seen(&h, "dc1"), (true, 1));

    // A template-only edit (same replicas, no new decision) is not applied anywhere either.
    let edited = spec(
        deployment("web", 2, 100).replace("nginx:1.27", "nginx:1.28"),
        static_weights(&[("dc1", 1), ("dc2", 1)], true),
    );
    h.put("ns", "web", edited);
    assert_eq!(seen(&h, "dc1"), (false, 1));
    let edit = h.index;
    report_at(&mut h, "x", at("dc1", true, 1, edit - 1));
    assert_eq!(seen(&h, "dc1"), (false, 1));
    report_at(&mut h, "x", at("dc1", true, 1, edit));
    assert_eq!(seen(&h, "dc1"), (true, 1));
}

#[test]
fn reports_in_one_batch_are_judged_on_the_state_before_it() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    web(&mut h, 4);
    let read = h.index;
    let a = as_actor(
        &mut h,
        "x",
        EXACT_REPORTS_SINCE,
        Command::StatusReportsAt(vec![at("dc1", true, 2, read), at("dc2", true, 2, read)]),
    );
    assert!(a.outcome.is_accepted());
    assert_eq!((seen(&h, "dc1"), seen(&h, "dc2")), ((true, 2), (true, 2)));
    // Another cluster's report moved the version: a report read before it comes again.
    report_at(&mut h, "x", at("dc2", true, 1, read));
    assert_eq!(seen(&h, "dc2"), (true, 2));
}

#[test]
fn only_the_owner_reports_and_only_what_it_read_as_owner() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    web(&mut h, 4);
    let lease = || {
        Command::ExecutorLease(ExecutorLease {
            lease_ms: 10_000,
            locality: Vec::new(),
        })
    };
    // Both nodes renew until the book forms; node1 gets dc1, node2 dc2 (fewest, then name).
    for step in 0..4 {
        if step > 0 {
            h.advance(4_000);
            h.heartbeat(&["dc1", "dc2"], None);
        }
        for n in [NODE1, NODE2] {
            let a = as_actor(&mut h, n, EXACT_REPORTS_SINCE, lease());
            assert!(a.outcome.is_accepted());
        }
    }
    let owners = h.state.owners();
    assert!(owners.in_force());
    let dc1 = owners.owner("dc1").unwrap().clone();
    assert_eq!(dc1.node, NODE1);
    let now = h.index;
    // Not the owner: dropped, however fresh.
    report_at(&mut h, NODE2, at("dc1", true, 2, now));
    assert_eq!(seen(&h, "dc1"), (false, 0));
    // The owner, but read before it took the cluster (a leader-only runner's pass of the
    // forming window): dropped.
    report_at(&mut h, NODE1, at("dc1", true, 2, dc1.since_index - 1));
    assert_eq!(seen(&h, "dc1"), (false, 0));
    report_at(&mut h, NODE1, at("dc1", true, 2, now));
    assert_eq!(seen(&h, "dc1"), (true, 2));

    // node1 stops renewing: its clusters move to node2 when its lease lapses.
    for _ in 0..3 {
        h.advance(4_000);
        h.heartbeat(&["dc1", "dc2"], None);
        let a = as_actor(&mut h, NODE2, EXACT_REPORTS_SINCE, lease());
        assert!(a.outcome.is_accepted());
    }
    let moved = h.state.owners().owner("dc1").unwrap().clone();
    assert_eq!(moved.node, NODE2);
    web(&mut h, 2);
    let now = h.index;
    // The stale owner's report of the new count, read after the change: still not its word.
    report_at(&mut h, NODE1, at("dc1", true, 1, now));
    assert_eq!(seen(&h, "dc1"), (false, 2));
    report_at(&mut h, NODE2, at("dc1", true, 1, now));
    assert_eq!(seen(&h, "dc1"), (true, 1));
}

#[test]
fn a_report_from_the_future_or_an_older_envelope_is_refused() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    web(&mut h, 4);
    let next = h.index + 1;
    let a = as_actor(
        &mut h,
        "x",
        EXACT_REPORTS_SINCE,
        Command::StatusReportsAt(vec![at("dc1", true, 2, next)]),
    );
    let r = format!("{:?}", a.outcome.rejection().expect("refused"));
    assert!(r.contains("reports[0].asOf"), "{r}");
    let read = h.index;
    let a = as_actor(
        &mut h,
        "x",
        EXACT_REPORTS_SINCE - 1,
        Command::StatusReportsAt(vec![at("dc1", true, 2, read)]),
    );
    assert!(a.outcome.rejection().is_some());
    assert_eq!(seen(&h, "dc1"), (false, 0));
}

#[test]
fn older_entries_keep_the_applied_flag_across_a_new_replica_count() {
    let mut h = Harness::new();
    let old = EXACT_REPORTS_SINCE - 1;
    for c in ["dc1", "dc2"] {
        let a = as_actor(
            &mut h,
            "admin",
            old,
            Command::RegisterCluster(cluster_spec(c, &[])),
        );
        assert!(a.outcome.is_accepted());
    }
    h.heartbeat(&["dc1", "dc2"], Some(big_capacity()));
    let put = |h: &mut Harness, replicas: u32| {
        let a = as_actor(
            h,
            "admin",
            old,
            Command::PutObject {
                namespace: "ns".into(),
                name: "web".into(),
                spec: spec(
                    deployment("web", replicas, 100),
                    static_weights(&[("dc1", 1), ("dc2", 1)], true),
                ),
                expected_version: None,
            },
        );
        assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
    };
    put(&mut h, 4);
    h.report("ns", "web", "dc1", true, 2);
    put(&mut h, 2);
    assert_eq!(seen(&h, "dc1"), (true, 2), "as version 10 applied it");
}

#[test]
fn a_staying_cluster_given_more_replicas_is_not_applied_until_it_reports_them() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    web(&mut h, 4);
    let read = h.index;
    report_at(&mut h, "x", at("dc1", true, 2, read));
    // dc2 drains: dc1 takes every replica (no new spec, a new decision).
    h.ok(Command::Drain { name: "dc2".into() });
    assert_eq!(h.placement("ns", "web").get("dc1"), Some(&4));
    assert_eq!(seen(&h, "dc1"), (false, 2));
    report_at(&mut h, "x", at("dc1", true, 2, read));
    assert_eq!(seen(&h, "dc1"), (false, 2));
    let drained = h.index;
    report_at(&mut h, "x", at("dc1", true, 4, drained));
    assert_eq!(seen(&h, "dc1"), (true, 4));
}

/// One step of the property below.
#[derive(Debug, Clone)]
enum Op {
    /// Put `web` with this many replicas.
    Put(u32),
    /// Drain dc2, or lift the drain.
    Drain(bool),
    /// An executor's report that dc1 (false) or dc2 (true) holds `web`, read this many entries
    /// ago.
    Report(bool, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u32..7).prop_map(Op::Put),
        any::<bool>().prop_map(Op::Drain),
        (any::<bool>(), 0u64..4).prop_map(|(c, back)| Op::Report(c, back)),
    ]
}

proptest! {
    /// Whatever the order of puts, placement changes and late reports: a cluster is applied
    /// only if some report read the state at or after the last change of what that cluster
    /// must run; and a report that read the latest state always counts.
    #[test]
    fn applied_always_speaks_of_the_current_version(ops in proptest::collection::vec(op(), 1..40)) {
        let mut h = Harness::new();
        h.fleet(&["dc1", "dc2"]);
        web(&mut h, 4);
        // cluster -> (index of the last change of what it must run, its replicas then, and
        // whether a report since read a state at least that recent)
        let mut model: BTreeMap<String, (u64, u32, bool)> = BTreeMap::new();
        let note = |h: &Harness, model: &mut BTreeMap<String, (u64, u32, bool)>, all: bool| {
            let now = h.placement("ns", "web");
            model.retain(|c, _| now.contains_key(c));
            for (c, n) in now {
                let e = model.entry(c).or_insert((h.index, n, false));
                if all || e.1 != n {
                    *e = (h.index, n, false);
                }
            }
        };
        note(&h, &mut model, true);
        for op in ops {
            match op {
                Op::Put(n) => {
                    let before = h.obj("ns", "web").spec.clone();
                    web(&mut h, n);
                    let spec_changed = h.obj("ns", "web").spec != before;
                    note(&h, &mut model, spec_changed);
                }
                Op::Drain(on) => {
                    let name = "dc2".to_string();
                    // Draining twice, or lifting a drain not in force, may be refused: fine.
                    h.apply(if on { Command::Drain { name } } else { Command::Uncordon { name } });
                    note(&h, &mut model, false);
                }
                Op::Report(second, back) => {
                    let cluster = if second { "dc2" } else { "dc1" };
                    let as_of = h.index.saturating_sub(back);
                    let n = h.obj("ns", "web").replicas_on(cluster);
                    report_at(&mut h, "x", at(cluster, true, n, as_of));
                    if let Some(m) = model.get_mut(cluster) {
                        m.2 |= as_of >= m.0;
                        if back == 0 {
                            prop_assert_eq!(seen(&h, cluster), (true, n), "a fresh report counts");
                        }
                    }
                }
            }
            for p in &h.obj("ns", "web").status.clusters {
                let (since, _, confirmed) = model[&*p.cluster];
                prop_assert!(!p.applied || confirmed, "{} applied, changed at {since}, no report since", p.cluster);
            }
        }
    }
}
