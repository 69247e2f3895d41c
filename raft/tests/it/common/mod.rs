//! Shared helpers for the loopback cluster tests: start real nodes (real RocksDB in temp dirs,
//! real HTTP on 127.0.0.1:0), wait for conditions by polling, compare state hashes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fedraft_core::command::Command;
use fedraft_raft::{FedNode, NodeConfig, Proposal};

pub const SECRET: &str = "test-secret";

/// Timeouts that tolerate a loaded two-core machine (tests that measure failover use defaults).
pub fn relaxed(cfg: NodeConfig) -> NodeConfig {
    NodeConfig {
        heartbeat_interval_ms: 200,
        election_timeout_min_ms: 1000,
        election_timeout_max_ms: 2000,
        propose_timeout_ms: 10_000,
        ..cfg
    }
}

pub struct TestNode {
    pub id: u64,
    pub addr: String,
    pub dir: PathBuf,
    pub node: FedNode,
    server: tokio::task::JoinHandle<()>,
}

impl TestNode {
    /// Stops raft and the peer server; the data dir stays for a restart.
    pub async fn stop(self) {
        let _ = self.node.shutdown().await;
        self.server.abort();
        let _ = self.server.await;
    }
}

/// Starts a node on `addr` ("127.0.0.1:0" for a fresh port) over `dir`.
pub async fn start_node(
    id: u64,
    dir: PathBuf,
    addr: &str,
    tune: &dyn Fn(NodeConfig) -> NodeConfig,
) -> TestNode {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = tune(NodeConfig {
        node_id: id,
        data_dir: dir.clone(),
        advertise_peer_addr: addr.clone(),
        cluster_secret: SECRET.into(),
        cluster_id: "test-cluster".into(),
        ..NodeConfig::default()
    });
    let node = FedNode::open(cfg).await.unwrap();
    let router = node.peer_router();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    TestNode {
        id,
        addr,
        dir,
        node,
        server,
    }
}

pub struct Cluster {
    pub root: tempfile::TempDir,
    pub nodes: Vec<TestNode>,
}

/// Starts `n` nodes, bootstraps them as voters from node 1 and waits for a leader.
pub async fn start_cluster(n: u64, tune: &dyn Fn(NodeConfig) -> NodeConfig) -> Cluster {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Vec::new();
    for id in 1..=n {
        nodes.push(start_node(id, root.path().join(format!("n{id}")), "127.0.0.1:0", tune).await);
    }
    let members: BTreeMap<u64, String> = nodes.iter().map(|t| (t.id, t.addr.clone())).collect();
    nodes[0].node.bootstrap(members).await.unwrap();
    let c = Cluster { root, nodes };
    c.wait_leader(Duration::from_secs(30)).await;
    c
}

impl Cluster {
    pub fn get(&self, id: u64) -> &TestNode {
        self.nodes.iter().find(|t| t.id == id).unwrap()
    }

    pub fn take(&mut self, id: u64) -> TestNode {
        let i = self.nodes.iter().position(|t| t.id == id).unwrap();
        self.nodes.remove(i)
    }

    /// The ids of every running node but `skip`.
    pub fn ids_except(&self, skip: u64) -> Vec<u64> {
        self.nodes
            .iter()
            .map(|t| t.id)
            .filter(|id| *id != skip)
            .collect()
    }

    /// Stops every node but `keep`.
    pub async fn stop_all_but(&mut self, keep: u64) {
        for id in self.ids_except(keep) {
            self.take(id).stop().await;
        }
    }

    /// Waits until some running node reports itself leader and the others agree.
    pub async fn wait_leader(&self, within: Duration) -> u64 {
        wait_for(within, "a leader", || async {
            let leaders: Vec<u64> = self
                .nodes
                .iter()
                .filter(|t| t.node.status().is_leader)
                .map(|t| t.id)
                .collect();
            let [l] = leaders[..] else { return None };
            self.nodes
                .iter()
                .all(|t| t.node.status().leader_id == Some(l))
                .then_some(l)
        })
        .await
    }

    /// Waits until every running node has applied `index` and all state hashes agree.
    pub async fn wait_converged(&self, index: u64, within: Duration) -> String {
        wait_for(within, "identical state on all nodes", || async {
            let reports: Vec<_> = self.nodes.iter().map(|t| t.node.report()).collect();
            let all_applied = reports.iter().all(|r| r.state_applied_index >= index);
            let first = &reports[0].state_hash;
            (all_applied
                && reports.iter().all(|r| {
                    &r.state_hash == first
                        && r.state_applied_index == reports[0].state_applied_index
                }))
            .then(|| first.clone())
        })
        .await
    }
}

/// Polls `f` every 50 ms until it yields Some, or panics after `within`.
pub async fn wait_for<T, F, Fut>(within: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A ~256-byte command that core applies cheaply (a cordon of an unknown cluster is refused,
/// still committed, applied and deduplicated like any other entry).
pub fn proposal(request_id: impl Into<String>, tag: &str) -> Proposal {
    let mut name = format!("c-{tag}-");
    while name.len() < 200 {
        name.push('x');
    }
    Proposal {
        request_id: request_id.into(),
        actor: "tester".into(),
        command: Command::Cordon { name },
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}
