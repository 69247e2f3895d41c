//! A real three-node fedraft cluster on loopback for HTTP tests (fedraft-testkit's in-process
//! group serving the real API router on ephemeral ports), this crate's tokens, and request and
//! watch helpers. Helpers poll for conditions; none sleeps as an assertion.
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fedraft_apiserver::{ApiConfig, Principal, Role, TokenStore};
use fedraft_raft::NodeConfig;
use fedraft_testkit::cluster::Group;
pub use fedraft_testkit::cluster::Node;
use fedraft_testkit::eventually;
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

pub struct TestCluster {
    pub root: tempfile::TempDir,
    pub nodes: Vec<Node>,
    pub http: reqwest::Client,
}

/// Starts three nodes with the API; log time advances only with writes (no idle ticks), so the
/// state hash is a faithful "nothing changed" check.
pub async fn start(cfg: ApiConfig) -> TestCluster {
    let tune = |cfg| NodeConfig {
        heartbeat_interval_ms: 200,
        election_timeout_min_ms: 1000,
        election_timeout_max_ms: 2000,
        tick_interval_ms: 3_600_000,
        propose_timeout_ms: 4_000,
        ..cfg
    };
    let cluster = Group::new("api-test", SECRET)
        .with_api(tokens(), cfg)
        .start(3, &tune)
        .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    TestCluster {
        root: cluster.root,
        nodes: cluster.nodes,
        http,
    }
}

impl TestCluster {
    pub async fn wait<F, Fut>(&self, what: &str, mut f: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        eventually(Duration::from_secs(60), what, || {
            let done = f();
            async move { done.await.then_some(()) }
        })
        .await
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
        let rb = self
            .http
            .request(method, format!("{}{path}", node.api_url()));
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
