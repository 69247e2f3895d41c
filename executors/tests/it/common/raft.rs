//! Real fedraft raft nodes (RocksDB in temp dirs, peer HTTP on 127.0.0.1:0) for end-to-end
//! executor tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use fedraft_core::command::Command;
use fedraft_core::state::{Applied, Outcome};
use fedraft_raft::{FedNode, NodeConfig, Proposal};

pub struct RaftNode {
    pub id: u64,
    pub node: FedNode,
    server: tokio::task::JoinHandle<()>,
}

impl RaftNode {
    pub async fn stop(self) {
        let _ = self.node.shutdown().await;
        self.server.abort();
        let _ = self.server.await;
    }
}

/// Election timeouts used by these tests (a loaded 2-core machine needs slack).
pub const ELECTION_MIN_MS: u64 = 1000;
pub const ELECTION_MAX_MS: u64 = 2000;

async fn start_node(id: u64, dir: PathBuf) -> (RaftNode, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cfg = NodeConfig {
        node_id: id,
        data_dir: dir,
        advertise_peer_addr: addr.clone(),
        cluster_secret: "executor-test-secret".into(),
        cluster_id: "executor-test".into(),
        heartbeat_interval_ms: 200,
        election_timeout_min_ms: ELECTION_MIN_MS,
        election_timeout_max_ms: ELECTION_MAX_MS,
        tick_interval_ms: 500,
        propose_timeout_ms: 10_000,
        ..NodeConfig::default()
    };
    let node = FedNode::open(cfg).await.unwrap();
    let router = node.peer_router();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (RaftNode { id, node, server }, addr)
}

/// Starts `n` voters and waits for a leader.
pub async fn start_group(root: &tempfile::TempDir, n: u64) -> Vec<RaftNode> {
    let mut nodes = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=n {
        let (node, addr) = start_node(id, root.path().join(format!("node{id}"))).await;
        members.insert(id, addr);
        nodes.push(node);
    }
    nodes[0].node.bootstrap(members).await.unwrap();
    wait_leader(&nodes, Duration::from_secs(30)).await;
    nodes
}

pub async fn wait_leader(nodes: &[RaftNode], within: Duration) -> u64 {
    super::eventually(within, "a raft leader", || {
        let leaders: Vec<u64> = nodes
            .iter()
            .filter(|n| n.node.status().is_leader)
            .map(|n| n.id)
            .collect();
        let agreed = match leaders[..] {
            [l] => nodes
                .iter()
                .all(|n| n.node.status().leader_id == Some(l))
                .then_some(l),
            _ => None,
        };
        async move { agreed }
    })
    .await
}

/// Proposes as the admin and asserts the command was accepted.
pub async fn must(node: &FedNode, command: Command) -> Applied {
    let id = format!("test-{}", rand_id());
    let a = node
        .propose(Proposal {
            request_id: id,
            actor: "admin".into(),
            command,
        })
        .await
        .unwrap();
    assert!(
        matches!(a.outcome, Outcome::Accepted { .. }),
        "rejected: {:?}",
        a.outcome
    );
    a
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    t ^ N.fetch_add(1, Ordering::Relaxed)
}
