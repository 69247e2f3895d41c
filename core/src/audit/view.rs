//! What the federation looked like at one index: clusters, objects and their placement, tenants.
//! A summary for people and tools (the API's `/v1/audit/state`, `fedraft audit replay`);
//! credentials and templates are left out. Times stay milliseconds since the epoch: the edges
//! (apiserver's `audit_wire`, the CLI) turn them into text.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::Health;
use crate::state::State;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    pub name: String,
    pub health: Health,
    /// Log time (ms) of the last health change.
    pub health_since_ms: u64,
    pub cordoned: bool,
    pub drained: bool,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<String>,
    pub resource_version: u64,
    /// Why the cluster is in its health at this index, from every vantage point's view (which
    /// nodes reach it, which fail and with what error, whether failover is held); None when no
    /// vantage point has spoken of it.
    pub condition: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectView {
    pub namespace: String,
    pub name: String,
    pub replicas: u32,
    /// cluster -> replicas.
    pub placement: BTreeMap<String, u32>,
    pub ready_replicas: u32,
    pub unschedulable: Option<u32>,
    pub decision: String,
    pub decided_index: u64,
    pub resource_version: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantView {
    pub name: String,
    pub namespaces: Vec<String>,
    pub resource_version: u64,
}

/// The state at `index`, as shown to a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateView {
    pub index: u64,
    /// The log time (ms) of the entry at `index`.
    pub log_time_ms: u64,
    pub state_hash: String,
    pub clusters: Vec<ClusterView>,
    pub objects: Vec<ObjectView>,
    pub tenants: Vec<TenantView>,
}

impl StateView {
    /// The view of `s`; `namespaces` restricts objects and tenants to a tenant's namespaces and
    /// then hides clusters (tenants do not see the fleet).
    pub fn of(s: &State, namespaces: Option<&[String]>) -> StateView {
        let visible = |ns: &str| namespaces.is_none_or(|a| a.iter().any(|x| x == ns));
        let clusters = if namespaces.is_some() {
            Vec::new()
        } else {
            s.clusters()
                .map(|c| ClusterView {
                    name: c.spec.name.clone(),
                    health: c.status.health,
                    health_since_ms: c.status.health_since_ms,
                    cordoned: c.cordoned,
                    drained: c.drained,
                    labels: c.spec.labels.clone(),
                    taints: c
                        .effective_taints
                        .iter()
                        .map(|t| format!("{}:{}", t.key, t.effect.as_str()))
                        .collect(),
                    resource_version: c.resource_version,
                    condition: s.health_note(&c.spec.name).and_then(|n| n.condition),
                })
                .collect()
        };
        let objects = s
            .objects()
            .filter(|o| visible(&o.namespace))
            .map(|o| ObjectView {
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                replicas: o.template_info.replicas,
                placement: o.placement_map(),
                ready_replicas: o.status.ready_replicas,
                unschedulable: o.status.shortfall.as_ref().map(|f| f.replicas),
                decision: o.status.decision_summary.to_string(),
                decided_index: o.status.decided_index,
                resource_version: o.resource_version,
            })
            .collect();
        let tenants = s
            .tenants()
            .filter(|t| namespaces.is_none() || t.spec.namespaces.iter().any(|n| visible(n)))
            .map(|t| TenantView {
                name: t.spec.name.clone(),
                namespaces: t.spec.namespaces.clone(),
                resource_version: t.resource_version,
            })
            .collect();
        StateView {
            index: s.applied_index(),
            log_time_ms: s.log_time_ms(),
            state_hash: s.state_hash_hex(),
            clusters,
            objects,
            tenants,
        }
    }
}
