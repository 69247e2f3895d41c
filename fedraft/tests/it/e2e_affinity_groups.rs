//! End to end, through stock kubectl and the door: a Karmada PropagationPolicy with ordered
//! affinity groups (`placement.clusterAffinities`) places its Deployment on the first group's
//! cluster; when that cluster goes dark for good (NotReady, then past the failover grace
//! period that Karmada's policies get, 60 s), the workload arrives on the second group's
//! cluster and nowhere else, and the audit's explain names the group that placed it.

use std::time::Duration;

use serde_json::Value;

use crate::kubectl_door::{have_kubectl, kubectl_for};
use crate::support::*;

const FAILURE_S: u64 = 4;

const APP: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web
  namespace: shop
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterAffinities:
    - affinityName: primary
      clusterNames: [dc1]
    - affinityName: backup
      clusterNames: [dc2]
"#;

async fn replicas_on(fed: &Fed, cluster: &str) -> u64 {
    fed.deployment(cluster, "shop", "web")
        .await
        .map_or(0, |d| replicas_of(&d))
}

/// The causes the audit's explain gives for shop/web's placement changes, as one text.
async fn explained(fed: &Fed) -> String {
    let v: Value = fed.get("/v1/audit/explain/shop/deployment.apps:web").await;
    v.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dark_affinity_group_fails_over_to_the_next() {
    if !have_kubectl() {
        return;
    }
    let fed = Fed::start_tls().await;
    fed.register_all(FAILURE_S, 1).await;
    let (_home, k) = kubectl_for(&fed);
    k.ok_in(&["apply", "-f", "-"], Some(APP));

    // The first group: dc1 alone runs web.
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.27")
        .await;
    assert_eq!(replicas_on(&fed, "dc2").await, 0);
    assert_eq!(replicas_on(&fed, "dc3").await, 0);
    let why = explained(&fed).await;
    assert!(why.contains("affinity group primary"), "{why}");

    // dc1 dark for good: NotReady after the threshold, then the grace period runs out and the
    // object moves to the next group.
    fed.go_dark("dc1", None);
    fed.wait_health("dc1", "NotReady").await;
    eventually(
        Duration::from_secs(120),
        "web's 2 replicas on dc2 (the backup group)",
        || async {
            let p = fed.placement("shop", "deployment.apps:web").await;
            let on_dc2 = replicas_on(&fed, "dc2").await;
            (!p.contains_key("dc1") && on_dc2 == 2).then_some(())
        },
    )
    .await;
    fed.wait_deployment("dc2", "shop", "web", 2, "nginx:1.27")
        .await;
    assert_eq!(replicas_on(&fed, "dc3").await, 0, "dc3 is in no group");
    let why = explained(&fed).await;
    assert!(why.contains("affinity group backup"), "{why}");

    // dc1 comes back: the workload stays with the group it moved to.
    fed.come_back("dc1");
    fed.wait_health("dc1", "Ready").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        fed.placement("shop", "deployment.apps:web")
            .await
            .keys()
            .collect::<Vec<_>>(),
        ["dc2"]
    );
}
