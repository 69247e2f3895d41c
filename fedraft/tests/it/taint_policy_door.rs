//! Karmada's `ClusterTaintPolicy` through the Kubernetes-compatible door, with the stock kubectl
//! against three `fedraft server` processes and simulated members registered by Karmada
//! `Cluster` documents: the published sample is created and read back, a bad effect is refused
//! naming the field, and a NoExecute policy on a condition an external checker writes with
//! `kubectl patch --subresource=status` moves a Deployment off the member while the condition is
//! bad and lets it back once the removal condition holds.

use crate::kubectl_door::{have_kubectl, kubectl_for};
use crate::support::*;

fn member(name: &str, url: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: {name}
  namespace: karmada-cluster
type: Opaque
stringData:
  token: token-{name}
---
apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata:
  name: {name}
spec:
  syncMode: Push
  apiEndpoint: {url}
  secretRef:
    namespace: karmada-cluster
    name: {name}
"
    )
}

const APP: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
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
    name: web
  placement:
    clusterAffinity:
      clusterNames: [dc1, dc2]
"#;

fn policy(effect: &str) -> String {
    format!(
        r#"apiVersion: policy.karmada.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: foo
spec:
  targetClusters:
    clusterNames: [dc1]
  addOnConditions:
  - conditionType: KubeComponentsHealthy
    operator: NotIn
    statusValues: ["True"]
  removeOnConditions:
  - conditionType: KubeComponentsHealthy
    operator: In
    statusValues: ["True"]
  taints:
  - key: kube-components-unhealthy
    effect: {effect}
"#
    )
}

fn condition(status: &str) -> String {
    format!(
        r#"{{"status":{{"conditions":[{{"type":"KubeComponentsHealthy","status":"{status}","reason":"Probe","message":"checked"}}]}}}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taint_policy_on_an_external_condition_moves_workloads_through_kubectl() {
    if !have_kubectl() {
        return;
    }
    let fed = Fed::start_tls_sealed().await;
    let (_home, k) = kubectl_for(&fed);
    for c in ["dc1", "dc2"] {
        k.ok_in(&["apply", "-f", "-"], Some(&member(c, &fed.sim(c).url())));
    }
    for c in ["dc1", "dc2"] {
        fed.wait_health(c, "Ready").await;
    }
    k.ok_in(&["apply", "-f", "-"], Some(APP));
    for c in ["dc1", "dc2"] {
        fed.wait_deployment(c, "shop", "web", 2, "nginx:1.27").await;
    }

    // PreferNoExecute has no meaning in fedraft: refused, naming the field.
    let out = k.run(&["apply", "-f", "-"], Some(&policy("PreferNoExecute")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("taints[0].effect"),
        "{err}"
    );

    k.ok_in(&["apply", "-f", "-"], Some(&policy("NoExecute")));
    let names = k.ok(&["get", "clustertaintpolicies", "-o", "name"]);
    assert!(
        names.contains("clustertaintpolicy.policy.karmada.io/foo"),
        "{names}"
    );

    // The checker reports dc1's components unhealthy: the taint moves the Deployment off dc1.
    let patch = |status: &str| {
        k.ok(&[
            "patch",
            "clusters.cluster.karmada.io",
            "dc1",
            "--subresource=status",
            "--type=merge",
            "-p",
            &condition(status),
        ])
    };
    patch("False");
    let shown = k.ok(&[
        "get",
        "clusters.cluster.karmada.io",
        "dc1",
        "-o",
        "jsonpath={.status.conditions[1].type}={.status.conditions[1].status}",
    ]);
    assert_eq!(shown, "KubeComponentsHealthy=False");
    fed.wait_absent("dc1", "shop", "web").await;
    fed.wait_deployment("dc2", "shop", "web", 2, "nginx:1.27")
        .await;

    // Healthy again: the removal condition holds, the taint goes and dc1 gets its copy back.
    patch("True");
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.27")
        .await;

    k.ok(&["delete", "clustertaintpolicy", "foo"]);
    let left = k.ok(&["get", "clustertaintpolicies", "-o", "name"]);
    assert!(left.trim().is_empty(), "{left}");
}
