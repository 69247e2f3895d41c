//! Karmada's `suspension` and `preserveResourcesOnDeletion` through the Kubernetes-compatible
//! door, with the stock kubectl against three `fedraft server` processes and three simulated
//! members: a template change is not dispatched to a suspended cluster (it keeps its copy while
//! the others move on) and reaches it once the suspension is removed; deleting the template
//! under `preserveResourcesOnDeletion` leaves every member's copy in place, no longer fedraft's.

use std::time::Duration;

use crate::kubectl_door::kubectl_federation;
use crate::support::*;

fn app(image: &str, suspended: &[&str]) -> String {
    let suspension = if suspended.is_empty() {
        String::new()
    } else {
        format!(
            "  suspension:\n    dispatchingOnClusters:\n      clusterNames: [{}]\n",
            suspended.join(", ")
        )
    };
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: {image}
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
  preserveResourcesOnDeletion: true
  placement:
    replicaScheduling:
      replicaSchedulingType: Duplicated
{suspension}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspension_holds_a_cluster_back_and_preserved_copies_outlive_their_template() {
    let Some((fed, _home, k)) = kubectl_federation().await else {
        return;
    };

    k.ok_in(&["apply", "-f", "-"], Some(&app("nginx:1.27", &["dc2"])));
    for c in CLUSTERS {
        fed.wait_deployment(c, "shop", "web", 2, "nginx:1.27").await;
    }

    // A new image while dc2 is suspended: dc1 and dc3 take it, dc2 keeps what it holds.
    k.ok_in(&["apply", "-f", "-"], Some(&app("nginx:1.28", &["dc2"])));
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.28")
        .await;
    fed.wait_deployment("dc3", "shop", "web", 2, "nginx:1.28")
        .await;
    let writes = fed.writes("dc2");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = fed
        .deployment("dc2", "shop", "web")
        .await
        .expect("dc2 keeps its copy");
    assert_eq!(image_of(&held), "nginx:1.27", "{held}");
    assert_eq!(
        fed.writes("dc2"),
        writes,
        "nothing written to dc2 meanwhile"
    );
    // Its status keeps coming: the template's object still counts dc2's ready replicas.
    eventually(LIMIT, "dc2's status reported", || async {
        let o = fed
            .get("/v1/namespaces/shop/objects/deployment.apps:web")
            .await;
        (o.pointer("/status/clusters/dc2/readyReplicas")? == 2).then_some(())
    })
    .await;

    // The suspension removed: dc2 gets the new image too.
    k.ok_in(&["apply", "-f", "-"], Some(&app("nginx:1.28", &[])));
    fed.wait_deployment("dc2", "shop", "web", 2, "nginx:1.28")
        .await;

    // Deleting the template: every member keeps its copy, released from fedraft.
    k.ok(&["delete", "-n", "shop", "deployment", "web"]);
    for c in CLUSTERS {
        fed.wait_absent(c, "shop", "web").await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for c in CLUSTERS {
        let d = fed
            .deployment(c, "shop", "web")
            .await
            .unwrap_or_else(|| panic!("{c}: the preserved copy was deleted"));
        assert_eq!(image_of(&d), "nginx:1.28", "{c}: {d}");
        assert!(
            d.pointer("/metadata/labels/fedraft.io~1managed-by")
                .is_none(),
            "{c}: still labelled fedraft's: {d}"
        );
    }
    let gone = k.run(&["get", "-n", "shop", "deployment", "web"], None);
    assert!(!gone.status.success(), "the template is gone from the door");
}
