//! KubeFed's documents (`types.kubefed.io/v1beta1` FederatedX, `scheduling.kubefed.io/v1alpha1`
//! ReplicaSchedulingPreference; `core.kubefed.io/v1beta1` KubeFedCluster, `cluster`) read into a fedraft federated object, so that a KubeFed user's
//! manifests place what KubeFed placed without a rewrite.
//!
//! Owns: which federated kinds exist and what they federate ([`FederatedKind`]), reading a
//! FederatedX (`federated`) and an RSP (`rsp`) with errors naming the field, and the translation
//! onto an [`ObjectSpec`](crate::model::ObjectSpec): the template KubeFed would have sent,
//! KubeFed's placement rules and its per-cluster JSON-patch overrides. A field fedraft cannot
//! honour as KubeFed does is refused, never ignored.
//!
//! Must not: keep state or decide placement. The documents travel in the log as JSON text and
//! are read here at apply (`state/handlers/kubefed.rs` stores them beside Karmada's policies);
//! the scheduler decides. What this module accepts is replicated semantics: widen it only with a
//! new log entry version, and never refuse a document it once accepted.

mod cluster;
mod federated;
mod rsp;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use cluster::parse_kubefed_cluster;
pub use federated::{parse_federated, FederatedSpec};
pub use rsp::{parse_rsp, RspSpec};

/// The group of the FederatedX kinds, and the one version of it fedraft reads.
pub const TYPES_GROUP: &str = "types.kubefed.io";
pub const TYPES_VERSION: &str = "v1beta1";
/// The group of ReplicaSchedulingPreference.
pub const SCHEDULING_GROUP: &str = "scheduling.kubefed.io";
pub const SCHEDULING_VERSION: &str = "v1alpha1";
pub const RSP_KIND: &str = "ReplicaSchedulingPreference";

/// The first log entry version whose `PutResource` may carry a KubeFed document (before it,
/// such a manifest was an ordinary resource template, and replays as one).
pub const KUBEFED_SINCE: u16 = 5;

/// The federated kinds fedraft reads: those of KubeFed's default `kubefedctl enable` set that
/// its samples and e2e fixtures use, and ReplicaSet (an RSP's other target). Part of the log
/// (through `door::PolicyKindTag`): new kinds go at the END.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FederatedKind {
    Namespace,
    Deployment,
    ReplicaSet,
    ConfigMap,
    Secret,
    Service,
    Job,
    Ingress,
    ServiceAccount,
    ClusterRole,
    ClusterRoleBinding,
}

impl FederatedKind {
    pub const ALL: [FederatedKind; 11] = [
        FederatedKind::Namespace,
        FederatedKind::Deployment,
        FederatedKind::ReplicaSet,
        FederatedKind::ConfigMap,
        FederatedKind::Secret,
        FederatedKind::Service,
        FederatedKind::Job,
        FederatedKind::Ingress,
        FederatedKind::ServiceAccount,
        FederatedKind::ClusterRole,
        FederatedKind::ClusterRoleBinding,
    ];

    /// The federated kind of a document of `api_version`, if it is one fedraft reads.
    pub fn of(api_version: &str, kind: &str) -> Option<FederatedKind> {
        if api_version != format!("{TYPES_GROUP}/{TYPES_VERSION}") {
            return None;
        }
        Self::ALL.into_iter().find(|k| k.kind() == kind)
    }

    /// The kind it federates, and that kind's apiVersion as current clusters serve it.
    pub fn target(self) -> (&'static str, &'static str) {
        match self {
            FederatedKind::Namespace => ("v1", "Namespace"),
            FederatedKind::Deployment => ("apps/v1", "Deployment"),
            FederatedKind::ReplicaSet => ("apps/v1", "ReplicaSet"),
            FederatedKind::ConfigMap => ("v1", "ConfigMap"),
            FederatedKind::Secret => ("v1", "Secret"),
            FederatedKind::Service => ("v1", "Service"),
            FederatedKind::Job => ("batch/v1", "Job"),
            // KubeFed v0.10 federated `extensions/v1beta1`, which Kubernetes 1.22 removed; the
            // template is sent as networking.k8s.io/v1, the version members serve today.
            FederatedKind::Ingress => ("networking.k8s.io/v1", "Ingress"),
            FederatedKind::ServiceAccount => ("v1", "ServiceAccount"),
            FederatedKind::ClusterRole => ("rbac.authorization.k8s.io/v1", "ClusterRole"),
            FederatedKind::ClusterRoleBinding => {
                ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
            }
        }
    }

    /// `Federated` and the target's kind.
    pub fn kind(self) -> &'static str {
        match self {
            FederatedKind::Namespace => "FederatedNamespace",
            FederatedKind::Deployment => "FederatedDeployment",
            FederatedKind::ReplicaSet => "FederatedReplicaSet",
            FederatedKind::ConfigMap => "FederatedConfigMap",
            FederatedKind::Secret => "FederatedSecret",
            FederatedKind::Service => "FederatedService",
            FederatedKind::Job => "FederatedJob",
            FederatedKind::Ingress => "FederatedIngress",
            FederatedKind::ServiceAccount => "FederatedServiceAccount",
            FederatedKind::ClusterRole => "FederatedClusterRole",
            FederatedKind::ClusterRoleBinding => "FederatedClusterRoleBinding",
        }
    }

    /// The resource name the door serves it under (`federateddeployments`).
    pub fn plural(self) -> String {
        format!("{}s", self.kind().to_ascii_lowercase())
    }

    /// Whether the FederatedX object itself lives in a namespace. FederatedNamespace does (in
    /// the namespace it federates); the federated cluster-scoped kinds do not.
    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            FederatedKind::ClusterRole | FederatedKind::ClusterRoleBinding
        )
    }

    /// Whether the target kind lives in a namespace.
    pub fn namespaced_target(self) -> bool {
        !matches!(
            self,
            FederatedKind::Namespace
                | FederatedKind::ClusterRole
                | FederatedKind::ClusterRoleBinding
        )
    }

    /// Whether a ReplicaSchedulingPreference may target it.
    pub fn schedulable(self) -> bool {
        matches!(self, FederatedKind::Deployment | FederatedKind::ReplicaSet)
    }
}
