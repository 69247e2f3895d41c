//! kube-rs against the simulator: the same client code paths fedraft's executors use.

use std::time::Duration;

use crate::common::{api_error, client, eventually, raw, PATIENCE};
use fedraft_kubesim::{SimConfig, Simulator};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::watcher;
use serde_json::json;

fn config(name: &str) -> SimConfig {
    SimConfig {
        name: name.into(),
        status_delay: Duration::from_millis(200),
        ..SimConfig::default()
    }
}

fn deployment(name: &str, replicas: i32, cpu: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.27",
                    "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
            }
        }
    }))
    .unwrap()
}

async fn next<T>(rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(crate::common::PATIENCE, rx.recv())
        .await
        .expect("watcher event")
        .expect("watcher open")
}

async fn converged(api: &Api<Deployment>, name: &str, ready: i32) -> Deployment {
    eventually(
        PATIENCE,
        &format!("{name} to have {ready} ready replicas"),
        || async {
            let d = api.get(name).await.ok()?;
            let st = d.status.clone()?;
            (st.observed_generation == d.metadata.generation
                && st.ready_replicas.unwrap_or(0) == ready)
                .then_some(d)
        },
    )
    .await
}

#[tokio::test]
async fn list_apply_converge_conflict_delete() {
    let sim = Simulator::start(SimConfig {
        nodes: 4,
        ..config("dc1")
    })
    .await
    .unwrap();
    let c = client(&sim.url());

    let nodes = Api::<Node>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(nodes.items.len(), 4);
    let alloc = nodes.items[0]
        .status
        .as_ref()
        .unwrap()
        .allocatable
        .as_ref()
        .unwrap();
    assert_eq!(alloc["cpu"].0, "8");
    assert_eq!(alloc["memory"].0, "32Gi");

    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}});
    Api::<Namespace>::all(c.clone())
        .patch("team-a", &PatchParams::apply("fedraft"), &Patch::Apply(&ns))
        .await
        .unwrap();

    let api: Api<Deployment> = Api::namespaced(c.clone(), "team-a");
    let pp = PatchParams::apply("fedraft");
    let first = api
        .patch("web", &pp, &Patch::Apply(deployment("web", 3, "500m")))
        .await
        .unwrap();
    assert_eq!(first.metadata.generation, Some(1));
    assert!(first.metadata.uid.is_some() && first.metadata.creation_timestamp.is_some());
    let mf = first.metadata.managed_fields.as_ref().unwrap();
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("fedraft"), Some("Apply"))
    );

    // Applying the same desired state again writes nothing.
    let before = sim.admin().stats();
    let again = api
        .patch("web", &pp, &Patch::Apply(deployment("web", 3, "500m")))
        .await
        .unwrap();
    let after = sim.admin().stats();
    assert_eq!(
        again.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(after.requests["apply"], before.requests["apply"] + 1);
    assert_eq!(after.changes["apply"], before.changes["apply"]);
    assert_eq!(after.mutating_requests, before.mutating_requests + 1);

    let d = converged(&api, "web", 3).await;
    let st = d.status.unwrap();
    assert_eq!(
        (st.replicas, st.available_replicas, st.updated_replicas),
        (Some(3), Some(3), Some(3))
    );
    let available = st
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("Available"))
        .unwrap();
    assert_eq!(available.status.as_deref(), Some("True"));

    // A spec change bumps generation and status follows it.
    let scaled = api
        .patch("web", &pp, &Patch::Apply(deployment("web", 5, "500m")))
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    converged(&api, "web", 5).await;

    // Another manager setting a different value conflicts unless it forces.
    let err = api
        .patch(
            "web",
            &PatchParams::apply("other"),
            &Patch::Apply(deployment("web", 1, "500m")),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err), (409, "Conflict".to_string()));
    let forced = api
        .patch(
            "web",
            &PatchParams::apply("other").force(),
            &Patch::Apply(deployment("web", 1, "500m")),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.replicas, Some(1));

    api.delete("web", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(api.get("web").await.unwrap_err()).0, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn capacity_pressure_keeps_pods_unready() {
    let sim = Simulator::start(SimConfig {
        nodes: 2,
        node_cpu: "2".into(),
        ..config("tight")
    })
    .await
    .unwrap();
    let api: Api<Deployment> = Api::namespaced(client(&sim.url()), "default");
    let pp = PatchParams::apply("fedraft");
    // Two nodes of 2 cpu hold four 1-cpu pods; the other two cannot be scheduled.
    api.patch("big", &pp, &Patch::Apply(deployment("big", 6, "1")))
        .await
        .unwrap();
    let d = converged(&api, "big", 4).await;
    let st = d.status.unwrap();
    assert_eq!((st.replicas, st.unavailable_replicas), (Some(6), Some(2)));
    let available = st
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_.as_deref() == Some("Available"))
        .unwrap();
    assert_eq!(available.status.as_deref(), Some("False"));
    let cap = sim.admin().capacity();
    assert!(
        cap.nodes.iter().all(|n| n.requested.cpu_milli == 2000),
        "{cap:?}"
    );

    api.patch("big", &pp, &Patch::Apply(deployment("big", 4, "1")))
        .await
        .unwrap();
    let d = converged(&api, "big", 4).await;
    assert_eq!(d.status.unwrap().unavailable_replicas, None);
    sim.shutdown().await;
}

