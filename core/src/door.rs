//! What the Kubernetes-compatible door stores beside the federated objects: the identity and
//! metadata of every resource template written through it, the Karmada-style policies that
//! place them, KubeFed's documents (kept like policies, as written), and the member cluster
//! documents (Karmada's `Cluster`, `KubeFedCluster`) with the Secrets holding their
//! credentials, kept sealed in the same table ([`MemberDoc`], `state/handlers/members.rs`).
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
use serde_json::Value;

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
    /// The namespace of the federated object this template is: its own, or
    /// [`CLUSTER_SCOPE_NAMESPACE`] for a cluster-scoped template (empty `namespace`).
    pub fn object_namespace(&self) -> &str {
        if self.namespace.is_empty() {
            CLUSTER_SCOPE_NAMESPACE
        } else {
            &self.namespace
        }
    }

    /// Whether this is a CustomResourceDefinition template.
    pub fn is_crd(&self) -> bool {
        self.group == CRD_GROUP && self.kind == CRD_KIND
    }

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
    /// A `cluster.karmada.io` Cluster: a member cluster registered through the door.
    KarmadaCluster,
    /// A `core.kubefed.io` KubeFedCluster: the same for KubeFed's documents.
    KubeFedCluster,
    /// A v1 Secret in a [`CREDENTIALS_NAMESPACES`] namespace: a member's credentials, kept
    /// sealed beside the documents that name it and never a resource template.
    MemberSecret,
    /// A `policy.karmada.io` ClusterTaintPolicy: taints clusters on their conditions
    /// (`crate::karmada::TAINT_POLICIES_SINCE`).
    ClusterTaint,
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
            _ => None,
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
            PolicyKindTag::KarmadaCluster => (
                format!("{KARMADA_CLUSTER_GROUP}/{KARMADA_CLUSTER_VERSION}"),
                "Cluster",
            ),
            PolicyKindTag::KubeFedCluster => (
                format!("{KUBEFED_CORE_GROUP}/{KUBEFED_CORE_VERSION}"),
                "KubeFedCluster",
            ),
            PolicyKindTag::MemberSecret => ("v1".to_string(), "Secret"),
            PolicyKindTag::ClusterTaint => (
                format!("{}/{}", crate::karmada::GROUP, crate::karmada::VERSION),
                crate::karmada::TAINT_POLICY_KIND,
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
            PolicyKindTag::KarmadaCluster => KARMADA_CLUSTER_GROUP,
            PolicyKindTag::KubeFedCluster => KUBEFED_CORE_GROUP,
            PolicyKindTag::MemberSecret => "",
            _ => crate::karmada::GROUP,
        }
    }

    /// Whether the document lives in a namespace.
    pub fn namespaced(self) -> bool {
        match self {
            PolicyKindTag::Federated(k) => k.namespaced(),
            PolicyKindTag::ReplicaSchedulingPreference
            | PolicyKindTag::KubeFedCluster
            | PolicyKindTag::MemberSecret => true,
            PolicyKindTag::KarmadaCluster | PolicyKindTag::ClusterTaint => false,
            karmada => karmada.karmada().is_some_and(PolicyKind::namespaced),
        }
    }
}

impl PolicyKindTag {
    /// The kind of a member cluster document of `api_version` and `kind`, if it is one.
    pub fn member_doc(api_version: &str, kind: &str) -> Option<PolicyKindTag> {
        let karmada = format!("{KARMADA_CLUSTER_GROUP}/{KARMADA_CLUSTER_VERSION}");
        let kubefed = format!("{KUBEFED_CORE_GROUP}/{KUBEFED_CORE_VERSION}");
        match (api_version, kind) {
            (av, "Cluster") if av == karmada => Some(PolicyKindTag::KarmadaCluster),
            (av, "KubeFedCluster") if av == kubefed => Some(PolicyKindTag::KubeFedCluster),
            _ => None,
        }
    }

    /// Whether the document registers a member cluster or holds its credentials: written with
    /// the member commands, never with `PutResource`, and an administrator's only.
    pub fn is_member(self) -> bool {
        matches!(
            self,
            PolicyKindTag::KarmadaCluster
                | PolicyKindTag::KubeFedCluster
                | PolicyKindTag::MemberSecret
        )
    }
}

