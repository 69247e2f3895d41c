//! The resource catalog and the discovery documents built from it.
//!
//! The catalog is the subset of Kubernetes' built-in types the simulator serves, taken from
//! `fedraft_kubeapi::resource::builtin` and trimmed to what the simulator implements (the
//! `status` subresource only; no categories, so discovery answers as it always has). Routing,
//! storage and discovery all read it, so a kind listed here is served end to end (stored
//! generically when no controller cares about it). The documents themselves are
//! `fedraft_kubeapi::discovery`'s. This module must not hold objects.

use std::sync::LazyLock;

use fedraft_kubeapi::discovery as docs;
use serde_json::Value;

pub use fedraft_kubeapi::resource::ResourceDef;

/// What the simulator serves, as (group, plural) of built-in types. Only namespaces, nodes,
/// deployments, statefulsets and services have behaviour beyond storage (see `controller`).
const SERVED: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "nodes"),
    ("", "services"),
    ("", "configmaps"),
    ("", "secrets"),
    ("", "pods"),
    ("", "serviceaccounts"),
    ("", "persistentvolumeclaims"),
    ("", "resourcequotas"),
    ("", "limitranges"),
    ("", "endpoints"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("apps", "replicasets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
    ("discovery.k8s.io", "endpointslices"),
    ("networking.k8s.io", "ingresses"),
    ("networking.k8s.io", "networkpolicies"),
    ("policy", "poddisruptionbudgets"),
    ("autoscaling", "horizontalpodautoscalers"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
];

/// Everything the simulator serves, in [`SERVED`] order.
pub static CATALOG: LazyLock<Vec<ResourceDef>> = LazyLock::new(|| {
    SERVED
        .iter()
        .filter_map(|(group, plural)| {
            let mut def = fedraft_kubeapi::resource::builtin()
                .iter()
                .find(|r| r.group == *group && r.plural == *plural)?
                .clone();
            def.subresources.retain(|s| s == "status");
            def.categories.clear();
            Some(def)
        })
        .collect()
});

pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    CATALOG
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

pub fn version_doc(git_version: &str) -> Value {
    docs::version_doc(git_version)
}

/// `GET /api`.
pub fn core_versions(server_address: &str) -> Value {
    docs::core_versions(server_address)
}

/// `GET /apis`.
pub fn group_list() -> Value {
    docs::group_list(&CATALOG)
}

/// `GET /apis/{group}`.
pub fn group(group: &str) -> Option<Value> {
    docs::group(&CATALOG, group)
}

/// Aggregated discovery: the core group (`GET /api`) or the others (`GET /apis`).
pub fn aggregated(core: bool, version: docs::AggregatedVersion) -> Value {
    docs::aggregated(&CATALOG, core, version)
}

/// `GET /api/v1` and `GET /apis/{group}/{version}`: an APIResourceList, or None if not served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    docs::resource_list(&CATALOG, group, version)
}

/// `GET /openapi/v3`: the index of per-group-version documents.
pub fn openapi_v3_root() -> Value {
    docs::openapi_v3_root(&CATALOG)
}

/// `GET /openapi/v3/{api/v1 | apis/group/version}`: PATCH parameters only (see
/// `fedraft_kubeapi::discovery::openapi_v3_group_version`).
pub fn openapi_v3_group_version(group: &str, version: &str) -> Option<Value> {
    docs::openapi_v3_group_version(&CATALOG, group, version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_served_name_is_a_builtin() {
        assert_eq!(CATALOG.len(), SERVED.len());
        for (g, v) in docs::groups(&CATALOG) {
            let list = resource_list(g, v).unwrap();
            assert!(!list["resources"].as_array().unwrap().is_empty());
        }
        assert!(resource_list("", "v1").is_some());
        assert!(resource_list("nope", "v1").is_none());
    }

    #[test]
    fn keys_are_unique() {
        for r in CATALOG.iter() {
            assert_eq!(CATALOG.iter().filter(|x| x.key() == r.key()).count(), 1);
        }
    }

    #[test]
    fn documents_keep_their_shape() {
        let list = resource_list("apps", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(names[..2], ["deployments", "deployments/status"]);
        assert!(!names.contains(&"deployments/scale"), "scale is not served");
        let deploy = &list["resources"][0];
        assert!(deploy.get("categories").is_none());
        assert_eq!(deploy["shortNames"], json!(["deploy"]));
        assert_eq!(deploy["verbs"].as_array().unwrap().len(), 8);
        let core = resource_list("", "v1").unwrap();
        let secrets = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "secrets")
            .unwrap();
        assert_eq!(secrets["shortNames"], json!([]));
        assert_eq!(group_list()["groups"][0]["name"], "apps");
    }
}
