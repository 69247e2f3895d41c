//! The JSON shapes of the API (camelCase, Kubernetes style) and their conversion to and from core
//! types. JSON stops here: handlers hand core types to the log and turn core types back into JSON.
//!
//! Inputs are flat documents: a cluster is `{name, labels, apiEndpoint, credentials, taints}`, an
//! object `{template, placement, overrides}` (namespace and name come from the path), a tenant
//! `{namespaces, quota, sliceSize, members}`. Each may also carry `kind` (checked), `metadata`
//! (`name`, `namespace`, `resourceVersion`), `resourceVersion`, and the read-only fields a GET
//! returns (`status`, `cordoned`, ...), which are ignored so a GET -> edit -> PUT round trip works.
//!
//! Outputs never contain cluster credentials: [`cluster_json`] builds the document field by field
//! and has no access path to them.

use std::collections::BTreeMap;

use fedraft_core::model::{Cluster, Credentials, FederatedObject, Tenant};
use fedraft_core::policy::{Override, Placement, Resources, Taint};
use fedraft_core::scheduler::Decision;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;

/// A resource version given as a number or a numeric string (Kubernetes sends strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Version {
    Number(u64),
    Text(#[serde(deserialize_with = "numeric_string")] u64),
}

fn numeric_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = String::deserialize(d)?;
    s.parse()
        .map_err(|_| serde::de::Error::custom("resourceVersion must be a number"))
}

impl Version {
    pub fn get(self) -> u64 {
        match self {
            Version::Number(n) | Version::Text(n) => n,
        }
    }
}

/// `metadata` as accepted on input.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaIn {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub resource_version: Option<Version>,
}

/// The common envelope fields of every input document.
pub trait Envelope {
    const KIND: &'static str;
    fn kind(&self) -> Option<&str>;
    fn meta(&self) -> Option<&MetaIn>;
    fn top_version(&self) -> Option<Version>;

    /// The expected resource version: `metadata.resourceVersion`, else `resourceVersion`.
    fn expected_version(&self) -> Option<u64> {
        self.meta()
            .and_then(|m| m.resource_version)
            .or(self.top_version())
            .map(Version::get)
    }

    /// Refuses a `kind` other than this resource's.
    fn check_kind(&self) -> Result<(), ApiError> {
        match self.kind() {
            Some(k) if k != Self::KIND => Err(ApiError::UnknownKind {
                kind: k.to_string(),
                field: "kind".into(),
            }),
            _ => Ok(()),
        }
    }
}

/// A cluster as written by an operator.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterIn {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub metadata: Option<MetaIn>,
    #[serde(default)]
    pub resource_version: Option<Version>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub api_endpoint: String,
    /// Write-only. Absent on an update keeps the stored credentials.
    #[serde(default)]
    pub credentials: Option<Credentials>,
    #[serde(default)]
    pub taints: Vec<Taint>,
    #[serde(default)]
    pub failure_threshold_seconds: Option<u64>,
    #[serde(default)]
    pub success_threshold_seconds: Option<u64>,
    // Read-only fields of a GET, ignored on input.
    #[serde(default)]
    pub status: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub cordoned: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub drained: Option<serde::de::IgnoredAny>,
}

/// A federated object as written by a tenant.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectIn {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub metadata: Option<MetaIn>,
    #[serde(default)]
    pub resource_version: Option<Version>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// Any Kubernetes manifest.
    pub template: Value,
    #[serde(default)]
    pub placement: Placement,
    #[serde(default)]
    pub overrides: Vec<Override>,
    /// Service discovery for a v1 Service template (DNS and the endpoints API).
    #[serde(default)]
    pub discovery: Option<fedraft_core::discovery::DiscoverySpec>,
    /// How a new template reaches the clusters (all at once, or in waves with gates); a put
    /// without it keeps the object's strategy.
    #[serde(default)]
    pub rollout: Option<fedraft_core::rollout::RolloutStrategy>,
    /// Whether replicas return to a cluster they failed over from once it recovers (`never`
    /// or `{"afterRecoveryHeld": SECONDS}`); a put without it keeps the object's choice.
    #[serde(default)]
    pub fail_back: Option<fedraft_core::rollout::failback::FailBack>,
    /// Whether replicas left Pending unschedulable on a cluster move elsewhere
    /// (`{"pendingSeconds": N}`, 0 for off); a put without it keeps the object's policy.
    #[serde(default)]
    pub descheduling: Option<fedraft_core::rollout::deschedule::Descheduling>,
    #[serde(default)]
    pub status: Option<serde::de::IgnoredAny>,
}

