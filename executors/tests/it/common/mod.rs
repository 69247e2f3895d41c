//! Test harness: simulated member clusters and a control plane from fedraft-testkit, plus this
//! crate's own shorthands for registrations and placements.

pub mod local;
pub mod raft;

use fedraft_core::command::Command;
use fedraft_core::model::{ClusterSpec, ObjectSpec};
use fedraft_kubesim::SimHandle;
pub use fedraft_testkit::eventually;
pub use fedraft_testkit::manifests::{deployment, image_of, replicas_of};
pub use fedraft_testkit::members::{executor_config, get_deployment, kube_client, start_sim};
use serde_json::{json, Value};

pub fn init_tracing() {
    fedraft_testkit::init_tracing("warn,fedraft_executors=info");
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
