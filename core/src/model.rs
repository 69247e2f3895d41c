//! The domain model: member clusters, federated objects and tenants, as the state machine keeps
//! them.
//!
//! Specs (`*Spec`) are what users write and what travels inside log entries; the surrounding
//! types add the status the state machine derives. Everything here is plain data: validation and
//! every change live in `crate::state`, one module per command family.
//!
//! Encoding rule: every type must round-trip through bincode 2's serde mode, so no
//! `serde_json::Value`, no untagged enums, no `flatten` and no `skip_serializing_if` (bincode is
//! positional). Manifests are JSON text.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::policy::{Override, Placement, Resources, Taint};

/// Default time without heartbeats after which a Ready cluster turns NotReady.
pub const DEFAULT_FAILURE_THRESHOLD_SECONDS: u64 = 30;
/// Default time of uninterrupted heartbeats before a NotReady cluster is Ready again.
pub const DEFAULT_SUCCESS_THRESHOLD_SECONDS: u64 = 30;

fn default_failure_threshold() -> u64 {
    DEFAULT_FAILURE_THRESHOLD_SECONDS
}

fn default_success_threshold() -> u64 {
    DEFAULT_SUCCESS_THRESHOLD_SECONDS
}

/// Identifies a federated object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `namespace/name`, the text `Display` writes, built without the formatter: change
    /// records on the apply path carry it for every touched object.
    pub fn join(namespace: &str, name: &str) -> String {
        let mut s = String::with_capacity(namespace.len() + 1 + name.len());
        s.push_str(namespace);
        s.push('/');
        s.push_str(name);
        s
    }

    pub fn path(&self) -> String {
        Self::join(&self.namespace, &self.name)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// How fedraft authenticates to a member cluster. Stored in the log so every node's executors can
/// reach the cluster; the API must never return it, and `Debug` never prints it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Credentials {
    /// No credentials (e.g. a simulator or an anonymous endpoint).
    #[default]
    None,
    /// A bearer token sent with every request.
    BearerToken(String),
    /// A whole kubeconfig document (YAML text).
    Kubeconfig(String),
    /// One of the above, encrypted at the API edge (envelope encryption, `secrets/`). Core
    /// never opens it: it stores, hashes and snapshots the blob like any other bytes.
    /// Appended last so the entries written before it keep their encoding.
    Sealed(SealedCredentials),
}

/// Credentials encrypted under a fresh data key, itself encrypted (wrapped) by a key-encryption
/// key that only the nodes' configuration holds. Rotation re-wraps `wrapped_key` under a newer
/// key and leaves `nonce` and `ciphertext` unchanged.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SealedCredentials {
    /// Id of the key-encryption key that wrapped `wrapped_key` (names a key in the config).
    pub key_id: String,
    /// The data key, encrypted by the key-encryption key (nonce and tag included).
    pub wrapped_key: Vec<u8>,
    /// The nonce under which the data key encrypted `ciphertext`.
    pub nonce: Vec<u8>,
    /// The credentials (their kind and text), encrypted and authenticated by the data key.
    pub ciphertext: Vec<u8>,
}

impl fmt::Debug for SealedCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sealed(key {:?})", self.key_id)
    }
}

impl Credentials {
    /// True when the secret (if any) is stored in the clear.
    pub fn is_plaintext(&self) -> bool {
        matches!(
            self,
            Credentials::BearerToken(_) | Credentials::Kubeconfig(_)
        )
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::BearerToken(_) => f.write_str("BearerToken(<redacted>)"),
            Credentials::Kubeconfig(_) => f.write_str("Kubeconfig(<redacted>)"),
            Credentials::Sealed(s) => s.fmt(f),
        }
    }
}

/// A member cluster as the operator registers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    /// DNS-1123 label; the cluster's identity.
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Kubernetes API URL, e.g. `https://10.0.0.1:6443`.
    pub api_endpoint: String,
    #[serde(default)]
    pub credentials: Credentials,
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Log time without heartbeats after which a Ready cluster turns NotReady.
    #[serde(default = "default_failure_threshold")]
    pub failure_threshold_seconds: u64,
    /// Log time of uninterrupted heartbeats before a NotReady cluster is Ready again.
    #[serde(default = "default_success_threshold")]
    pub success_threshold_seconds: u64,
}

impl ClusterSpec {
    /// A spec with defaults for everything but the name and endpoint.
    pub fn new(name: impl Into<String>, api_endpoint: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            labels: BTreeMap::new(),
            api_endpoint: api_endpoint.into(),
            credentials: Credentials::None,
            taints: Vec::new(),
            failure_threshold_seconds: DEFAULT_FAILURE_THRESHOLD_SECONDS,
            success_threshold_seconds: DEFAULT_SUCCESS_THRESHOLD_SECONDS,
        }
    }
}

/// Cluster health as derived from heartbeats in log time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Health {
    /// Registered, never heard from.
    Unknown,
    Ready,
    NotReady,
}

/// Resources a cluster reports. `available` is what remains for fedraft: allocatable minus what
/// workloads fedraft does not manage already use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    pub allocatable: Resources,
    pub available: Resources,
}

