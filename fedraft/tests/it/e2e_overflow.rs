//! End to end, through stock kubectl and the door: a Karmada PropagationPolicy with an
//! overflow tier (`clusterAffinities[].overflowAffinities`, Karmada's "overflow from IDC
//! clusters to cloud clusters") over three simulated members. dc1, the IDC, has one node that
//! holds four replicas; dc2 and dc3, the cloud tier, are large. Six replicas fill dc1 and
//! overflow two to the cloud; the audit's explain names the overflow term; scaled down to
//! three, the cloud members give theirs back first and dc1 keeps its own.

use std::time::Duration;

use fedraft_kubesim::{SimConfig, Simulator};
use serde_json::Value;

use crate::kubectl_door::{have_kubectl, kubectl_for};
use crate::support::*;

/// A Deployment whose replicas ask for a quarter of a CPU each, and its policy.
fn app(replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: infer
  namespace: ai
  labels: {{app: infer}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: infer}}
  template:
    metadata:
      labels: {{app: infer}}
    spec:
      containers:
      - name: model
        image: vllm:1
        resources:
          requests: {{cpu: 250m}}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: infer
  namespace: ai
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterAffinities:
    - affinityName: idc
      clusterNames: [dc1]
      overflowAffinities:
      - affinityName: cloud
        clusterNames: [dc2, dc3]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        dynamicWeight: AvailableReplicas
"#
    )
}

/// A member with `nodes` nodes of `cpu` CPUs each.
async fn member(name: &str, nodes: u32, cpu: &str) -> fedraft_kubesim::SimHandle {
    Simulator::start(SimConfig {
        name: name.into(),
        nodes,
        node_cpu: cpu.into(),
        status_delay: Duration::from_millis(100),
        bookmark_interval: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .await
    .expect("starting a simulated member cluster")
}

async fn replicas_on(fed: &Fed, cluster: &str) -> u64 {
    fed.deployment(cluster, "ai", "infer")
        .await
        .map_or(0, |d| replicas_of(&d))
}

/// What the three members hold, once it is `want` (dc1, dc2 + dc3).
async fn wait_members(fed: &Fed, want: (u64, u64), what: &str) {
    eventually(Duration::from_secs(120), what, || async {
        let idc = replicas_on(fed, "dc1").await;
        let cloud = replicas_on(fed, "dc2").await + replicas_on(fed, "dc3").await;
        ((idc, cloud) == want).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idc_member_fills_first_and_the_cloud_members_take_the_rest() {
    if !have_kubectl() {
        return;
    }
    let sims = vec![
        member("dc1", 1, "1").await,
        member("dc2", 3, "8").await,
        member("dc3", 3, "8").await,
    ];
    let fed = Fed::start_tls_with_members(sims).await;
    fed.register_all(10, 1).await;
    let (_home, k) = kubectl_for(&fed);
    k.ok_in(&["apply", "-f", "-"], Some(&app(6)));

    // dc1 holds four of the six; the cloud tier the other two.
    wait_members(&fed, (4, 2), "4 replicas on dc1 and 2 on dc2 and dc3").await;
    let why: Value = fed.get("/v1/audit/explain/ai/deployment.apps:infer").await;
    let why = why.to_string();
    assert!(why.contains("affinity group idc"), "{why}");
    assert!(why.contains("by overflow cloud"), "{why}");

    // Scaled down to three: the cloud members give theirs back first, dc1 keeps three.
    k.ok_in(&["apply", "-f", "-"], Some(&app(3)));
    wait_members(&fed, (3, 0), "3 replicas on dc1 and none in the cloud").await;
}