#[tokio::test]
async fn watcher_sees_changes_and_relists_after_410() {
    let sim = Simulator::start(SimConfig {
        bookmark_interval: Duration::from_millis(200),
        ..config("watch")
    })
    .await
    .unwrap();
    let c = client(&sim.url());
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let w = watcher(api.clone(), watcher::Config::default());
    let task = tokio::spawn(async move {
        let mut w = std::pin::pin!(w);
        while let Some(ev) = w.next().await {
            if tx.send(ev).is_err() {
                return;
            }
        }
    });

    assert!(matches!(next(&mut rx).await, Ok(watcher::Event::Init)));
    assert!(matches!(next(&mut rx).await, Ok(watcher::Event::InitDone)));

    let cm = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"v": v}});
    let pp = PatchParams::apply("fedraft");
    api.patch("a", &pp, &Patch::Apply(cm("1"))).await.unwrap();
    match next(&mut rx).await {
        Ok(watcher::Event::Apply(o)) => assert_eq!(o.data.unwrap()["v"], "1"),
        other => panic!("expected Apply, got {other:?}"),
    }
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .unwrap();
    match next(&mut rx).await {
        Ok(watcher::Event::Apply(o)) => assert_eq!(o.data.unwrap()["v"], "2"),
        other => panic!("expected Apply, got {other:?}"),
    }
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(
        matches!(next(&mut rx).await, Ok(watcher::Event::Delete(o)) if o.metadata.name.as_deref() == Some("a"))
    );

    // History compaction ends the watch with a 410; the watcher relists and carries on.
    api.patch(
        "b",
        &pp,
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}})),
    )
    .await
    .unwrap();
    assert!(matches!(next(&mut rx).await, Ok(watcher::Event::Apply(_))));
    sim.admin().compact_watch_history();
    match next(&mut rx).await {
        Err(watcher::Error::WatchError(s)) => assert_eq!(s.code, 410),
        other => panic!("expected a 410 watch error, got {other:?}"),
    }
    assert!(matches!(next(&mut rx).await, Ok(watcher::Event::Init)));
    assert!(
        matches!(next(&mut rx).await, Ok(watcher::Event::InitApply(o)) if o.metadata.name.as_deref() == Some("b"))
    );
    assert!(matches!(next(&mut rx).await, Ok(watcher::Event::InitDone)));
    api.patch(
        "c",
        &pp,
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
    )
    .await
    .unwrap();
    assert!(
        matches!(next(&mut rx).await, Ok(watcher::Event::Apply(o)) if o.metadata.name.as_deref() == Some("c"))
    );
    task.abort();

    // A raw watch from before the compaction gets the 410 as an ERROR event; a current one
    // gets bookmarks.
    let mut old = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match old.next().await {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected ERROR 410, got {other:?}"),
    }
    let rv = sim.admin().resource_version().to_string();
    let mut live = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(crate::common::PATIENCE, live.next())
        .await
        .unwrap();
    assert!(matches!(ev, Some(Ok(WatchEvent::Bookmark(_)))), "{ev:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn paging_with_continue_tokens() {
    let sim = Simulator::start(config("pages")).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&sim.url()), "default");
    for i in 0..7 {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}"), "labels": {"set": if i % 2 == 0 { "even" } else { "odd" }}}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        names.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        match page.metadata.continue_ {
            Some(tok) if !tok.is_empty() => lp = lp.continue_token(&tok),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
    let even = api
        .list(&ListParams::default().labels("set=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 4);
    let set = api
        .list(&ListParams::default().labels("set in (odd),set notin (even)"))
        .await
        .unwrap();
    assert_eq!(set.items.len(), 3);
    sim.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_status_bodies() {
    let sim = Simulator::start(config("errors")).await.unwrap();
    let c = client(&sim.url());
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");

    assert_eq!(
        api_error(cms.get("missing").await.unwrap_err()),
        (404, "NotFound".into())
    );
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "x"}, "data": {"a": "1"}})).unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(
        api_error(cms.create(&PostParams::default(), &cm).await.unwrap_err()),
        (409, "AlreadyExists".into())
    );

    // Update with a stale resourceVersion.
    let mut fresh = created.clone();
    fresh.data = Some([("a".to_string(), "2".to_string())].into());
    cms.replace("x", &PostParams::default(), &fresh)
        .await
        .unwrap();
    let mut stale = created.clone();
    stale.data = Some([("a".to_string(), "3".to_string())].into());
    assert_eq!(
        api_error(
            cms.replace("x", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        ),
        (409, "Conflict".into())
    );

    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let mut bad = deployment("bad", 1, "100m");
    bad.spec.replicas = Some(-1);
    assert_eq!(
        api_error(
            deploys
                .create(&PostParams::default(), &bad)
                .await
                .unwrap_err()
        ),
        (422, "Invalid".into())
    );
    assert_eq!(
        api_error(
            cms.list(&ListParams::default().labels("app in db"))
                .await
                .unwrap_err()
        ),
        (400, "BadRequest".into())
    );
    let other_ns: Api<ConfigMap> = Api::namespaced(c.clone(), "nope");
    assert_eq!(
        api_error(
            other_ns
                .create(&PostParams::default(), &cm)
                .await
                .unwrap_err()
        )
        .0,
        404
    );

    // Below the client: exact bodies, apply without a field manager, unknown paths.
    let addr = sim.addr();
    let (code, body) = raw(
        addr,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
        &[],
        "",
    )
    .await;
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(code, 404);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["message"], "configmaps \"missing\" not found");
    assert_eq!(status["details"]["name"], "missing");
    let ct = [("Content-Type", "application/apply-patch+yaml")];
    let (code, _) = raw(
        addr,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        &ct,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = raw(
        addr,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x?fieldManager=m",
        &ct,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n",
    )
    .await;
    assert_eq!(code, 400);
    let (code, _) = raw(
        addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[],
        "{not json",
    )
    .await;
    assert_eq!(code, 400);
    let (code, body) = raw(addr, "GET", "/openapi/v2", &[], "").await;
    assert_eq!(code, 404, "{body}");
    let (code, _) = raw(
        addr,
        "GET",
        "/apis/apps/v1/namespaces/default/widgets",
        &[],
        "",
    )
    .await;
    assert_eq!(code, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn drift_is_reverted_only_by_a_forced_apply() {
    let sim = Simulator::start(config("drift")).await.unwrap();
    let api: Api<Deployment> = Api::namespaced(client(&sim.url()), "default");
    let pp = PatchParams::apply("fedraft");
    api.patch("web", &pp, &Patch::Apply(deployment("web", 3, "100m")))
        .await
        .unwrap();
    let drifted = sim
        .admin()
        .drift(
            "apps/v1",
            "deployments",
            "default",
            "web",
            &json!({"spec": {"replicas": 7}}),
        )
        .unwrap();
    assert_eq!(drifted["spec"]["replicas"], 7);
    assert_eq!(api.get("web").await.unwrap().spec.replicas, Some(7));

    let err = api
        .patch("web", &pp, &Patch::Apply(deployment("web", 3, "100m")))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(s.message.contains("kubesim-drift"), "{}", s.message);
        }
        other => panic!("{other:?}"),
    }
    let fixed = api
        .patch(
            "web",
            &pp.clone().force(),
            &Patch::Apply(deployment("web", 3, "100m")),
        )
        .await
        .unwrap();
    assert_eq!(fixed.spec.replicas, Some(3));
    // Ownership is back with fedraft: a plain apply is a no-op again.
    let before = sim.admin().stats().total_changes;
    api.patch("web", &pp, &Patch::Apply(deployment("web", 3, "100m")))
        .await
        .unwrap();
    assert_eq!(sim.admin().stats().total_changes, before);
    sim.shutdown().await;
}

#[tokio::test]
async fn load_balancer_services_get_addresses() {
    let sim = Simulator::start(SimConfig {
        lb_ip_prefix: Some("10.42".into()),
        ..config("lb")
    })
    .await
    .unwrap();
    let api: Api<Service> = Api::namespaced(client(&sim.url()), "default");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 80}]}});
    let created = api
        .patch("web", &PatchParams::apply("fedraft"), &Patch::Apply(&svc))
        .await
        .unwrap();
    assert!(created
        .spec
        .unwrap()
        .cluster_ip
        .unwrap()
        .starts_with("10.96."));
    let ip = eventually(PATIENCE, "a load-balancer address", || async {
        let s = api.get("web").await.ok()?;
        s.status?.load_balancer?.ingress?.first()?.ip.clone()
    })
    .await;
    assert_eq!(ip, "10.42.0.1");
    sim.shutdown().await;
}
