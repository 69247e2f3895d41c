//! Abuse of the DNS server on loopback: answers stay within `max_answers` whatever the name and
//! type (ANY, SRV additionals, per-cluster names of a cluster reporting many addresses), and a
//! UDP flood from one source network is rate limited (dropped, every second one truncated)
//! while a client from another network, and the flooding one over TCP, still get answers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use fedraft_core::command::{Command, Heartbeat};
use fedraft_core::discovery::{DiscoverySpec, EndpointsReport, PortProtocol, ServicePort};
use fedraft_core::model::{ClusterSpec, ObjectSpec};
use fedraft_dns::{DnsConfig, DnsServer, RateLimitConfig};
use fedraft_raft::FedNode;
use fedraft_testkit::cluster::{must, relaxed, Cluster, Group};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use serde_json::json;

const CLUSTERS: usize = 12;
const ADDRESSES_PER_CLUSTER: usize = 10;
const MAX_ANSWERS: usize = 4;
const RATE: u32 = 50;
const FLOOD: usize = 600;
const SVC: &str = "web.default.svc.fed.internal.";

async fn propose(node: &FedNode, command: Command) {
    must(node, command).await;
}

/// One node whose zone holds a Service on 12 clusters that report 10 addresses each.
async fn node_with_a_wide_service() -> Cluster {
    let group = Group::new("dns-abuse", "dns-abuse-test-secret-of-32-bytes");
    let cluster = group.start(1, &relaxed).await;
    let node = &cluster.get(1).node;
    let names: Vec<String> = (1..=CLUSTERS).map(|c| format!("dc{c}")).collect();
    for c in &names {
        let spec = ClusterSpec::new(c, format!("http://{c}.invalid"));
        propose(node, Command::RegisterCluster(spec)).await;
    }
    let beats = names
        .iter()
        .map(|c| Heartbeat {
            cluster: c.clone(),
            capacity: None,
        })
        .collect();
    propose(node, Command::Heartbeats(beats)).await;
    let template = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}});
    let spec: ObjectSpec = serde_json::from_value(json!({
        "template": template.to_string(),
        "placement": {"replicas": {"mode": "Duplicated"}},
    }))
    .unwrap();
    propose(
        node,
        Command::PutObjectWithDiscovery {
            namespace: "default".into(),
            name: "web".into(),
            spec,
            discovery: DiscoverySpec::default(),
            expected_version: None,
        },
    )
    .await;
    let reports = (1..=CLUSTERS)
        .map(|c| {
            let mut addresses: Vec<String> = (1..=ADDRESSES_PER_CLUSTER)
                .map(|i| format!("10.{c}.0.{i}"))
                .collect();
            addresses.sort();
            EndpointsReport {
                namespace: "default".into(),
                name: "web".into(),
                cluster: format!("dc{c}"),
                addresses,
                ports: vec![ServicePort {
                    name: "http".into(),
                    protocol: PortProtocol::Tcp,
                    port: 80,
                }],
                ready_endpoints: 2,
            }
        })
        .collect();
    propose(node, Command::ServiceEndpoints(reports)).await;
    cluster
}