/// A tenant as written by an admin.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantIn {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub metadata: Option<MetaIn>,
    #[serde(default)]
    pub resource_version: Option<Version>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Integers (`cpuMillis`...) or Kubernetes quantities with extended resources
    /// (`routes::quota`).
    #[serde(default)]
    pub quota: BTreeMap<String, Value>,
    /// A quota per cluster name, each in the form of `quota`.
    #[serde(default)]
    pub per_cluster: BTreeMap<String, BTreeMap<String, Value>>,
    #[serde(default)]
    pub slice_size: Option<Resources>,
    #[serde(default)]
    pub members: Vec<String>,
    #[serde(default)]
    pub status: Option<serde::de::IgnoredAny>,
}

macro_rules! envelope {
    ($t:ty, $kind:literal) => {
        impl Envelope for $t {
            const KIND: &'static str = $kind;
            fn kind(&self) -> Option<&str> {
                self.kind.as_deref()
            }
            fn meta(&self) -> Option<&MetaIn> {
                self.metadata.as_ref()
            }
            fn top_version(&self) -> Option<Version> {
                self.resource_version
            }
        }
    };
}
envelope!(ClusterIn, "Cluster");
envelope!(ObjectIn, "FederatedObject");
envelope!(TenantIn, "Tenant");

/// Checks that a name in the body, if any, equals the one in the path.
pub fn check_same(field: &str, body: Option<&str>, path: &str) -> Result<(), ApiError> {
    match body {
        Some(b) if b != path => Err(ApiError::invalid(
            field,
            format!("{b:?} does not match {path:?} in the path"),
        )),
        _ => Ok(()),
    }
}

/// Validates a DNS-1123 label from the path or body (400 InvalidName).
pub fn valid_label(name: &str, field: &str) -> Result<(), ApiError> {
    fedraft_core::state::validate::dns_label(name, field).map_err(|e| ApiError::InvalidName {
        name: name.to_string(),
        field: field.to_string(),
        message: e.message,
    })
}

/// Validates a DNS-1123 subdomain (object names).
pub fn valid_subdomain(name: &str, field: &str) -> Result<(), ApiError> {
    fedraft_core::state::validate::dns_subdomain(name, field).map_err(|e| ApiError::InvalidName {
        name: name.to_string(),
        field: field.to_string(),
        message: e.message,
    })
}

/// Validates the name of an object to read or act on: a native object's DNS-1123 subdomain, or
/// the `kind.group:name` a resource template of the Kubernetes-compatible API is stored under
/// (`deployment.apps:web`), so that every read route reaches both.
pub fn valid_object_ref(name: &str, field: &str) -> Result<(), ApiError> {
    match name.split_once(':') {
        None => valid_subdomain(name, field),
        Some((kind, rest)) => {
            valid_subdomain(kind, field)?;
            valid_subdomain(rest, field)
        }
    }
}

/// Refuses a native write to a resource template of the Kubernetes-compatible API: the template
/// and the policies that place it are the truth there, and a `/v1` write would fight them.
pub fn refuse_template_write(name: &str) -> Result<(), ApiError> {
    if name.contains(':') {
        valid_object_ref(name, "name")?;
        return Err(ApiError::InvalidField {
            field: "name".to_string(),
            message: format!(
                "{name} is a resource template of the Kubernetes-compatible API: change or delete it \
                 there (kubectl), or its policies"
            ),
        });
    }
    valid_subdomain(name, "name")
}

// ---------------------------------------------------------------------------------------------
// Core -> JSON.

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A cluster as the API shows it. Credentials are deliberately absent.
pub fn cluster_json(c: &Cluster) -> Value {
    let st = &c.status;
    json!({
        "kind": "Cluster",
        "name": c.spec.name,
        "labels": c.spec.labels,
        "apiEndpoint": c.spec.api_endpoint,
        "taints": to_value(&c.spec.taints),
        "failureThresholdSeconds": c.spec.failure_threshold_seconds,
        "successThresholdSeconds": c.spec.success_threshold_seconds,
        "cordoned": c.cordoned,
        "drained": c.drained,
        "resourceVersion": c.resource_version,
        "status": {
            "health": to_value(&st.health),
            "healthSinceMs": st.health_since_ms,
            "lastHeartbeatMs": st.last_heartbeat_ms,
            "capacity": st.capacity.as_ref().map(to_value),
            "capacityReportedMs": st.capacity_reported_ms,
        },
    })
}

