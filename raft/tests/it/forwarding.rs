//! Forwarded proposals and the two ways a bounded wait ends: many concurrent proposals through a
//! follower travel in batches and all commit once, in order per proposer; a wait that runs out
//! on a cluster with a working leader is `Timeout`, and only a leader without its majority, a
//! node that knows no leader, or a follower whose leader refuses its calls says `NoQuorum`.

use std::collections::BTreeSet;
use std::time::Duration;

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

const CLIENTS: usize = 48;
const PER_CLIENT: usize = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_proposals_via_a_follower_are_batched_and_commit_once_in_order() {
    init_tracing();
    let c = start_cluster(3, &relaxed).await;
    let leader = c.wait_leader(Duration::from_secs(10)).await;
    let follower = c
        .nodes
        .iter()
        .find(|t| t.id != leader)
        .unwrap()
        .node
        .clone();
    let before = follower.forwarding_stats();

    // Closed-loop proposers through one follower, each with its own names and request ids.
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let node = follower.clone();
        tasks.push(tokio::spawn(async move {
            let mut versions = Vec::new();
            for i in 0..PER_CLIENT {
                let name = format!("f{client}-{i}");
                let a = node
                    .propose(register(&format!("id-{name}"), &name))
                    .await
                    .unwrap();
                assert!(
                    matches!(a.outcome, Outcome::Accepted { .. }),
                    "{name}: {:?}",
                    a.outcome
                );
                assert_eq!(a.duplicate_of, None, "{name} applied as a duplicate");
                versions.push(a.index);
            }
            versions
        }));
    }
    let mut all = BTreeSet::new();
    let mut last = 0;
    for t in tasks {
        let versions = t.await.unwrap();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "one proposer's writes commit in the order it made them: {versions:?}"
        );
        last = last.max(*versions.last().unwrap());
        for v in versions {
            assert!(all.insert(v), "resource version {v} answered twice");
        }
    }
    assert_eq!(all.len(), CLIENTS * PER_CLIENT);

    // Batched: far fewer calls to the leader than proposals.
    let after = follower.forwarding_stats();
    let (calls, proposals) = (
        after.calls - before.calls,
        after.proposals - before.proposals,
    );
    assert_eq!(proposals as usize, CLIENTS * PER_CLIENT);
    eprintln!("{proposals} forwarded proposals in {calls} calls");
    assert!(
        calls * 2 <= proposals,
        "forwarding is batched: {calls} calls for {proposals} proposals"
    );

    // Nothing lost, nothing applied twice, the same state everywhere.
    // All nodes at one index with one state hash (a tick may follow at any moment, so
    // hashes read later need not match).
    c.wait_converged(last, Duration::from_secs(60)).await;
    for t in &c.nodes {
        let n = t.node.read_stale(|s| s.clusters().count());
        assert_eq!(n, CLIENTS * PER_CLIENT, "node {}", t.id);
    }
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retries_in_one_forwarded_batch_are_deduplicated_by_request_id() {
    init_tracing();
    let c = start_cluster(3, &relaxed).await;
    let leader = c.wait_leader(Duration::from_secs(10)).await;
    let follower = c
        .nodes
        .iter()
        .find(|t| t.id != leader)
        .unwrap()
        .node
        .clone();
    // Two copies of every request, sent at once, so copies share forwarding calls.
    let mut tasks = Vec::new();
    for copy in 0..2 {
        for i in 0..20 {
            let node = follower.clone();
            tasks.push(tokio::spawn(async move {
                let name = format!("dup{i}");
                let a = node
                    .propose(register(&format!("same-{i}"), &name))
                    .await
                    .unwrap();
                (i, copy, a)
            }));
        }
    }
    let mut by_id = std::collections::BTreeMap::<usize, Vec<_>>::new();
    for t in tasks {
        let (i, _, a) = t.await.unwrap();
        by_id.entry(i).or_default().push(a);
    }
    for (i, answers) in by_id {
        let [a, b] = &answers[..] else {
            panic!("two answers for {i}")
        };
        assert_eq!(
            a.outcome, b.outcome,
            "request {i}: both copies get one outcome"
        );
        assert!(
            matches!(a.outcome, Outcome::Accepted { .. }),
            "{:?}",
            a.outcome
        );
        let firsts = answers.iter().filter(|x| x.duplicate_of.is_none()).count();
        assert_eq!(firsts, 1, "request {i} applied exactly once: {answers:?}");
        let first = answers.iter().find(|x| x.duplicate_of.is_none()).unwrap();
        let dup = answers.iter().find(|x| x.duplicate_of.is_some()).unwrap();
        assert_eq!(dup.duplicate_of, Some(first.index));
    }
    let count = follower
        .read(|s| {
            s.clusters()
                .filter(|c| c.spec.name.starts_with("dup"))
                .count()
        })
        .await
        .unwrap();
    assert_eq!(count, 20);
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wait_that_runs_out_is_timeout_with_a_quorum_and_no_quorum_without() {
    init_tracing();
    let tune = |cfg: NodeConfig| NodeConfig {
        propose_timeout_ms: 3_000,
        ..relaxed(cfg)
    };
    let mut c = start_cluster(3, &tune).await;
    c.get(1)
        .node
        .propose(register("warm", "warm"))
        .await
        .unwrap();
    let leader = c.wait_leader(Duration::from_secs(10)).await;
    let lnode = c.get(leader).node.clone();
    let follower = c.nodes.iter().find(|t| t.id != leader).unwrap().id;
    // The whole cluster is up: a wait far shorter than one fsync runs out on an overloaded-looking
    // but healthy cluster, on the leader and through a follower alike. The timer only fires at
    // the next millisecond tick, so a busy runtime may see the write commit first; that is a
    // correct answer too, and the next attempt gets another chance to run out.
    for (via, prefix) in [(leader, "short-l"), (follower, "short-f")] {
        let mut ran_out = false;
        for attempt in 0..50 {
            let name = format!("{prefix}-{attempt}");
            match c
                .get(via)
                .node
                .propose_within(register(&name, &name), Duration::from_micros(1))
                .await
            {
                Ok(_) => continue,
                Err(RaftError::Timeout { .. }) => {
                    ran_out = true;
                    break;
                }
                Err(err) => panic!("node {via} with its quorum: {err:?}"),
            }
        }
        assert!(
            ran_out,
            "node {via}: 50 one-microsecond waits all committed"
        );
    }
    // The leader alone: once a majority has been silent for longer than the election timeout,
    // the same kind of wait is NoQuorum, for writes and for linearizable reads.
    c.stop_all_but(leader).await;
    let lease = lnode.config().election_timeout_max_ms;
    eventually(
        Duration::from_secs(30),
        "the leader to miss its quorum",
        || {
            let l = lnode.clone();
            async move {
                let m = l.raft().metrics().borrow().clone();
                m.millis_since_quorum_ack
                    .is_none_or(|ms| ms > lease)
                    .then_some(())
            }
        },
    )
    .await;
    let err = lnode
        .propose_within(register("lost", "lost"), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, RaftError::NoQuorum { .. }), "{err:?}");
    let err = lnode.read(|s| s.clusters().count()).await.unwrap_err();
    assert!(matches!(err, RaftError::NoQuorum { .. }), "{err:?}");
    for t in c.nodes {
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_whose_leader_is_gone_says_no_quorum_while_it_still_names_it() {
    init_tracing();
    let mut c = start_cluster(3, &relaxed).await;
    c.get(1)
        .node
        .propose(register("warm", "warm"))
        .await
        .unwrap();
    let leader = c.wait_leader(Duration::from_secs(10)).await;
    let survivor = c.nodes.iter().find(|t| t.id != leader).unwrap().id;
    c.stop_all_but(survivor).await;
    // A follower stands for election only after the leader's lease and an election timeout
    // (here 2 s + 1..2 s); until then it names the dead leader, whose port refuses every call.
    let node = c.get(survivor).node.clone();
    let err = node
        .propose_within(register("lost", "lost"), Duration::from_millis(800))
        .await
        .unwrap_err();
    assert!(matches!(err, RaftError::NoQuorum { .. }), "{err:?}");
    assert_eq!(
        node.status().leader_id,
        Some(leader),
        "the follower should still name its old leader for this check to mean anything"
    );
    let err = node.read(|s| s.clusters().count()).await.unwrap_err();
    assert!(matches!(err, RaftError::NoQuorum { .. }), "{err:?}");
    c.take(survivor).stop().await;
}