fn query_bytes(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(rand::random(), MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// One query over UDP from a socket bound to `from`.
fn udp_query(server: SocketAddr, from: [u8; 4], name: &str, qtype: RecordType) -> Message {
    let sock = UdpSocket::bind(SocketAddr::from((from, 0))).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    sock.send_to(&query_bytes(name, qtype), server).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    Message::from_vec(&buf[..n]).unwrap()
}

/// One query over TCP (two-byte length prefix) from 127.0.0.1.
fn tcp_query(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let q = query_bytes(name, qtype);
    let mut framed = u16::try_from(q.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    s.write_all(&framed).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut body).unwrap();
    Message::from_vec(&body).unwrap()
}

/// Sends `n` queries from one socket as fast as it can while a second thread collects the
/// answers (so the client's own receive buffer drops none) until none came for 500 ms; returns
/// (full answers, truncated answers, seconds from first send to last answer).
fn flood(server: SocketAddr, n: usize) -> (usize, usize, f64) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let reader = sock.try_clone().unwrap();
    reader
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let start = Instant::now();
    let collect = std::thread::spawn(move || {
        let (mut full, mut truncated) = (0, 0);
        let mut last = Instant::now();
        let mut buf = [0u8; 4096];
        while let Ok((len, _)) = reader.recv_from(&mut buf) {
            last = Instant::now();
            let m = Message::from_vec(&buf[..len]).unwrap();
            if m.metadata.truncation {
                assert!(
                    m.answers.is_empty(),
                    "a truncated answer carries no records"
                );
                truncated += 1;
            } else {
                assert_eq!(m.answers.len(), MAX_ANSWERS);
                full += 1;
            }
        }
        (full, truncated, last)
    });
    let q = query_bytes(SVC, RecordType::A);
    for _ in 0..n {
        sock.send_to(&q, server).unwrap();
    }
    let (full, truncated, last) = collect.join().unwrap();
    (full, truncated, last.duration_since(start).as_secs_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_capped_and_floods_are_rate_limited_per_source_network() {
    let cluster = node_with_a_wide_service().await;
    let node = &cluster.get(1).node;
    let dns = DnsServer::start(
        node.clone(),
        DnsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_answers: MAX_ANSWERS,
            leader_contact_bound_ms: 60_000,
            rate_limit: RateLimitConfig {
                responses_per_second: RATE,
                slip: 2,
                ..RateLimitConfig::default()
            },
            ..DnsConfig::default()
        },
    )
    .await
    .unwrap();
    let server = dns.udp_addr();

    // Caps, asked from 127.0.2.1 (its own /24, well under its rate).
    let caps = tokio::task::spawn_blocking(move || {
        let ask = |name: &str, t: RecordType| udp_query(server, [127, 0, 2, 1], name, t);
        let cluster = format!("dc1.{SVC}");
        let srv = format!("_http._tcp.{SVC}");
        let checks = [
            (SVC, RecordType::A),
            (SVC, RecordType::ANY),
            (cluster.as_str(), RecordType::A),
            (cluster.as_str(), RecordType::ANY),
            (srv.as_str(), RecordType::SRV),
            (srv.as_str(), RecordType::ANY),
        ];
        for (name, t) in checks {
            let m = ask(name, t);
            assert_eq!(
                m.metadata.response_code,
                ResponseCode::NoError,
                "{name} {t}"
            );
            // Each name holds more than the cap: 12 clusters x 10 addresses, or 10 + a TXT.
            assert_eq!(m.answers.len(), MAX_ANSWERS, "{name} {t}: {:?}", m.answers);
            assert!(
                m.additionals.len() <= MAX_ANSWERS,
                "{name} {t}: {} additionals",
                m.additionals.len()
            );
        }
        let srv_answer = ask(&srv, RecordType::SRV);
        // SRV targets' addresses still come along within the cap, one per target in turn.
        let targets: std::collections::BTreeSet<_> = srv_answer
            .answers
            .iter()
            .map(|r| r.data.to_string())
            .collect();
        let mut networks: Vec<String> = srv_answer
            .additionals
            .iter()
            .map(|r| {
                r.data
                    .to_string()
                    .rsplitn(3, '.')
                    .last()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        networks.sort();
        networks.dedup();
        assert_eq!(targets.len(), MAX_ANSWERS);
        assert_eq!(
            networks.len(),
            MAX_ANSWERS,
            "one address of each target: {:?}",
            srv_answer.additionals
        );
    });
    caps.await.unwrap();
    let before = dns.rate_limit_stats();
    assert_eq!(before.dropped + before.slipped, 0);

    // A flood from 127.0.0.1: about one second of the rate gets through, plus the refill.
    let (full, truncated, seconds) = tokio::task::spawn_blocking(move || flood(server, FLOOD))
        .await
        .unwrap();
    let allowed = f64::from(RATE) * (1.0 + seconds) + 2.0;
    println!("flood of {FLOOD}: {full} full, {truncated} truncated answers in {seconds:.3} s");
    assert!(
        full as f64 <= allowed,
        "{full} full answers in {seconds:.3} s, at most {allowed} allowed"
    );
    assert!(
        full >= RATE as usize,
        "the first second's worth is answered ({full})"
    );
    assert!(truncated > 0, "over the limit, every second response slips");
    assert!(full + truncated < FLOOD, "the rest is dropped");
    let stats = dns.rate_limit_stats();
    let (dropped, slipped) = (stats.dropped, stats.slipped);
    assert!(dropped > 0 && slipped > 0, "{stats:?}");
    // Operators see the same counts in /metrics.
    let mut registry = prometheus_client::registry::Registry::default();
    dns.metrics().register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
    for series in [
        format!("fedraft_dns_rate_limited_total{{action=\"drop\"}} {dropped}"),
        format!("fedraft_dns_rate_limited_total{{action=\"slip\"}} {slipped}"),
    ] {
        assert!(text.contains(&series), "{series} missing:\n{text}");
    }
    assert!(
        dropped.abs_diff(slipped) <= 1,
        "slip 2 truncates every second response over the limit: {stats:?}"
    );
    // Loopback loses nothing unless a receive buffer overflows; allow a little for that.
    assert!(
        truncated as u64 <= slipped && truncated as u64 * 10 >= slipped * 9,
        "slipped {slipped}, truncated answers received {truncated}"
    );

    // The flooding source's bucket is empty now; another /24 and TCP are unaffected.
    let others = tokio::task::spawn_blocking(move || {
        for from in [[127, 0, 1, 1], [127, 0, 3, 9]] {
            let m = udp_query(server, from, SVC, RecordType::A);
            assert_eq!(m.metadata.response_code, ResponseCode::NoError);
            assert!(!m.metadata.truncation);
            assert_eq!(m.answers.len(), MAX_ANSWERS, "from {from:?}");
        }
        let m = tcp_query(server, SVC, RecordType::A);
        assert!(!m.metadata.truncation);
        assert_eq!(m.answers.len(), MAX_ANSWERS, "TCP is never limited");
    });
    others.await.unwrap();

    dns.shutdown().await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_limiter_answers_every_query() {
    let cluster = node_with_a_wide_service().await;
    let node = &cluster.get(1).node;
    let dns = DnsServer::start(
        node.clone(),
        DnsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_answers: MAX_ANSWERS,
            leader_contact_bound_ms: 60_000,
            rate_limit: RateLimitConfig {
                responses_per_second: 1,
                ..RateLimitConfig::disabled()
            },
            ..DnsConfig::default()
        },
    )
    .await
    .unwrap();
    let server = dns.udp_addr();
    let answered = tokio::task::spawn_blocking(move || {
        (0..200)
            .map(|_| udp_query(server, [127, 0, 0, 1], SVC, RecordType::A))
            .filter(|m| !m.metadata.truncation && m.answers.len() == MAX_ANSWERS)
            .count()
    })
    .await
    .unwrap();
    assert_eq!(answered, 200);
    assert_eq!(dns.rate_limit_stats().sent, 200);
    dns.shutdown().await;
    cluster.stop().await;
}
