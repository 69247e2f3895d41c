//! Simulated member clusters (fedraft-kubesim in the test process, on loopback) with timings
//! shortened for tests, the executor settings that match them, and a plain kube-rs client for
//! reading what a member cluster holds. Owns starting simulators and reading them back; faults
//! are switched through each simulator's own admin handle.

use std::time::Duration;

use fedraft_executors::ExecutorConfig;
use fedraft_kubesim::{SimConfig, SimHandle, Simulator};
use serde_json::Value;

/// A simulator named `name` with two nodes of 8 CPU each, status converging after 100 ms.
pub async fn start_sim(name: &str) -> SimHandle {
    start_sim_with_nodes(name, 2).await
}

/// A simulator with `nodes` nodes of 8 CPU each (the scheduler books requests against them).
pub async fn start_sim_with_nodes(name: &str, nodes: u32) -> SimHandle {
    Simulator::start(SimConfig {
        name: name.into(),
        nodes,
        status_delay: Duration::from_millis(100),
        bookmark_interval: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .await
    .expect("starting a simulated member cluster")
}

/// One simulator per name, in order.
pub async fn start_sims(names: &[&str]) -> Vec<SimHandle> {
    let mut sims = Vec::new();
    for name in names {
        sims.push(start_sim(name).await);
    }
    sims
}

/// Executor settings shortened for tests: probes every 300 ms, resync every 3 s, short backoff.
pub fn executor_config() -> ExecutorConfig {
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

/// A kube-rs client for a simulator with retries off, for assertions and out-of-band edits.
pub fn kube_client(sim: &SimHandle) -> kube::Client {
    fedraft_executors::client::install_crypto_provider();
    let mut cfg = kube::Config::new(sim.url().parse().expect("a simulator URL"));
    cfg.default_retry = false;
    kube::Client::try_from(cfg).expect("a kube client")
}

/// The Deployment as the member cluster holds it, if it does.
pub async fn get_deployment(sim: &SimHandle, ns: &str, name: &str) -> Option<Value> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: kube::Api<Deployment> = kube::Api::namespaced(kube_client(sim), ns);
    let d = api.get_opt(name).await.ok().flatten()?;
    serde_json::to_value(d).ok()
}
