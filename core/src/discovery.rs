//! Cross-cluster service discovery: the `discovery` section of a federated Service, the
//! endpoint observations executors report, and the DNS view derived from the state.
//!
//! The view is a pure function of the state ([`endpoints_view`]): a placed cluster is eligible
//! when it is Ready (after the health hysteresis of `state/health.rs`), reported at least one
//! ready endpoint and at least one external address. Eligible clusters are answered with weight
//! = ready endpoints (or 1 each with `Equal`). With none eligible, `failOpen` answers with the
//! last known addresses of the placed clusters (a control plane that lost a cluster does not
//! prove its pods dead); otherwise the name has no data. Because the view is derived from the
//! log, rebuilding the state at a past index shows what DNS answered then.
//!
//! Must not: do I/O, draw random numbers or read clocks. Weighted-random ordering belongs to the
//! DNS server; this module only says who may be answered and with which weight, in cluster-name
//! order. Where the state keeps these facts: `state/services.rs`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::model::Health;
use crate::state::validate;
use crate::state::State;

/// Default TTL of DNS answers (and SOA minimum, so negative answers expire as fast).
pub const DEFAULT_TTL_SECONDS: u32 = 5;
/// Largest TTL accepted: discovery answers must follow failover, not sit in caches for hours.
pub const MAX_TTL_SECONDS: u32 = 3600;
/// Most external addresses one cluster may report for one Service.
pub const MAX_ADDRESSES: usize = 16;
/// Most ports one Service may report.
pub const MAX_PORTS: usize = 64;
/// Longest hostname accepted as an address (DNS limit on a name).
const MAX_HOSTNAME_BYTES: usize = 253;

fn yes() -> bool {
    true
}

fn default_ttl() -> u32 {
    DEFAULT_TTL_SECONDS
}

/// How answers are weighted among eligible clusters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Weighting {
    /// Weight = the cluster's ready endpoints.
    #[default]
    ReadyEndpoints,
    /// Every eligible cluster weighs 1.
    Equal,
}

/// The `discovery` section of a federated Service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscoverySpec {
    /// Served by DNS and the endpoints API when true.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// TTL of answers and SOA minimum of negative answers.
    #[serde(default = "default_ttl")]
    pub ttl_seconds: u32,
    #[serde(default)]
    pub weighting: Weighting,
    /// With no eligible cluster, answer the last known addresses of the placed clusters rather
    /// than nothing.
    #[serde(default = "yes")]
    pub fail_open: bool,
}

impl Default for DiscoverySpec {
    fn default() -> Self {
        DiscoverySpec {
            enabled: true,
            ttl_seconds: DEFAULT_TTL_SECONDS,
            weighting: Weighting::ReadyEndpoints,
            fail_open: true,
        }
    }
}

impl DiscoverySpec {
    /// Field-named checks; `field` is the path of the section (e.g. `discovery`).
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        if self.ttl_seconds == 0 || self.ttl_seconds > MAX_TTL_SECONDS {
            return Err(FieldError::new(
                format!("{field}.ttlSeconds"),
                format!(
                    "{} is outside 1..={MAX_TTL_SECONDS} seconds",
                    self.ttl_seconds
                ),
            ));
        }
        Ok(())
    }
}

/// Checks that a template may carry a discovery section: a core/v1 Service whose name is a DNS
/// label (it becomes one label of `<svc>.<ns>.svc.<zone>`).
pub fn validate_service_template(
    template: &str,
    name: &str,
    field: &str,
) -> Result<(), FieldError> {
    let doc: serde_json::Value = serde_json::from_str(template)
        .map_err(|e| FieldError::new(field, format!("template is not JSON: {e}")))?;
    let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    let api_version = doc.get("apiVersion").and_then(|k| k.as_str()).unwrap_or("");
    if kind != "Service" || api_version != "v1" {
        return Err(FieldError::new(
            field,
            format!("discovery needs a v1 Service template, found {api_version}/{kind}"),
        ));
    }
    validate::dns_label(name, "").map_err(|_| {
        FieldError::new(
            "metadata.name",
            format!("{name:?} must be a DNS-1123 label to be served by discovery"),
        )
    })
}

/// Transport protocol of a Service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PortProtocol {
    #[serde(rename = "TCP")]
    Tcp,
    #[serde(rename = "UDP")]
    Udp,
    #[serde(rename = "SCTP")]
    Sctp,
}

