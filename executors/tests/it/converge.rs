//! Converging real simulated member clusters from the real state machine: put, change, delete,
//! overrides, drift, idempotence (counted writes), a handover to a fresh executor set, and
//! leftovers in kinds nothing desires swept away.

use std::time::Duration;

use crate::common::local::LocalNode;
use crate::common::*;
use fedraft_core::command::Command;
use fedraft_core::model::Health;
use fedraft_executors::ExecutorSet;
use fedraft_kubesim::SimHandle;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(30);

async fn wait_ready(node: &LocalNode, clusters: &[&str]) {
    for c in clusters {
        let c = c.to_string();
        eventually(LIMIT, &format!("{c} Ready"), || {
            let ok = node.read(|s| s.cluster(&c).map(|x| x.status.health) == Some(Health::Ready));
            async move { ok.then_some(()) }
        })
        .await;
    }
}

async fn wait_replicas(sim: &SimHandle, ns: &str, name: &str, want: u64, image: &str) {
    eventually(
        LIMIT,
        &format!("{ns}/{name} with {want} replicas and {image}"),
        || async {
            let d = get_deployment(sim, ns, name).await?;
            (replicas_of(&d) == want && image_of(&d) == image).then_some(())
        },
    )
    .await;
}

async fn wait_absent(sim: &SimHandle, ns: &str, name: &str) {
    eventually(LIMIT, &format!("{ns}/{name} removed"), || async {
        get_deployment(sim, ns, name).await.is_none().then_some(())
    })
    .await;
}

