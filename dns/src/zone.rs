//! The zone: every record fedraft serves, built once per applied state from core's discovery
//! views (`fedraft_core::discovery::dns_views`) so that answering a query is a hash lookup plus
//! a weighted shuffle.
//!
//! Names (all under `<zone>`):
//! - `<svc>.<ns>.svc`: A/AAAA of the answering clusters' IP addresses (hostname addresses are
//!   served through the per-cluster name and SRV targets, since a CNAME cannot sit beside
//!   other data);
//! - `_<port>._<proto>.<svc>.<ns>.svc`: SRV per answering cluster that serves the port (`<port>`
//!   is the port's name, or its number when unnamed), weight = the cluster's weight, target =
//!   the per-cluster name;
//! - `<cluster>.<svc>.<ns>.svc`: that cluster's last known addresses (A/AAAA, or a CNAME to a
//!   hostname) and a TXT saying whether it is answered and why not, for debugging;
//! - the apex (SOA, NS) and empty non-terminals (`svc`, `<ns>.svc`), which exist without data.
//!
//! Must not: read the clock or the network; randomness is the caller's (see `answer`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use fedraft_core::discovery::{Address, AnswerMode, EndpointsView};
use fedraft_core::state::State;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record};

use crate::error::DnsError;

/// SOA timers of the zone (seconds). Secondaries are not expected (every fedraft node is a
/// primary of its own applied state), so these only matter to caches.
const SOA_REFRESH_S: i32 = 60;
const SOA_RETRY_S: i32 = 10;
const SOA_EXPIRE_S: i32 = 600;

/// One cluster of a Service.
#[derive(Debug)]
pub struct ClusterRecords {
    pub cluster: String,
    pub weight: u32,
    /// Part of answers at the Service name.
    pub answering: bool,
    /// A/AAAA at the Service name (owner = Service name).
    pub at_service: Vec<Record>,
    /// A/AAAA or CNAME at the per-cluster name.
    pub own: Vec<Record>,
    pub txt: Record,
}

/// One SRV name: one record per answering cluster serving the port.
#[derive(Debug)]
pub struct SrvRecords {
    /// (index into `ServiceRecords::clusters`, SRV record)
    pub records: Vec<(usize, Record)>,
}

/// Everything served for one Service.
#[derive(Debug)]
pub struct ServiceRecords {
    pub ttl: u32,
    pub clusters: Vec<ClusterRecords>,
    /// SOA with minimum = this Service's TTL, for its negative answers.
    pub soa: Record,
}

/// What a name in the zone is.
#[derive(Debug, Clone)]
pub enum Node {
    Apex,
    /// Exists, holds nothing (e.g. `svc.<zone>`, `<ns>.svc.<zone>`).
    Empty,
    Service(Arc<ServiceRecords>),
    Srv(Arc<ServiceRecords>, Arc<SrvRecords>),
    Cluster(Arc<ServiceRecords>, usize),
}

/// The whole zone at one applied index.
#[derive(Debug)]
pub struct Zone {
    pub origin: Name,
    /// Lowercase, fully qualified (trailing dot) name -> node.
    pub names: HashMap<String, Node>,
    pub soa: Record,
    pub ns: Record,
    pub applied_index: u64,
    /// `<zone>.` and `.<zone>.`, lowercase, for the in-zone test.
    origin_key: String,
    dot_origin: String,
}

fn name(s: &str) -> Result<Name, DnsError> {
    Name::from_ascii(s).map_err(|e| DnsError::Name {
        name: s.to_string(),
        message: e.to_string(),
    })
}

fn soa_record(origin: &Name, serial: u64, minimum: u32) -> Result<Record, DnsError> {
    let mname = name(&format!("ns.{origin}"))?;
    let rname = name(&format!("hostmaster.{origin}"))?;
    // Serial wraps at 2^32: caches only compare it, and fedraft has no secondaries.
    let soa = SOA::new(
        mname,
        rname,
        (serial & u64::from(u32::MAX)) as u32,
        SOA_REFRESH_S,
        SOA_RETRY_S,
        SOA_EXPIRE_S,
        minimum,
    );
    // RFC 2308: the negative TTL is min(SOA TTL, SOA minimum).
    Ok(Record::from_rdata(origin.clone(), minimum, RData::SOA(soa)))
}

fn ip_record(owner: &Name, ttl: u32, ip: IpAddr) -> Record {
    let rdata = match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    };
    Record::from_rdata(owner.clone(), ttl, rdata)
}

fn key(n: &Name) -> String {
    let mut s = n.to_ascii().to_ascii_lowercase();
    if !s.ends_with('.') {
        s.push('.');
    }
    s
}

impl Zone {
    /// An empty zone (apex only), e.g. before the first state is read.
    pub fn empty(origin: &str, default_ttl: u32) -> Result<Zone, DnsError> {
        let origin = name(&format!("{}.", origin.trim_end_matches('.')))?;
        let soa = soa_record(&origin, 0, default_ttl)?;
        let ns = Record::from_rdata(
            origin.clone(),
            default_ttl,
            RData::NS(NS(name(&format!("ns.{origin}"))?)),
        );
        let mut names = HashMap::new();
        names.insert(key(&origin), Node::Apex);
        names.insert(format!("svc.{}", key(&origin)), Node::Empty);
        let origin_key = key(&origin);
        Ok(Zone {
            dot_origin: format!(".{origin_key}"),
            origin_key,
            origin,
            names,
            soa,
            ns,
            applied_index: 0,
        })
    }

