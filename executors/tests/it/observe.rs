//! Observing member clusters: heartbeats with capacity, batching (nothing but heartbeats when
//! nothing changes), a dark cluster turning NotReady through the state machine, and member-API
//! errors shown in the object's per-cluster status and healed by retries, and a cluster that
//! refuses connections held as a whole rather than retried object by object.

use std::time::Duration;

use crate::common::local::LocalNode;
use crate::common::*;
use fedraft_core::command::Command;
use fedraft_core::model::Health;
use fedraft_executors::ExecutorSet;
use fedraft_kubesim::DarkMode;

const LIMIT: Duration = Duration::from_secs(30);

fn health(node: &LocalNode, c: &str) -> Option<Health> {
    node.read(|s| s.cluster(c).map(|x| x.status.health))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_heartbeats_batching_and_dark_cluster() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let dc2 = start_sim("dc2").await;
    let node = LocalNode::new();
    node.must(register(cluster_spec("dc1", &dc1, "east")));
    node.must(register(cluster_spec("dc2", &dc2, "west")));
    let cfg = executor_config();
    let set = ExecutorSet::start(node.clone(), cfg.clone());

    // Capacity from the node scan: 2 nodes x 8 cpu, 32Gi, 110 pods (simulator defaults).
    let cap = eventually(LIMIT, "dc1 capacity reported", || {
        let c = node.read(|s| s.cluster("dc1").and_then(|c| c.status.capacity));
        async move { c }
    })
    .await;
    assert_eq!(cap.allocatable.cpu_millis, 16_000);
    assert_eq!(cap.allocatable.memory_bytes, 64 << 30);
    assert_eq!(cap.allocatable.pods, 220);
    assert_eq!(cap.available, cap.allocatable, "no foreign pods yet");
    assert_eq!(health(&node, "dc1"), Some(Health::Ready));

    // Steady state: only heartbeats, at most one entry per probe interval, and capacity only
    // while it is new.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = node.executor_entries().len();
    let window = Duration::from_secs(3);
    tokio::time::sleep(window).await;
    let entries: Vec<Command> = node.executor_entries()[start..].to_vec();
    let max_entries = (window.as_millis() / cfg.probe_interval.as_millis()) as usize + 1;
    assert!(!entries.is_empty(), "no heartbeats at all");
    assert!(
        entries.len() <= max_entries,
        "{} entries in {window:?}: {entries:?}",
        entries.len()
    );
    for e in &entries {
        match e {
            Command::Heartbeats(hbs) => {
                assert!(hbs.len() <= 2, "one heartbeat per cluster per batch");
                assert!(
                    hbs.iter().all(|h| h.capacity.is_none()),
                    "unchanged capacity was re-sent: {hbs:?}"
                );
            }
            other => panic!("unexpected entry while nothing changed: {other:?}"),
        }
    }

    // A foreign pod lowers what is available for fedraft; allocatable stays.
    let pods =
        kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(kube_client(&dc1), "default");
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "batch-job"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]},
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    eventually(
        LIMIT,
        "available capacity lowered by the foreign pod",
        || {
            let c = node.read(|s| s.cluster("dc1").and_then(|c| c.status.capacity));
            async move {
                c.filter(|c| c.available.cpu_millis == 14_000 && c.allocatable.cpu_millis == 16_000)
            }
        },
    )
    .await;

    // dc2 goes dark: probes fail, one unreachable report (with the error), no more heartbeats
    // for it, and the state machine (not the executor) turns it NotReady after its 2 s
    // threshold.
    let before = node.executor_entries().len();
    dc2.admin().go_dark(DarkMode::Refuse);
    eventually(LIMIT, "dc2 NotReady", || {
        let h = health(&node, "dc2");
        async move { (h == Some(Health::NotReady)).then_some(()) }
    })
    .await;
    assert_eq!(health(&node, "dc1"), Some(Health::Ready));
    let after: Vec<Command> = node.executor_entries()[before..].to_vec();
    let hints = after
        .iter()
        .filter_map(|c| match c {
            Command::Reachability(rs) => Some(rs),
            _ => None,
        })
        .flatten()
        .filter(|r| r.cluster == "dc2")
        .inspect(|r| assert!(r.failure.is_some(), "{r:?}"))
        .count();
    assert_eq!(
        hints, 1,
        "exactly one unreachable hint per dark spell: {after:?}"
    );

    // Back: heartbeats resume and the cluster is Ready again after its success threshold.
    dc2.admin().come_back();
    eventually(LIMIT, "dc2 Ready again", || {
        let h = health(&node, "dc2");
        async move { (h == Some(Health::Ready)).then_some(()) }
    })
    .await;
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_api_errors_are_reported_and_retried() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let node = LocalNode::new();
    // /readyz fails too while errors are injected: a long failure threshold keeps the cluster
    // Ready so this test sees retries rather than a failover.
    let mut spec = cluster_spec("dc1", &dc1, "east");
    spec.failure_threshold_seconds = 600;
    node.must(register(spec));
    let set = ExecutorSet::start(node.clone(), executor_config());
    eventually(LIMIT, "dc1 Ready", || {
        let h = health(&node, "dc1");
        async move { (h == Some(Health::Ready)).then_some(()) }
    })
    .await;
    // Let the executor's watches and discovery settle, then fail every API request.
    tokio::time::sleep(Duration::from_secs(1)).await;
    dc1.admin().set_error_rate(1.0).unwrap();
    node.must(put(
        "default",
        "web",
        weighted_spec(&deployment("web", 3, "nginx:1"), &[("dc1", 1)], None),
    ));
    let message = eventually(LIMIT, "the error shows in the object's status", || {
        let m = node.read(|s| {
            let o = s.object("default", "web")?;
            let c = o.status.clusters.iter().find(|c| &*c.cluster == "dc1")?;
            (!c.applied).then(|| c.message.clone()).flatten()
        });
        async move { m }
    })
    .await;
    assert!(
        message.contains("500"),
        "status message should carry the member API's answer: {message}"
    );

    // The cluster heals: the retry (with backoff) applies it and the status clears.
    dc1.admin().set_error_rate(0.0).unwrap();
    eventually(LIMIT, "applied after the errors stop", || {
        let ok = node.read(|s| {
            let o = s.object("default", "web").unwrap();
            o.status
                .clusters
                .iter()
                .all(|c| c.applied && c.message.is_none() && c.ready_replicas == 3)
        });
        async move { ok.then_some(()) }
    })
    .await;
    assert_eq!(
        replicas_of(&get_deployment(&dc1, "default", "web").await.unwrap()),
        3
    );
    set.shutdown().await;
}

