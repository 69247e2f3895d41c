//! End to end over a real three-node raft group (RocksDB, loopback HTTP) and two simulated
//! member clusters: each node runs an ExecutorSet; only the leader's executors act. Killing the
//! leader hands convergence to the new leader within 2x the election timeout, with no duplicate
//! and no lost objects.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::common::raft::{must, start_group, wait_leader, ELECTION_MAX_MS};
use crate::common::*;
use fedraft_core::model::Health;
use fedraft_executors::ExecutorSet;
use fedraft_kubesim::SimHandle;
use k8s_openapi::api::apps::v1::Deployment;

const LIMIT: Duration = Duration::from_secs(40);

async fn managed_deployments(sim: &SimHandle) -> BTreeSet<String> {
    let api: kube::Api<Deployment> = kube::Api::all(kube_client(sim));
    let lp = kube::api::ListParams::default().labels("fedraft.io/managed-by=fedraft");
    api.list(&lp)
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|d| {
                    format!(
                        "{}/{}",
                        d.metadata.namespace.unwrap_or_default(),
                        d.metadata.name.unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_change_hands_over_convergence() {
    init_tracing();
    let root = tempfile::tempdir().unwrap();
    let dc1 = start_sim("dc1").await;
    let dc2 = start_sim("dc2").await;
    let mut nodes = start_group(&root, 3).await;
    let mut sets: Vec<Option<ExecutorSet>> = nodes
        .iter()
        .map(|n| Some(ExecutorSet::start(n.node.clone(), executor_config())))
        .collect();

    let any = nodes[0].node.clone();
    must(&any, register(cluster_spec("dc1", &dc1, "east"))).await;
    must(&any, register(cluster_spec("dc2", &dc2, "west"))).await;
    for c in ["dc1", "dc2"] {
        eventually(LIMIT, &format!("{c} Ready"), || {
            let h = any.read_stale(|s| s.cluster(c).map(|x| x.status.health));
            async move { (h == Some(Health::Ready)).then_some(()) }
        })
        .await;
    }

    for i in 0..4 {
        let name = format!("svc{i}");
        let spec = weighted_spec(
            &deployment(&name, 3, "nginx:1"),
            &[("dc1", 2), ("dc2", 1)],
            None,
        );
        must(&any, put("default", &name, spec)).await;
    }
    let want: BTreeSet<String> = (0..4).map(|i| format!("default/svc{i}")).collect();
    for sim in [&dc1, &dc2] {
        eventually(LIMIT, "all objects placed", || async {
            (managed_deployments(sim).await == want).then_some(())
        })
        .await;
    }

    // Exactly the leader's set runs executors.
    let leader = wait_leader(&nodes, LIMIT).await;
    let running: Vec<u64> = nodes
        .iter()
        .zip(&sets)
        .filter(|(_, s)| s.as_ref().is_some_and(|s| !s.running_clusters().is_empty()))
        .map(|(n, _)| n.id)
        .collect();
    assert_eq!(running, vec![leader]);

    // Kill the leader (its executors stop with it).
    let i = nodes.iter().position(|n| n.id == leader).unwrap();
    let old = nodes.remove(i);
    let old_set = sets.remove(i);
    let killed_at = Instant::now();
    old.stop().await;
    if let Some(s) = old_set {
        s.shutdown().await;
    }
    let new_leader = wait_leader(&nodes, LIMIT).await;
    assert_ne!(new_leader, leader);
    let elected_after = killed_at.elapsed();
    let j = nodes.iter().position(|n| n.id == new_leader).unwrap();
    eventually(
        Duration::from_millis(2 * ELECTION_MAX_MS),
        "new leader's executors running",
        || {
            let n = sets[j]
                .as_ref()
                .map(|s| s.running_clusters().len())
                .unwrap_or(0);
            async move { (n == 2).then_some(()) }
        },
    )
    .await;
    eprintln!(
        "leader killed; new leader elected after {elected_after:?}, executors resumed after {:?}",
        killed_at.elapsed()
    );

    // Convergence continues: a change and a new object land, nothing is duplicated or lost.
    let newest = nodes[j].node.clone();
    let spec = weighted_spec(
        &deployment("svc0", 9, "nginx:2"),
        &[("dc1", 2), ("dc2", 1)],
        None,
    );
    must(&newest, put("default", "svc0", spec)).await;
    let spec = weighted_spec(
        &deployment("late", 2, "nginx:1"),
        &[("dc1", 1), ("dc2", 1)],
        None,
    );
    must(&newest, put("default", "late", spec)).await;
    eventually(LIMIT, "svc0 rescaled on dc1", || async {
        let d = get_deployment(&dc1, "default", "svc0").await?;
        (replicas_of(&d) == 6 && image_of(&d) == "nginx:2").then_some(())
    })
    .await;
    let mut want = want.clone();
    want.insert("default/late".into());
    for sim in [&dc1, &dc2] {
        eventually(LIMIT, "exactly the desired objects", || async {
            (managed_deployments(sim).await == want).then_some(())
        })
        .await;
    }

    for s in sets.into_iter().flatten() {
        s.shutdown().await;
    }
    for n in nodes {
        n.stop().await;
    }
}
