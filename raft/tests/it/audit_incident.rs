//! The audit archive of a real three-node cluster through a scripted incident: three member
//! clusters register and heartbeat, a Divided workload is placed, dc2 goes dark, turns NotReady
//! and its replicas fail over after the grace period, dc2 recovers, and an operator forces a
//! rebalance. Then: replay at each step gives the live node's placement and state hash, explain
//! lists each move with its cause, diff between two steps is exact, verify passes on all three
//! stopped nodes' data directories (read-only, unmodified), and fails on copies with one byte
//! changed, one record removed, or the last record cut off.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use fedraft_core::audit::Filter;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_core::model::{ClusterSpec, Health, ObjectKey, ObjectSpec};
use fedraft_core::policy::Placement;
use fedraft_raft::audit::{rebuild_offline, AuditLog, LiveState, Order};
use fedraft_raft::{FedNode, NodeConfig, Proposal};

fn tune(cfg: NodeConfig) -> NodeConfig {
    let mut c = relaxed(cfg);
    c.tick_interval_ms = 200;
    c.audit.checkpoint_every_commands = 25;
    c
}

fn propose(actor: &str, command: Command) -> Proposal {
    Proposal {
        request_id: String::new(),
        actor: actor.into(),
        command,
    }
}

/// Live (index, hash, placement of default/web), read atomically on one node.
type Step = (u64, String, BTreeMap<String, u32>);

fn step(node: &FedNode) -> Step {
    node.read_stale(|s| {
        let p = s
            .object("default", "web")
            .map(|o| o.placement_map())
            .unwrap_or_default();
        (s.applied_index(), s.state_hash_hex(), p)
    })
}

fn placement(pairs: &[(&str, u32)]) -> BTreeMap<String, u32> {
    pairs.iter().map(|(c, n)| (c.to_string(), *n)).collect()
}

/// What an executor would send: heartbeats for the clusters that answer.
fn start_heartbeats(
    node: FedNode,
    alive: Arc<Mutex<BTreeSet<String>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let names: Vec<String> = alive.lock().unwrap().iter().cloned().collect();
            if names.is_empty() {
                continue;
            }
            let beats = names
                .into_iter()
                .map(|cluster| Heartbeat {
                    cluster,
                    capacity: None,
                })
                .collect();
            let _ = node
                .propose(propose("executor/node-1", Command::Heartbeats(beats)))
                .await;
        }
    })
}

