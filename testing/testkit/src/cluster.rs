//! In-process raft groups: real `FedNode`s (RocksDB in temporary directories, peer HTTP on
//! 127.0.0.1:0), bootstrapped from the first node, optionally each with the HTTP API on its own
//! ephemeral port. Owns starting, stopping and waiting for agreement; what a test proposes and
//! checks is its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fedraft_apiserver::{Api, ApiConfig, TokenStore};
use fedraft_core::command::Command;
use fedraft_core::state::{Applied, Outcome};
use fedraft_raft::{FedNode, NodeConfig, Proposal};
use tokio::task::JoinHandle;

use crate::wait::eventually;

/// How long a freshly started group may take to agree on a leader on a loaded machine.
pub const START_LIMIT: Duration = Duration::from_secs(30);

/// Timeouts that tolerate a loaded two-core machine: heartbeat 200 ms, election 1-2 s, proposals
/// wait 10 s. Tests that measure failover keep the defaults instead.
pub fn relaxed(cfg: NodeConfig) -> NodeConfig {
    NodeConfig {
        heartbeat_interval_ms: 200,
        election_timeout_min_ms: 1000,
        election_timeout_max_ms: 2000,
        propose_timeout_ms: 10_000,
        ..cfg
    }
}

/// What every node of one group shares: its identity and, when set, the API each node serves.
#[derive(Clone)]
pub struct Group {
    pub cluster_id: String,
    pub secret: String,
    api: Option<(TokenStore, ApiConfig)>,
}

/// One running node.
pub struct Node {
    pub id: u64,
    /// The peer listener's address (`127.0.0.1:port`).
    pub addr: String,
    pub dir: PathBuf,
    pub node: FedNode,
    /// `http://127.0.0.1:port` of this node's API, when the group serves one.
    pub api: Option<String>,
    tasks: Vec<JoinHandle<()>>,
}

impl Node {
    /// The applied state's hash, as this node has it now.
    pub fn hash(&self) -> String {
        self.node.read_stale(|s| s.state_hash_hex())
    }

    /// The API's base URL; panics if the group was started without one.
    pub fn api_url(&self) -> &str {
        self.api.as_deref().expect("this group serves no API")
    }

    /// Stops raft and the listeners but keeps the handle (a partitioned node's last state stays
    /// readable); the data directory stays for a restart.
    pub async fn halt(&mut self) {
        let _ = self.node.shutdown().await;
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
    }

    /// [`Node::halt`], dropping the handle.
    pub async fn stop(mut self) {
        self.halt().await;
    }
}

impl Group {
    pub fn new(cluster_id: &str, secret: &str) -> Group {
        Group {
            cluster_id: cluster_id.into(),
            secret: secret.into(),
            api: None,
        }
    }

    /// Every node also serves the HTTP API with these tokens and settings.
    pub fn with_api(mut self, tokens: TokenStore, cfg: ApiConfig) -> Group {
        self.api = Some((tokens, cfg));
        self
    }

    /// Starts node `id` over `dir` with its peer listener on `addr` ("127.0.0.1:0" for a fresh
    /// port; a stopped node's address to restart it in place). `tune` adjusts the config.
    pub async fn start_node(
        &self,
        id: u64,
        dir: PathBuf,
        addr: &str,
        tune: &dyn Fn(NodeConfig) -> NodeConfig,
    ) -> Node {
        fedraft_raft::install_crypto_provider();
        let peer = tokio::net::TcpListener::bind(addr)
            .await
            .expect("binding a peer listener");
        let addr = peer.local_addr().expect("a bound address").to_string();
        let cfg = tune(NodeConfig {
            node_id: id,
            data_dir: dir.clone(),
            advertise_peer_addr: addr.clone(),
            cluster_secret: self.secret.clone(),
            cluster_id: self.cluster_id.clone(),
            ..NodeConfig::default()
        });
        let node = FedNode::open(cfg).await.expect("opening a node");
        let router = node.peer_router();
        let mut tasks = vec![tokio::spawn(async move {
            let _ = axum::serve(peer, router).await;
        })];
        let mut api = None;
        if let Some((tokens, cfg)) = &self.api {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("binding an API listener");
            api = Some(format!(
                "http://{}",
                listener.local_addr().expect("a bound address")
            ));
            let router = Api::new(node.clone(), tokens.clone(), cfg.clone()).router();
            tasks.push(tokio::spawn(async move {
                let _ = axum::serve(listener, router).await;
            }));
        }
        Node {
            id,
            addr,
            dir,
            node,
            api,
            tasks,
        }
    }