impl PortProtocol {
    /// The label used in SRV names: `_tcp`, `_udp`, `_sctp` without the underscore.
    pub fn srv_label(self) -> &'static str {
        match self {
            PortProtocol::Tcp => "tcp",
            PortProtocol::Udp => "udp",
            PortProtocol::Sctp => "sctp",
        }
    }

    pub fn parse(s: &str) -> Option<PortProtocol> {
        match s.to_ascii_uppercase().as_str() {
            "TCP" => Some(PortProtocol::Tcp),
            "UDP" => Some(PortProtocol::Udp),
            "SCTP" => Some(PortProtocol::Sctp),
            _ => None,
        }
    }
}

/// One port of a Service as a member cluster serves it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// Empty when the Service has one unnamed port.
    pub name: String,
    pub protocol: PortProtocol,
    pub port: u16,
}

/// What an executor saw of one Service in one member cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointsReport {
    pub namespace: String,
    pub name: String,
    pub cluster: String,
    /// External addresses (`status.loadBalancer.ingress`): IPs or hostnames, sorted.
    pub addresses: Vec<String>,
    /// Sorted by (name, protocol, port).
    pub ports: Vec<ServicePort>,
    pub ready_endpoints: u32,
}

/// An external address, classified.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Address {
    Ip(IpAddr),
    Hostname(String),
}

impl Address {
    pub fn parse(s: &str) -> Option<Address> {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Some(Address::Ip(ip));
        }
        let host = s.strip_suffix('.').unwrap_or(s).to_ascii_lowercase();
        let ok = !host.is_empty()
            && host.len() <= MAX_HOSTNAME_BYTES
            && host.split('.').all(|l| validate::dns_label(l, "").is_ok());
        ok.then_some(Address::Hostname(host))
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Ip(ip) => write!(f, "{ip}"),
            Address::Hostname(h) => f.write_str(h),
        }
    }
}

impl EndpointsReport {
    /// Field-named checks of one report; `field` is its path (e.g. `reports[3]`).
    pub fn validate(&self, field: &str) -> Result<(), FieldError> {
        let at = |what: &str, e: FieldError| FieldError::new(format!("{field}.{what}"), e.message);
        validate::dns_label(&self.namespace, "").map_err(|e| at("namespace", e))?;
        validate::dns_label(&self.name, "").map_err(|e| at("name", e))?;
        validate::dns_label(&self.cluster, "").map_err(|e| at("cluster", e))?;
        if self.addresses.len() > MAX_ADDRESSES {
            return Err(FieldError::new(
                format!("{field}.addresses"),
                format!("{} addresses exceed {MAX_ADDRESSES}", self.addresses.len()),
            ));
        }
        for (i, a) in self.addresses.iter().enumerate() {
            if Address::parse(a).is_none() {
                return Err(FieldError::new(
                    format!("{field}.addresses[{i}]"),
                    format!("{a:?} is neither an IP address nor a hostname"),
                ));
            }
        }
        if self.ports.len() > MAX_PORTS {
            return Err(FieldError::new(
                format!("{field}.ports"),
                format!("{} ports exceed {MAX_PORTS}", self.ports.len()),
            ));
        }
        for (i, p) in self.ports.iter().enumerate() {
            if p.port == 0 {
                return Err(FieldError::new(
                    format!("{field}.ports[{i}].port"),
                    "port 0 is not a port",
                ));
            }
            if !p.name.is_empty() {
                validate::dns_label(&p.name, "").map_err(|e| at(&format!("ports[{i}].name"), e))?;
            }
        }
        Ok(())
    }
}

/// Which answer a Service gets now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AnswerMode {
    /// At least one eligible cluster: those are answered.
    Eligible,
    /// None eligible, `failOpen`: the last known addresses of the placed clusters.
    FailOpen,
    /// None eligible and not fail-open (or nothing known): NODATA.
    NoData,
}

/// One cluster of a Service's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEndpoints {
    pub cluster: String,
    pub health: Health,
    /// In the object's current placement.
    pub placed: bool,
    pub eligible: bool,
    /// Why it is not eligible (None when it is).
    pub reason: Option<String>,
    pub addresses: Vec<Address>,
    pub ports: Vec<ServicePort>,
    pub ready_endpoints: u32,
    /// Share in answers while eligible (or while fail-open).
    pub weight: u32,
    /// Index of the entry that last changed this cluster's observation (0: never reported).
    pub reported_index: u64,
}

