//! Loopback clusters of real nodes (RocksDB in temp dirs, HTTP on 127.0.0.1): replication,
//! failover, forwarding, idempotency, linearizable reads, snapshots, membership, auth and the
//! bounded NoQuorum error.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common::*;
use fedraft_core::command::Command;
use fedraft_core::model::ClusterSpec;
use fedraft_core::state::Outcome;
use fedraft_raft::{NodeConfig, Proposal, RaftError};

fn register(request_id: &str, name: &str) -> Proposal {
    Proposal {
        request_id: request_id.into(),
        actor: "tester".into(),
        command: Command::RegisterCluster(ClusterSpec::new(
            name,
            format!("https://{name}.example:6443"),
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replication_gives_identical_state_on_three_nodes() {
    init_tracing();
    let c = start_cluster(3, &relaxed).await;
    let mut rx = c.get(2).node.subscribe();
    // Propose through every node: followers forward to the leader.
    let mut last = 0;
    for i in 0..30u64 {
        let via = &c.nodes[(i % 3) as usize].node;
        let a = via
            .propose(register(&format!("r{i}"), &format!("dc{i}")))
            .await
            .unwrap();
        assert!(
            matches!(a.outcome, Outcome::Accepted { .. }),
            "{:?}",
            a.outcome
        );
        assert!(a.index > last, "indexes increase");
        last = a.index;
    }
    // All nodes at one index with one state hash (a tick may follow at any moment, so
    // hashes read later need not match).
    c.wait_converged(last, Duration::from_secs(30)).await;
    for t in &c.nodes {
        assert_eq!(
            t.node.read_stale(|s| s.clusters().count()),
            30,
            "node {}",
            t.id
        );
    }
    // The subscriber on a follower saw every applied command entry in order.
    let mut seen = Vec::new();
    while seen.len() < 30 {
        let e = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        if matches!(e.entry().command, Command::RegisterCluster(_)) {
            seen.push(e.index);
        }
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(*seen.last().unwrap(), last);
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn same_request_id_is_applied_once_and_leader_stamps_time() {
    init_tracing();
    let c = start_cluster(3, &relaxed).await;
    let first = c
        .get(1)
        .node
        .propose(register("same-id", "dc-a"))
        .await
        .unwrap();
    // A retry through another node (forwarded) returns the first outcome without applying.
    let again = c
        .get(3)
        .node
        .propose(register("same-id", "dc-a"))
        .await
        .unwrap();
    assert_eq!(again.duplicate_of, Some(first.index));
    assert_eq!(again.outcome, first.outcome);
    let other = c
        .get(2)
        .node
        .propose(register("other-id", "dc-a"))
        .await
        .unwrap();
    assert!(
        matches!(other.outcome, Outcome::Rejected(_)),
        "a new request for an existing name is refused"
    );
    let t = c.get(1).node.read(|s| s.log_time_ms()).await.unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        t > 0 && t <= now + 1000,
        "log time comes from the leader's clock: {t} vs {now}"
    );
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn follower_read_is_linearizable() {
    init_tracing();
    let c = start_cluster(3, &relaxed).await;
    let leader = c.wait_leader(Duration::from_secs(10)).await;
    let follower = c.nodes.iter().find(|t| t.id != leader).unwrap();
    for i in 0..20 {
        let name = format!("lin{i}");
        c.get(leader)
            .node
            .propose(register(&name, &name))
            .await
            .unwrap();
        // Acknowledged on the leader, so a linearizable read anywhere must see it.
        let n = name.clone();
        assert!(
            follower
                .node
                .read(move |s| s.cluster(&n).is_some())
                .await
                .unwrap(),
            "{name}"
        );
    }
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_loss_new_leader_accepts_writes_within_two_seconds() {
    init_tracing();
    // Default (production) timeouts, as the failover budget is defined for them.
    let mut c = start_cluster(3, &|cfg| cfg).await;
    c.get(1)
        .node
        .propose(register("before", "before"))
        .await
        .unwrap();
    let old = c.wait_leader(Duration::from_secs(10)).await;
    let survivor = c.nodes.iter().find(|t| t.id != old).unwrap().id;
    c.take(old).stop().await;
    let stopped = Instant::now();
    let a = c
        .get(survivor)
        .node
        .propose(register("after", "after"))
        .await
        .unwrap();
    let failover = stopped.elapsed();
    assert!(matches!(a.outcome, Outcome::Accepted { .. }));
    let new = c.wait_leader(Duration::from_secs(10)).await;
    assert_ne!(new, old);
    eprintln!("failover: write accepted {failover:?} after the leader stopped");
    assert!(
        failover < Duration::from_secs(2),
        "write accepted only after {failover:?}"
    );
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_quorum_is_a_typed_error_after_the_bounded_wait() {
    init_tracing();
    let tune = |cfg: NodeConfig| NodeConfig {
        propose_timeout_ms: 3_000,
        ..relaxed(cfg)
    };
    let mut c = start_cluster(3, &tune).await;
    c.get(1).node.propose(register("ok", "ok")).await.unwrap();
    let keep = c.wait_leader(Duration::from_secs(10)).await;
    c.stop_all_but(keep).await;
    let node = &c.get(keep).node;
    let started = Instant::now();
    let err = node.propose(register("lost", "lost")).await.unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, RaftError::NoQuorum { .. }), "{err:?}");
    assert!(
        waited >= Duration::from_millis(2_900) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    let err = node.read(|s| s.clusters().count()).await.unwrap_err();
    assert!(matches!(err, RaftError::NoQuorum { .. }), "{err:?}");
    // Stale reads still answer from local state.
    assert!(node.read_stale(|s| s.cluster("ok").is_some()));
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn peer_requests_without_the_secret_get_401() {
    init_tracing();
    let c = start_cluster(1, &relaxed).await;
    let addr = &c.nodes[0].addr;
    let http = reqwest::Client::new();
    for path in [
        "/raft/append",
        "/raft/vote",
        "/raft/snapshot",
        "/raft/propose",
        "/raft/read-index",
    ] {
        let r = http
            .post(format!("http://{addr}{path}"))
            .body(vec![1, 2, 3])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path} without secret");
        let r = http
            .post(format!("http://{addr}{path}"))
            .header("authorization", "Bearer wrong-secret")
            .body(vec![1, 2, 3])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path} with a wrong secret");
    }
    let r = http
        .get(format!("http://{addr}/raft/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // With the secret the same routes answer (here: a malformed body is a 400, not a 401).
    let r = http
        .post(format!("http://{addr}/raft/vote"))
        .header("authorization", format!("Bearer {SECRET}"))
        .body(vec![1, 2, 3])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // And a peer client with a wrong secret cannot propose.
    let bad = fedraft_raft::PeerClient::new("wrong-secret").unwrap();
    let err = bad
        .propose(addr, &register("x", "x"), Duration::from_secs(5), false)
        .await
        .unwrap_err();
    assert!(
        matches!(err, fedraft_raft::network::client::CallError::Status(401)),
        "{err:?}"
    );
    let good = fedraft_raft::PeerClient::new(SECRET).unwrap();
    let a = good
        .propose(addr, &register("y", "y"), Duration::from_secs(10), false)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(a.outcome, Outcome::Accepted { .. }));
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wiped_follower_catches_up_by_snapshot() {
    init_tracing();
    let tune = |cfg: NodeConfig| NodeConfig {
        snapshot_every_entries: 50,
        max_in_snapshot_log_to_keep: 0,
        ..relaxed(cfg)
    };
    let mut c = start_cluster(3, &tune).await;
    for i in 0..120 {
        c.get(1)
            .node
            .propose(register(&format!("s{i}"), &format!("snap{i}")))
            .await
            .unwrap();
    }
    let leader = c.wait_leader(Duration::from_secs(10)).await;
    let lnode = c.get(leader).node.clone();
    // Raft log index (commands are batched, so it differs from resource versions).
    let last = lnode.status().applied_index;
    lnode.raft().trigger().snapshot().await.unwrap();
    eventually(
        Duration::from_secs(30),
        "snapshot at the last index",
        || async {
            lnode
                .raft()
                .metrics()
                .borrow()
                .snapshot
                .is_some_and(|s| s.index >= last)
                .then_some(())
        },
    )
    .await;
    lnode.raft().trigger().purge_log(last).await.unwrap();
    eventually(Duration::from_secs(30), "leader log purged", || async {
        lnode
            .raft()
            .metrics()
            .borrow()
            .purged
            .is_some_and(|p| p.index >= last)
            .then_some(())
    })
    .await;

    // A wiped member must not come back as a voter under its old id (raft forbids a follower's
    // log from going backwards): take it out of the voters, wipe it, and bring it back as a
    // learner, which the leader can only catch up by sending its snapshot.
    let victim = c.nodes.iter().find(|t| t.id != leader).unwrap().id;
    let voters: BTreeSet<u64> = c.ids_except(victim).into_iter().collect();
    lnode.change_membership(voters).await.unwrap();
    let t = c.take(victim);
    let (dir, addr) = (t.dir.clone(), t.addr.clone());
    t.stop().await;
    // Wiped: the node restarts on a fresh, empty directory.
    let restarted = start_node(victim, dir.with_extension("wiped"), &addr, &tune).await;
    c.nodes.push(restarted);
    lnode.add_learner(victim, addr).await.unwrap();
    lnode
        .change_membership(BTreeSet::from([1, 2, 3]))
        .await
        .unwrap();
    let a = lnode
        .propose(register("after-wipe", "after-wipe"))
        .await
        .unwrap();
    // All nodes at one index with one state hash (a tick may follow at any moment, so
    // hashes read later need not match).
    c.wait_converged(a.index, Duration::from_secs(60)).await;
    let v = c.get(victim);
    let m = v.node.raft().metrics().borrow().clone();
    assert!(
        m.snapshot.is_some_and(|s| s.index >= last),
        "follower state came from a snapshot: {:?}",
        m.snapshot
    );
    assert_eq!(v.node.read_stale(|s| s.clusters().count()), 121);
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn membership_three_four_three_while_writing() {
    init_tracing();
    let mut c = start_cluster(3, &relaxed).await;
    let writer_nodes: Vec<_> = c.nodes.iter().map(|t| t.node.clone()).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    // A writer keeps proposing through nodes 1..3 during both membership changes.
    let writer = tokio::spawn(async move {
        let mut acked = Vec::new();
        let mut i = 0u64;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            let via = &writer_nodes[(i % 3) as usize];
            let name = format!("m{i}");
            if let Ok(a) = via.propose(register(&name, &name)).await {
                assert!(matches!(a.outcome, Outcome::Accepted { .. }));
                acked.push(name);
            }
            i += 1;
        }
        acked
    });
    let n4 = start_node(4, c.root.path().join("n4"), "127.0.0.1:0", &relaxed).await;
    let leader = c.wait_leader(Duration::from_secs(10)).await;
    let lnode = c.get(leader).node.clone();
    lnode.add_learner(4, n4.addr.clone()).await.unwrap();
    lnode
        .change_membership(BTreeSet::from([1, 2, 3, 4]))
        .await
        .unwrap();
    c.nodes.push(n4);
    eventually(Duration::from_secs(30), "4 voters everywhere", || async {
        c.nodes
            .iter()
            .all(|t| t.node.status().voters == BTreeSet::from([1, 2, 3, 4]))
            .then_some(())
    })
    .await;
    // Remove a voter that is not the leader (removing the leader also works but moves writes).
    let remove = (1..=3).find(|id| *id != leader).unwrap();
    let remaining: BTreeSet<u64> = [1, 2, 3, 4]
        .into_iter()
        .filter(|id| *id != remove)
        .collect();
    lnode.change_membership(remaining.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let acked = writer.await.unwrap();
    assert!(
        acked.len() > 5,
        "writes continued during the changes: {}",
        acked.len()
    );
    c.take(remove).stop().await;
    let a = lnode.propose(register("final", "final")).await.unwrap();
    // All nodes at one index with one state hash (a tick may follow at any moment, so
    // hashes read later need not match).
    c.wait_converged(a.index, Duration::from_secs(30)).await;
    for t in &c.nodes {
        assert_eq!(t.node.status().voters, remaining);
        for name in &acked {
            assert!(
                t.node.read_stale(|s| s.cluster(name).is_some()),
                "{name} on node {}",
                t.id
            );
        }
    }
    for t in c.nodes {
        t.stop().await;
    }
}
