//! Intents against the state machine: resource versions and compare-and-swap, cordon and
//! drain, capacity booking, quota, two-level slices, status aggregation, idempotent retries,
//! change records and rendering for a cluster.

use crate::state_support::*;
use fedraft_core::command::Command;
use fedraft_core::model::{ConditionType, TenantSpec};
use fedraft_core::policy::Resources;
use fedraft_core::state::{ChangeKind, ChangeOp, Outcome, RejectCode};

#[test]
fn resource_version_is_the_index_and_cas_is_enforced() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    let s = spec(deployment("web", 2, 100), divided(None));
    let put = |expected| Command::PutObject {
        namespace: "ns".into(),
        name: "web".into(),
        spec: s.clone(),
        expected_version: expected,
    };
    let a = h.ok(put(Some(0)));
    assert_eq!(
        a.outcome,
        Outcome::Accepted {
            resource_version: Some(a.index)
        }
    );
    assert_eq!(h.obj("ns", "web").resource_version, a.index);
    let r = h.refused(put(Some(0)));
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::Conflict, Some("metadata.resourceVersion"))
    );
    let r = h.refused(put(Some(a.index + 100)));
    assert_eq!(r.code, RejectCode::Conflict);
    assert!(r.message.contains(&a.index.to_string()), "{}", r.message);
    // An identical put is a no-op that reports the unchanged version.
    let b = h.ok(put(Some(a.index)));
    assert_eq!(
        b.outcome,
        Outcome::Accepted {
            resource_version: Some(a.index)
        }
    );
    assert!(b.changes.is_empty());
    let r = h.refused(Command::DeleteObject {
        namespace: "ns".into(),
        name: "web".into(),
        expected_version: Some(1),
    });
    assert_eq!(r.code, RejectCode::Conflict);
    let d = h.ok(Command::DeleteObject {
        namespace: "ns".into(),
        name: "web".into(),
        expected_version: Some(a.index),
    });
    assert_eq!(d.changes[0].op, ChangeOp::Deleted);
    assert!(h.state.object("ns", "web").is_none());
    assert_eq!(
        h.state.booked("dc1"),
        Some(Resources::ZERO),
        "deleting releases the booking"
    );
}

#[test]
fn template_only_edit_keeps_placement_without_a_decision() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2", "dc3"]);
    let a = h.put("ns", "web", spec(deployment("web", 3, 100), divided(None)));
    assert_eq!(a.decisions.len(), 1);
    let before = h.placement("ns", "web");
    let edited = deployment("web", 3, 100).replace("nginx:1.27", "nginx:1.28");
    let b = h.put("ns", "web", spec(edited, divided(None)));
    assert!(b.decisions.is_empty(), "no reschedule for an image change");
    assert_eq!(h.placement("ns", "web"), before);
    assert_eq!(h.obj("ns", "web").resource_version, b.index);
}

#[test]
fn cordon_keeps_existing_and_blocks_new() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "a", spec(deployment("a", 2, 100), divided(None)));
    let a = h.ok(Command::Cordon { name: "dc1".into() });
    assert!(a.decisions.is_empty());
    assert_eq!(h.placement("ns", "a").get("dc1"), Some(&1));
    h.put("ns", "b", spec(deployment("b", 2, 100), divided(None)));
    assert_eq!(h.placement("ns", "b").get("dc1"), None);
    assert_eq!(h.placement("ns", "b").get("dc2"), Some(&2));
}

#[test]
fn drain_moves_everything_off_and_uncordon_undoes_it() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "a", spec(deployment("a", 4, 100), divided(None)));
    h.put("ns", "d", spec(deployment("d", 1, 100), duplicated()));
    let a = h.ok(Command::Drain { name: "dc1".into() });
    assert_eq!(a.decisions.len(), 2);
    let c = h.state.cluster("dc1").unwrap();
    assert!(c.cordoned && c.drained);
    assert!(c
        .effective_taints
        .iter()
        .any(|t| t.key == "fedraft.io/drain"));
    assert_eq!(h.placement("ns", "a").get("dc2"), Some(&4));
    // Make-before-break: dc1 keeps running `a` until dc2 reports all 4 ready; `d` had a copy
    // on dc2 already, so dc1's copy simply goes.
    let held: Vec<String> = h
        .state
        .desired_for_cluster("dc1")
        .iter()
        .map(|d| d.key.name.clone())
        .collect();
    assert_eq!(held, ["a"]);
    h.report("ns", "a", "dc2", true, 4);
    assert!(h.state.desired_for_cluster("dc1").is_empty());
    h.ok(Command::Uncordon { name: "dc1".into() });
    let c = h.state.cluster("dc1").unwrap();
    assert!(!c.cordoned && !c.drained && c.effective_taints.is_empty());
    // Duplicated objects come back (every selected cluster runs a copy); divided ones stay put.
    assert_eq!(h.placement("ns", "d").get("dc1"), Some(&1));
    assert_eq!(h.placement("ns", "a").get("dc2"), Some(&4));
}