/// [`cluster_json`] with what the state says beyond the status: `owner` (spread ownership), and
/// of its health `condition` (why NotReady, a broken link, a paused failover), `reachability`
/// per node, `failoverHeld`.
pub fn cluster_json_in(s: &fedraft_core::state::State, c: &Cluster) -> Value {
    let mut doc = cluster_json(c);
    // The node whose executors converge it, under spread ownership (`fedraft_core::owners`).
    if let Some(o) = s.owners().owner(&c.spec.name) {
        let node = fedraft_core::health::vantage_name(&o.node);
        doc["owner"] = json!({"node": node, "token": o.token(), "sinceIndex": o.since_index});
    }
    let Some(note) = s.health_note(&c.spec.name) else {
        return doc;
    };
    let reach: Vec<Value> = note
        .reachable_from
        .iter()
        .map(|v| json!({"node": v, "reachable": true}))
        .chain(note.unreachable_from.iter().map(|(v, r)| {
            let f = r.failure.as_ref();
            json!({
                "node": v,
                "reachable": false,
                "sinceMs": r.since_ms,
                "failure": f.map(|f| to_value(&f.kind)),
                "error": f.map(|f| f.message.clone()),
            })
        }))
        .collect();
    if let Some(st) = doc.get_mut("status").and_then(Value::as_object_mut) {
        st.insert("condition".into(), json!(note.condition));
        st.insert("reachability".into(), Value::Array(reach));
        st.insert("failoverHeld".into(), json!(note.failover_held));
    }
    doc
}

/// An object as the API shows it; `decision` adds the scheduler's current reasoning. The shape is
/// [`crate::view::ObjectView`]'s; paths that only write the document out use the view directly.
pub fn object_json(o: &FederatedObject, decision: Option<&Decision>) -> Value {
    let mut doc = to_value(&crate::view::ObjectView(o));
    let last = doc
        .get_mut("status")
        .and_then(|st| st.get_mut("lastDecision"))
        .and_then(Value::as_object_mut);
    if let (Some(d), Some(m)) = (decision, last) {
        if let Value::Object(dm) = decision_json(d) {
            for (k, v) in dm {
                if k != "summary" {
                    m.insert(k, v);
                }
            }
        }
    }
    doc
}

/// A decision record, with each drop reason also as a sentence.
pub fn decision_json(d: &Decision) -> Value {
    let mut v = to_value(d);
    if let Some(dropped) = v.get_mut("dropped").and_then(Value::as_array_mut) {
        for (item, reason) in dropped.iter_mut().zip(&d.dropped) {
            if let Some(m) = item.as_object_mut() {
                m.insert("reasonText".into(), Value::String(reason.reason.describe()));
            }
        }
    }
    if let Some(m) = v.as_object_mut() {
        m.insert("summary".into(), Value::String(d.summary()));
        // With overflow tiers: cluster -> the affinity term behind its replicas.
        if let Some(terms) = &d.terms {
            let by_cluster: serde_json::Map<String, Value> = d
                .placement
                .keys()
                .filter_map(|c| {
                    let (term, overflow) = terms.term(c)?;
                    let tier = if overflow { "overflow" } else { "primary" };
                    Some((
                        c.clone(),
                        serde_json::json!({"affinityName": term, "tier": tier}),
                    ))
                })
                .collect();
            m.insert("affinityTerms".into(), Value::Object(by_cluster));
        }
    }
    v
}

