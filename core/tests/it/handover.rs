//! Make-before-break in the state machine: a drained cluster keeps its replicas until the
//! clusters that gained them report them ready, or until the deadline; a cluster that goes
//! NotReady gives them up at once; a scale-down holds nothing; replay and snapshots keep holds.

use fedraft_core::command::{Command, LogEntry};
use fedraft_core::model::ObjectKey;
use fedraft_core::state::{State, HANDOVER_DEADLINE_MS};

use crate::state_support::{deployment, divided, duplicated, spec, Harness};

fn key() -> ObjectKey {
    ObjectKey::new("shop", "web")
}

/// Replicas the cluster is asked to run (None: nothing there), as the executors render it.
fn running(h: &Harness, cluster: &str) -> Option<u64> {
    let d = h.state.desired_for_cluster(cluster);
    let web = d.iter().find(|d| d.key == key())?;
    let m = web.manifest.as_ref().expect("renders");
    Some(m["spec"]["replicas"].as_u64().unwrap_or(0))
}

fn setup() -> Harness {
    let mut h = Harness::new();
    h.fleet(&["dc1", "dc2", "dc3"]);
    h.put(
        "shop",
        "web",
        spec(deployment("web", 6, 100), divided(None)),
    );
    assert_eq!(crate::state_support::total(&h.placement("shop", "web")), 6);
    for c in ["dc1", "dc2", "dc3"] {
        h.report("shop", "web", c, true, 2);
    }
    h
}

#[test]
fn a_drained_cluster_keeps_its_replicas_until_the_new_ones_are_ready() {
    let mut h = setup();
    h.ok(Command::Drain { name: "dc1".into() });
    let p = h.placement("shop", "web");
    assert!(!p.contains_key("dc1"), "{p:?}");
    assert_eq!(h.state.held_on(&key(), "dc1"), Some(2));
    assert_eq!(running(&h, "dc1"), Some(2), "dc1 still runs its 2");
    // The new placement counts as it is: dc2 and dc3 render their new shares.
    assert_eq!(running(&h, "dc2"), Some(u64::from(p["dc2"])));

    // Part of the new replicas ready: still held.
    h.report("shop", "web", "dc2", true, p["dc2"]);
    assert_eq!(running(&h, "dc1"), Some(2));
    let before = h.obj("shop", "web").resource_version;
    // All ready: the hold ends on that entry, and the object's version moves so executors see it.
    h.report("shop", "web", "dc3", true, p["dc3"]);
    assert_eq!(h.state.held_on(&key(), "dc1"), None);
    assert_eq!(running(&h, "dc1"), None);
    assert!(h.obj("shop", "web").resource_version > before);
}

#[test]
fn a_hold_ends_at_its_deadline_or_when_the_cluster_is_lost() {
    let mut h = setup();
    h.ok(Command::Drain { name: "dc1".into() });
    assert!(h.state.handover(&key()).is_some());
    // Heartbeats keep everyone Ready; nothing reports the new replicas ready.
    h.heartbeat_for(&["dc1", "dc2", "dc3"], HANDOVER_DEADLINE_MS - 5_000, 5_000);
    assert_eq!(
        h.state.held_on(&key(), "dc1"),
        Some(2),
        "before the deadline"
    );
    h.heartbeat_for(&["dc1", "dc2", "dc3"], 10_000, 5_000);
    assert_eq!(h.state.held_on(&key(), "dc1"), None, "past the deadline");

    // A second drain, and the draining cluster goes dark: nothing to wait for.
    let mut h = setup();
    h.ok(Command::Drain { name: "dc2".into() });
    assert_eq!(h.state.held_on(&key(), "dc2"), Some(2));
    h.heartbeat_for(&["dc1", "dc3"], 120_000, 5_000);
    assert_eq!(h.state.held_on(&key(), "dc2"), None);
    assert_eq!(running(&h, "dc2"), None);

    // Deregistering the cluster ends its hold too.
    let mut h = setup();
    h.ok(Command::Drain { name: "dc3".into() });
    assert!(h.state.handover(&key()).is_some());
    h.ok(Command::DeregisterCluster {
        name: "dc3".into(),
        expected_version: None,
    });
    assert!(h.state.handover(&key()).is_none());
}

#[test]
fn moves_hold_but_scale_downs_and_deletes_do_not() {
    let mut h = setup();
    // Fewer replicas: a cluster losing some is not a move.
    h.put(
        "shop",
        "web",
        spec(deployment("web", 3, 100), divided(None)),
    );
    assert!(h.state.handover(&key()).is_none());
    // A policy change that moves the object off dc3: held until dc1 and dc2 are ready.
    h.put(
        "shop",
        "web",
        spec(deployment("web", 3, 100), divided(Some(&["dc1", "dc2"]))),
    );
    assert_eq!(h.state.held_on(&key(), "dc3"), Some(1));
    // Deleting the object ends every hold.
    h.ok(Command::DeleteObject {
        namespace: "shop".into(),
        name: "web".into(),
        expected_version: None,
    });
    assert!(h.state.handover(&key()).is_none());
    assert_eq!(running(&h, "dc3"), None);

    // A Duplicated copy that no other cluster takes over is not a move: nothing to wait for.
    h.put("shop", "cm", spec(deployment("cm", 1, 10), duplicated()));
    h.ok(Command::Drain { name: "dc2".into() });
    let cm = ObjectKey::new("shop", "cm");
    assert_eq!(h.state.held_on(&cm, "dc2"), None);
}

#[test]
fn holds_replay_and_survive_a_snapshot() {
    let mut log: Vec<(u64, Command)> = Vec::new();
    // Rebuild the same history with a recorded log.
    let mut r = Harness::new();
    let run = |r: &mut Harness, cmd: Command, log: &mut Vec<(u64, Command)>| {
        log.push((r.now_ms, cmd.clone()));
        r.ok(cmd);
    };
    for c in ["dc1", "dc2", "dc3"] {
        run(
            &mut r,
            Command::RegisterCluster(crate::state_support::cluster_spec(c, &[])),
            &mut log,
        );
    }
    run(
        &mut r,
        Command::Heartbeats(
            ["dc1", "dc2", "dc3"]
                .iter()
                .map(|c| fedraft_core::command::Heartbeat {
                    cluster: c.to_string(),
                    capacity: Some(crate::state_support::big_capacity()),
                })
                .collect(),
        ),
        &mut log,
    );
    run(
        &mut r,
        Command::PutObject {
            namespace: "shop".into(),
            name: "web".into(),
            spec: spec(deployment("web", 6, 100), divided(None)),
            expected_version: None,
        },
        &mut log,
    );
    run(&mut r, Command::Drain { name: "dc1".into() }, &mut log);
    assert!(r.state.handover(&key()).is_some());
    let mut replayed = State::new();
    for (i, (t, cmd)) in log.iter().enumerate() {
        replayed.apply(i as u64 + 1, &LogEntry::new("", "test", *t, cmd.clone()));
    }
    assert_eq!(replayed.state_hash(), r.state.state_hash());
    assert_eq!(replayed.handover(&key()), r.state.handover(&key()));
    let restored = State::from_snapshot(&r.state.to_snapshot()).expect("snapshot");
    assert_eq!(restored.state_hash(), r.state.state_hash());
    assert_eq!(restored.handover(&key()), r.state.handover(&key()));
}