#[test]
fn capacity_is_booked_so_consecutive_workloads_never_overcommit() {
    let mut h = Harness::new();
    for n in ["dc1", "dc2"] {
        h.register(n, &[]);
    }
    h.heartbeat(&["dc1", "dc2"], Some(capacity(1000)));
    // 8 x 200m = 1600m of 2000m total, then 4 x 200m more: only 2 fit.
    h.put("ns", "a", spec(deployment("a", 8, 200), dynamic(false)));
    assert_eq!(total(&h.placement("ns", "a")), 8);
    h.put("ns", "b", spec(deployment("b", 4, 200), dynamic(false)));
    let b = h.obj("ns", "b");
    assert_eq!(total(&b.placement_map()), 2);
    assert_eq!(b.status.shortfall.as_ref().map(|s| s.replicas), Some(2));
    for c in ["dc1", "dc2"] {
        assert!(
            h.state.booked(c).unwrap().cpu_millis <= 1000,
            "{c} overcommitted"
        );
    }
    let cond = b.conditions();
    assert!(cond
        .iter()
        .any(|c| c.type_ == ConditionType::Unschedulable && c.status));
    // More capacity reported: the short object is re-placed.
    h.advance(1000);
    h.heartbeat(&["dc1"], Some(capacity(2000)));
    assert_eq!(total(&h.placement("ns", "b")), 4);
    assert!(h.obj("ns", "b").status.shortfall.is_none());
}

#[test]
fn quota_refuses_growth_beyond_it_naming_the_shortfall() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    h.ok(Command::PutTenant(TenantSpec {
        name: "team-a".into(),
        namespaces: vec!["a".into()],
        quota: Resources {
            cpu_millis: 1000,
            memory_bytes: 1 << 30,
            pods: 10,
        },
        slice_size: None,
        members: vec!["alice".into()],
    }));
    h.put("a", "one", spec(deployment("one", 4, 200), divided(None)));
    assert_eq!(
        h.state.tenant("team-a").unwrap().status.used.cpu_millis,
        800
    );
    let hash = h.state.state_hash();
    let r = h.refused(Command::PutObject {
        namespace: "a".into(),
        name: "two".into(),
        spec: spec(deployment("two", 2, 200), divided(None)),
        expected_version: None,
    });
    assert_eq!(
        (r.code, r.field.as_deref()),
        (RejectCode::FailedPrecondition, Some("spec"))
    );
    assert!(r.message.contains("short by 200"), "{}", r.message);
    assert_eq!(h.state.state_hash(), hash);
    // Shrinking is fine, and frees quota.
    h.put("a", "one", spec(deployment("one", 2, 200), divided(None)));
    h.put("a", "two", spec(deployment("two", 2, 200), divided(None)));
    assert_eq!(
        h.state.tenant("team-a").unwrap().status.used.cpu_millis,
        800
    );
    let r = h.refused(Command::DeleteTenant {
        name: "team-a".into(),
        expected_version: None,
    });
    assert_eq!(r.code, RejectCode::FailedPrecondition);
}

