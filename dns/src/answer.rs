//! Answering one question from a [`Zone`]: the pure part of the server (no sockets), so every
//! rule is tested without a network.
//!
//! - outside the zone: REFUSED (fedraft is authoritative for its zone only, never recursive);
//! - unknown name in the zone: NXDOMAIN with the SOA;
//! - known name without records of the type: NOERROR, empty, with the SOA (NODATA); the SOA's
//!   minimum is the Service's TTL, so negative answers expire as fast as positive ones;
//! - Service names: the answering clusters in weighted-random order (weight = ready endpoints, or
//!   equal), clusters local to the client first, then at most `max_answers` records.
//!
//! Every answer, whatever the name and type (ANY and SRV additionals included), carries at
//! most `max_answers` records in its answer section and at most `max_answers` in its additional
//! section: a cluster may report any number of addresses, and an unbounded answer would make
//! the server an amplifier.
//!
//! Must not: touch sockets or the clock; randomness comes from the caller's generator.

use std::collections::HashMap;
use std::net::IpAddr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, Record, RecordType};
use ipnet::IpNet;
use rand::Rng;

use crate::zone::{ClusterRecords, Node, Zone};

/// Client networks per cluster: a query from one of them gets that cluster first.
#[derive(Debug, Clone, Default)]
pub struct Locality {
    pub by_cluster: HashMap<String, Vec<IpNet>>,
}

impl Locality {
    fn is_local(&self, cluster: &str, client: Option<IpAddr>) -> bool {
        match (client, self.by_cluster.get(cluster)) {
            (Some(ip), Some(nets)) => nets.iter().any(|n| n.contains(&ip)),
            _ => false,
        }
    }
}

/// An answer, borrowing records from the zone.
#[derive(Debug)]
pub struct Answer<'z> {
    pub rcode: ResponseCode,
    pub authoritative: bool,
    pub answers: Vec<&'z Record>,
    /// The SOA for negative answers.
    pub soa: Option<&'z Record>,
    pub additionals: Vec<&'z Record>,
}

impl<'z> Answer<'z> {
    fn refused() -> Self {
        Answer {
            rcode: ResponseCode::Refused,
            authoritative: false,
            answers: Vec::new(),
            soa: None,
            additionals: Vec::new(),
        }
    }

    fn negative(rcode: ResponseCode, soa: &'z Record) -> Self {
        Answer {
            rcode,
            authoritative: true,
            answers: Vec::new(),
            soa: Some(soa),
            additionals: Vec::new(),
        }
    }

    /// Positive if there are answers, NODATA with `soa` otherwise.
    fn data(answers: Vec<&'z Record>, additionals: Vec<&'z Record>, soa: &'z Record) -> Self {
        if answers.is_empty() {
            return Answer::negative(ResponseCode::NoError, soa);
        }
        Answer {
            rcode: ResponseCode::NoError,
            authoritative: true,
            answers,
            soa: None,
            additionals,
        }
    }
}

/// Indexes of `candidates` in answer order: local ones first, each group drawn by weight
/// without replacement.
pub fn weighted_order<R: Rng>(
    clusters: &[ClusterRecords],
    candidates: &[usize],
    client: Option<IpAddr>,
    locality: &Locality,
    rng: &mut R,
) -> Vec<usize> {
    let (mut local, mut rest): (Vec<usize>, Vec<usize>) = candidates
        .iter()
        .partition(|i| locality.is_local(&clusters[**i].cluster, client));
    let mut out = Vec::with_capacity(candidates.len());
    for group in [&mut local, &mut rest] {
        while !group.is_empty() {
            let total: u64 = group
                .iter()
                .map(|i| u64::from(clusters[*i].weight.max(1)))
                .sum();
            let mut pick = rng.random_range(0..total);
            let mut chosen = group.len() - 1;
            for (pos, i) in group.iter().enumerate() {
                let w = u64::from(clusters[*i].weight.max(1));
                if pick < w {
                    chosen = pos;
                    break;
                }
                pick -= w;
            }
            out.push(group.remove(chosen));
        }
    }
    out
}

fn is_addr(r: &Record, qtype: RecordType) -> bool {
    match qtype {
        RecordType::A => matches!(r.data, RData::A(_)),
        RecordType::AAAA => matches!(r.data, RData::AAAA(_)),
        RecordType::ANY => matches!(r.data, RData::A(_) | RData::AAAA(_)),
        _ => false,
    }
}