/// The discovery view of one Service: what DNS and the endpoints API serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointsView {
    pub namespace: String,
    pub name: String,
    pub spec: DiscoverySpec,
    pub mode: AnswerMode,
    /// Every placed or reported cluster, by name.
    pub clusters: Vec<ClusterEndpoints>,
    /// Applied index of the state this view was derived from.
    pub applied_index: u64,
}

impl EndpointsView {
    /// The clusters an answer is built from, by name, with their weights.
    pub fn answering(&self) -> impl Iterator<Item = &ClusterEndpoints> {
        let mode = self.mode;
        self.clusters.iter().filter(move |c| match mode {
            AnswerMode::Eligible => c.eligible,
            AnswerMode::FailOpen => c.placed && !c.addresses.is_empty(),
            AnswerMode::NoData => false,
        })
    }

    /// Ports served by the answering clusters, without duplicates, sorted.
    pub fn ports(&self) -> Vec<ServicePort> {
        let mut ports: Vec<ServicePort> = self
            .answering()
            .flat_map(|c| c.ports.iter().cloned())
            .collect();
        ports.sort();
        ports.dedup();
        ports
    }
}

/// The view of one Service with a discovery section (None if it has none or does not exist).
/// A disabled section still yields a view (the API shows it); DNS skips it.
pub fn endpoints_view(state: &State, namespace: &str, name: &str) -> Option<EndpointsView> {
    let spec = state.discovery(namespace, name)?.clone();
    let obj = state.object(namespace, name)?;
    let observed = state.observed_endpoints(namespace, name);
    let mut names: Vec<&str> = obj
        .status
        .clusters
        .iter()
        .filter(|p| p.replicas > 0)
        .map(|p| p.cluster.as_str())
        .collect();
    if let Some(o) = observed {
        names.extend(o.keys().map(String::as_str));
    }
    names.sort_unstable();
    names.dedup();
    let mut clusters = Vec::with_capacity(names.len());
    for cluster in names {
        let placed = obj.replicas_on(cluster) > 0;
        let health = state
            .cluster(cluster)
            .map(|c| c.status.health)
            .unwrap_or(Health::Unknown);
        let seen = observed.and_then(|o| o.get(cluster));
        let addresses: Vec<Address> = seen
            .map(|s| {
                s.addresses
                    .iter()
                    .filter_map(|a| Address::parse(a))
                    .collect()
            })
            .unwrap_or_default();
        let ready = seen.map_or(0, |s| s.ready_endpoints);
        let reason = if !placed {
            Some("not in the placement".to_string())
        } else if health != Health::Ready {
            Some(format!("cluster is {health:?}"))
        } else if seen.is_none() {
            Some("no observation reported yet".to_string())
        } else if ready == 0 {
            Some("no ready endpoints".to_string())
        } else if addresses.is_empty() {
            Some("no external address".to_string())
        } else {
            None
        };
        let weight = match spec.weighting {
            // Fail-open answers clusters with no ready endpoint known: they still need a share.
            Weighting::ReadyEndpoints => ready.max(1),
            Weighting::Equal => 1,
        };
        clusters.push(ClusterEndpoints {
            cluster: cluster.to_string(),
            health,
            placed,
            eligible: reason.is_none(),
            reason,
            addresses,
            ports: seen.map(|s| s.ports.clone()).unwrap_or_default(),
            ready_endpoints: ready,
            weight,
            reported_index: seen.map_or(0, |s| s.changed_index),
        });
    }
    let mode = if clusters.iter().any(|c| c.eligible) {
        AnswerMode::Eligible
    } else if spec.fail_open && clusters.iter().any(|c| c.placed && !c.addresses.is_empty()) {
        AnswerMode::FailOpen
    } else {
        AnswerMode::NoData
    };
    Some(EndpointsView {
        namespace: namespace.to_string(),
        name: name.to_string(),
        spec,
        mode,
        clusters,
        applied_index: state.applied_index(),
    })
}

/// Views of every Service whose discovery is enabled, ordered by namespace then name.
pub fn dns_views(state: &State) -> Vec<EndpointsView> {
    state
        .discovery_keys()
        .filter(|(_, spec)| spec.enabled)
        .filter_map(|(k, _)| endpoints_view(state, &k.namespace, &k.name))
        .collect()
}
