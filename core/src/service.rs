//! The service-discovery data the log carries: a federated Service's `discovery` section
//! ([`DiscoverySpec`]) and the endpoint observations executors report ([`EndpointsReport`]),
//! with the checks each needs on its own (names, limits, address syntax).
//!
//! The log envelope (`crate::command`) depends on this module, so it must not depend on the
//! state machine: nothing here reads `State`. Where the state keeps these facts:
//! `state/handlers/services.rs`; the view derived from them for DNS: `crate::discovery`.
//!
//! Must not: do I/O, read clocks, or change a serialized shape (these types are encoded in the
//! log; a change is a new envelope version).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::policy::validate_dns_label;

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
    validate_dns_label(name, "").map_err(|_| {
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
            && host.split('.').all(|l| validate_dns_label(l, "").is_ok());
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
        validate_dns_label(&self.namespace, "").map_err(|e| at("namespace", e))?;
        validate_dns_label(&self.name, "").map_err(|e| at("name", e))?;
        validate_dns_label(&self.cluster, "").map_err(|e| at("cluster", e))?;
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
                validate_dns_label(&p.name, "").map_err(|e| at(&format!("ports[{i}].name"), e))?;
            }
        }
        Ok(())
    }
}