/// What the state machine derived about a cluster from events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub health: Health,
    /// Log time at which `health` took its current value.
    pub health_since_ms: u64,
    pub last_heartbeat_ms: Option<u64>,
    /// While NotReady: log time of the first heartbeat of the current uninterrupted run.
    pub recovering_since_ms: Option<u64>,
    /// Log time of the last "unreachable" hint from an executor.
    pub last_unreachable_ms: Option<u64>,
    pub capacity: Option<Capacity>,
    pub capacity_reported_ms: Option<u64>,
}

/// A registered member cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    pub spec: ClusterSpec,
    /// No new replicas go here; existing ones stay.
    pub cordoned: bool,
    /// Drained: cordoned plus the `fedraft.io/drain` NoExecute taint, so everything leaves.
    pub drained: bool,
    /// `spec.taints` plus the drain taint when drained: what the scheduler sees.
    pub effective_taints: Vec<Taint>,
    pub status: ClusterStatus,
    /// Index of the entry that last changed this cluster.
    pub resource_version: u64,
}

/// A federated object as the user writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectSpec {
    /// Any Kubernetes manifest as JSON text: an object with apiVersion, kind and metadata.name.
    pub template: String,
    #[serde(default)]
    pub placement: Placement,
    #[serde(default)]
    pub overrides: Vec<Override>,
}

/// Fields parsed once from the template so scheduling never re-parses JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateInfo {
    /// `spec.replicas` of the template (1 when absent).
    pub replicas: u32,
    /// Sum of the container requests of one replica.
    pub per_replica: Resources,
}

/// One cluster an object is placed on, with what that cluster's executor last reported.
/// Every object holds one per cluster it runs on, so the names are boxed strings (no spare
/// capacity): 64 bytes, not 80. Serde encodes a `Box<str>` exactly as a `String`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacedCluster {
    pub cluster: Box<str>,
    pub replicas: u32,
    pub applied: bool,
    pub ready_replicas: u32,
    pub message: Option<Box<str>>,
    pub reported_ms: Option<u64>,
}

/// What the state machine derived about an object. Kept small on purpose (it exists for every
/// object); the full decision record goes to the caller in `Applied::decisions` for the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    /// Sorted by cluster name; clusters with zero replicas are absent. A slice, not a vector:
    /// its length is set by each decision, and every object holds one.
    pub clusters: Box<[PlacedCluster]>,
    /// Sum of the ready replicas reported by the placed clusters.
    pub ready_replicas: u32,
    /// Replicas the fleet could not hold at the last decision, with the scheduler's reason.
    /// Boxed, as the other fields rarely set: they kept every object's allocation a size class
    /// larger.
    pub shortfall: Option<Box<ShortfallStatus>>,
    /// One sentence explaining the last decision.
    pub decision_summary: Box<str>,
    /// Index of the entry that made the last decision.
    pub decided_index: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShortfallStatus {
    pub replicas: u32,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionType {
    /// Every wanted replica has a cluster.
    Scheduled,
    /// Some replicas have no cluster; the message says why.
    Unschedulable,
    /// Every placed cluster reported the object applied.
    Applied,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: ConditionType,
    pub status: bool,
    pub message: String,
}

/// A federated object: a template, where it may run, and where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FederatedObject {
    pub namespace: String,
    pub name: String,
    pub spec: ObjectSpec,
    pub template_info: TemplateInfo,
    pub status: ObjectStatus,
    /// Index of the entry that last changed this object (spec or status).
    pub resource_version: u64,
}

impl FederatedObject {
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(self.namespace.clone(), self.name.clone())
    }

    /// Current placement as the scheduler takes it.
    pub fn placement_map(&self) -> BTreeMap<String, u32> {
        self.status
            .clusters
            .iter()
            .map(|c| (String::from(&*c.cluster), c.replicas))
            .collect()
    }

    pub fn replicas_on(&self, cluster: &str) -> u32 {
        self.status
            .clusters
            .binary_search_by(|c| c.cluster.as_ref().cmp(cluster))
            .map(|i| self.status.clusters[i].replicas)
            .unwrap_or(0)
    }

    /// Conditions derived from the status, Kubernetes style.
    pub fn conditions(&self) -> Vec<Condition> {
        let s = &self.status;
        let scheduled = s.shortfall.is_none() && !s.clusters.is_empty();
        let applied = !s.clusters.is_empty() && s.clusters.iter().all(|c| c.applied);
        let pending: Vec<&str> = s
            .clusters
            .iter()
            .filter(|c| !c.applied)
            .map(|c| &*c.cluster)
            .collect();
        vec![
            Condition {
                type_: ConditionType::Scheduled,
                status: scheduled,
                message: s.decision_summary.to_string(),
            },
            Condition {
                type_: ConditionType::Unschedulable,
                status: s.shortfall.is_some(),
                message: s
                    .shortfall
                    .as_ref()
                    .map(|f| format!("{} replicas unschedulable: {}", f.replicas, f.message))
                    .unwrap_or_default(),
            },
            Condition {
                type_: ConditionType::Applied,
                status: applied,
                message: if pending.is_empty() {
                    String::new()
                } else {
                    format!("not yet applied on {}", pending.join(", "))
                },
            },
        ]
    }
}