#[test]
fn two_level_objects_run_only_on_slice_clusters() {
    let mut h = Harness::new();
    for n in ["dc1", "dc2", "dc3"] {
        h.register(n, &[]);
    }
    h.heartbeat(&["dc1"], Some(capacity(4000)));
    h.heartbeat(&["dc2", "dc3"], Some(capacity(100)));
    h.ok(Command::PutTenant(TenantSpec {
        name: "t".into(),
        namespaces: vec!["t".into()],
        quota: Resources {
            cpu_millis: 2000,
            memory_bytes: 0,
            pods: 0,
        },
        slice_size: Some(Resources {
            cpu_millis: 1000,
            memory_bytes: 0,
            pods: 0,
        }),
        members: vec![],
    }));
    let t = h.state.tenant("t").unwrap();
    assert_eq!(t.status.slices_wanted, 2);
    assert_eq!(
        t.status.slices.keys().collect::<Vec<_>>(),
        vec!["dc1"],
        "only dc1 holds a slice"
    );
    h.put("t", "w", spec(deployment("w", 3, 100), divided(None)));
    assert_eq!(
        h.placement("t", "w").keys().collect::<Vec<_>>(),
        vec!["dc1"]
    );
    // Outside the tenant the same object spreads everywhere.
    h.put("free", "w", spec(deployment("w", 3, 10), divided(None)));
    assert_eq!(h.placement("free", "w").len(), 3);
}

#[test]
fn status_reports_aggregate_and_set_applied() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 4, 100), divided(None)));
    let applied = |h: &Harness| {
        h.obj("ns", "web")
            .conditions()
            .into_iter()
            .find(|c| c.type_ == ConditionType::Applied)
            .unwrap()
    };
    assert!(!applied(&h).status);
    let a = h.report("ns", "web", "dc1", true, 2);
    assert_eq!(a.changes.len(), 1);
    assert!(!applied(&h).status);
    assert!(applied(&h).message.contains("dc2"));
    h.report("ns", "web", "dc2", true, 1);
    assert!(applied(&h).status);
    assert_eq!(h.obj("ns", "web").status.ready_replicas, 3);
    // A stale report (cluster not placed, object unknown) is skipped, not refused.
    h.report("ns", "web", "dc9", true, 7);
    h.report("ns", "nope", "dc1", true, 7);
    assert_eq!(h.obj("ns", "web").status.ready_replicas, 3);
    // Same report again: no change, no event.
    let a = h.report("ns", "web", "dc2", true, 1);
    assert!(a.changes.is_empty());
}

#[test]
fn retried_request_id_returns_first_outcome_and_changes_nothing() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let cmd = Command::PutObject {
        namespace: "ns".into(),
        name: "web".into(),
        spec: spec(deployment("web", 1, 100), divided(None)),
        expected_version: Some(0),
    };
    let first = h.apply_with_id("req-1", cmd.clone());
    assert!(first.outcome.is_accepted());
    let hash = h.state.state_hash();
    let again = h.apply_with_id("req-1", cmd.clone());
    assert_eq!(again.duplicate_of, Some(first.index));
    assert_eq!(
        again.outcome, first.outcome,
        "not a Conflict: the first outcome"
    );
    assert!(again.changes.is_empty() && again.decisions.is_empty());
    assert_eq!(h.state.state_hash(), hash);
    // After the retention window the id is forgotten.
    h.advance(fedraft_core::state::DEDUPE_RETENTION_MS + 1);
    let late = h.apply_with_id("req-1", cmd);
    assert_eq!(late.duplicate_of, None);
    assert_eq!(
        late.outcome.rejection().map(|r| r.code),
        Some(RejectCode::Conflict)
    );
}

#[test]
fn request_ids_are_scoped_by_actor_and_by_command() {
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let put = |name: &str, replicas: u32| Command::PutObject {
        namespace: "ns".into(),
        name: name.into(),
        spec: spec(deployment(name, replicas, 100), divided(None)),
        expected_version: None,
    };
    let as_actor = |h: &mut Harness, actor: &str, command: Command| {
        h.index += 1;
        let entry = fedraft_core::command::LogEntry::new("key:k", actor, h.now_ms, command);
        h.state.apply(h.index, &entry)
    };
    let alice = as_actor(&mut h, "alice", put("a", 1));
    assert!(alice.outcome.is_accepted());
    // Another actor's write under the same id is its own, and is applied.
    let mallory = as_actor(&mut h, "mallory", put("m", 1));
    assert_eq!(mallory.duplicate_of, None);
    assert!(mallory.outcome.is_accepted());
    assert!(
        h.state.object("ns", "m").is_some(),
        "the second write was dropped"
    );
    // The same actor, id and command: a retry, answered with the first outcome.
    let hash = h.state.state_hash();
    let retry = as_actor(&mut h, "alice", put("a", 1));
    assert_eq!(retry.duplicate_of, Some(alice.index));
    // The same actor and id for another command: refused, nothing changes.
    let reused = as_actor(&mut h, "alice", put("a", 3));
    assert_eq!(reused.duplicate_of, None);
    assert_eq!(
        reused.outcome.rejection().map(|r| r.code),
        Some(RejectCode::FailedPrecondition)
    );
    assert!(reused.changes.is_empty());
    assert_eq!(h.state.state_hash(), hash);
    // A snapshot remembers all of it.
    let back = fedraft_core::state::State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(back.state_hash(), hash);
    let mut h2 = Harness {
        state: back,
        index: h.index,
        now_ms: h.now_ms,
        stalled: false,
    };
    let again = as_actor(&mut h2, "alice", put("a", 3));
    assert_eq!(again.outcome, reused.outcome);
}

