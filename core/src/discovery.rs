//! Cross-cluster service discovery: the DNS view derived from the state. The data the log
//! carries (a Service's `discovery` section, the endpoint observations executors report) is
//! defined in `crate::service`, which must not read the state, and re-exported here.
//!
//! The view is a pure function of the state ([`endpoints_view`]): a placed cluster is eligible
//! when it is Ready (after the health hysteresis of `state/handlers/health.rs`), reported at
//! least one ready endpoint and at least one external address. Eligible clusters are answered
//! with weight = ready endpoints (or 1 each with `Equal`). With none eligible, `failOpen`
//! answers with the last known addresses of the placed clusters (a control plane that lost a
//! cluster does not prove its pods dead); otherwise the name has no data. Because the view is
//! derived from the log, rebuilding the state at a past index shows what DNS answered then.
//!
//! Must not: do I/O, draw random numbers or read clocks. Weighted-random ordering belongs to the
//! DNS server; this module only says who may be answered and with which weight, in cluster-name
//! order. Where the state keeps these facts: `state/handlers/services.rs`.

use serde::{Deserialize, Serialize};

use crate::model::Health;
pub use crate::service::{
    validate_service_template, Address, DiscoverySpec, EndpointsReport, PortProtocol, ServicePort,
    Weighting, DEFAULT_TTL_SECONDS, MAX_ADDRESSES, MAX_PORTS, MAX_TTL_SECONDS,
};
use crate::state::State;

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
        .map(|p| &*p.cluster)
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
