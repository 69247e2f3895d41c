//! Helpers shared by the integration tests: a kube-rs client for a simulator, the polling limit, and a
//! raw HTTP/1.1 request for checks below the client (status codes, bodies, refused sockets).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use fedraft_testkit::eventually;

/// Generous: the machine is a loaded 2-core box.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A kube-rs client for `url` with retries off, so injected faults reach the test.
pub fn client(url: &str) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut cfg = kube::Config::new(url.parse().unwrap());
    cfg.default_retry = false;
    cfg.connect_timeout = Some(Duration::from_secs(5));
    kube::Client::try_from(cfg).unwrap()
}

/// The Status code and reason of a kube-rs API error.
pub fn api_error(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// One request on a fresh connection; returns (status code, body).
pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(PATIENCE, s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}