#[test]
fn version_one_request_ids_keep_their_single_scope() {
    // Entries written before ids were scoped replay as they applied: one id, one memo.
    let mut h = Harness::new();
    h.fleet(&["dc1"]);
    let put = |name: &str| Command::PutObject {
        namespace: "ns".into(),
        name: name.into(),
        spec: spec(deployment(name, 1, 100), divided(None)),
        expected_version: None,
    };
    let old = |h: &mut Harness, actor: &str, command: Command| {
        h.index += 1;
        let mut entry = fedraft_core::command::LogEntry::new("key:k", actor, h.now_ms, command);
        entry.version = 1;
        h.state.apply(h.index, &entry)
    };
    let first = old(&mut h, "alice", put("a"));
    assert!(first.outcome.is_accepted());
    let second = old(&mut h, "bob", put("b"));
    assert_eq!(second.duplicate_of, Some(first.index));
    assert!(h.state.object("ns", "b").is_none());
}

#[test]
fn changes_and_decisions_are_reported() {
    let mut h = Harness::new();
    let a = h.ok(Command::RegisterCluster(cluster_spec("dc1", &[])));
    assert_eq!(a.changes[0].kind, ChangeKind::Cluster);
    assert_eq!(a.changes[0].op, ChangeOp::Added);
    h.heartbeat(&["dc1"], Some(big_capacity()));
    let a = h.put("ns", "web", spec(deployment("web", 2, 100), divided(None)));
    assert_eq!(
        a.changes.len(),
        1,
        "one Added, the placement is part of it: {:?}",
        a.changes
    );
    assert_eq!(a.changes[0].key, "ns/web");
    assert_eq!(a.decisions[0].1.placement.get("dc1"), Some(&2));
    assert!(h.obj("ns", "web").status.decision_summary.len() > 3);
}

#[test]
fn deregister_strips_the_cluster_and_replaces() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 4, 100), divided(None)));
    h.ok(Command::DeregisterCluster {
        name: "dc1".into(),
        expected_version: None,
    });
    assert!(h.state.cluster("dc1").is_none());
    assert_eq!(h.placement("ns", "web").get("dc2"), Some(&4));
    assert_eq!(h.state.booked("dc1"), None);
}

#[test]
fn desired_for_cluster_renders_with_the_clusters_replicas() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 4, 100), divided(None)));
    let d = h.state.desired_for_cluster("dc1");
    assert_eq!(d.len(), 1);
    let m = d[0].manifest.as_ref().unwrap();
    assert_eq!(m["spec"]["replicas"], 2);
    assert_eq!(m["metadata"]["namespace"], "ns");
    assert_eq!(m["metadata"]["labels"]["fedraft.io/managed-by"], "fedraft");
}

#[test]
fn adding_an_unrelated_cluster_moves_nothing_without_rebalance() {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2"]);
    h.put("ns", "web", spec(deployment("web", 5, 100), divided(None)));
    let before = h.placement("ns", "web");
    h.fleet(&["dc3"]);
    h.tick(1000);
    assert_eq!(h.placement("ns", "web"), before);
}

#[test]
fn indexes_past_the_applied_one_only() {
    let mut h = Harness::new();
    h.tick(1);
    let hash = h.state.state_hash();
    let e = fedraft_core::command::LogEntry::new("", "t", T0, Command::Tick);
    let a = h.state.apply(h.index, &e);
    assert_eq!(
        a.outcome.rejection().map(|r| r.code),
        Some(RejectCode::FailedPrecondition)
    );
    assert_eq!(h.state.state_hash(), hash);
}