/// The first log entry version whose door stores cluster-scoped templates (ClusterRole,
/// StorageClass, CustomResourceDefinition, cluster-scoped custom resources...); before it a
/// template without a namespace was refused, and still is when replayed.
pub const CLUSTER_TEMPLATES_SINCE: u16 = 9;

/// The namespace the federated objects of cluster-scoped templates live in. A template's
/// identity (and so what members get) has no namespace; the native model needs one, and this
/// one is reserved: the door stores no namespaced template in it and never lists it as a
/// namespace, and executors write cluster-scoped kinds without it.
pub const CLUSTER_SCOPE_NAMESPACE: &str = "fedraft-cluster-scoped";

/// The annotation in which the door keeps a written object's `managedFields` (server-side
/// apply's field ownership): a manifest's metadata holds what the user wrote, and this is the
/// one server-kept field a later write needs. The door sets it and lifts it back into
/// `metadata.managedFields` when it answers; rendering for members leaves it out.
pub const MANAGED_FIELDS_ANNOTATION: &str = "fedraft.io/managed-fields";

/// Log entry version from which a `Namespace` template stored in the namespace it names (as
/// the door stores `kubectl create ns` and Helm's `--create-namespace`) is admitted without
/// the admission policy's `clusterScopedKinds` listing `Namespace`: it is the container every
/// other template of the door needs, and whoever may write in that namespace may declare it.
/// It reaches members only where a policy places it or something in it is placed.
pub const NAMESPACES_SINCE: u16 = 13;

/// Log entry version from which a template without a replica count (a Service, a ConfigMap, a
/// DaemonSet...) bound to a policy that divides replicas goes to every cluster the policy
/// selects, as Karmada schedules it, instead of taking one replica's worth of place on one
/// cluster ([`undivided_without_replicas`]).
pub const UNDIVIDED_WITHOUT_REPLICAS_SINCE: u16 = 13;

/// A policy's placement as it applies to `template` (JSON text, of `kind`, or "" when the kind
/// is not at hand and the template decides) in an entry of
/// `version`: a dividing placement duplicates a template that has no replicas to divide.
pub fn undivided_without_replicas(
    placement: crate::policy::Placement,
    (kind, template): (&str, &str),
    version: u16,
) -> crate::policy::Placement {
    // Re-derivation passes every bound template through here: the kinds that always carry
    // replicas (the Deployments a dividing policy is mostly for) need no parse.
    if version < UNDIVIDED_WITHOUT_REPLICAS_SINCE
        || !placement.replicas.mode.divides()
        || crate::render::kind_carries_replicas(kind)
    {
        return placement;
    }
    match serde_json::from_str::<Value>(template) {
        Ok(doc) => undivided_for(placement, &doc, version),
        Err(_) => placement,
    }
}

/// [`undivided_without_replicas`] for a template already parsed.
pub fn undivided_for(
    mut placement: crate::policy::Placement,
    doc: &Value,
    version: u16,
) -> crate::policy::Placement {
    use crate::policy::{ReplicaMode, ReplicaPolicy};
    if version >= UNDIVIDED_WITHOUT_REPLICAS_SINCE
        && placement.replicas.mode.divides()
        && !crate::render::carries_replicas(doc)
    {
        placement.replicas = ReplicaPolicy {
            mode: ReplicaMode::Duplicated,
            division: None,
        };
    }
    placement
}

/// Whether `admitted` is a `Namespace` template in the namespace it names.
pub fn is_own_namespace(admitted: &crate::admission::Admitted) -> bool {
    admitted.group().is_empty()
        && admitted.kind == "Namespace"
        && admitted.name == admitted.namespace
}

/// Log entry version from which templates that differ only in [`MANAGED_FIELDS_ANNOTATION`]
/// are one revision ([`same_revision`]): who last wrote a field is not a change to roll out.
pub const MANAGED_FIELDS_SINCE: u16 = 12;

