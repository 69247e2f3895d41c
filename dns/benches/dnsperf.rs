//! Benchmark (a plain program, not a test; `cargo bench` builds it in release): one fedraft node serving a 1,000-Service zone over UDP, side by
//! side in the same run with NSD serving the same A records from a generated zone file, both
//! measured with dnsperf (Debian's `dnsperf`, `nsd`).
//!
//! Run: `cargo bench -p fedraft-dns --bench dnsperf` (needs Debian's `dnsperf` and `nsd`)
//! (`BENCH_SECONDS`, default 10, sets each throughput run's length).
//!
//! Per server: a throughput run (dnsperf's default 100 queries in flight, `-l` seconds), then a
//! latency run at a fixed 2,000 queries/s with `-v`, from whose per-query lines p50/p99 are
//! taken (dnsperf 2.10 prints no percentiles). The ratio printed is fedraft / NSD queries/s.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command as Process, Stdio};
use std::time::Duration;

use fedraft_core::command::{Command, Heartbeat};
use fedraft_core::discovery::{DiscoverySpec, EndpointsReport, PortProtocol, ServicePort};
use fedraft_core::model::{ClusterSpec, ObjectSpec};
use fedraft_dns::{DnsConfig, DnsServer};
use fedraft_raft::{FedNode, Proposal};
use fedraft_testkit::cluster::Group;
use futures::StreamExt;
use serde_json::json;

const SERVICES: usize = 1000;

fn ip(cluster: usize, i: usize) -> String {
    format!("10.{}.{}.{}", 10 + cluster, i / 250, i % 250 + 1)
}

async fn propose(node: &FedNode, command: Command) {
    node.propose(Proposal {
        request_id: format!("bench-{}", rand::random::<u64>()),
        actor: "admin".into(),
        command,
    })
    .await
    .unwrap();
}

