//! The leader drains the state's reschedule queue without waiting for regular ticks: a cluster
//! leaving queues every object placed on it, each entry re-places a bounded number of them, and
//! the ticker proposes the entries that finish the job although its regular period is a minute.

use std::time::Duration;

use crate::common::*;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_core::model::{ClusterSpec, Health, ObjectSpec};
use fedraft_core::state::RESCHEDULE_OBJECTS_PER_ENTRY;
use fedraft_raft::{FedNode, NodeConfig, Proposal};

fn tune(cfg: NodeConfig) -> NodeConfig {
    let mut c = relaxed(cfg);
    c.tick_interval_ms = 60_000;
    c
}

async fn propose(node: &FedNode, command: Command) {
    let a = node
        .propose(Proposal {
            request_id: String::new(),
            actor: "tester".into(),
            command,
        })
        .await
        .unwrap();
    assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
}

fn config_map(i: usize) -> Command {
    let template = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("o{i}")},
    })
    .to_string();
    let spec = ObjectSpec {
        template,
        placement: Default::default(),
        overrides: Vec::new(),
    };
    Command::PutObject {
        namespace: "default".into(),
        name: format!("o{i}"),
        spec,
        expected_version: None,
    }
}

fn placed_on(node: &FedNode, cluster: &str) -> usize {
    node.read_stale(|s| {
        s.objects()
            .filter(|o| o.placement_map().contains_key(cluster))
            .count()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_of_reschedules_drains_between_regular_ticks() {
    init_tracing();
    let c = start_cluster(1, &tune).await;
    let node = c.get(1).node.clone();
    for name in ["dc1", "dc2"] {
        let mut spec = ClusterSpec::new(name, format!("https://{name}.example:6443"));
        // Ready after a second of heartbeats, and never dark during the test.
        spec.success_threshold_seconds = 1;
        spec.failure_threshold_seconds = 600;
        propose(&node, Command::RegisterCluster(spec)).await;
    }
    eventually(Duration::from_secs(30), "two Ready clusters", || async {
        let beats = ["dc1", "dc2"]
            .map(|cluster| Heartbeat {
                cluster: cluster.into(),
                capacity: None,
            })
            .to_vec();
        propose(&node, Command::Heartbeats(beats)).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ready = node.read_stale(|s| {
            s.clusters()
                .filter(|c| c.status.health == Health::Ready)
                .count()
        });
        (ready == 2).then_some(())
    })
    .await;

    // Proposed a chunk at a time: the batcher packs each chunk into a few entries, where one
    // proposal after the other would take an fsync each.
    let objects = 3 * RESCHEDULE_OBJECTS_PER_ENTRY;
    let puts: Vec<Command> = (0..objects).map(config_map).collect();
    for chunk in puts.chunks(256) {
        futures::future::join_all(chunk.iter().map(|put| propose(&node, put.clone()))).await;
    }
    let on_dc1 = placed_on(&node, "dc1");
    assert_eq!(on_dc1, objects, "every object is placed on dc1");

    // Leaving, dc1 queues every object placed there; its own entry re-places the first batch.
    propose(
        &node,
        Command::DeregisterCluster {
            name: "dc1".into(),
            expected_version: None,
        },
    )
    .await;
    eventually(Duration::from_secs(10), "the queue drained", || async {
        (node.read_stale(|s| s.pending_reschedules()) == 0).then_some(())
    })
    .await;
    let left_on_dc1 = placed_on(&node, "dc1");
    assert_eq!(left_on_dc1, 0);
    for t in c.nodes {
        t.stop().await;
    }
}