/// Whether two stored templates are one revision: equal, or, from [`MANAGED_FIELDS_SINCE`],
/// equal but for the managed-fields annotation. A template that does not parse is only ever
/// its own revision.
pub fn same_revision(a: &str, b: &str, version: u16) -> bool {
    if a == b {
        return true;
    }
    // Parsing is for templates that carry the annotation; any other difference is real.
    let annotated = |t: &str| t.contains(MANAGED_FIELDS_ANNOTATION);
    if version < MANAGED_FIELDS_SINCE || !(annotated(a) || annotated(b)) {
        return false;
    }
    match (without_managed_fields(a), without_managed_fields(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// The template with the managed-fields annotation (and an annotation map it leaves empty) out.
fn without_managed_fields(template: &str) -> Option<Value> {
    let mut doc: Value = serde_json::from_str(template).ok()?;
    if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
        let emptied = match meta.get_mut("annotations").and_then(Value::as_object_mut) {
            Some(a) => a.remove(MANAGED_FIELDS_ANNOTATION).is_some() && a.is_empty(),
            None => false,
        };
        if emptied {
            meta.remove("annotations");
        }
    }
    Some(doc)
}

/// The group and kind of a CustomResourceDefinition: stored as a cluster-scoped template, read
/// by the door to serve the kind it defines ([`crd_names`]).
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
pub const CRD_KIND: &str = "CustomResourceDefinition";

/// The group and kind a CustomResourceDefinition manifest defines (`spec.group`,
/// `spec.names.kind`), if it names both.
pub fn crd_names(manifest: &serde_json::Value) -> Option<(&str, &str)> {
    let group = manifest.pointer("/spec/group")?.as_str()?;
    let kind = manifest.pointer("/spec/names/kind")?.as_str()?;
    Some((group, kind))
}

/// Whether a template is one of Helm's release records: a v1 Secret labelled `owner: helm`
/// (Helm 3 writes one per release revision, of type `helm.sh/release.v1`). From
/// [`CLUSTER_TEMPLATES_SINCE`] on, only a policy selector naming it binds one, so a policy
/// selecting every Secret of a namespace does not copy release records to members.
pub fn is_helm_release(group: &str, kind: &str, labels: &BTreeMap<String, String>) -> bool {
    group.is_empty() && kind == "Secret" && labels.get("owner").is_some_and(|o| o == "helm")
}

/// Karmada's cluster API group and the version of it fedraft reads.
pub const KARMADA_CLUSTER_GROUP: &str = "cluster.karmada.io";
pub const KARMADA_CLUSTER_VERSION: &str = "v1alpha1";
/// KubeFed's core API group (KubeFedCluster) and the version of it fedraft reads.
pub const KUBEFED_CORE_GROUP: &str = "core.kubefed.io";
pub const KUBEFED_CORE_VERSION: &str = "v1beta1";

/// The namespaces whose Secrets are members' credentials: where `karmadactl join` and
/// `kubefedctl join` write them. A Secret there is sealed at the API edge and kept beside the
/// cluster documents; it is never a resource template, so no policy can propagate it.
pub const CREDENTIALS_NAMESPACES: [&str; 2] = ["karmada-cluster", "kube-federation-system"];

pub fn is_credentials_namespace(namespace: &str) -> bool {
    CREDENTIALS_NAMESPACES.contains(&namespace)
}

/// The first log entry version with the member commands (`PutMemberCluster`,
/// `PutMemberSecret`); before it a Secret in a credentials namespace or a KubeFedCluster was an
/// ordinary resource template, and replays as one.
pub const MEMBERS_SINCE: u16 = 8;

/// The annotation of a PropagationPolicy or ClusterPropagationPolicy that gives the templates it
/// binds a rollout strategy (the JSON of [`RolloutStrategy`], as the native API's `rollout`
/// field). Karmada has no rollout API; an annotation keeps its documents valid for Karmada.
pub const ROLLOUT_STRATEGY_ANNOTATION: &str = "fedraft.io/rollout-strategy";

/// The first log entry version whose door templates roll out under their propagation policy's
/// strategy ([`ROLLOUT_STRATEGY_ANNOTATION`]), and whose Deployments' `spec.paused` pauses and
/// resumes that rollout instead of reaching the members, and whose `Rollout` commands (pause,
/// resume, abort, undo, promote) may name a template's object (`deployment.apps:web`). Older
/// entries ignored the annotation (it was any annotation), stored `spec.paused` in the template
/// and refused such a name, and replay so.
pub const DOOR_ROLLOUTS_SINCE: u16 = 11;

/// The strategy a policy document's [`ROLLOUT_STRATEGY_ANNOTATION`] carries: None without the
/// annotation, an error naming the field when it is not a valid strategy.
pub fn rollout_annotation(
    manifest: &serde_json::Value,
) -> Result<Option<crate::rollout::RolloutStrategy>, crate::error::FieldError> {
    let field = format!("metadata.annotations[{ROLLOUT_STRATEGY_ANNOTATION}]");
    let Some(raw) = manifest
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(ROLLOUT_STRATEGY_ANNOTATION))
    else {
        return Ok(None);
    };
    let text = raw
        .as_str()
        .ok_or_else(|| crate::error::FieldError::new(&field, "must be a string"))?;
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        crate::error::FieldError::new(
            &field,
            format!("not JSON ({e}); write it as the native rollout field, e.g. {{\"type\":\"Progressive\",\"maxConcurrency\":{{\"count\":1}}}}"),
        )
    })?;
    let strategy: crate::rollout::RolloutStrategy = crate::karmada::typed(&doc, &field)?;
    strategy.validate(&field)?;
    Ok(Some(strategy))
}