fn free_port() -> u16 {
    // UDP and TCP free together (NSD binds both).
    loop {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = u.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

struct Perf {
    qps: f64,
    lost: String,
    p50_ms: f64,
    p99_ms: f64,
}

fn dnsperf(addr: SocketAddr, queries: &std::path::Path, seconds: u64) -> Perf {
    let out = Process::new("dnsperf")
        .args(["-s", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .arg("-d")
        .arg(queries)
        .args(["-l", &seconds.to_string(), "-c", "4", "-T", "1"])
        .output()
        .expect("dnsperf must be installed (apt-get install dnsperf)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let field = |key: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(key))
            .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            .unwrap_or_default()
    };
    let qps: f64 = field("Queries per second")
        .split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0.0);
    let lost = field("Queries lost");
    // Latency run: fixed rate, every query's latency printed.
    let out = Process::new("dnsperf")
        .args(["-s", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .arg("-d")
        .arg(queries)
        .args(["-l", "3", "-Q", "2000", "-v"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let mut lat: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("> "))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| -> f64 {
        if lat.is_empty() {
            return f64::NAN;
        }
        lat[((lat.len() as f64 - 1.0) * p) as usize] * 1000.0
    };
    Perf {
        qps,
        lost,
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let group = Group::new("bench", "bench").start(1, &|cfg| cfg).await;
    let node = group.nodes[0].node.clone();
    for c in ["dc1", "dc2"] {
        propose(
            &node,
            Command::RegisterCluster(ClusterSpec::new(c, format!("http://{c}.invalid"))),
        )
        .await;
    }
    let hb = Command::Heartbeats(
        ["dc1", "dc2"]
            .iter()
            .map(|c| Heartbeat {
                cluster: c.to_string(),
                capacity: None,
            })
            .collect(),
    );
    propose(&node, hb.clone()).await;
    let beat = {
        let node = node.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                propose(&node, hb.clone()).await;
            }
        })
    };
    let puts = (0..SERVICES).map(|i| {
        let node = node.clone();
        async move {
            let template = json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": format!("web-{i}")},
                "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}});
            let spec: ObjectSpec = serde_json::from_value(json!({
                "template": template.to_string(),
                "placement": {"replicas": {"mode": "Duplicated"}},
            }))
            .unwrap();
            propose(
                &node,
                Command::PutObjectWithDiscovery {
                    namespace: "default".into(),
                    name: format!("web-{i}"),
                    spec,
                    discovery: DiscoverySpec::default(),
                    expected_version: None,
                },
            )
            .await;
        }
    });
    // Bounded concurrency keeps the batcher's queue within its limit.
    futures::stream::iter(puts)
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    let reports: Vec<EndpointsReport> = (0..SERVICES)
        .flat_map(|i| {
            [0usize, 1].map(|c| EndpointsReport {
                namespace: "default".into(),
                name: format!("web-{i}"),
                cluster: format!("dc{}", c + 1),
                addresses: vec![ip(c, i)],
                ports: vec![ServicePort {
                    name: "http".into(),
                    protocol: PortProtocol::Tcp,
                    port: 80,
                }],
                ready_endpoints: 2,
            })
        })
        .collect();
    propose(&node, Command::ServiceEndpoints(reports)).await;

    let dns = DnsServer::start(
        node.clone(),
        DnsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            // dnsperf measures throughput from one address; NSD has no limit either.
            rate_limit: fedraft_dns::RateLimitConfig::disabled(),
            ..DnsConfig::default()
        },
    )
    .await
    .unwrap();

    // The same A records for NSD, from a zone file.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let mut zone = String::from(
        "$ORIGIN fed.internal.\n$TTL 5\n@ IN SOA ns.fed.internal. hostmaster.fed.internal. 1 60 10 600 5\n@ IN NS ns.fed.internal.\nns IN A 127.0.0.1\n",
    );
    let mut queries = String::new();
    for i in 0..SERVICES {
        for c in 0..2 {
            zone.push_str(&format!("web-{i}.default.svc IN A {}\n", ip(c, i)));
            zone.push_str(&format!(
                "dc{}.web-{i}.default.svc IN A {}\n",
                c + 1,
                ip(c, i)
            ));
        }
        zone.push_str(&format!(
            "_http._tcp.web-{i}.default.svc IN SRV 0 2 80 dc1.web-{i}.default.svc\n"
        ));
        queries.push_str(&format!("web-{i}.default.svc.fed.internal A\n"));
    }
    std::fs::write(dir.join("fed.internal.zone"), zone).unwrap();
    std::fs::write(dir.join("queries.txt"), queries).unwrap();
    let nsd_port = free_port();
    let conf = format!(
        "server:\n  ip-address: 127.0.0.1@{nsd_port}\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  logfile: \"{d}/nsd.log\"\n  server-count: 1\n  verbosity: 0\nremote-control:\n  control-enable: no\nzone:\n  name: fed.internal\n  zonefile: fed.internal.zone\n",
        d = dir.display()
    );
    std::fs::write(dir.join("nsd.conf"), conf).unwrap();
    let mut nsd = Process::new("nsd")
        .args(["-d", "-c"])
        .arg(dir.join("nsd.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nsd must be installed (apt-get install nsd)");
    let nsd_addr = SocketAddr::from(([127, 0, 0, 1], nsd_port));
    // Both serve before measuring.
    for addr in [nsd_addr, dns.udp_addr()] {
        let q = dir.join("one.txt");
        std::fs::write(&q, "web-1.default.svc.fed.internal A\n").unwrap();
        for _ in 0..100 {
            let p = dnsperf_once(addr, &q);
            if p {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let qfile = dir.join("queries.txt");
    let fed = tokio::task::spawn_blocking({
        let (a, q) = (dns.udp_addr(), qfile.clone());
        move || dnsperf(a, &q, seconds)
    })
    .await
    .unwrap();
    let ref_ = tokio::task::spawn_blocking(move || dnsperf(nsd_addr, &qfile, seconds))
        .await
        .unwrap();
    let _ = nsd.kill();
    let _ = nsd.wait();
    println!("zone: {SERVICES} services, 2 clusters each; UDP; dnsperf -c 4 -T 1 -l {seconds}");
    for (name, p) in [("fedraft", &fed), ("nsd", &ref_)] {
        println!(
            "{name:>8}: {:>10.0} queries/s (lost {}), at 2000 q/s: p50 {:.3} ms, p99 {:.3} ms",
            p.qps, p.lost, p.p50_ms, p.p99_ms
        );
    }
    println!("ratio fedraft/nsd: {:.2}", fed.qps / ref_.qps.max(1.0));
    assert!(fed.qps > 0.0 && ref_.qps > 0.0, "both servers answered");
    beat.abort();
    dns.shutdown().await;
    group.stop().await;
}

fn dnsperf_once(addr: SocketAddr, q: &std::path::Path) -> bool {
    Process::new("dnsperf")
        .args(["-s", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .arg("-d")
        .arg(q)
        .args(["-n", "1", "-t", "1"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("Queries completed:    1 "))
        .unwrap_or(false)
}
