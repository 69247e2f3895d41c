//! The harness's HTTP client for fedraft's API and the simulators: one pooled client with short, bounded
//! timeouts, and the classification of every reply into what a history needs (answered with a status,
//! definitely not sent, or indeterminate). It decides nothing about workloads or verdicts.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

/// What came back from one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The server answered.
    Answered { status: u16, body: Value },
    /// The request never reached a server (connection refused): it did not happen.
    NotSent(String),
    /// Sent, but no answer (timeout, reset): it may or may not have happened.
    Lost(String),
}

impl Reply {
    /// The body of a 2xx answer.
    pub fn ok_body(&self) -> Option<&Value> {
        match self {
            Reply::Answered { status, body } if (200..300).contains(status) => Some(body),
            _ => None,
        }
    }

    /// A short text for histories and logs.
    pub fn describe(&self) -> String {
        match self {
            Reply::Answered { status, body } => {
                let message = body
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("HTTP {status} {message}")
            }
            Reply::NotSent(e) => format!("not sent: {e}"),
            Reply::Lost(e) => format!("no answer: {e}"),
        }
    }
}

/// A client for the three nodes' APIs (and any plain URL).
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    token: String,
    nodes: Vec<String>,
}

impl Api {
    /// `nodes[i]` is node `i`'s API base URL; `timeout` bounds every request.
    pub fn new(nodes: Vec<String>, token: String, timeout: Duration) -> anyhow::Result<Api> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(1))
            .timeout(timeout)
            .pool_idle_timeout(Duration::from_secs(5))
            .build()?;
        Ok(Api { http, token, nodes })
    }

    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Like [`Api::call`] for a GET, with a shorter timeout (for samplers that must not stall).
    pub async fn get_quick(&self, node: usize, path: &str, timeout: Duration) -> Reply {
        let Some(base) = self.nodes.get(node) else {
            return Reply::NotSent(format!("no node {node}"));
        };
        let rb = self
            .http
            .get(format!("{base}{path}"))
            .bearer_auth(&self.token)
            .timeout(timeout);
        send(rb).await
    }

    /// Sends to node `node`'s API with the admin token.
    pub async fn call(
        &self,
        node: usize,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, String)],
    ) -> Reply {
        let Some(base) = self.nodes.get(node) else {
            return Reply::NotSent(format!("no node {node}"));
        };
        let mut rb = self
            .http
            .request(method, format!("{base}{path}"))
            .bearer_auth(&self.token);
        for (k, v) in headers {
            rb = rb.header(*k, v);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        send(rb).await
    }

    /// Like [`Api::call`] with its own timeout (membership changes wait for a learner to catch up).
    pub async fn call_timeout(
        &self,
        node: usize,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Reply {
        let Some(base) = self.nodes.get(node) else {
            return Reply::NotSent(format!("no node {node}"));
        };
        let mut rb = self
            .http
            .request(method, format!("{base}{path}"))
            .bearer_auth(&self.token)
            .timeout(timeout);
        if let Some(b) = body {
            rb = rb.json(b);
        }
        send(rb).await
    }

    /// A GET of any URL (simulators) with its own timeout, for samplers that must not stall.
    pub async fn plain_get_quick(&self, url: &str, timeout: Duration) -> Reply {
        send(self.http.get(url).timeout(timeout)).await
    }

    /// A request to any URL (simulators), without the API token.
    pub async fn plain(&self, method: Method, url: &str, body: Option<&Value>) -> Reply {
        let mut rb = self.http.request(method, url);
        if let Some(b) = body {
            rb = rb.json(b);
        }
        send(rb).await
    }
}

async fn send(rb: reqwest::RequestBuilder) -> Reply {
    match rb.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            match resp.bytes().await {
                Ok(bytes) => Reply::Answered {
                    status,
                    body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                },
                // The status line arrived, so the server did decide; a cut body loses only details.
                Err(e) => Reply::Answered {
                    status,
                    body: Value::String(e.to_string()),
                },
            }
        }
        Err(e) if e.is_connect() => Reply::NotSent(e.to_string()),
        Err(e) => Reply::Lost(e.to_string()),
    }
}