    /// Builds the zone from the state's discovery views.
    pub fn build(origin: &str, default_ttl: u32, state: &State) -> Result<Zone, DnsError> {
        let mut zone = Zone::empty(origin, default_ttl)?;
        zone.applied_index = state.applied_index();
        zone.soa = soa_record(&zone.origin, state.applied_index(), default_ttl)?;
        for view in fedraft_core::discovery::dns_views(state) {
            zone.add_service(&view)?;
        }
        Ok(zone)
    }

    fn add_service(&mut self, view: &EndpointsView) -> Result<(), DnsError> {
        let ttl = view.spec.ttl_seconds;
        let ns_name = format!("{}.svc.{}", view.namespace, self.origin);
        let svc_name = name(&format!("{}.{ns_name}", view.name))?;
        let answering: std::collections::BTreeSet<&str> =
            view.answering().map(|c| c.cluster.as_str()).collect();
        let mut clusters = Vec::with_capacity(view.clusters.len());
        for c in &view.clusters {
            let cname = name(&format!("{}.{svc_name}", c.cluster))?;
            let mut at_service = Vec::new();
            let mut own = Vec::new();
            for a in &c.addresses {
                match a {
                    Address::Ip(ip) => {
                        at_service.push(ip_record(&svc_name, ttl, *ip));
                        own.push(ip_record(&cname, ttl, *ip));
                    }
                    Address::Hostname(h) => {
                        // One CNAME only, and never beside addresses.
                        if own.is_empty() {
                            own.push(Record::from_rdata(
                                cname.clone(),
                                ttl,
                                RData::CNAME(CNAME(name(&format!("{h}."))?)),
                            ));
                        }
                    }
                }
            }
            if own.len() > 1 && own.iter().any(|r| matches!(r.data, RData::CNAME(_))) {
                own.retain(|r| !matches!(r.data, RData::CNAME(_)));
            }
            let is_answering = answering.contains(c.cluster.as_str());
            let status = match (&c.reason, view.mode) {
                (None, _) => "eligible".to_string(),
                (Some(r), AnswerMode::FailOpen) if is_answering => format!("fail-open: {r}"),
                (Some(r), _) => r.clone(),
            };
            let txt = Record::from_rdata(
                cname.clone(),
                ttl,
                RData::TXT(TXT::new(vec![
                    format!("answered={is_answering}"),
                    format!("weight={}", c.weight),
                    format!("ready={}", c.ready_endpoints),
                    format!("health={:?}", c.health),
                    format!("status={status}"),
                ])),
            );
            clusters.push(ClusterRecords {
                cluster: c.cluster.clone(),
                weight: c.weight,
                answering: is_answering,
                at_service,
                own,
                txt,
            });
        }
        let svc = Arc::new(ServiceRecords {
            ttl,
            soa: soa_record(&self.origin, self.applied_index, ttl)?,
            clusters,
        });
        // SRV names.
        for port in view.ports() {
            let label = if port.name.is_empty() {
                port.port.to_string()
            } else {
                port.name.clone()
            };
            let srv_name = name(&format!(
                "_{label}._{}.{svc_name}",
                port.protocol.srv_label()
            ))?;
            let mut records = Vec::new();
            for (i, c) in view.clusters.iter().enumerate() {
                if !svc.clusters[i].answering || !c.ports.contains(&port) {
                    continue;
                }
                let target = name(&format!("{}.{svc_name}", c.cluster))?;
                let weight = u16::try_from(c.weight).unwrap_or(u16::MAX);
                let srv = SRV::new(0, weight, port.port, target);
                records.push((
                    i,
                    Record::from_rdata(srv_name.clone(), ttl, RData::SRV(srv)),
                ));
            }
            let srv = Arc::new(SrvRecords { records });
            // `_<proto>.<svc>` exists as an empty non-terminal.
            self.names.insert(
                format!("_{}.{}", port.protocol.srv_label(), key(&svc_name)),
                Node::Empty,
            );
            self.names
                .insert(key(&srv_name), Node::Srv(svc.clone(), srv));
        }
        for (i, c) in view.clusters.iter().enumerate() {
            let cname = name(&format!("{}.{svc_name}", c.cluster))?;
            self.names
                .insert(key(&cname), Node::Cluster(svc.clone(), i));
        }
        self.names
            .entry(ns_name.to_ascii_lowercase())
            .or_insert(Node::Empty);
        self.names.insert(key(&svc_name), Node::Service(svc));
        Ok(())
    }

    /// The node at a lowercase fully qualified name.
    pub fn get(&self, fqdn_lower: &str) -> Option<&Node> {
        self.names.get(fqdn_lower)
    }

    /// Whether `fqdn_lower` is inside this zone.
    pub fn contains(&self, fqdn_lower: &str) -> bool {
        fqdn_lower == self.origin_key || fqdn_lower.ends_with(&self.dot_origin)
    }
}
