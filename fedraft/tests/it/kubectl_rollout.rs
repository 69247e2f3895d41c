//! `kubectl rollout` through the Kubernetes-compatible door, with the stock kubectl against
//! three `fedraft server` processes and three simulated members: a PropagationPolicy whose
//! `fedraft.io/rollout-strategy` annotation asks for one cluster per wave; `rollout status`
//! waits for the last wave; `rollout restart` starts a new revision; `rollout pause` stops it
//! between waves (spec.paused shows it, the members keep what they had, and none of them is
//! paused itself); `rollout resume` finishes it on every member; a pause with nothing under way
//! is refused naming `spec.paused`.

use std::time::Duration;

use serde_json::Value;

use crate::kubectl_door::kubectl_federation;
use crate::support::*;

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
  annotations:
    fedraft.io/rollout-strategy: '{"type":"Progressive","maxConcurrency":{"count":1},"minSuccessSeconds":4,"progressDeadlineSeconds":120}'
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    replicaScheduling:
      replicaSchedulingType: Duplicated
"#;

const RESTARTED: &str = "kubectl.kubernetes.io/restartedAt";

/// Whether `cluster`'s copy carries kubectl's restart stamp in its pod template.
async fn restarted(fed: &Fed, cluster: &str) -> Option<bool> {
    let d = fed.deployment(cluster, "shop", "web").await?;
    Some(
        d.pointer("/spec/template/metadata/annotations")
            .and_then(|a| a.get(RESTARTED))
            .is_some(),
    )
}

async fn phase(fed: &Fed) -> String {
    let r = fed
        .get("/v1/namespaces/shop/objects/deployment.apps:web/rollout")
        .await;
    r.pointer("/rollout/phase")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_restart_pause_resume_and_status() {
    let Some((fed, _home, k)) = kubectl_federation().await else {
        return;
    };
    let web = ["-n", "shop", "deploy/web"];
    let with = |verb: &[&str], extra: &[&str]| -> Vec<String> {
        verb.iter()
            .chain(web.iter())
            .chain(extra.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: Vec<String>| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        k.ok(&a)
    };

    k.ok_in(&["apply", "-f", "-"], Some(APP));
    for c in CLUSTERS {
        fed.wait_deployment(c, "shop", "web", 2, "nginx:1.27").await;
    }
    let done = run(with(&["rollout", "status"], &["--timeout=120s"]));
    assert!(done.contains("successfully rolled out"), "{done}");

    // Nothing under way: a pause is refused, naming the field, and changes nothing.
    let refused = k.run(&["rollout", "pause", "-n", "shop", "deploy/web"], None);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("spec.paused"), "{err}");
    assert_eq!(phase(&fed).await, "Complete");

    // A restart is a new revision, rolled out one cluster per wave; pause stops it there.
    run(with(&["rollout", "restart"], &[]));
    run(with(&["rollout", "pause"], &[]));
    assert_eq!(phase(&fed).await, "Paused");
    let paused = run(with(&["get"], &["-o", "jsonpath={.spec.paused}"]));
    assert_eq!(paused, "true");
    // The first wave's cluster may get the new revision; the others stay where they were
    // while paused, and no member's own Deployment is paused.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let mut updated = 0;
    for c in CLUSTERS {
        let d = fed
            .deployment(c, "shop", "web")
            .await
            .expect("a member copy");
        assert!(d.pointer("/spec/paused").is_none(), "{c}: {d}");
        if restarted(&fed, c).await == Some(true) {
            updated += 1;
        }
    }
    assert!(updated <= 1, "{updated} clusters updated while paused");
    assert_eq!(phase(&fed).await, "Paused");
    let status = run(with(&["rollout", "status"], &["--watch=false"]));
    assert!(!status.contains("successfully rolled out"), "{status}");

    // Resume: every member gets the restart, and status completes.
    run(with(&["rollout", "resume"], &[]));
    let done = run(with(&["rollout", "status"], &["--timeout=120s"]));
    assert!(done.contains("successfully rolled out"), "{done}");
    for c in CLUSTERS {
        eventually(LIMIT, &format!("{c} restarted"), || async {
            (restarted(&fed, c).await == Some(true)).then_some(())
        })
        .await;
    }
    // The last wave still holds for minSuccessSeconds before the rollout counts as complete.
    eventually(LIMIT, "the rollout complete", || async {
        (phase(&fed).await == "Complete").then_some(())
    })
    .await;
    let paused = run(with(&["get"], &["-o", "jsonpath={.spec.paused}"]));
    assert_eq!(paused, "");
}
