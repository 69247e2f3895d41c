//! A real three-node fedraft cluster on loopback for HTTP tests: real raft, RocksDB in temp
//! dirs, the real API router on ephemeral ports. Helpers poll for conditions; none sleeps as an
//! assertion.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fedraft_apiserver::{Api, ApiConfig, Principal, Role, TokenStore};
use fedraft_raft::{FedNode, NodeConfig};
use serde_json::Value;

pub const SECRET: &str = "cluster-secret-for-api-tests";
pub const ADMIN: &str = "admin-token-0123456789";
pub const OPERATOR: &str = "operator-token-0123456789";
pub const CAROL: &str = "carol-token-0123456789";

/// Every log line of the test process, for grepping.
#[derive(Clone, Default)]
pub struct Logs(pub Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Installs a debug-level subscriber capturing every crate's logs (once per test binary).
pub fn capture_logs() -> Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let w = logs.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter("debug,openraft=info,hyper=info,reqwest=info,h2=info")
            .with_writer(move || w.clone())
            .try_init();
        logs
    })
    .clone()
}

pub fn tokens() -> TokenStore {
    let p = |n: &str, role| Principal {
        name: n.into(),
        role,
    };
    TokenStore::new(
        [
            (ADMIN.to_string(), p("alice", Role::Admin)),
            (OPERATOR.to_string(), p("bob", Role::Operator)),
            (CAROL.to_string(), p("carol", Role::Tenant("blue".into()))),
        ],
        Some(SECRET.into()),
    )
    .unwrap()
}

pub struct Node {
    pub id: u64,
    pub node: FedNode,
    pub api: String,
    pub peer: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Node {
    pub fn hash(&self) -> String {
        self.node.read_stale(|s| s.state_hash_hex())
    }

    pub async fn stop(self) {
        let _ = self.node.shutdown().await;
        for t in self.tasks {
            t.abort();
        }
    }
}

pub struct TestCluster {
    pub root: tempfile::TempDir,
    pub nodes: Vec<Node>,
    pub http: reqwest::Client,
}

/// Starts three nodes with the API; log time advances only with writes (no idle ticks), so the
/// state hash is a faithful "nothing changed" check.
pub async fn start(cfg: ApiConfig) -> TestCluster {
    fedraft_raft::install_crypto_provider();
    let root = tempfile::tempdir().unwrap();
    let mut listeners = Vec::new();
    for _ in 0..3 {
        let peer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listeners.push((peer, api));
    }
    let members: BTreeMap<u64, String> = listeners
        .iter()
        .enumerate()
        .map(|(i, (p, _))| (i as u64 + 1, p.local_addr().unwrap().to_string()))
        .collect();
    let mut nodes = Vec::new();
    for (i, (peer, api)) in listeners.into_iter().enumerate() {
        let id = i as u64 + 1;
        let peer_addr = peer.local_addr().unwrap().to_string();
        let api_addr = api.local_addr().unwrap().to_string();
        let node = FedNode::open(NodeConfig {
            node_id: id,
            data_dir: root.path().join(format!("n{id}")),
            advertise_peer_addr: peer_addr.clone(),
            cluster_secret: SECRET.into(),
            cluster_id: "api-test".into(),
            heartbeat_interval_ms: 200,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            tick_interval_ms: 3_600_000,
            propose_timeout_ms: 4_000,
            ..NodeConfig::default()
        })
        .await
        .unwrap();
        let pr = node.peer_router();
        let t1 = tokio::spawn(async move {
            let _ = axum::serve(peer, pr).await;
        });
        let router = Api::new(node.clone(), tokens(), cfg.clone()).router();
        let t2 = tokio::spawn(async move {
            let _ = axum::serve(api, router).await;
        });
        nodes.push(Node {
            id,
            node,
            api: format!("http://{api_addr}"),
            peer: format!("http://{peer_addr}"),
            tasks: vec![t1, t2],
        });
    }
    for n in &nodes {
        n.node.bootstrap(members.clone()).await.unwrap();
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let c = TestCluster { root, nodes, http };
    c.wait("a leader seen by all nodes", || async {
        let ids: Vec<_> = c.nodes.iter().map(|n| n.node.status().leader_id).collect();
        ids.iter().all(|l| l.is_some() && *l == ids[0])
    })
    .await;
    c
}

impl TestCluster {
    pub async fn wait<F, Fut>(&self, what: &str, mut f: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !f().await {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn leader(&self) -> &Node {
        let id = self.nodes[0].node.status().leader_id.unwrap();
        self.nodes.iter().find(|n| n.id == id).unwrap()
    }

    pub fn follower(&self) -> &Node {
        let id = self.nodes[0].node.status().leader_id.unwrap();
        self.nodes.iter().find(|n| n.id != id).unwrap()
    }

    /// Waits until every node applied the same state and returns its hash.
    pub async fn settled_hash(&self) -> String {
        let mut hash = String::new();
        self.wait("identical state on all nodes", || {
            let hs: Vec<String> = self.nodes.iter().map(|n| n.hash()).collect();
            let same = hs.iter().all(|h| *h == hs[0]);
            hash = hs[0].clone();
            async move { same }
        })
        .await;
        hash
    }

    pub fn req(
        &self,
        node: &Node,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let rb = self.http.request(method, format!("{}{path}", node.api));
        match token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }
}

/// A response reduced to what tests assert on; every body is kept for the credentials grep.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub json: Value,
}

pub async fn send(rb: reqwest::RequestBuilder, seen: &Mutex<Vec<String>>) -> Resp {
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    seen.lock().unwrap().push(text.clone());
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Resp {
        status,
        headers,
        text,
        json,
    }
}

/// Reads NDJSON lines from a watch response until `stop` says so (or 30 s pass).
pub async fn read_watch(
    resp: reqwest::Response,
    mut stop: impl FnMut(&[Value]) -> bool,
) -> Vec<Value> {
    use futures::StreamExt;
    let mut stream = resp.bytes_stream();
    let (mut buf, mut events) = (Vec::new(), Vec::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !stop(&events) {
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("watch timed out");
        let Some(chunk) = chunk else { break };
        buf.extend_from_slice(&chunk.unwrap());
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            events.push(serde_json::from_slice(&line).unwrap());
        }
    }
    events
}
