//! What the door serves: the resource types (built-in Kubernetes kinds as resource templates,
//! namespaced and cluster-scoped,
//! fedraft's own kinds as read views, Karmada's policy kinds, KubeFed's federated kinds and
//! ReplicaSchedulingPreference, the member cluster documents of both, and their internal kinds,
//! whose writes are refused saying why) and which store answers each.
//!
//! Discovery, routing, reads and writes all look a type up here, so a type listed here is served
//! end to end. Must not hold objects or build documents (those are `fedraft_kubeapi`'s).

use std::sync::LazyLock;

use fedraft_core::door::{self, PolicyKindTag};
use fedraft_core::karmada;
use fedraft_core::kubefed::{self, FederatedKind};
use fedraft_kubeapi::resource::{self, ResourceDef};

/// fedraft's own API group, where its clusters and tenants are served read-only and its user
/// database read and written.
pub const FEDRAFT_GROUP: &str = "fedraft.io";
pub const FEDRAFT_VERSION: &str = "v1alpha1";

/// Where a type's objects live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// A resource template: a door template record plus its federated object.
    Template,
    /// A namespace: a `Namespace` template (in its own namespace) or a namespace in use.
    Namespace,
    /// One of Karmada's four policy kinds.
    Policy(PolicyKindTag),
    /// A member cluster of the native model (read-only).
    Cluster,
    /// A tenant of the native model (read-only).
    Tenant,
    /// A user or service account of the replicated user database (`super::users`).
    User,
    /// An API token of the user database, named by its id (`super::users`).
    UserToken,
    /// One of Karmada's or KubeFed's internal kinds (`super::internal`): served so that a write
    /// is refused saying why fedraft does not need it; holds that reason.
    Internal(&'static str),
}

/// One served type.
#[derive(Debug, Clone)]
pub struct Served {
    pub def: ResourceDef,
    pub store: Store,
    /// A custom resource version's `additionalPrinterColumns` (empty: NAME and AGE, the CRD
    /// default); None for every other type, printed with its own columns.
    pub columns: Option<Vec<serde_json::Value>>,
}

const READ_ONLY: &[&str] = &["get", "list", "watch"];
/// The verbs of the documents kept as written in the policy table: what kubectl's apply, edit,
/// delete and `get -w` use.
const DOCUMENT_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// Built-in kinds not served: nodes are the members' own. (The kinds that CustomResourceDefinitions
/// define are served too, but read from the state per request: `crds`.)
const NOT_TEMPLATES: &[&str] = &["nodes"];

/// Everything the door serves, built-in kinds first.
pub static CATALOG: LazyLock<Vec<Served>> = LazyLock::new(build);

/// The definitions alone, for the discovery documents.
pub static DEFS: LazyLock<Vec<ResourceDef>> =
    LazyLock::new(|| CATALOG.iter().map(|s| s.def.clone()).collect());

