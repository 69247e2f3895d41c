//! Karmada's and KubeFed's internal kinds: objects their own controllers write or are configured
//! by (bindings, Works, the search cache's registries, KubeFed's controller
//! configuration). fedraft does that work inside its state machine and executors, so it keeps
//! none of them; it still serves the kinds in discovery, so that kubectl reaches the server and a
//! user applying one reads which kind it is, why fedraft does not need it and what does its job
//! in fedraft, instead of kubectl's "could not find the requested resource".
//!
//! Owns: the list of those kinds and their explanations. Must not: store, accept or derive
//! anything from them. Reads answer as for a kind with no objects (get: 404, list: empty); every
//! write is refused with 405 MethodNotAllowed.

use fedraft_kubeapi::resource::ResourceDef;

use super::errors::Refusal;

/// One internal kind: (group, version, plural, kind, namespaced, why fedraft does not need it).
type Kind = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static str,
);

const BINDING: &str = "Karmada's scheduler writes it; in fedraft the binding of a resource \
    template is derived in the replicated log whenever the template or a policy is written, so \
    there is nothing to write: `fedraft audit explain NAMESPACE/kind.group:name` lists where a \
    template is placed and which policy placed it";

const WORK: &str = "Karmada's controllers write one per member cluster; fedraft's executors apply \
    each member's manifests straight from the replicated state";

const REGISTRY: &str = "it asks Karmada's search component to cache member objects; fedraft keeps \
    no such cache: the executors report each template's status on the members into the log \
    (`kubectl get` of the template shows it), and member clusters are read directly";

const KUBEFED_CONFIG: &str = "it configures KubeFed's controllers, which fedraft does not run: \
    leader election, timeouts and health checks are the fedraft node's own settings \
    (`fedraft/examples/node.toml`, `fedraft health-policy`)";

const TYPE_CONFIG: &str = "fedraft federates a fixed set of KubeFed types, served from the start \
    (FederatedNamespace, FederatedDeployment, FederatedReplicaSet, FederatedConfigMap, \
    FederatedSecret, FederatedService, FederatedJob, FederatedIngress, FederatedServiceAccount, \
    FederatedClusterRole, FederatedClusterRoleBinding); any other kind is federated by applying \
    it as a resource template with a Karmada PropagationPolicy";

/// The door's discovery lists one version per group, so `work.karmada.io` is served at
/// v1alpha1 (Karmada's Work, and the bindings as its samples write them); Karmada's current
/// bindings are v1alpha2, which kubectl reports as not served.
const KINDS: &[Kind] = &[
    (
        "work.karmada.io",
        "v1alpha1",
        "resourcebindings",
        "ResourceBinding",
        true,
        BINDING,
    ),
    (
        "work.karmada.io",
        "v1alpha1",
        "clusterresourcebindings",
        "ClusterResourceBinding",
        false,
        BINDING,
    ),
    ("work.karmada.io", "v1alpha1", "works", "Work", true, WORK),
    (
        "search.karmada.io",
        "v1alpha1",
        "resourceregistries",
        "ResourceRegistry",
        false,
        REGISTRY,
    ),
    (
        "core.kubefed.io",
        "v1beta1",
        "kubefedconfigs",
        "KubeFedConfig",
        true,
        KUBEFED_CONFIG,
    ),
    (
        "core.kubefed.io",
        "v1beta1",
        "federatedtypeconfigs",
        "FederatedTypeConfig",
        true,
        TYPE_CONFIG,
    ),
];

/// The kinds, with the reason each is not kept.
pub fn defs() -> impl Iterator<Item = (ResourceDef, &'static str)> {
    KINDS
        .iter()
        .map(|&(group, version, plural, kind, namespaced, why)| {
            let mut def = ResourceDef::new(group, version, plural, kind)
                .verbs(&["create", "delete", "get", "list", "patch", "update"]);
            if !namespaced {
                def = def.cluster_scoped();
            }
            (def, why)
        })
}

/// The answer to any write of an internal kind.
pub fn refusal(def: &ResourceDef, why: &str) -> Refusal {
    fedraft_kubeapi::ApiError::MethodNotAllowed(format!(
        "fedraft does not keep {} ({}): {why}",
        def.kind,
        def.api_version()
    ))
    .into()
}