/// Up to `cap` records taken one from each target in turn, so a capped additional section
/// still helps with every SRV target rather than holding only the first target's addresses.
fn round_robin<'z>(targets: &[&'z [Record]], cap: usize) -> Vec<&'z Record> {
    let mut out = Vec::new();
    let deepest = targets.iter().map(|t| t.len()).max().unwrap_or(0);
    for depth in 0..deepest {
        for t in targets {
            if out.len() == cap {
                return out;
            }
            if let Some(r) = t.get(depth) {
                out.push(r);
            }
        }
    }
    out
}

/// Answers `qtype` at `qname` (lowercase, fully qualified), with at most `max_answers` records
/// in each of the answer and additional sections.
pub fn answer<'z, R: Rng>(
    zone: &'z Zone,
    qname: &str,
    qtype: RecordType,
    client: Option<IpAddr>,
    locality: &Locality,
    max_answers: usize,
    rng: &mut R,
) -> Answer<'z> {
    let cap = max_answers.max(1);
    let mut a = answer_uncapped(zone, qname, qtype, client, locality, cap, rng);
    a.answers.truncate(cap);
    a.additionals.truncate(cap);
    a
}

fn answer_uncapped<'z, R: Rng>(
    zone: &'z Zone,
    qname: &str,
    qtype: RecordType,
    client: Option<IpAddr>,
    locality: &Locality,
    max_answers: usize,
    rng: &mut R,
) -> Answer<'z> {
    if !zone.contains(qname) {
        return Answer::refused();
    }
    let Some(node) = zone.get(qname) else {
        return Answer::negative(ResponseCode::NXDomain, &zone.soa);
    };
    match node {
        Node::Apex => {
            let mut answers = Vec::new();
            if matches!(qtype, RecordType::SOA | RecordType::ANY) {
                answers.push(&zone.soa);
            }
            if matches!(qtype, RecordType::NS | RecordType::ANY) {
                answers.push(&zone.ns);
            }
            Answer::data(answers, Vec::new(), &zone.soa)
        }
        Node::Empty => Answer::negative(ResponseCode::NoError, &zone.soa),
        Node::Service(svc) => {
            if !matches!(qtype, RecordType::A | RecordType::AAAA | RecordType::ANY) {
                return Answer::negative(ResponseCode::NoError, &svc.soa);
            }
            let candidates: Vec<usize> = (0..svc.clusters.len())
                .filter(|i| {
                    let c = &svc.clusters[*i];
                    c.answering && c.at_service.iter().any(|r| is_addr(r, qtype))
                })
                .collect();
            let order = weighted_order(&svc.clusters, &candidates, client, locality, rng);
            let answers: Vec<&Record> = order
                .iter()
                .flat_map(|i| svc.clusters[*i].at_service.iter())
                .filter(|r| is_addr(r, qtype))
                .take(max_answers)
                .collect();
            Answer::data(answers, Vec::new(), &svc.soa)
        }
        Node::Srv(svc, srv) => {
            if !matches!(qtype, RecordType::SRV | RecordType::ANY) {
                return Answer::negative(ResponseCode::NoError, &svc.soa);
            }
            let candidates: Vec<usize> = srv.records.iter().map(|(i, _)| *i).collect();
            let order = weighted_order(&svc.clusters, &candidates, client, locality, rng);
            let mut answers = Vec::new();
            let mut targets = Vec::new();
            for i in order.into_iter().take(max_answers) {
                if let Some((_, r)) = srv.records.iter().find(|(c, _)| *c == i) {
                    answers.push(r);
                    targets.push(svc.clusters[i].own.as_slice());
                }
            }
            let additionals = round_robin(&targets, max_answers);
            Answer::data(answers, additionals, &svc.soa)
        }
        Node::Cluster(svc, i) => {
            let c = &svc.clusters[*i];
            let cname: Vec<&Record> = c
                .own
                .iter()
                .filter(|r| matches!(r.data, RData::CNAME(_)))
                .collect();
            let answers: Vec<&Record> = match qtype {
                RecordType::TXT => vec![&c.txt],
                RecordType::ANY => c.own.iter().chain([&c.txt]).collect(),
                // A name with a CNAME has no other data: the CNAME answers every type.
                _ if !cname.is_empty() => cname,
                RecordType::A | RecordType::AAAA => {
                    c.own.iter().filter(|r| is_addr(r, qtype)).collect()
                }
                _ => Vec::new(),
            };
            Answer::data(answers, Vec::new(), &svc.soa)
        }
    }
}