/// Deletes the reconciler of `cluster` tried and failed, from the executors' metrics.
fn delete_errors(registry: &prometheus_client::registry::Registry, cluster: &str) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let series = format!(
        "fedraft_executor_reconciles_total{{cluster=\"{cluster}\",result=\"delete_error\"}} "
    );
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_refusing_connections_is_tried_once_per_backoff_not_once_per_object() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let dc2 = start_sim("dc2").await;
    let node = LocalNode::new();
    // Ready throughout: the objects leave dc1 because their placement says so, not by failover.
    for (name, sim) in [("dc1", &dc1), ("dc2", &dc2)] {
        let mut spec = cluster_spec(name, sim, "east");
        spec.failure_threshold_seconds = 600;
        node.must(register(spec));
    }
    let mut registry = prometheus_client::registry::Registry::default();
    let cfg = executor_config();
    cfg.metrics.register(&mut registry);
    let set = ExecutorSet::start(node.clone(), cfg.clone());
    const N: usize = 48;
    let on = |cluster: &'static str| {
        move |i: usize| {
            let d = deployment(&format!("web{i}"), 1, "nginx:1");
            put(
                "default",
                &format!("web{i}"),
                weighted_spec(&d, &[(cluster, 1)], None),
            )
        }
    };
    for i in 0..N {
        node.must(on("dc1")(i));
    }
    eventually(LIMIT, "every object on dc1", || async {
        let mut held = 0;
        for i in 0..N {
            held += usize::from(
                get_deployment(&dc1, "default", &format!("web{i}"))
                    .await
                    .is_some(),
            );
        }
        (held == N).then_some(())
    })
    .await;

    dc1.admin().go_dark(DarkMode::Refuse);
    for i in 0..N {
        node.must(on("dc2")(i));
    }
    // Each object's own backoff (100 to 800 ms here) would try every delete several times a
    // second; held per cluster, a pass tries one write per backoff step after the first burst.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let tried = delete_errors(&registry, "dc1");
    assert!(tried > 0, "the deletes were tried");
    assert!(
        tried < N as u64,
        "{tried} failed deletes of {N} objects in 4 s: not held per cluster"
    );

    // Back: the hold ends within one backoff and every delete goes through.
    dc1.admin().come_back();
    eventually(LIMIT, "dc1 cleaned once it accepts connections", || async {
        for i in 0..N {
            if get_deployment(&dc1, "default", &format!("web{i}"))
                .await
                .is_some()
            {
                return None;
            }
        }
        Some(())
    })
    .await;
    set.shutdown().await;
}