    /// Starts nodes 1..=n under `root` (`root/node<id>`), bootstraps them as voters from node 1
    /// and waits for a leader they all agree on.
    pub async fn start_in(
        &self,
        root: &Path,
        n: u64,
        tune: &dyn Fn(NodeConfig) -> NodeConfig,
    ) -> Vec<Node> {
        let mut nodes = Vec::new();
        for id in 1..=n {
            let dir = root.join(format!("node{id}"));
            nodes.push(self.start_node(id, dir, "127.0.0.1:0", tune).await);
        }
        let members: BTreeMap<u64, String> = nodes.iter().map(|t| (t.id, t.addr.clone())).collect();
        nodes[0]
            .node
            .bootstrap(members)
            .await
            .expect("bootstrapping the group");
        wait_leader(&nodes, START_LIMIT).await;
        nodes
    }

    /// [`Group::start_in`] under a fresh temporary directory the returned cluster owns.
    pub async fn start(&self, n: u64, tune: &dyn Fn(NodeConfig) -> NodeConfig) -> Cluster {
        let root = crate::temp_dir(&self.cluster_id);
        let nodes = self.start_in(root.path(), n, tune).await;
        Cluster { root, nodes }
    }
}

/// A started group and the directory its nodes live in.
pub struct Cluster {
    pub root: tempfile::TempDir,
    pub nodes: Vec<Node>,
}

impl Cluster {
    pub fn get(&self, id: u64) -> &Node {
        self.nodes
            .iter()
            .find(|t| t.id == id)
            .expect("no running node with that id")
    }

    /// Removes node `id` from the cluster (to stop or restart it).
    pub fn take(&mut self, id: u64) -> Node {
        let i = self
            .nodes
            .iter()
            .position(|t| t.id == id)
            .expect("no running node with that id");
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

    /// Waits until one running node reports itself leader and the others agree.
    pub async fn wait_leader(&self, within: Duration) -> u64 {
        wait_leader(&self.nodes, within).await
    }

    /// The node the first node believes leads (call after [`Cluster::wait_leader`]).
    pub fn leader(&self) -> &Node {
        let id = self.nodes[0]
            .node
            .status()
            .leader_id
            .expect("a known leader");
        self.get(id)
    }

    /// Some node that does not lead (call after [`Cluster::wait_leader`]).
    pub fn follower(&self) -> &Node {
        let id = self.nodes[0]
            .node
            .status()
            .leader_id
            .expect("a known leader");
        self.nodes.iter().find(|n| n.id != id).expect("a follower")
    }

    /// Waits until every running node has applied `index` and all state hashes agree.
    pub async fn wait_converged(&self, index: u64, within: Duration) -> String {
        eventually(within, "identical state on all nodes", || async {
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

    /// Stops every node in turn.
    pub async fn stop(self) {
        for n in self.nodes {
            n.stop().await;
        }
    }
}

/// Waits until exactly one of `nodes` reports itself leader and every one of them agrees.
pub async fn wait_leader(nodes: &[Node], within: Duration) -> u64 {
    eventually(within, "a leader all nodes agree on", || async {
        let leaders: Vec<u64> = nodes
            .iter()
            .filter(|t| t.node.status().is_leader)
            .map(|t| t.id)
            .collect();
        let [l] = leaders[..] else { return None };
        nodes
            .iter()
            .all(|t| t.node.status().leader_id == Some(l))
            .then_some(l)
    })
    .await
}

/// Proposes `command` as "admin" under a request id unique in this process and asserts it was
/// accepted.
pub async fn must(node: &FedNode, command: Command) -> Applied {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let request_id = format!(
        "test-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let a = node
        .propose(Proposal {
            request_id,
            actor: "admin".into(),
            command,
        })
        .await
        .expect("proposing");
    assert!(
        matches!(a.outcome, Outcome::Accepted { .. }),
        "rejected: {:?}",
        a.outcome
    );
    a
}
