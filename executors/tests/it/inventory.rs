//! The capacity inventory follows a member's nodes through its watches: a node added, turning
//! NotReady, turning Ready again and removed each changes the reported capacity, and the
//! executor lists nothing again to see it (a 5,000-node member must not cost a full LIST per
//! capacity report).

use std::time::Duration;

use crate::common::local::LocalNode;
use crate::common::*;
use fedraft_executors::ExecutorSet;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(30);

/// Waits until dc1's reported allocatable cpu is `millis`.
async fn allocatable_cpu(node: &LocalNode, millis: u64, what: &str) {
    eventually(LIMIT, what, || {
        let c = node.read(|s| s.cluster("dc1").and_then(|c| c.status.capacity));
        async move { c.filter(|c| c.allocatable.cpu_millis == millis) }
    })
    .await;
}

fn lists(sim: &fedraft_kubesim::SimHandle) -> u64 {
    sim.admin()
        .stats()
        .requests
        .get("list")
        .copied()
        .unwrap_or(0)
}

/// The LIST count once it held still for a second: every watch has done its first list.
async fn settled_lists(sim: &fedraft_kubesim::SimHandle) -> u64 {
    let mut last = lists(sim);
    let mut still = 0;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = lists(sim);
        still = if now == last { still + 1 } else { 0 };
        last = now;
        if still >= 2 {
            break;
        }
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_changes_reach_capacity_without_a_relist() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let node = LocalNode::new();
    node.must(register(cluster_spec("dc1", &dc1, "east")));
    // No resync within the test: a resync's sweep of the default kinds lists too.
    let cfg = fedraft_executors::ExecutorConfig {
        resync_period: Duration::from_secs(600),
        ..executor_config()
    };
    let set = ExecutorSet::start(node.clone(), cfg);

    // Two simulated nodes of 8 cpu each.
    allocatable_cpu(&node, 16_000, "dc1 capacity reported").await;
    // The reconciler's watches list too, and may start after the first capacity report.
    let listed = settled_lists(&dc1).await;

    // A third node joins: created bare (status is a subresource), then its kubelet reports.
    let nodes: Api<Node> = Api::all(kube_client(&dc1));
    let extra: Node =
        serde_json::from_value(json!({ "metadata": { "name": "dc1-extra" } })).unwrap();
    nodes.create(&PostParams::default(), &extra).await.unwrap();
    let status = json!({ "status": {
        "allocatable": { "cpu": "4", "memory": "16Gi", "pods": "110" },
        "conditions": [{ "type": "Ready", "status": "True" }],
    }});
    dc1.admin()
        .drift("v1", "nodes", "", "dc1-extra", &status)
        .unwrap();
    allocatable_cpu(&node, 20_000, "the new node counted").await;

    dc1.admin().set_node_ready("dc1-extra", false).unwrap();
    allocatable_cpu(&node, 16_000, "the NotReady node left out").await;
    dc1.admin().set_node_ready("dc1-extra", true).unwrap();
    allocatable_cpu(&node, 20_000, "the node Ready again").await;

    nodes
        .delete("dc1-extra", &DeleteParams::default())
        .await
        .unwrap();
    allocatable_cpu(&node, 16_000, "the removed node gone").await;

    assert_eq!(
        lists(&dc1),
        listed,
        "capacity followed the nodes by watch events, not by listing again"
    );
    set.shutdown().await;
}
