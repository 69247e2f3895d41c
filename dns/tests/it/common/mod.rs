//! Harness: three raft nodes from fedraft-testkit (RocksDB in temp dirs), executors and a DNS
//! server on each, simulated member clusters, all on 127.0.0.1; plus `dig` and a hickory-proto
//! UDP client.
#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::process::Command as Process;
use std::time::Duration;

use fedraft_core::command::LogEntry;
use fedraft_dns::{DnsConfig, DnsServer};
use fedraft_executors::ExecutorSet;
use fedraft_raft::{FedNode, NodeConfig};
pub use fedraft_testkit::cluster::must;
use fedraft_testkit::cluster::{Group, Node as RaftNode};
pub use fedraft_testkit::eventually;
pub use fedraft_testkit::members::{executor_config, start_sim};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

pub const ZONE: &str = "fed.internal";
/// Above the test election time (lease of up to 2 s, then a timeout of 1-2 s and a vote).
pub const CONTACT_BOUND_MS: u64 = 6000;

pub fn init_tracing() {
    fedraft_testkit::init_tracing("warn,kube_client=off,openraft=off");
}

/// One fedraft node with its executors and DNS server.
pub struct Node {
    pub id: u64,
    pub node: FedNode,
    pub dns: Option<DnsServer>,
    pub exec: Option<ExecutorSet>,
    raft: RaftNode,
}

impl Node {
    pub fn dns_addr(&self) -> SocketAddr {
        self.dns.as_ref().unwrap().udp_addr()
    }

    /// Stops raft, the executors and the peer listener; the DNS server keeps serving what this
    /// node last applied (as a partitioned node would).
    pub async fn isolate(&mut self) {
        if let Some(e) = self.exec.take() {
            e.shutdown().await;
        }
        self.raft.halt().await;
    }

    pub async fn stop(mut self) {
        self.isolate().await;
        if let Some(d) = self.dns.take() {
            d.shutdown().await;
        }
    }
}

/// Three voters under `root`, each with a DNS server and executors once a leader is agreed.
pub async fn start_group(root: &tempfile::TempDir) -> Vec<Node> {
    let tune = |cfg| NodeConfig {
        heartbeat_interval_ms: 200,
        election_timeout_min_ms: 1000,
        election_timeout_max_ms: 2000,
        tick_interval_ms: 300,
        propose_timeout_ms: 10_000,
        ..cfg
    };
    let group = Group::new("dns-test", "dns-test-secret")
        .start_in(root.path(), 3, &tune)
        .await;
    let mut nodes = Vec::new();
    for raft in group {
        let cfg = DnsConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            leader_contact_bound_ms: CONTACT_BOUND_MS,
            // The weighting checks send a thousand queries from one address in a tight loop.
            rate_limit: fedraft_dns::RateLimitConfig::disabled(),
            ..DnsConfig::default()
        };
        let node = raft.node.clone();
        nodes.push(Node {
            id: raft.id,
            dns: Some(DnsServer::start(node.clone(), cfg).await.unwrap()),
            exec: Some(ExecutorSet::start(node.clone(), executor_config())),
            node,
            raft,
        });
    }
    nodes
}

/// One uncached query over UDP with hickory-proto's message codec.
pub fn query(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut m = Message::new(rand::random(), MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    sock.send_to(&m.to_vec().unwrap(), server).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    Message::from_vec(&buf[..n]).unwrap()
}

/// Addresses in the answer section, in order.
pub fn addresses(m: &Message) -> Vec<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

pub fn rcode(m: &Message) -> ResponseCode {
    m.metadata.response_code
}

/// What `dig` printed, parsed.
#[derive(Debug)]
pub struct Dig {
    pub status: String,
    pub flags: Vec<String>,
    /// (section, name, ttl, type, data)
    pub records: Vec<(String, String, u32, String, String)>,
}

impl Dig {
    pub fn section(&self, s: &str) -> Vec<&(String, String, u32, String, String)> {
        self.records.iter().filter(|r| r.0 == s).collect()
    }
}

/// Runs Debian's dig against a node.
pub fn dig(server: SocketAddr, name: &str, qtype: &str, tcp: bool) -> Dig {
    let mut cmd = Process::new("dig");
    cmd.arg(format!("@{}", server.ip()))
        .arg("-p")
        .arg(server.port().to_string())
        .arg(name)
        .arg(qtype)
        .args(["+tries=1", "+time=3", "+norecurse"]);
    if tcp {
        cmd.arg("+tcp");
    }
    let out = cmd
        .output()
        .expect("dig must be installed (scripts/setup-deps)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut status = String::new();
    let mut flags = Vec::new();
    let mut records = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        if let Some(rest) = line.split("status: ").nth(1) {
            status = rest.split(',').next().unwrap_or("").to_string();
        }
        if let Some(rest) = line.strip_prefix(";; flags: ") {
            flags = rest
                .split(';')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect();
        }
        if let Some(rest) = line.strip_prefix(";; ") {
            if let Some(s) = rest.strip_suffix(" SECTION:") {
                section = s.to_string();
            }
            continue;
        }
        if line.starts_with(';') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 5 {
            records.push((
                section.clone(),
                f[0].to_string(),
                f[1].parse().unwrap_or(0),
                f[3].to_string(),
                f[4..].join(" "),
            ));
        }
    }
    assert!(!status.is_empty(), "dig printed no status:\n{text}");
    Dig {
        status,
        flags,
        records,
    }
}

/// Rebuilds a state from applied entries up to and including `upto`.
pub fn state_at(log: &[(u64, LogEntry)], upto: u64) -> fedraft_core::state::State {
    let mut s = fedraft_core::state::State::new();
    for (i, e) in log.iter().filter(|(i, _)| *i <= upto) {
        s.apply(*i, e);
    }
    s
}