fn mutating(sims: &[&SimHandle]) -> u64 {
    sims.iter()
        .map(|s| s.admin().stats().mutating_requests)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_change_delete_drift_and_idempotence() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let dc2 = start_sim("dc2").await;
    let node = LocalNode::new();
    node.must(register(cluster_spec("dc1", &dc1, "east")));
    node.must(register(cluster_spec("dc2", &dc2, "west")));
    let set = ExecutorSet::start(node.clone(), executor_config());
    wait_ready(&node, &["dc1", "dc2"]).await;

    // An object fedraft does not manage, in the namespace fedraft will use.
    let foreign = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        kube_client(&dc1),
        "default",
        &kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let unmanaged: kube::api::DynamicObject = serde_json::from_value(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hand-made"},
            "spec": deployment("hand-made", 1, "busybox:1")["spec"].clone()}),
    )
    .unwrap();
    foreign
        .create(&kube::api::PostParams::default(), &unmanaged)
        .await
        .unwrap();

    // put: 6 replicas split 2:1, dc2 gets an image override.
    let tpl = deployment("api", 6, "nginx:1.27");
    node.must(put(
        "default",
        "api",
        weighted_spec(&tpl, &[("dc1", 2), ("dc2", 1)], Some(("dc2", "1.28"))),
    ));
    wait_replicas(&dc1, "default", "api", 4, "nginx:1.27").await;
    wait_replicas(&dc2, "default", "api", 2, "nginx:1.28").await;
    let live = get_deployment(&dc1, "default", "api").await.unwrap();
    assert_eq!(
        live.pointer("/metadata/labels/fedraft.io~1managed-by"),
        Some(&json!("fedraft"))
    );

    // The state learns the objects are applied and ready.
    eventually(LIMIT, "status applied with 6 ready replicas", || {
        let done = node.read(|s| {
            let o = s.object("default", "api").unwrap();
            o.status.clusters.iter().all(|c| c.applied) && o.status.ready_replicas == 6
        });
        async move { done.then_some(()) }
    })
    .await;

    // A namespace is created only where something is placed, and labelled.
    node.must(put(
        "shop",
        "cart",
        weighted_spec(&deployment("cart", 2, "cart:1"), &[("dc1", 1)], None),
    ));
    wait_replicas(&dc1, "shop", "cart", 2, "cart:1").await;
    let ns = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(kube_client(&dc1))
        .get("shop")
        .await
        .unwrap();
    assert_eq!(
        ns.metadata
            .labels
            .unwrap()
            .get("fedraft.io/managed-by")
            .map(String::as_str),
        Some("fedraft")
    );
    let none_in_dc2 = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(kube_client(&dc2))
        .get_opt("shop")
        .await
        .unwrap();
    assert!(
        none_in_dc2.is_none(),
        "dc2 holds nothing of shop, so no namespace either"
    );

    // change weights: counts follow.
    let mut spec = weighted_spec(&tpl, &[("dc1", 1), ("dc2", 2)], Some(("dc2", "1.28")));
    if let fedraft_core::policy::Division::StaticWeights { rebalance, .. } =
        spec.placement.replicas.division.as_deref_mut().unwrap()
    {
        *rebalance = true;
    }
    node.must(put("default", "api", spec.clone()));
    wait_replicas(&dc1, "default", "api", 2, "nginx:1.27").await;
    wait_replicas(&dc2, "default", "api", 4, "nginx:1.28").await;

    // drift: an out-of-band edit of a managed field is reverted within 5 s.
    dc1.admin()
        .drift(
            "apps/v1",
            "deployments",
            "default",
            "api",
            &json!({"spec": {"replicas": 9}}),
        )
        .unwrap();
    let drifted_at = tokio::time::Instant::now();
    eventually(Duration::from_secs(5), "drift reverted", || async {
        let d = get_deployment(&dc1, "default", "api").await?;
        (replicas_of(&d) == 2).then_some(())
    })
    .await;
    eprintln!("drift reverted after {:?}", drifted_at.elapsed());

    // idempotence: the same desired state again writes nothing, through several passes and a
    // resync, on this executor set and on a fresh one (a new leader with no memory).
    tokio::time::sleep(Duration::from_millis(800)).await; // let the drift repair's echo settle
    let before = mutating(&[&dc1, &dc2]);
    node.must(put("default", "api", spec.clone()));
    node.must(Command::Tick);
    tokio::time::sleep(executor_config().resync_period + Duration::from_secs(1)).await;
    assert_eq!(
        mutating(&[&dc1, &dc2]) - before,
        0,
        "re-applying the same desired state wrote"
    );
    set.shutdown().await;
    let set = ExecutorSet::start(node.clone(), executor_config());
    eventually(LIMIT, "fresh set running", || {
        let n = set.running_clusters().len();
        async move { (n == 2).then_some(()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        mutating(&[&dc1, &dc2]) - before,
        0,
        "a fresh executor set rewrote converged objects"
    );

    // delete: removed everywhere; the unmanaged deployment stays.
    node.must(Command::DeleteObject {
        namespace: "default".into(),
        name: "api".into(),
        expected_version: None,
    });
    wait_absent(&dc1, "default", "api").await;
    wait_absent(&dc2, "default", "api").await;
    assert!(
        get_deployment(&dc1, "default", "hand-made").await.is_some(),
        "unmanaged object was touched"
    );
    assert!(get_deployment(&dc1, "shop", "cart").await.is_some());
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_run_only_on_the_leader() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let node = LocalNode::new();
    node.set_leader(false);
    node.must(register(cluster_spec("dc1", &dc1, "east")));
    node.must(put(
        "default",
        "web",
        weighted_spec(&deployment("web", 2, "nginx:1"), &[("dc1", 1)], None),
    ));
    let set = ExecutorSet::start(node.clone(), executor_config());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(set.running_clusters().is_empty());
    assert!(
        get_deployment(&dc1, "default", "web").await.is_none(),
        "a follower wrote to a member cluster"
    );
    assert!(
        node.executor_entries().is_empty(),
        "a follower proposed events"
    );

    node.set_leader(true);
    eventually(
        Duration::from_secs(2),
        "executors started after gaining leadership",
        || {
            let n = set.running_clusters().len();
            async move { (n == 1).then_some(()) }
        },
    )
    .await;
    // Objects are placed once the cluster is Ready; heartbeats make it so.
    wait_replicas(&dc1, "default", "web", 2, "nginx:1").await;

    node.set_leader(false);
    eventually(
        Duration::from_secs(2),
        "executors stopped after losing leadership",
        || {
            let n = set.running_clusters().len();
            async move { (n == 0).then_some(()) }
        },
    )
    .await;
    let proposed = node.executor_entries().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        node.executor_entries().len(),
        proposed,
        "a deposed leader kept proposing"
    );
    set.shutdown().await;
}

/// A fedraft object left in a kind nothing desires on this cluster (written under an earlier
/// leader or owner) is found by the sweep and removed; an unlabelled one of the same kind stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_in_a_kind_nothing_desires_is_swept_away() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let api = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        kube_client(&dc1),
        "default",
    );
    for (name, labels) in [
        ("leftover", json!({"fedraft.io/managed-by": "fedraft"})),
        ("hand-made", json!({})),
    ] {
        let cm = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels,
                "annotations": {"fedraft.io/object": format!("default/{name}")}},
            "data": {"k": "v"}}))
        .unwrap();
        api.create(&kube::api::PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let node = LocalNode::new();
    node.must(register(cluster_spec("dc1", &dc1, "east")));
    // Something of another kind is desired, so the cluster's reconciler runs its passes.
    node.must(put(
        "default",
        "web",
        weighted_spec(&deployment("web", 1, "nginx:1"), &[("dc1", 1)], None),
    ));
    let set = ExecutorSet::start(node.clone(), executor_config());
    wait_replicas(&dc1, "default", "web", 1, "nginx:1").await;
    eventually(LIMIT, "the labelled leftover ConfigMap removed", || async {
        api.get_opt("leftover")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(api.get_opt("hand-made").await.unwrap().is_some());
    set.shutdown().await;
}