fn build() -> Vec<Served> {
    let mut out = Vec::new();
    for r in resource::builtin() {
        if NOT_TEMPLATES.contains(&r.plural.as_str()) {
            continue;
        }
        let mut def = r.clone();
        // Only the scale subresource is served (kubectl scale); status is derived, never written.
        def.subresources.retain(|s| s == "scale");
        let store = if r.group.is_empty() && r.plural == "namespaces" {
            // Patching or replacing a namespace that exists only because something uses it
            // stores it as a template (Helm applies the namespace it creates).
            def.verbs = [
                "create", "delete", "get", "list", "patch", "update", "watch",
            ]
            .map(String::from)
            .to_vec();
            Store::Namespace
        } else {
            Store::Template
        };
        out.push(Served {
            def,
            store,
            columns: None,
        });
    }
    let fedraft = |plural: &str, kind: &str, short: &[&str]| {
        ResourceDef::new(FEDRAFT_GROUP, FEDRAFT_VERSION, plural, kind)
            .cluster_scoped()
            .short_names(short)
            .verbs(READ_ONLY)
    };
    out.push(Served {
        def: fedraft("clusters", "Cluster", &[]),
        store: Store::Cluster,
        columns: None,
    });
    out.push(Served {
        def: fedraft("tenants", "Tenant", &[]),
        store: Store::Tenant,
        columns: None,
    });
    // The user database: an administrator's to write, every non-tenant role's to read.
    out.push(Served {
        def: ResourceDef::new(FEDRAFT_GROUP, FEDRAFT_VERSION, "users", "User")
            .cluster_scoped()
            .verbs(&["create", "delete", "get", "list", "patch", "update"]),
        store: Store::User,
        columns: None,
    });
    out.push(Served {
        def: ResourceDef::new(FEDRAFT_GROUP, FEDRAFT_VERSION, "usertokens", "UserToken")
            .cluster_scoped()
            .verbs(&["create", "delete", "get", "list"]),
        store: Store::UserToken,
        columns: None,
    });
    let policy = |plural: &str, kind: &str, short: &str, tag: PolicyKindTag| {
        let mut def = ResourceDef::new(karmada::GROUP, karmada::VERSION, plural, kind)
            .short_names(&[short])
            .verbs(DOCUMENT_VERBS);
        if matches!(
            tag,
            PolicyKindTag::ClusterPropagation | PolicyKindTag::ClusterOverride
        ) {
            def = def.cluster_scoped();
        }
        Served {
            def,
            store: Store::Policy(tag),
            columns: None,
        }
    };
    out.push(policy(
        "propagationpolicies",
        "PropagationPolicy",
        "pp",
        PolicyKindTag::Propagation,
    ));
    out.push(policy(
        "clusterpropagationpolicies",
        "ClusterPropagationPolicy",
        "cpp",
        PolicyKindTag::ClusterPropagation,
    ));
    out.push(policy(
        "overridepolicies",
        "OverridePolicy",
        "op",
        PolicyKindTag::Override,
    ));
    out.push(policy(
        "clusteroverridepolicies",
        "ClusterOverridePolicy",
        "cop",
        PolicyKindTag::ClusterOverride,
    ));
    // Taints member clusters on their conditions (`fedraft_core::karmada::TAINT_POLICIES_SINCE`).
    out.push(Served {
        def: ResourceDef::new(
            karmada::GROUP,
            karmada::VERSION,
            "clustertaintpolicies",
            karmada::TAINT_POLICY_KIND,
        )
        .cluster_scoped()
        .verbs(DOCUMENT_VERBS),
        store: Store::Policy(PolicyKindTag::ClusterTaint),
        columns: None,
    });
    // KubeFed's documents are kept as written, like the policies, and served with the same
    // verbs.
    let kubefed_def = |group: &str, version: &str, plural: &str, kind: &str| {
        ResourceDef::new(group, version, plural, kind).verbs(DOCUMENT_VERBS)
    };
    for k in FederatedKind::ALL {
        let mut def = kubefed_def(
            kubefed::TYPES_GROUP,
            kubefed::TYPES_VERSION,
            &k.plural(),
            k.kind(),
        );
        if !k.namespaced() {
            def = def.cluster_scoped();
        }
        out.push(Served {
            def,
            store: Store::Policy(PolicyKindTag::Federated(k)),
            columns: None,
        });
    }
    out.push(Served {
        def: kubefed_def(
            kubefed::SCHEDULING_GROUP,
            kubefed::SCHEDULING_VERSION,
            "replicaschedulingpreferences",
            kubefed::RSP_KIND,
        )
        .short_names(&["rsp"]),
        store: Store::Policy(PolicyKindTag::ReplicaSchedulingPreference),
        columns: None,
    });
    // Member cluster documents: writing one registers a fedraft cluster (`members`).
    out.push(Served {
        def: kubefed_def(
            door::KARMADA_CLUSTER_GROUP,
            door::KARMADA_CLUSTER_VERSION,
            "clusters",
            "Cluster",
        )
        .cluster_scoped()
        // What external health checkers write, for taint policies (`cluster_status`).
        .subresources(&["status"]),
        store: Store::Policy(PolicyKindTag::KarmadaCluster),
        columns: None,
    });
    out.push(Served {
        def: kubefed_def(
            door::KUBEFED_CORE_GROUP,
            door::KUBEFED_CORE_VERSION,
            "kubefedclusters",
            "KubeFedCluster",
        ),
        store: Store::Policy(PolicyKindTag::KubeFedCluster),
        columns: None,
    });
    out.extend(super::internal::defs().map(|(def, why)| Served {
        def,
        store: Store::Internal(why),
        columns: None,
    }));
    out
}

