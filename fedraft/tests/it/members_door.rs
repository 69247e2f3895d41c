//! Member clusters registered through the Kubernetes-compatible door with the stock kubectl,
//! against three `fedraft server` processes with sealed credentials and three simulated
//! members: a Karmada `Cluster` applied before its Secret waits (its status says so) and
//! registers when the Secret arrives; one applied after its Secret registers at once; a
//! `KubeFedCluster` registers from the Secret beside it. Each becomes Ready (the executors
//! reached the member with the credentials the edge sealed), a PropagationPolicy selecting by
//! Karmada's `region` field places a Deployment onto exactly those members, the Secrets read
//! back without their token, and deleting a Cluster deregisters it.

use serde_json::Value;

use crate::kubectl_door::{have_kubectl, kubectl_for};
use crate::support::*;

const TOKEN_TEXT: &str = "member-token-5e1d0c9b7a";

fn karmada_cluster(name: &str, url: &str, region: &str) -> String {
    format!(
        "apiVersion: cluster.karmada.io/v1alpha1
kind: Cluster
metadata:
  name: {name}
spec:
  syncMode: Push
  apiEndpoint: {url}
  secretRef:
    namespace: karmada-cluster
    name: {name}
  provider: sim
  region: {region}
"
    )
}

fn secret(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata:
  name: {name}
  namespace: {ns}
type: Opaque
stringData:
  token: {TOKEN_TEXT}-{name}
"
    )
}

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
    name: web
  placement:
    clusterAffinity:
      fieldSelector:
        matchExpressions:
        - key: region
          operator: In
          values: [eu]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karmada_and_kubefed_clusters_register_members_through_kubectl() {
    if !have_kubectl() {
        return;
    }
    let fed = Fed::start_tls_sealed().await;
    let (_home, k) = kubectl_for(&fed);
    let apply = |doc: &str| {
        let out = k.run(&["apply", "-f", "-"], Some(doc));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ready = |kind: &str, name: &str, ns: Option<&str>| {
        let mut args = vec![
            "get",
            kind,
            name,
            "-o",
            "jsonpath={.status.conditions[0].status}/{.status.conditions[0].reason}",
        ];
        if let Some(ns) = ns {
            args.extend(["-n", ns]);
        }
        k.ok(&args)
    };

    // Before its Secret, a Cluster waits and registers nothing.
    apply(&karmada_cluster("dc1", &fed.sim("dc1").url(), "eu"));
    assert_eq!(
        ready("clusters.cluster.karmada.io", "dc1", None),
        "False/WaitingForSecret"
    );
    let none = fed
        .procs
        .req(0, reqwest::Method::GET, "/v1/clusters/dc1")
        .send()
        .await
        .expect("the API answers");
    assert_eq!(none.status(), reqwest::StatusCode::NOT_FOUND);
    apply(&secret("karmada-cluster", "dc1"));
    // A Secret first, then its Cluster.
    apply(&secret("karmada-cluster", "dc2"));
    apply(&karmada_cluster("dc2", &fed.sim("dc2").url(), "eu"));
    // KubeFed: the Secret beside the KubeFedCluster, in kube-federation-system.
    apply(&secret("kube-federation-system", "dc3"));
    apply(&format!(
        "apiVersion: core.kubefed.io/v1beta1
kind: KubeFedCluster
metadata:
  name: dc3
  namespace: kube-federation-system
  labels: {{region: us}}
spec:
  apiEndpoint: {}
  secretRef:
    name: dc3
",
        fed.sim("dc3").url()
    ));
    for c in CLUSTERS {
        fed.wait_health(c, "Ready").await;
    }
    eventually(LIMIT, "dc1 Ready through its Cluster", || async {
        (ready("clusters.cluster.karmada.io", "dc1", None) == "True/ClusterReady").then_some(())
    })
    .await;
    eventually(LIMIT, "dc3 Ready through its KubeFedCluster", || async {
        let got = ready("kubefedclusters", "dc3", Some("kube-federation-system"));
        (got == "True/ClusterReady").then_some(())
    })
    .await;
    let labels = fed.get("/v1/clusters/dc2").await;
    assert_eq!(labels["labels"]["region"], "eu", "{labels}");
    assert_eq!(labels["labels"]["provider"], "sim", "{labels}");

    // The Secret reads back without its token, in any form.
    let shown = k.ok(&[
        "get",
        "secret",
        "dc1",
        "-n",
        "karmada-cluster",
        "-o",
        "json",
    ]);
    assert!(!shown.contains(TOKEN_TEXT), "{shown}");
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["metadata"]["name"], "dc1");
    assert!(shown.get("data").is_none() && shown.get("stringData").is_none());

    // Karmada's region field selects dc1 and dc2, registered through the door.
    apply(APP);
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.27")
        .await;
    fed.wait_deployment("dc2", "shop", "web", 2, "nginx:1.27")
        .await;
    fed.wait_absent("dc3", "shop", "web").await;

    // Deleting a Cluster deregisters its member.
    k.ok(&["delete", "clusters.cluster.karmada.io", "dc2"]);
    eventually(LIMIT, "dc2 deregistered", || async {
        let r = fed
            .procs
            .req(0, reqwest::Method::GET, "/v1/clusters/dc2")
            .send()
            .await
            .ok()?;
        (r.status() == reqwest::StatusCode::NOT_FOUND).then_some(())
    })
    .await;
}
