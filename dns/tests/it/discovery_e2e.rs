//! End to end on loopback: three fedraft nodes with executors and DNS servers, two simulated
//! member clusters. A Deployment divided 3:1 and a LoadBalancer Service with discovery placed
//! on both; then dig over UDP and TCP on every node, weighting over 1,000 queries, failover
//! with a replay check, recovery, leader loss, fail-open, and SERVFAIL on a leaderless node.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::discovery::{endpoints_view, AnswerMode, DiscoverySpec};
use fedraft_core::model::{ClusterSpec, Health, ObjectSpec};
use fedraft_kubesim::faults::DarkMode;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use serde_json::json;

const SVC: &str = "web.default.svc.fed.internal.";
const FAILURE_THRESHOLD_S: u64 = 2;

fn cluster(name: &str, url: String) -> Command {
    let mut spec = ClusterSpec::new(name, url);
    spec.failure_threshold_seconds = FAILURE_THRESHOLD_S;
    spec.success_threshold_seconds = 1;
    Command::RegisterCluster(spec)
}

fn deployment() -> Command {
    let template = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web-app"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}
    });
    let spec: ObjectSpec = serde_json::from_value(json!({
        "template": template.to_string(),
        "placement": {"clusters": ["dc1", "dc2"], "replicas": {"mode": "Divided",
            "division": {"staticWeights": {"weights": {"dc1": {"weight": 3}, "dc2": {"weight": 1}}}}}},
    }))
    .unwrap();
    Command::PutObject {
        namespace: "default".into(),
        name: "web-app".into(),
        spec,
        expected_version: None,
    }
}

fn service() -> Command {
    let template = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]}
    });
    let spec: ObjectSpec = serde_json::from_value(json!({
        "template": template.to_string(),
        "placement": {"clusters": ["dc1", "dc2"], "replicas": {"mode": "Duplicated"}},
    }))
    .unwrap();
    Command::PutObjectWithDiscovery {
        namespace: "default".into(),
        name: "web".into(),
        spec,
        discovery: DiscoverySpec {
            ttl_seconds: 7,
            ..DiscoverySpec::default()
        },
        expected_version: None,
    }
}

