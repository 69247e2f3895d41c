//! What the `deploy_*` tests share beyond fedraft-testkit's server processes: their tokens and
//! layout, and the writes a well-behaved client makes across leader changes.

#![allow(dead_code)]

use std::time::{Duration, Instant};

#[allow(unused_imports)] // the deploy_wan benchmark includes this module and uses no TLS
pub use fedraft_testkit::procs::{Cluster, Layout, TlsDir};
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
pub const ADMIN: &str = "deploy-test-admin-token-0123456789";
pub const OPERATOR: &str = "deploy-test-operator-token-0123456789";
pub const SECRET: &str = "deploy-test-cluster-secret-0123456789";

/// The deploy tests' layout: an admin and an operator token, executors off (these clusters
/// register member clusters that do not exist: executors would turn them NotReady and change
/// the state the tests compare across nodes and restores).
pub fn layout() -> Layout {
    let mut l = Layout::new(BIN, ADMIN);
    l.secret = SECRET.into();
    l.tokens = vec![
        format!("{ADMIN} admin admin"),
        format!("{OPERATOR} ops operator"),
    ];
    l
}

pub fn deployment(name: &str, replicas: u32) -> Value {
    serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": replicas}})
}

/// PUTs an object with an idempotency key, retrying (same key) until `deadline`: what a
/// well-behaved client does across a leader change. Returns the resource version.
pub async fn put_object_retrying(
    c: &Cluster,
    node: usize,
    ns: &str,
    name: &str,
    deadline: Instant,
) -> Result<u64, String> {
    let body = serde_json::json!({"template": deployment(name, 1)});
    let key = format!("put-{ns}-{name}");
    let mut last = String::new();
    let mut attempt = 0usize;
    while Instant::now() < deadline {
        // Spread retries over the nodes, as a client behind a load balancer would.
        let i = (node + attempt) % c.nodes.len();
        attempt += 1;
        let r = c
            .req(
                i,
                reqwest::Method::PUT,
                &format!("/v1/namespaces/{ns}/objects/{name}"),
            )
            .header("Idempotency-Key", &key)
            .json(&body)
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => {
                let v: Value = r.json().await.map_err(|e| e.to_string())?;
                return Ok(resource_version(&v));
            }
            Ok(r) => last = format!("HTTP {} {}", r.status(), r.text().await.unwrap_or_default()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last)
}

pub fn resource_version(v: &Value) -> u64 {
    let rv = &v["metadata"]["resourceVersion"];
    rv.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| rv.as_u64())
        .or_else(|| v["resourceVersion"].as_u64())
        .unwrap_or(0)
}

/// Registers one member cluster so objects have somewhere to go.
pub async fn register_cluster(c: &Cluster, node: usize, name: &str) {
    let body = serde_json::json!({"name": name, "apiEndpoint": format!("https://{name}.example:6443"),
        "labels": {"region": name}});
    let r = c
        .req(node, reqwest::Method::POST, "/v1/clusters")
        .header("Idempotency-Key", format!("reg-{name}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}