/// A tenant: the namespaces it owns and what they may use in total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantSpec {
    /// DNS-1123 label.
    pub name: String,
    /// Namespaces owned by this tenant; a namespace belongs to at most one tenant.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Total requests of all objects in these namespaces (replicas x per-replica requests).
    /// A zero dimension is not limited.
    #[serde(default)]
    pub quota: Resources,
    /// When set, the quota is cut into slices of this size placed on clusters first (two-level
    /// scheduling); the tenant's objects then run only on clusters holding its slices.
    #[serde(default)]
    pub slice_size: Option<Resources>,
    /// Actors allowed to act in these namespaces (enforced by the API).
    #[serde(default)]
    pub members: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    /// Requests booked by the tenant's objects.
    pub used: Resources,
    /// Slices wanted: ceil(quota / slice size) over the most demanding dimension.
    pub slices_wanted: u32,
    /// Slices per cluster (two-level scheduling only).
    pub slices: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    pub spec: TenantSpec,
    pub status: TenantStatus,
    pub resource_version: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_print() {
        let c = Credentials::BearerToken("s3cr3t".into());
        assert!(!format!("{c:?}").contains("s3cr3t"));
        let mut spec = ClusterSpec::new("dc1", "https://x");
        spec.credentials = Credentials::Kubeconfig("apiVersion: v1 token: s3cr3t".into());
        assert!(!format!("{spec:?}").contains("s3cr3t"));
        let sealed = Credentials::Sealed(SealedCredentials {
            key_id: "k1".into(),
            wrapped_key: vec![7; 60],
            nonce: vec![1; 12],
            ciphertext: b"s3cr3t".to_vec(),
        });
        assert_eq!(format!("{sealed:?}"), r#"Sealed(key "k1")"#);
        assert!(!sealed.is_plaintext());
    }

    #[test]
    fn sealed_credentials_leave_older_encodings_alone() {
        // The variant index is the first byte: None 0, BearerToken 1, Kubeconfig 2 as before.
        let enc = |c: &Credentials| {
            bincode::serde::encode_to_vec(c, bincode::config::standard()).unwrap()
        };
        assert_eq!(enc(&Credentials::None), vec![0]);
        assert_eq!(enc(&Credentials::BearerToken("t".into())), vec![1, 1, b't']);
        assert_eq!(enc(&Credentials::Kubeconfig("k".into()))[0], 2);
        let sealed = Credentials::Sealed(SealedCredentials {
            key_id: "k".into(),
            wrapped_key: vec![9],
            nonce: vec![8],
            ciphertext: vec![7],
        });
        assert_eq!(enc(&sealed), vec![3, 1, b'k', 1, 9, 1, 8, 1, 7]);
    }

    #[test]
    fn a_placed_cluster_is_64_bytes() {
        // Every object holds one per cluster it is placed on: 80 bytes with `String` names.
        assert!(std::mem::size_of::<PlacedCluster>() <= 64);
    }

    #[test]
    fn placed_cluster_encodes_as_with_string_names() {
        // The layout logs and snapshots were written with.
        #[derive(Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Before {
            cluster: String,
            replicas: u32,
            applied: bool,
            ready_replicas: u32,
            message: Option<String>,
            reported_ms: Option<u64>,
        }
        let before = Before {
            cluster: "dc1".into(),
            replicas: 3,
            applied: true,
            ready_replicas: 2,
            message: Some("1 pending".into()),
            reported_ms: Some(7),
        };
        let now = PlacedCluster {
            cluster: before.cluster.as_str().into(),
            replicas: before.replicas,
            applied: before.applied,
            ready_replicas: before.ready_replicas,
            message: before.message.as_deref().map(Box::from),
            reported_ms: before.reported_ms,
        };
        let cfg = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(&before, cfg).unwrap();
        assert_eq!(bincode::serde::encode_to_vec(&now, cfg).unwrap(), bytes);
        let (read, _): (PlacedCluster, _) = bincode::serde::decode_from_slice(&bytes, cfg).unwrap();
        assert_eq!(read, now);
        let json = serde_json::to_string(&before).unwrap();
        assert_eq!(serde_json::to_string(&now).unwrap(), json);
        assert_eq!(serde_json::from_str::<PlacedCluster>(&json).unwrap(), now);
    }

    #[test]
    fn cluster_spec_defaults_from_json() {
        let spec: ClusterSpec =
            serde_json::from_str(r#"{"name":"dc1","apiEndpoint":"https://x"}"#).unwrap();
        assert_eq!(spec, ClusterSpec::new("dc1", "https://x"));
        assert!(
            serde_json::from_str::<ClusterSpec>(r#"{"name":"a","apiEndpoint":"h","x":1}"#).is_err()
        );
    }
}