/// What a tenant member may learn of a decision: clusters outside `visible` (its tenant's
/// slices and the clusters its replicas run on or left) are not named, not counted and not
/// described (their taints, health and capacity are other tenants' business and the platform
/// team's). The summary is rebuilt from what is left.
pub fn redact_decision(d: &Decision, visible: &std::collections::BTreeSet<String>) -> Decision {
    let shown = |c: &str| visible.contains(c);
    Decision {
        placement: d.placement.clone(),
        candidates: d
            .candidates
            .iter_str()
            .filter(|c| shown(c))
            .map(str::to_string)
            .collect(),
        dropped: d
            .dropped
            .iter()
            .filter(|x| shown(&x.cluster))
            .cloned()
            .collect(),
        weights: d
            .weights
            .iter_str()
            .filter(|(c, _)| shown(c))
            .map(|(c, w)| (c.to_string(), w))
            .collect(),
        // The scheduler's message counts and describes clusters; the number is the tenant's.
        unschedulable: d.unschedulable.as_ref().map(|sf| {
            fedraft_core::scheduler::decision::Shortfall {
                replicas: sf.replicas,
                message: "not enough eligible capacity among the clusters this tenant may use"
                    .into(),
            }
        }),
        moved: d
            .moved
            .iter()
            .filter(|m| shown(&m.cluster))
            .cloned()
            .collect(),
        // Names placed clusters only, which the tenant sees anyway.
        terms: d.terms.clone(),
    }
}

/// `d` as a member of a tenant whose slices are `slices` may see it: those clusters and the
/// ones the decision places on or moves replicas from.
pub fn redact_for_tenant(slices: &std::collections::BTreeSet<String>, d: &Decision) -> Decision {
    let mut visible = slices.clone();
    visible.extend(d.placement.keys().cloned());
    visible.extend(d.moved.iter().map(|m| m.cluster.clone()));
    redact_decision(d, &visible)
}

/// A tenant as the API shows it.
pub fn tenant_json(t: &Tenant) -> Value {
    json!({
        "kind": "Tenant",
        "name": t.spec.name,
        "namespaces": t.spec.namespaces,
        "quota": to_value(&t.spec.quota),
        "sliceSize": t.spec.slice_size.as_ref().map(to_value),
        "members": t.spec.members,
        "resourceVersion": t.resource_version,
        "status": {
            "used": to_value(&t.status.used),
            "slicesWanted": t.status.slices_wanted,
            "slices": t.status.slices,
        },
    })
}

/// A list document.
pub fn list_json(kind: &str, resource_version: u64, items: Vec<Value>) -> Value {
    json!({ "kind": format!("{kind}List"), "resourceVersion": resource_version, "items": items })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::model::ClusterSpec;

    #[test]
    fn cluster_json_never_carries_credentials() {
        let mut spec = ClusterSpec::new("dc1", "https://10.0.0.1:6443");
        spec.credentials = Credentials::BearerToken("SUPER-SECRET-TOKEN".into());
        let mut state = fedraft_core::state::State::new();
        let entry = fedraft_core::command::LogEntry::new(
            "r",
            "admin",
            1,
            fedraft_core::command::Command::RegisterCluster(spec),
        );
        state.apply(1, &entry);
        let c = state.cluster("dc1").unwrap();
        let text = cluster_json(c).to_string();
        assert!(!text.contains("SUPER-SECRET"), "{text}");
        assert!(!text.contains("credentials"), "{text}");
    }

    #[test]
    fn a_decision_names_the_affinity_term_of_each_placed_cluster() {
        use fedraft_core::scheduler::AffinityTerms;
        let d = Decision {
            placement: [("idc1".to_string(), 4), ("cloud1".to_string(), 2)].into(),
            terms: Some(AffinityTerms {
                names: vec!["idc-gpu".into(), "cloud-gpu".into()],
                tier_of: [("idc1".to_string(), 0), ("cloud1".to_string(), 1)].into(),
            }),
            ..Decision::default()
        };
        let v = decision_json(&d);
        assert_eq!(v["affinityTerms"]["idc1"]["affinityName"], "idc-gpu");
        assert_eq!(v["affinityTerms"]["idc1"]["tier"], "primary");
        assert_eq!(v["affinityTerms"]["cloud1"]["affinityName"], "cloud-gpu");
        assert_eq!(v["affinityTerms"]["cloud1"]["tier"], "overflow");
        let summary = v["summary"].as_str().unwrap_or_default();
        assert!(
            summary.contains("cloud1 (2) by overflow cloud-gpu"),
            "{summary}"
        );
        assert!(decision_json(&Decision::default())
            .get("affinityTerms")
            .is_none());
    }

    #[test]
    fn versions_parse_from_numbers_and_strings() {
        let m: MetaIn = serde_json::from_str(r#"{"resourceVersion":"12"}"#).unwrap();
        assert_eq!(m.resource_version.map(Version::get), Some(12));
        let m: MetaIn = serde_json::from_str(r#"{"resourceVersion":7}"#).unwrap();
        assert_eq!(m.resource_version.map(Version::get), Some(7));
    }
}
