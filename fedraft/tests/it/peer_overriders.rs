//! Karmada's command and args overriders and KubeFed's federated ClusterRole through the stock
//! kubectl against three `fedraft server` processes and three simulated members, checked by what
//! each member holds: a Deployment whose container command and args differ per cluster as the
//! OverridePolicy says; a FederatedClusterRole placed on the clusters its placement names once an
//! administrator let ClusterRoles be federated (`fedraft admission set`), checked by the
//! executors' report from each member (the simulated members serve no RBAC cluster kinds, so the
//! member answers that it lacks the kind: what matters here is which members were written to);
//! and the refusal kubectl prints for one of Karmada's internal kinds.

use std::time::Duration;

use serde_json::{json, Value};

use crate::kubectl_door::kubectl_federation;
use crate::peer_samples::allow_cluster_scoped_kinds;
use crate::support::*;

const WORKLOAD: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: myapp
  namespace: shop
spec:
  replicas: 1
  selector:
    matchLabels: {app: myapp}
  template:
    metadata:
      labels: {app: myapp}
    spec:
      containers:
      - name: myapp
        image: nginx:1.27
        command: [./myapp, --parameter1=foo, --parameter2=bar]
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: myapp
  namespace: shop
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: myapp}
  placement:
    clusterAffinity:
      clusterNames: [dc1, dc2]
---
apiVersion: policy.karmada.io/v1alpha1
kind: OverridePolicy
metadata:
  name: myapp
  namespace: shop
spec:
  resourceSelectors:
  - {apiVersion: apps/v1, kind: Deployment, name: myapp}
  overrideRules:
  - targetCluster:
      clusterNames: [dc1]
    overriders:
      commandOverrider:
      - containerName: myapp
        operator: add
        value: [--cluster=dc1]
      argsOverrider:
      - containerName: myapp
        operator: add
        value: [--verbose]
  - targetCluster:
      clusterNames: [dc2]
    overriders:
      commandOverrider:
      - containerName: myapp
        operator: remove
        value: [--parameter1=foo]
"#;

const ROLE: &str = r#"apiVersion: types.kubefed.io/v1beta1
kind: FederatedClusterRole
metadata:
  name: reader
spec:
  template:
    rules:
    - apiGroups: ['']
      resources: [pods]
      verbs: [get, list]
  placement:
    clusters:
    - name: dc1
"#;

/// The container of the member's Deployment, once it exists.
async fn container(fed: &Fed, cluster: &str) -> Option<Value> {
    let d = fed.deployment(cluster, "shop", "myapp").await?;
    d.pointer("/spec/template/spec/containers/0").cloned()
}

/// The federated object of the ClusterRole `reader`, as the native API shows it.
const ROLE_OBJECT: &str =
    "/v1/namespaces/fedraft-cluster-scoped/objects/clusterrole.rbac.authorization.k8s.io:reader";

/// The members the executors reported on for the ClusterRole object.
async fn role_reports(fed: &Fed) -> Vec<String> {
    let v = fed.get(ROLE_OBJECT).await;
    v.pointer("/status/clusters")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karmada_command_overriders_and_kubefed_cluster_roles_reach_the_members() {
    let Some((fed, home, k)) = kubectl_federation().await else {
        return;
    };
    allow_cluster_scoped_kinds(&fed, home.path());

    // Each cluster's copy carries its rule's command and args, computed from the template.
    k.ok_in(&["apply", "-f", "-"], Some(WORKLOAD));
    let want = [
        (
            "dc1",
            json!([
                "./myapp",
                "--parameter1=foo",
                "--parameter2=bar",
                "--cluster=dc1"
            ]),
            Some(json!(["--verbose"])),
        ),
        ("dc2", json!(["./myapp", "--parameter2=bar"]), None),
    ];
    for (cluster, command, args) in want {
        eventually(
            LIMIT,
            &format!("{cluster} runs the overridden command"),
            || {
                let (fed, command, args) = (&fed, command.clone(), args.clone());
                async move {
                    let c = container(fed, cluster).await?;
                    (c.get("command") == Some(&command) && c.get("args") == args.as_ref())
                        .then_some(())
                }
            },
        )
        .await;
    }
    assert!(fed.deployment("dc3", "shop", "myapp").await.is_none());

    // A FederatedClusterRole is placed like a cluster-scoped template, where it says.
    let out = k.ok_in(&["apply", "-f", "-"], Some(ROLE));
    assert!(out.contains("created"), "{out}");
    let object = fed.get(ROLE_OBJECT).await;
    assert_eq!(object["template"]["kind"], "ClusterRole");
    assert_eq!(
        object["template"]["rules"][0]["verbs"],
        json!(["get", "list"])
    );
    eventually(
        LIMIT,
        "the executors reaching dc1 with the ClusterRole",
        || async { (role_reports(&fed).await == ["dc1"]).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(role_reports(&fed).await, ["dc1"], "only dc1 is written to");
    k.ok(&["delete", "federatedclusterrole", "reader"]);
    let gone = k.run(&["get", "federatedclusterrole", "reader"], None);
    assert!(!gone.status.success());

    // Karmada's internal kinds are served, and a write of one says why fedraft has none.
    let binding = "apiVersion: work.karmada.io/v1alpha1\nkind: ResourceBinding\nmetadata:\n  name: b\n  namespace: shop\nspec: {}\n";
    let out = k.run(&["apply", "-f", "-"], Some(binding));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("MethodNotAllowed") && err.contains("fedraft audit explain"),
        "{err}"
    );
}
