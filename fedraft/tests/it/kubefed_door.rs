//! KubeFed's documents through the stock kubectl against three `fedraft server` processes and
//! three simulated members, checked by what each member holds: a FederatedNamespace bounding
//! its namespace, a FederatedConfigMap and a FederatedDeployment with per-cluster overrides
//! (a full copy per cluster), a ReplicaSchedulingPreference dividing the Deployment 2:1 with
//! rebalance, a narrowed FederatedNamespace moving everything, and deletes.

use serde_json::Value;

use crate::kubectl_door::kubectl_federation;
use crate::support::*;

const NAMESPACE: &str = r#"apiVersion: types.kubefed.io/v1beta1
kind: FederatedNamespace
metadata:
  name: fed
  namespace: fed
spec:
  placement:
    clusterSelector: {}
"#;

const APP: &str = r#"apiVersion: types.kubefed.io/v1beta1
kind: FederatedConfigMap
metadata:
  name: settings
  namespace: fed
spec:
  template:
    data:
      greeting: hello
  placement:
    clusters:
    - name: dc1
    - name: dc2
  overrides:
  - clusterName: dc2
    clusterOverrides:
    - path: /data/greeting
      value: hallo
---
apiVersion: types.kubefed.io/v1beta1
kind: FederatedDeployment
metadata:
  name: web
  namespace: fed
spec:
  template:
    metadata:
      labels: {app: web}
    spec:
      replicas: 3
      selector:
        matchLabels: {app: web}
      template:
        metadata:
          labels: {app: web}
        spec:
          containers:
          - name: web
            image: nginx:1.27
  placement:
    clusterSelector: {}
  overrides:
  - clusterName: dc3
    clusterOverrides:
    - path: /spec/template/spec/containers/0/image
      value: nginx:1.28
"#;

const RSP: &str = r#"apiVersion: scheduling.kubefed.io/v1alpha1
kind: ReplicaSchedulingPreference
metadata:
  name: web
  namespace: fed
spec:
  targetKind: FederatedDeployment
  totalReplicas: 6
  rebalance: true
  clusters:
    dc1: {weight: 2}
    dc2: {weight: 1}
"#;

impl Fed {
    async fn config_map(&self, cluster: &str, ns: &str, name: &str) -> Option<Value> {
        let url = format!(
            "{}/api/v1/namespaces/{ns}/configmaps/{name}",
            self.sim(cluster).url()
        );
        let resp = self.procs.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.json().await.ok()
    }

    /// Waits until `cluster` holds the ConfigMap with `greeting`, or none when `None`.
    async fn wait_greeting(&self, cluster: &str, want: Option<&str>) {
        eventually(
            LIMIT,
            &format!("{cluster}: fed/settings greeting {want:?}"),
            || async {
                let cm = self.config_map(cluster, "fed", "settings").await;
                let got = cm
                    .as_ref()
                    .and_then(|c| c.pointer("/data/greeting"))
                    .and_then(Value::as_str);
                (got == want).then_some(())
            },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubefed_documents_place_what_kubefed_placed() {
    let Some((fed, _home, k)) = kubectl_federation().await else {
        return;
    };
    let apply = |doc: &str| {
        let out = k.run(&["apply", "-f", "-"], Some(doc));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    let kinds = k.run(&["api-resources", "--api-group=types.kubefed.io"], None);
    let kinds = String::from_utf8_lossy(&kinds.stdout).into_owned();
    assert!(kinds.contains("federateddeployments"), "{kinds}");

    // A full copy per cluster, each cluster's overrides applied.
    apply(NAMESPACE);
    let applied = apply(APP);
    assert!(
        applied.contains("federateddeployment.types.kubefed.io/web created"),
        "{applied}"
    );
    fed.wait_deployment("dc1", "fed", "web", 3, "nginx:1.27")
        .await;
    fed.wait_deployment("dc2", "fed", "web", 3, "nginx:1.27")
        .await;
    fed.wait_deployment("dc3", "fed", "web", 3, "nginx:1.28")
        .await;
    fed.wait_greeting("dc1", Some("hello")).await;
    fed.wait_greeting("dc2", Some("hallo")).await;
    assert!(fed.config_map("dc3", "fed", "settings").await.is_none());
    // What kubectl reads back is the document as written.
    let back = k.ok(&[
        "get",
        "federateddeployment",
        "web",
        "-n",
        "fed",
        "-o",
        "jsonpath={.spec.overrides[0].clusterName}",
    ]);
    assert_eq!(back, "dc3");

    // The RSP divides 6 replicas 2:1 over dc1 and dc2; dc3 has no preference and no copy.
    apply(RSP);
    fed.wait_deployment("dc1", "fed", "web", 4, "nginx:1.27")
        .await;
    fed.wait_deployment("dc2", "fed", "web", 2, "nginx:1.27")
        .await;
    fed.wait_absent("dc3", "fed", "web").await;

    // Narrowing the namespace to dc1 moves everything there.
    apply(&NAMESPACE.replace("    clusterSelector: {}", "    clusters:\n    - name: dc1"));
    fed.wait_deployment("dc1", "fed", "web", 6, "nginx:1.27")
        .await;
    fed.wait_absent("dc2", "fed", "web").await;
    fed.wait_greeting("dc2", None).await;
    fed.wait_greeting("dc1", Some("hello")).await;

    // Without the RSP, a full copy again; deleting the FederatedDeployment removes it.
    k.ok(&["delete", "rsp", "web", "-n", "fed"]);
    fed.wait_deployment("dc1", "fed", "web", 3, "nginx:1.27")
        .await;
    k.ok(&["delete", "federateddeployment", "web", "-n", "fed"]);
    fed.wait_absent("dc1", "fed", "web").await;

    // A plain ConfigMap of the same name as a FederatedConfigMap is refused, naming it.
    apply(APP.split("---").next().unwrap_or_default());
    let plain = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: fed
data: {greeting: plain}
"#;
    let out = k.run(&["apply", "-f", "-"], Some(plain));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FederatedConfigMap"), "{err}");
}
