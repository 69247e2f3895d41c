//! Test harness: simulated member clusters (fedraft-kubesim, in process, loopback) and helpers
//! to drive a control plane and read what the clusters hold.
#![allow(dead_code)]

pub mod local;
pub mod raft;

use std::time::Duration;

use fedraft_core::command::Command;
use fedraft_core::model::{ClusterSpec, ObjectSpec};
use fedraft_executors::ExecutorConfig;
use fedraft_kubesim::{SimConfig, SimHandle, Simulator};
use serde_json::{json, Value};

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,fedraft_executors=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Executor settings shortened for tests.
pub fn fast_config() -> ExecutorConfig {
    ExecutorConfig {
        probe_interval: Duration::from_millis(300),
        probe_timeout: Duration::from_millis(1000),
        capacity_interval: Duration::from_millis(600),
        resync_period: Duration::from_secs(3),
        leadership_poll: Duration::from_millis(50),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_millis(800),
        status_flush_interval: Duration::from_millis(100),
        request_timeout: Duration::from_secs(3),
        ..ExecutorConfig::default()
    }
}

pub async fn start_sim(name: &str) -> SimHandle {
    start_sim_with_nodes(name, 2).await
}

/// A simulator with `nodes` nodes of 8 cpu each (the scheduler books requests against them).
pub async fn start_sim_with_nodes(name: &str, nodes: u32) -> SimHandle {
    Simulator::start(SimConfig {
        name: name.into(),
        nodes,
        status_delay: Duration::from_millis(100),
        bookmark_interval: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

/// A registration for a simulator, with short health thresholds.
pub fn cluster_spec(name: &str, sim: &SimHandle, region: &str) -> ClusterSpec {
    let mut spec = ClusterSpec::new(name, sim.url());
    spec.labels.insert("region".into(), region.into());
    spec.failure_threshold_seconds = 2;
    spec.success_threshold_seconds = 1;
    spec
}

pub fn register(spec: ClusterSpec) -> Command {
    Command::RegisterCluster(spec)
}

/// A Deployment template with `replicas` and one container.
pub fn deployment(name: &str, replicas: u32, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{
                    "name": "app", "image": image,
                    "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                }]},
            },
        },
    })
}

/// A Divided object with static weights and an image override for one cluster.
pub fn weighted_spec(
    template: &Value,
    weights: &[(&str, u64)],
    override_for: Option<(&str, &str)>,
) -> ObjectSpec {
    let weights: serde_json::Map<String, Value> = weights
        .iter()
        .map(|(c, w)| (c.to_string(), json!({ "weight": w })))
        .collect();
    let overrides = match override_for {
        Some((cluster, tag)) => json!([{ "clusterName": cluster, "image": { "tag": tag } }]),
        None => json!([]),
    };
    serde_json::from_value(json!({
        "template": template.to_string(),
        "placement": {
            "replicas": { "mode": "Divided", "division": { "staticWeights": { "weights": weights } } },
            "failover": { "enabled": true, "gracePeriodSeconds": 2 },
        },
        "overrides": overrides,
    }))
    .unwrap()
}

pub fn put(ns: &str, name: &str, spec: ObjectSpec) -> Command {
    Command::PutObject {
        namespace: ns.into(),
        name: name.into(),
        spec,
        expected_version: None,
    }
}

/// A plain kube client for a simulator, for assertions and out-of-band edits.
pub fn kube_client(sim: &SimHandle) -> kube::Client {
    fedraft_executors::client::install_crypto_provider();
    let mut cfg = kube::Config::new(sim.url().parse().unwrap());
    cfg.default_retry = false;
    kube::Client::try_from(cfg).unwrap()
}

/// The deployment's JSON in the member cluster, if any.
pub async fn get_deployment(sim: &SimHandle, ns: &str, name: &str) -> Option<Value> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: kube::Api<Deployment> = kube::Api::namespaced(kube_client(sim), ns);
    api.get_opt(name)
        .await
        .ok()
        .flatten()
        .map(|d| serde_json::to_value(d).unwrap())
}

/// Polls `check` until it returns Some, or panics with `what` after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn replicas_of(d: &Value) -> u64 {
    d.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

pub fn image_of(d: &Value) -> String {
    d.pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
