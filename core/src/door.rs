//! What the Kubernetes-compatible door stores beside the federated objects: the identity and
//! metadata of every resource template written through it, the Karmada-style policies that
//! place them, and KubeFed's documents (kept like policies, as written).
//!
//! One model, not two: a namespaced template *is* a [`FederatedObject`](crate::model::FederatedObject)
//! named [`ResourceKey::object_name`], whose spec core derives from the template and the policies
//! that select it; this module keeps only what a Kubernetes client reads back and the object
//! cannot hold (apiVersion, labels, generation, creation, the binding). A policy is kept as the
//! document the user wrote; core parses it with [`crate::karmada`] when it applies it.
//!
//! Encoding rule as in `model`: plain data that round-trips through bincode's serde mode.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::karmada::PolicyKind;
use crate::kubefed::{self, FederatedKind};

/// Identifies an object written through the door: API group (empty for the core group), kind,
/// namespace (empty for a cluster-scoped kind) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ResourceKey {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ResourceKey {
    /// The name of the federated object a namespaced template is: `kind.group:name` in lower
    /// case (`deployment.apps:web`, `configmap:settings`). No object put through the native API
    /// can have it (':' is not a DNS-subdomain character), and templates of two kinds with one
    /// name, the usual Deployment and Service pair, stay apart.
    pub fn object_name(&self) -> String {
        let mut s = String::with_capacity(self.kind.len() + self.group.len() + self.name.len() + 2);
        s.push_str(&self.kind.to_ascii_lowercase());
        if !self.group.is_empty() {
            s.push('.');
            s.push_str(&self.group);
        }
        s.push(':');
        s.push_str(&self.name);
        s
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        if self.namespace.is_empty() {
            write!(f, "{kind} {}", self.name)
        } else {
            write!(f, "{kind} {}/{}", self.namespace, self.name)
        }
    }
}

/// The kinds of document kept as written and read at apply: the four of `policy.karmada.io`,
/// then KubeFed's federated kinds and its ReplicaSchedulingPreference. Part of the log and the
/// snapshot: new variants go at the END.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PolicyKindTag {
    Propagation,
    ClusterPropagation,
    Override,
    ClusterOverride,
    /// A `types.kubefed.io` FederatedX (`crate::kubefed`).
    Federated(FederatedKind),
    /// A `scheduling.kubefed.io` ReplicaSchedulingPreference.
    ReplicaSchedulingPreference,
}

impl From<PolicyKind> for PolicyKindTag {
    fn from(k: PolicyKind) -> Self {
        match k {
            PolicyKind::Propagation => PolicyKindTag::Propagation,
            PolicyKind::ClusterPropagation => PolicyKindTag::ClusterPropagation,
            PolicyKind::Override => PolicyKindTag::Override,
            PolicyKind::ClusterOverride => PolicyKindTag::ClusterOverride,
        }
    }
}

impl PolicyKindTag {
    /// The Karmada policy kind, or None for a KubeFed document.
    pub fn karmada(self) -> Option<PolicyKind> {
        match self {
            PolicyKindTag::Propagation => Some(PolicyKind::Propagation),
            PolicyKindTag::ClusterPropagation => Some(PolicyKind::ClusterPropagation),
            PolicyKindTag::Override => Some(PolicyKind::Override),
            PolicyKindTag::ClusterOverride => Some(PolicyKind::ClusterOverride),
            PolicyKindTag::Federated(_) | PolicyKindTag::ReplicaSchedulingPreference => None,
        }
    }

    /// The document's `apiVersion` and `kind`.
    pub fn api_version_kind(self) -> (String, &'static str) {
        match self {
            PolicyKindTag::Federated(k) => (
                format!("{}/{}", kubefed::TYPES_GROUP, kubefed::TYPES_VERSION),
                k.kind(),
            ),
            PolicyKindTag::ReplicaSchedulingPreference => (
                format!(
                    "{}/{}",
                    kubefed::SCHEDULING_GROUP,
                    kubefed::SCHEDULING_VERSION
                ),
                kubefed::RSP_KIND,
            ),
            karmada => (
                format!("{}/{}", crate::karmada::GROUP, crate::karmada::VERSION),
                karmada.karmada().map_or("", PolicyKind::kind),
            ),
        }
    }

    /// The API group of the document.
    pub fn group(self) -> &'static str {
        match self {
            PolicyKindTag::Federated(_) => kubefed::TYPES_GROUP,
            PolicyKindTag::ReplicaSchedulingPreference => kubefed::SCHEDULING_GROUP,
            _ => crate::karmada::GROUP,
        }
    }

    /// Whether the document lives in a namespace.
    pub fn namespaced(self) -> bool {
        match self {
            PolicyKindTag::Federated(k) => k.namespaced(),
            PolicyKindTag::ReplicaSchedulingPreference => true,
            karmada => karmada.karmada().is_some_and(PolicyKind::namespaced),
        }
    }
}

/// Identifies a policy: its kind, namespace (empty for the cluster-wide kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PolicyRef {
    pub kind: PolicyKindTag,
    pub namespace: String,
    pub name: String,
}

/// What a Kubernetes client reads back about a template beyond its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateRecord {
    /// As written (`apps/v1`); the key holds the group only.
    pub api_version: String,
    /// `metadata.labels`, which policies' label selectors read.
    pub labels: BTreeMap<String, String>,
    /// Starts at 1 and grows when anything but metadata and status changes.
    pub generation: u64,
    /// Log time and index of the entry that created it (the index makes its uid).
    pub created_ms: u64,
    pub created_index: u64,
    /// The propagation policy that places it, if any selects it.
    pub bound_to: Option<PolicyRef>,
}

/// A policy as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// The document as JSON text, server-populated metadata removed.
    pub manifest: String,
    pub generation: u64,
    pub created_ms: u64,
    pub created_index: u64,
    /// Index of the entry that last changed it.
    pub resource_version: u64,
}

/// The door's replicated tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoorTables {
    pub templates: BTreeMap<ResourceKey, TemplateRecord>,
    pub policies: BTreeMap<PolicyRef, PolicyRecord>,
}

impl DoorTables {
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.policies.is_empty()
    }
}