/// The Secret a member cluster document names: its namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

/// A member cluster as a Karmada `Cluster` or a `KubeFedCluster` describes it, read and checked
/// (`karmada::parse_cluster`, `kubefed::parse_kubefed_cluster`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDoc {
    /// `metadata.name`: the fedraft cluster's name.
    pub name: String,
    pub api_endpoint: String,
    pub secret: SecretRef,
    /// `metadata.labels`, with Karmada's provider, region and zone as the labels its field
    /// selectors read (`karmada::PROVIDER_LABEL`, ...).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<crate::policy::Taint>,
    /// KubeFed's `spec.caBundle` (base64, as written): the CA the member's API presents, which
    /// KubeFed keeps in the cluster document rather than in the Secret.
    pub ca_bundle: Option<String>,
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

/// The member document of kind `tag` in `manifest`, read and checked; None for a tag that is
/// not a cluster document.
pub fn parse_member(
    tag: PolicyKindTag,
    manifest: &serde_json::Value,
) -> Option<Result<MemberDoc, crate::error::FieldError>> {
    match tag {
        PolicyKindTag::KarmadaCluster => Some(crate::karmada::parse_cluster(manifest)),
        PolicyKindTag::KubeFedCluster => Some(kubefed::parse_kubefed_cluster(manifest)),
        _ => None,
    }
}

/// Where a stored member Secret keeps its (sealed) credentials: a top-level field of the stored
/// document beside the Secret's metadata, which the door never renders.
pub const SECRET_CREDENTIALS_FIELD: &str = "fedraftCredentials";

/// The stored text of a member Secret: `secret` (without `data` or `stringData`) with
/// `credentials` in [`SECRET_CREDENTIALS_FIELD`].
pub fn member_secret_manifest(
    secret: &serde_json::Value,
    credentials: &crate::model::Credentials,
) -> String {
    let mut doc = secret.clone();
    if let Some(obj) = doc.as_object_mut() {
        // A Credentials value is plain data: serializing it to a JSON value cannot fail.
        let creds = serde_json::to_value(credentials).unwrap_or(serde_json::Value::Null);
        obj.insert(SECRET_CREDENTIALS_FIELD.to_string(), creds);
    }
    doc.to_string()
}

/// The credentials a stored member Secret holds, None if the record is not one.
pub fn member_secret_credentials(record: &PolicyRecord) -> Option<crate::model::Credentials> {
    let doc: serde_json::Value = serde_json::from_str(&record.manifest).ok()?;
    serde_json::from_value(doc.get(SECRET_CREDENTIALS_FIELD)?.clone()).ok()
}