async fn wait_step(node: &FedNode, what: &str, f: impl Fn(&Step) -> bool) -> Step {
    eventually(Duration::from_secs(60), what, || async {
        let s = step(node);
        f(&s).then_some(s)
    })
    .await
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Every file's name and bytes, to prove a read-only open changed nothing.
fn fingerprint(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn verify_offline(dir: &Path) -> fedraft_raft::audit::VerifyReport {
    let log = AuditLog::open_offline(dir).unwrap();
    let live = LiveState::of(&rebuild_offline(log.reader()).unwrap());
    log.verify(Some(live), &mut |_| {}).unwrap()
}

/// Opens a copy for writing (as an attacker or a broken disk would) and edits one record.
fn damage(dir: &Path, f: impl FnOnce(&rocksdb::DB, &rocksdb::ColumnFamily)) {
    let db = rocksdb::DB::open_cf(
        &rocksdb::Options::default(),
        dir,
        ["log", "meta", "snapshot", "audit"],
    )
    .unwrap();
    let cf = db.cf_handle("audit").unwrap();
    f(&db, cf);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn incident_replay_explain_diff_and_verify() {
    init_tracing();
    let mut c = start_cluster(3, &tune).await;
    let node = c.get(1).node.clone();

    // Register: dark after 1 s without heartbeats, Ready again after 1 s of them.
    for name in ["dc1", "dc2", "dc3"] {
        let mut spec = ClusterSpec::new(name, format!("https://{name}.example:6443"));
        spec.failure_threshold_seconds = 1;
        spec.success_threshold_seconds = 1;
        let a = node
            .propose(propose("admin", Command::RegisterCluster(spec)))
            .await
            .unwrap();
        assert!(a.outcome.is_accepted(), "{a:?}");
    }
    let alive = Arc::new(Mutex::new(
        ["dc1", "dc2", "dc3"]
            .map(String::from)
            .into_iter()
            .collect::<BTreeSet<_>>(),
    ));
    let beats = start_heartbeats(node.clone(), alive.clone());
    eventually(Duration::from_secs(60), "three Ready clusters", || async {
        node.read_stale(|s| {
            s.clusters()
                .filter(|c| c.status.health == Health::Ready)
                .count()
                == 3
        })
        .then_some(())
    })
    .await;

    // Place: a Divided Deployment, 6 replicas, failover after 1 s.
    let mut placement_spec = Placement::default();
    placement_spec.failover.grace_period_seconds = 1;
    let template = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 6}
    })
    .to_string();
    let put = node
        .propose(propose(
            "alice",
            Command::PutObject {
                namespace: "default".into(),
                name: "web".into(),
                spec: ObjectSpec {
                    template,
                    placement: placement_spec,
                    overrides: Vec::new(),
                },
                expected_version: None,
            },
        ))
        .await
        .unwrap();
    assert!(put.outcome.is_accepted(), "{put:?}");
    let even = placement(&[("dc1", 2), ("dc2", 2), ("dc3", 2)]);
    let placed = wait_step(&node, "even placement", |s| s.2 == even).await;

    // dc2 goes dark: NotReady after 1 s, replicas re-placed 1 s later.
    alive.lock().unwrap().remove("dc2");
    let failed_over = wait_step(&node, "failover off dc2", |s| !s.2.contains_key("dc2")).await;
    assert_eq!(failed_over.2, placement(&[("dc1", 3), ("dc3", 3)]));

    // dc2 answers again and turns Ready; nothing moves back by itself (no rebalance asked).
    alive.lock().unwrap().insert("dc2".into());
    let recovered = eventually(Duration::from_secs(60), "dc2 Ready again", || async {
        let ready =
            node.read_stale(|s| s.cluster("dc2").map(|c| c.status.health) == Some(Health::Ready));
        ready.then(|| step(&node))
    })
    .await;
    assert_eq!(recovered.2, failed_over.2);

    // The on-call engineer forces a fresh placement.
    let revoke = node
        .propose(propose(
            "oncall",
            Command::RevokePlacement {
                namespace: "default".into(),
                name: "web".into(),
            },
        ))
        .await
        .unwrap();
    assert!(revoke.outcome.is_accepted(), "{revoke:?}");
    let rebalanced = wait_step(&node, "rebalanced", |s| s.2 == even).await;

    // ---- online, on the running node ----
    let log = node.audit().await;
    for (name, s) in [
        ("placed", &placed),
        ("failed over", &failed_over),
        ("recovered", &recovered),
        ("rebalanced", &rebalanced),
    ] {
        let at = log.state_at(s.0).unwrap();
        assert_eq!(at.applied_index(), s.0, "{name}");
        assert_eq!(
            at.state_hash_hex(),
            s.1,
            "{name}: replay hash differs from live"
        );
        let p = at.object("default", "web").unwrap().placement_map();
        assert_eq!(p, s.2, "{name}: placement");
    }

    let key = ObjectKey::new("default", "web");
    let changes = log.explain(&key, None, None, &mut |_| {}).unwrap();
    let lines: Vec<&str> = changes.iter().map(|c| c.explanation.as_str()).collect();
    assert_eq!(changes.len(), 3, "{lines:#?}");
    assert_eq!(
        lines[0],
        "created by alice -> 6 replicas added on dc1 (2), dc2 (2) and dc3 (2)"
    );
    assert_eq!(changes[0].index, put.index);
    assert!(
        lines[1].starts_with("dc2 NotReady since ")
            && lines[1].ends_with(", grace 1 s passed -> 2 replicas moved to dc1 (1) and dc3 (1)"),
        "{}",
        lines[1]
    );
    assert!(changes[1].index > placed.0 && changes[1].index <= failed_over.0);
    assert_eq!(changes[1].before, even);
    assert_eq!(changes[1].after, failed_over.2);
    assert_eq!(
        lines[2],
        "placement revoked by oncall (scheduled afresh) -> 2 replicas moved to dc2 (2)"
    );
    assert_eq!(
        (changes[2].index, changes[2].actor.as_str()),
        (revoke.index, "oncall")
    );

    // Diff between two steps: exactly the three per-cluster moves and dc2's health.
    let d = log.diff(placed.0, failed_over.0, None).unwrap();
    assert_eq!(
        (d.from_hash.as_str(), d.to_hash.as_str()),
        (placed.1.as_str(), failed_over.1.as_str())
    );
    let web = d.objects.iter().find(|o| o.key == "default/web").unwrap();
    let moves: Vec<(String, u32, u32)> = web
        .moves
        .iter()
        .map(|m| (m.cluster.clone(), m.from, m.to))
        .collect();
    assert_eq!(
        moves,
        vec![
            ("dc1".into(), 2, 3),
            ("dc2".into(), 2, 0),
            ("dc3".into(), 2, 3)
        ]
    );
    assert_eq!(d.objects.len(), 1, "{d:#?}");
    let dc2 = d.clusters.iter().find(|c| c.key == "dc2").unwrap();
    let health = dc2.fields.iter().find(|f| f.field == "health").unwrap();
    assert_eq!(
        (health.before.as_str(), health.after.as_str()),
        ("Ready", "NotReady")
    );
    assert!(log
        .diff(failed_over.0, failed_over.0, None)
        .unwrap()
        .is_empty());

    // Queries: by actor, by object, newest first with paging.
    let by_oncall = Filter {
        actor: Some("oncall".into()),
        ..Filter::default()
    };
    let page = log.query(&by_oncall, Order::OldestFirst, 10, None).unwrap();
    assert_eq!(page.records.len(), 1);
    assert_eq!(page.records[0].index, revoke.index);
    let about_web = Filter {
        object: Some("default/web".into()),
        ..Filter::default()
    };
    let first = log.query(&about_web, Order::NewestFirst, 1, None).unwrap();
    let second = log
        .query(&about_web, Order::NewestFirst, 1, first.next)
        .unwrap();
    assert!(first.next.is_some() && second.records[0].index < first.records[0].index);
    let t = first.records[0].entry.timestamp_ms;
    assert!(log.index_at_time(t).unwrap().unwrap() >= first.records[0].index);
    node.flush_checkpoints().await;
    assert!(!log.reader().checkpoint_indexes().unwrap().is_empty());

    // Verify online against the live node.
    let live = node.live_state().await;
    let online = log.verify(Some(live.clone()), &mut |_| {}).unwrap();
    assert!(online.ok(), "{:?}", online.problems);

    // ---- offline, on stopped nodes' data directories ----
    beats.abort();
    let last = step(&node).0;
    c.wait_converged(last, Duration::from_secs(60)).await;
    let dirs: Vec<_> = c.nodes.iter().map(|t| t.dir.clone()).collect();
    for id in [1, 2, 3] {
        c.take(id).stop().await;
    }
    drop(node);
    drop(log);
    tokio::time::sleep(Duration::from_millis(500)).await;
    for dir in &dirs {
        let before = fingerprint(dir);
        let r = verify_offline(dir);
        assert!(r.ok(), "{}: {:?}", dir.display(), r.problems);
        assert!(r.live_matched && r.checkpoints_checked > 0, "{r:?}");
        assert_eq!(fingerprint(dir), before, "verify changed {}", dir.display());
    }

    let scratch = tempfile::tempdir().unwrap();
    // The entry that failed web over: in the middle of the archive.
    let k = changes[1].index;
    let flipped = scratch.path().join("flipped");
    copy_dir(&dirs[0], &flipped);
    damage(&flipped, |db, cf| {
        let mut v = db.get_cf(cf, k.to_be_bytes()).unwrap().unwrap();
        let last = v.len() - 1;
        v[last] ^= 1;
        db.put_cf(cf, k.to_be_bytes(), v).unwrap();
    });
    let r = verify_offline(&flipped);
    assert!(!r.ok());
    assert!(
        r.problems
            .iter()
            .any(|p| p == &format!("record {k}: digest does not match its content")),
        "{:?}",
        r.problems
    );

    let removed = scratch.path().join("removed");
    copy_dir(&dirs[0], &removed);
    damage(&removed, |db, cf| {
        db.delete_cf(cf, k.to_be_bytes()).unwrap()
    });
    let r = verify_offline(&removed);
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains(&format!("records {k}..{k} missing"))),
        "{:?}",
        r.problems
    );

    let cut = scratch.path().join("cut");
    copy_dir(&dirs[0], &cut);
    let head = AuditLog::open_offline(&cut)
        .unwrap()
        .bounds()
        .unwrap()
        .unwrap()
        .1;
    damage(&cut, |db, cf| db.delete_cf(cf, head.to_be_bytes()).unwrap());
    let r = verify_offline(&cut);
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("records missing at the end")),
        "{:?}",
        r.problems
    );
}