/// Whether a group is one of the catalog's: its types never come from a CustomResourceDefinition.
pub fn serves_group(group: &str) -> bool {
    CATALOG.iter().any(|s| s.def.group == group)
}

/// The type served at `group`/`version`/`plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Served> {
    CATALOG
        .iter()
        .find(|s| s.def.group == group && s.def.version == version && s.def.plural == plural)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_once_and_every_group_listed() {
        for s in CATALOG.iter() {
            let same = CATALOG
                .iter()
                .filter(|x| x.def.key() == s.def.key())
                .count();
            assert_eq!(same, 1, "{}", s.def.key());
        }
        let groups: Vec<&str> = fedraft_kubeapi::discovery::groups(&DEFS)
            .into_iter()
            .map(|(g, _)| g)
            .collect();
        for g in [
            "apps",
            "batch",
            FEDRAFT_GROUP,
            karmada::GROUP,
            kubefed::TYPES_GROUP,
            kubefed::SCHEDULING_GROUP,
        ] {
            assert!(groups.contains(&g), "{g} missing from {groups:?}");
        }
        assert_eq!(
            find("", "v1", "namespaces").unwrap().store,
            Store::Namespace
        );
        assert!(find("", "v1", "nodes").is_none());
        let pp = find(karmada::GROUP, karmada::VERSION, "propagationpolicies").unwrap();
        assert!(pp.def.namespaced);
        let cpp = find(
            karmada::GROUP,
            karmada::VERSION,
            "clusterpropagationpolicies",
        )
        .unwrap();
        assert_eq!(cpp.store, Store::Policy(PolicyKindTag::ClusterPropagation));
        assert!(!cpp.def.namespaced);
        // Every document of the policy table is watched through the ring.
        for s in CATALOG.iter() {
            if let Store::Policy(tag) = s.store {
                assert!(s.def.verbs.iter().any(|v| v == "watch"), "{tag:?}");
            }
        }
        assert!(find("apps", "v1", "deployments")
            .unwrap()
            .def
            .has_subresource("scale"));
        let fd = find(
            kubefed::TYPES_GROUP,
            kubefed::TYPES_VERSION,
            "federateddeployments",
        )
        .unwrap();
        assert_eq!(
            fd.store,
            Store::Policy(PolicyKindTag::Federated(FederatedKind::Deployment))
        );
        assert!(fd.def.namespaced);
        let fcr = find(
            kubefed::TYPES_GROUP,
            kubefed::TYPES_VERSION,
            "federatedclusterroles",
        )
        .unwrap();
        assert!(!fcr.def.namespaced);
        let rb = find("work.karmada.io", "v1alpha1", "resourcebindings").unwrap();
        assert!(matches!(rb.store, Store::Internal(why) if why.contains("fedraft audit explain")));
        assert!(find("search.karmada.io", "v1alpha1", "resourceregistries").is_some());
        let ctp = find(karmada::GROUP, karmada::VERSION, "clustertaintpolicies").unwrap();
        assert_eq!(ctp.store, Store::Policy(PolicyKindTag::ClusterTaint));
        assert!(!ctp.def.namespaced);
        assert!(find("core.kubefed.io", "v1beta1", "kubefedconfigs").is_some());
    }
}