fn live(nodes: &[Node]) -> impl Iterator<Item = &Node> {
    nodes.iter().filter(|n| n.exec.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn discovery_end_to_end() {
    init_tracing();
    let dc1 = start_sim("dc1").await;
    let dc2 = start_sim("dc2").await;
    let root = tempfile::tempdir().unwrap();
    let mut nodes = start_group(&root).await;

    // Record every applied entry on node 1, to rebuild past states.
    let log: Arc<Mutex<Vec<(u64, LogEntry)>>> = Arc::default();
    let mut rx = nodes[0].node.subscribe();
    let sink = log.clone();
    let recorder = tokio::spawn(async move {
        while let Ok(a) = rx.recv().await {
            sink.lock().unwrap().push((a.index, a.entry().clone()));
        }
    });

    let n0 = nodes[0].node.clone();
    must(&n0, cluster("dc1", dc1.url())).await;
    must(&n0, cluster("dc2", dc2.url())).await;
    must(&n0, deployment()).await;
    must(&n0, service()).await;

    // Both clusters answered by every node, with 3 and 1 ready endpoints.
    let per_cluster = |c: &str| -> IpAddr {
        let m = query(nodes[0].dns_addr(), &format!("{c}.{SVC}"), RecordType::A);
        addresses(&m)[0]
    };
    for n in &nodes {
        eventually(Duration::from_secs(60), "both clusters in DNS", || {
            let m = query(n.dns_addr(), SVC, RecordType::A);
            let ok = addresses(&m).len() == 2;
            async move { ok.then_some(()) }
        })
        .await;
    }
    eventually(Duration::from_secs(30), "3 and 1 ready endpoints", || {
        let v = n0
            .read_stale(|s| endpoints_view(s, "default", "web"))
            .unwrap();
        let ready: Vec<u32> = v.clusters.iter().map(|c| c.ready_endpoints).collect();
        async move { (ready == vec![3, 1]).then_some(()) }
    })
    .await;
    let (ip1, ip2) = (per_cluster("dc1"), per_cluster("dc2"));
    assert_ne!(ip1, ip2);

    // dig, UDP and TCP, every node.
    for n in &nodes {
        for tcp in [false, true] {
            let a = dig(n.dns_addr(), SVC, "A", tcp);
            assert_eq!(a.status, "NOERROR");
            assert!(a.flags.contains(&"aa".to_string()), "{a:?}");
            let got: BTreeSet<String> = a.section("ANSWER").iter().map(|r| r.4.clone()).collect();
            let want: BTreeSet<String> = [ip1.to_string(), ip2.to_string()].into();
            assert_eq!(got, want, "{a:?}");
            assert!(a.section("ANSWER").iter().all(|r| r.2 == 7), "TTL: {a:?}");

            let srv = dig(n.dns_addr(), &format!("_http._tcp.{SVC}"), "SRV", tcp);
            assert_eq!(srv.status, "NOERROR");
            let srvs = srv.section("ANSWER");
            assert_eq!(srvs.len(), 2, "{srv:?}");
            for r in &srvs {
                // priority weight port target
                let f: Vec<&str> = r.4.split_whitespace().collect();
                assert_eq!(f[2], "80", "{srv:?}");
                let weight = if f[3].starts_with("dc1.") { "3" } else { "1" };
                assert_eq!(f[1], weight, "{srv:?}");
            }

            let aaaa = dig(n.dns_addr(), SVC, "AAAA", tcp);
            assert_eq!(aaaa.status, "NOERROR");
            assert!(aaaa.section("ANSWER").is_empty());
            let soa = aaaa.section("AUTHORITY");
            assert_eq!(soa.len(), 1, "{aaaa:?}");
            assert_eq!(soa[0].3, "SOA");
            assert!(soa[0].4.ends_with(" 7"), "SOA minimum = TTL: {aaaa:?}");

            let nx = dig(n.dns_addr(), "nope.default.svc.fed.internal.", "A", tcp);
            assert_eq!(nx.status, "NXDOMAIN");
            assert_eq!(nx.section("AUTHORITY").len(), 1);
        }
    }

    // Weighting: 3 vs 1 ready endpoints over 1,000 uncached queries.
    let mut first_dc1 = 0;
    for _ in 0..1000 {
        let m = query(nodes[1].dns_addr(), SVC, RecordType::A);
        if addresses(&m).first() == Some(&ip1) {
            first_dc1 += 1;
        }
    }
    println!("weighting: dc1 first in {first_dc1} of 1000 answers");
    assert!(
        (700..=800).contains(&first_dc1),
        "dc1 first {first_dc1}/1000"
    );

    // Failover: dc2 goes dark; every node drops it within the failure threshold + 1 s.
    let before_dark = n0.read_stale(|s| s.applied_index());
    let dark_at = Instant::now();
    dc2.admin().go_dark(DarkMode::Refuse);
    for n in live(&nodes) {
        eventually(Duration::from_secs(30), "dc2 gone from DNS", || {
            let m = query(n.dns_addr(), SVC, RecordType::A);
            let ok = addresses(&m) == vec![ip1];
            async move { ok.then_some(()) }
        })
        .await;
    }
    let took = dark_at.elapsed();
    println!("failover: every node answered without dc2 {took:?} after it went dark");
    assert!(
        took <= Duration::from_secs(FAILURE_THRESHOLD_S + 1) + Duration::from_millis(1500),
        "failover took {took:?}"
    );
    // Replay: the entry that turned dc2 NotReady, and the state just before it.
    let entries = log.lock().unwrap().clone();
    let turned = entries
        .iter()
        .filter(|(i, _)| *i > before_dark)
        .map(|(i, _)| *i)
        .find(|i| {
            state_at(&entries, *i)
                .cluster("dc2")
                .is_some_and(|c| c.status.health == Health::NotReady)
        })
        .expect("an entry turned dc2 NotReady");
    let past = state_at(&entries, turned - 1);
    let view = endpoints_view(&past, "default", "web").unwrap();
    let answered: Vec<&str> = view.answering().map(|c| c.cluster.as_str()).collect();
    assert_eq!(answered, ["dc1", "dc2"], "replay before index {turned}");
    let now = endpoints_view(&state_at(&entries, turned), "default", "web").unwrap();
    assert_eq!(now.answering().count(), 1);

    // dc2 comes back after the hysteresis.
    dc2.admin().come_back();
    for n in live(&nodes) {
        eventually(Duration::from_secs(30), "dc2 back in DNS", || {
            let m = query(n.dns_addr(), SVC, RecordType::A);
            let ok = addresses(&m).len() == 2;
            async move { ok.then_some(()) }
        })
        .await;
    }

    // Leader killed: the followers keep answering (never SERVFAIL) through the election.
    let leader = nodes
        .iter()
        .position(|n| n.node.status().is_leader)
        .unwrap();
    nodes[leader].isolate().await;
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        for i in &followers {
            let m = query(nodes[*i].dns_addr(), SVC, RecordType::A);
            assert_eq!(rcode(&m), ResponseCode::NoError);
            assert!(!addresses(&m).is_empty());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let n1 = nodes[followers[0]].node.clone();
    eventually(Duration::from_secs(30), "a new leader", || {
        let ok = followers.iter().any(|i| nodes[*i].node.status().is_leader);
        async move { ok.then_some(()) }
    })
    .await;

    // All clusters unhealthy, failOpen: last known addresses, never NXDOMAIN.
    dc1.admin().go_dark(DarkMode::Refuse);
    dc2.admin().go_dark(DarkMode::Refuse);
    eventually(Duration::from_secs(30), "both clusters NotReady", || {
        let ok = n1.read_stale(|s| {
            ["dc1", "dc2"]
                .iter()
                .all(|c| s.cluster(c).unwrap().status.health == Health::NotReady)
        });
        async move { ok.then_some(()) }
    })
    .await;
    for i in &followers {
        eventually(Duration::from_secs(10), "fail-open answers", || {
            let v = nodes[*i]
                .node
                .read_stale(|s| endpoints_view(s, "default", "web"))
                .unwrap();
            let m = query(nodes[*i].dns_addr(), SVC, RecordType::A);
            let got: BTreeSet<IpAddr> = addresses(&m).into_iter().collect();
            let ok = v.mode == AnswerMode::FailOpen
                && rcode(&m) == ResponseCode::NoError
                && got == BTreeSet::from([ip1, ip2]);
            async move { ok.then_some(()) }
        })
        .await;
    }

    // A leaderless node (its only peer gone) turns to SERVFAIL after the bound.
    let last = followers[1];
    nodes[followers[0]].isolate().await;
    let cut = Instant::now();
    eventually(
        Duration::from_millis(CONTACT_BOUND_MS + 10_000),
        "SERVFAIL",
        || {
            let m = query(nodes[last].dns_addr(), SVC, RecordType::A);
            let ok = rcode(&m) == ResponseCode::ServFail;
            async move { ok.then_some(()) }
        },
    )
    .await;
    assert!(cut.elapsed() >= Duration::from_millis(CONTACT_BOUND_MS) - Duration::from_millis(500));

    recorder.abort();
    for n in nodes {
        n.stop().await;
    }
    dc1.shutdown().await;
    dc2.shutdown().await;
}
