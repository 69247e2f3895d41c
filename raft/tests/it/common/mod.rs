//! What the raft tests share beyond fedraft-testkit: this crate's group identity and the log
//! filter. Nodes, clusters and waiting come from the testkit.

use std::path::PathBuf;

use fedraft_raft::NodeConfig;
pub use fedraft_testkit::cluster::{relaxed, Cluster, Group, Node as TestNode};
pub use fedraft_testkit::eventually;

pub const SECRET: &str = "test-secret";

fn group() -> Group {
    Group::new("test-cluster", SECRET)
}

/// Starts a node on `addr` ("127.0.0.1:0" for a fresh port) over `dir`.
pub async fn start_node(
    id: u64,
    dir: PathBuf,
    addr: &str,
    tune: &dyn Fn(NodeConfig) -> NodeConfig,
) -> TestNode {
    group().start_node(id, dir, addr, tune).await
}

/// Starts `n` nodes, bootstraps them as voters from node 1 and waits for a leader.
pub async fn start_cluster(n: u64, tune: &dyn Fn(NodeConfig) -> NodeConfig) -> Cluster {
    group().start(n, tune).await
}

pub fn init_tracing() {
    fedraft_testkit::init_tracing("warn");
}
