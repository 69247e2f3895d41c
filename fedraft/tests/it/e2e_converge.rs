//! End to end, three `fedraft server` processes and three member clusters: a put lands in the
//! right clusters with the per-cluster override and the right replica counts; new weights move
//! the counts; an out-of-band edit is reverted within 5 s; deregistering a cluster removes
//! fedraft's objects from it (and only those); a delete removes the object everywhere and
//! leaves unmanaged objects alone.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_weights_drift_deregister_delete() {
    let fed = Fed::start().await;
    fed.register_all(10, 1).await;

    // put: 6 replicas over 1:1:1 with dc3 on another tag; `api` only where its weights say.
    fed.put(
        "shop",
        "web",
        divided(
            "web",
            6,
            "nginx:1.27",
            &[("dc1", 1), ("dc2", 1), ("dc3", 1)],
            30,
            Some(("dc3", "1.27-alpine")),
        ),
    )
    .await;
    fed.put(
        "shop",
        "api",
        divided("api", 2, "api:1", &[("dc1", 1)], 30, None),
    )
    .await;
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.27")
        .await;
    fed.wait_deployment("dc2", "shop", "web", 2, "nginx:1.27")
        .await;
    fed.wait_deployment("dc3", "shop", "web", 2, "nginx:1.27-alpine")
        .await;
    fed.wait_deployment("dc1", "shop", "api", 2, "api:1").await;
    for c in ["dc2", "dc3"] {
        let m = fed.managed(c).await.unwrap();
        assert!(
            !m.contains_key("shop/api"),
            "api must not run on {c}: {m:?}"
        );
    }
    let d = fed.deployment("dc1", "shop", "web").await.unwrap();
    assert_eq!(
        d.pointer("/metadata/labels/fedraft.io~1managed-by"),
        Some(&json!("fedraft"))
    );

    // The status that flows back through the log says applied and ready everywhere.
    eventually(LIMIT, "web reported 6/6 ready", || async {
        let v = fed.get("/v1/namespaces/shop/objects/web").await;
        let ready = v.pointer("/status/readyReplicas").and_then(|r| r.as_u64());
        (ready == Some(6)).then_some(())
    })
    .await;

    // New weights: 4:1:1.
    fed.put(
        "shop",
        "web",
        divided(
            "web",
            6,
            "nginx:1.27",
            &[("dc1", 4), ("dc2", 1), ("dc3", 1)],
            30,
            Some(("dc3", "1.27-alpine")),
        ),
    )
    .await;
    fed.wait_deployment("dc1", "shop", "web", 4, "nginx:1.27")
        .await;
    fed.wait_deployment("dc2", "shop", "web", 1, "nginx:1.27")
        .await;
    fed.wait_deployment("dc3", "shop", "web", 1, "nginx:1.27-alpine")
        .await;

    // Drift: an operator edits the replicas and the image in dc2; both are reverted in 5 s.
    let edited = Instant::now();
    fed.sim("dc2")
        .admin()
        .drift(
            "apps/v1",
            "deployments",
            "shop",
            "web",
            &json!({"spec": {"replicas": 9, "template": {"spec": {"containers": [
                {"name": "app", "image": "evil:1"}]}}}}),
        )
        .unwrap();
    fed.wait_deployment("dc2", "shop", "web", 1, "nginx:1.27")
        .await;
    let reverted = edited.elapsed();
    assert!(
        reverted <= Duration::from_secs(5),
        "drift reverted after {reverted:?}"
    );
    eprintln!("E2E drift reverted in {reverted:?}");

    // Objects fedraft did not create, in the namespace it uses, in every cluster.
    for c in CLUSTERS {
        fed.create_unmanaged(c, "shop", "hand-made").await;
    }

    // Deregister dc3: fedraft's objects leave it, its replicas move, the unmanaged one stays.
    fed.call(reqwest::Method::DELETE, "/v1/clusters/dc3", None)
        .await;
    fed.wait_absent("dc3", "shop", "web").await;
    eventually(LIMIT, "web's 6 replicas on dc1 and dc2", || async {
        let p = fed.placement("shop", "web").await;
        let mut live = 0;
        for c in ["dc1", "dc2"] {
            live += fed
                .deployment(c, "shop", "web")
                .await
                .map_or(0, |d| replicas_of(&d));
        }
        (p.values().sum::<u64>() == 6 && !p.contains_key("dc3") && live == 6).then_some(())
    })
    .await;
    assert!(fed.deployment("dc3", "shop", "hand-made").await.is_some());
    let dc3_writes = fed.writes("dc3");

    // Delete: gone from every cluster; `api` and the unmanaged objects untouched.
    fed.delete("shop", "web").await;
    for c in ["dc1", "dc2"] {
        fed.wait_absent(c, "shop", "web").await;
    }
    for c in CLUSTERS {
        let d = fed.deployment(c, "shop", "hand-made").await;
        assert!(d.is_some(), "unmanaged object removed from {c}");
    }
    let expect: BTreeMap<String, u64> = [("shop/api".to_string(), 2)].into();
    assert_eq!(fed.managed("dc1").await.unwrap(), expect);
    assert!(fed.managed("dc2").await.unwrap().is_empty());
    assert_eq!(
        fed.writes("dc3"),
        dc3_writes,
        "nothing is written to a deregistered cluster"
    );
}
