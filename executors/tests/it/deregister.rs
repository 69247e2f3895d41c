//! Deregistering a member cluster: the leader's executor removes every object fedraft placed
//! there (and only those), the replicas move to the remaining clusters, and a cluster
//! registered again under the same name is converged afresh rather than emptied.

use std::time::Duration;

use crate::common::local::LocalNode;
use crate::common::*;
use fedraft_core::command::Command;
use fedraft_core::model::Health;
use fedraft_executors::ExecutorSet;
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deregister_removes_only_fedraft_objects() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let dc2 = start_sim("dc2").await;
    let node = LocalNode::new();
    node.must(register(cluster_spec("dc1", &dc1, "east")));
    node.must(register(cluster_spec("dc2", &dc2, "west")));
    let set = ExecutorSet::start(node.clone(), executor_config());
    for c in ["dc1", "dc2"] {
        eventually(LIMIT, &format!("{c} Ready"), || {
            let ok = node.read(|s| s.cluster(c).map(|x| x.status.health) == Some(Health::Ready));
            async move { ok.then_some(()) }
        })
        .await;
    }
    node.must(put(
        "default",
        "web",
        weighted_spec(
            &deployment("web", 4, "nginx:1"),
            &[("dc1", 1), ("dc2", 1)],
            None,
        ),
    ));
    for sim in [&dc1, &dc2] {
        eventually(LIMIT, "web with 2 replicas", || async {
            let d = get_deployment(sim, "default", "web").await?;
            (replicas_of(&d) == 2).then_some(())
        })
        .await;
    }
    // An object of the same kind, in the same namespace, that fedraft did not create.
    let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        kube_client(&dc2),
        "default",
        &kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let unmanaged: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "hand-made"},
        "spec": deployment("hand-made", 1, "busybox:1")["spec"].clone(),
    }))
    .unwrap();
    api.create(&kube::api::PostParams::default(), &unmanaged)
        .await
        .unwrap();

    node.must(Command::DeregisterCluster {
        name: "dc2".into(),
        expected_version: None,
    });
    eventually(LIMIT, "fedraft's object removed from dc2", || async {
        get_deployment(&dc2, "default", "web")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    eventually(LIMIT, "all 4 replicas on dc1", || async {
        let d = get_deployment(&dc1, "default", "web").await?;
        (replicas_of(&d) == 4).then_some(())
    })
    .await;
    assert!(get_deployment(&dc2, "default", "hand-made").await.is_some());
    assert!(
        set.running_clusters().iter().all(|c| c != "dc2"),
        "no executor converges a deregistered cluster"
    );
    // Nothing more is written to the deregistered cluster.
    let writes = dc2.admin().stats().mutating_requests;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(dc2.admin().stats().mutating_requests, writes);

    // Registered again: converged afresh, not emptied by the retired executor.
    node.must(register(cluster_spec("dc2", &dc2, "west")));
    node.must(put(
        "default",
        "api",
        weighted_spec(&deployment("api", 2, "api:1"), &[("dc2", 1)], None),
    ));
    eventually(LIMIT, "api placed on dc2 once it is Ready", || async {
        let d = get_deployment(&dc2, "default", "api").await?;
        (replicas_of(&d) == 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(get_deployment(&dc2, "default", "api").await.is_some());
    set.shutdown().await;
}
