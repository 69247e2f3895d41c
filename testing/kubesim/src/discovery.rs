//! The resource catalog and the discovery documents built from it.
//!
//! One static table says which resources exist, their kind, scope and short names. Routing,
//! storage and discovery all read it, so a kind listed here is served end to end (stored
//! generically when no controller cares about it). This module must not hold objects.

use serde_json::{json, Value};

/// One served resource type.
#[derive(Debug)]
pub struct ResourceDef {
    /// API group, "" for the core group.
    pub group: &'static str,
    pub version: &'static str,
    /// URL segment, e.g. "deployments".
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    /// Whether `{name}/status` is a subresource; if so, main-resource writes keep the old status.
    pub has_status: bool,
    pub short_names: &'static [&'static str],
}

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Stable store key for this resource type.
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
}

#[allow(clippy::too_many_arguments)]
const fn res(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    has_status: bool,
    short_names: &'static [&'static str],
) -> ResourceDef {
    ResourceDef {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        has_status,
        short_names,
    }
}

/// Everything the simulator serves. Only namespaces, nodes, deployments, statefulsets and services
/// have behaviour beyond storage (see `controller`).
pub static CATALOG: &[ResourceDef] = &[
    res(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        true,
        &["ns"],
    ),
    res("", "v1", "nodes", "node", "Node", false, true, &["no"]),
    res(
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        true,
        &["svc"],
    ),
    res(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        false,
        &["cm"],
    ),
    res("", "v1", "secrets", "secret", "Secret", true, false, &[]),
    res("", "v1", "pods", "pod", "Pod", true, true, &["po"]),
    res(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        false,
        &["sa"],
    ),
    res(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        true,
        &["pvc"],
    ),
    res(
        "",
        "v1",
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        true,
        true,
        &["quota"],
    ),
    res(
        "",
        "v1",
        "limitranges",
        "limitrange",
        "LimitRange",
        true,
        false,
        &["limits"],
    ),
    res(
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        false,
        &["ep"],
    ),
    res(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        true,
        &["deploy"],
    ),
    res(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        true,
        true,
        &["sts"],
    ),
    res(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        true,
        &["ds"],
    ),
    res(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        true,
        &["rs"],
    ),
    res("batch", "v1", "jobs", "job", "Job", true, true, &[]),
    res(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        true,
        true,
        &["cj"],
    ),
    res(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        false,
        &[],
    ),
    res(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        true,
        true,
        &["ing"],
    ),
    res(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        true,
        false,
        &["netpol"],
    ),
    res(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        true,
        &["pdb"],
    ),
    res(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        true,
        true,
        &["hpa"],
    ),
    res(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "role",
        "Role",
        true,
        false,
        &[],
    ),
    res(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        false,
        &[],
    ),
];

pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    CATALOG
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The groups other than core, in first-seen order, each with its one served version.
fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in CATALOG.iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

pub fn version_doc(git_version: &str) -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-11-30T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `GET /api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }],
    })
}

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({ "groupVersion": format!("{group}/{version}"), "version": version });
    json!({ "name": group, "versions": [gv.clone()], "preferredVersion": gv })
}

/// `GET /apis`.
pub fn group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(|(g, v)| group_doc(g, v)).collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `GET /apis/{group}`.
pub fn group(group: &str) -> Option<Value> {
    groups()
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, v)| {
            let mut doc = group_doc(g, v);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

/// `GET /api/v1` and `GET /apis/{group}/{version}`: an APIResourceList, or None if not served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let verbs = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    let mut resources = Vec::new();
    for r in CATALOG
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        resources.push(json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs,
            "shortNames": r.short_names,
        }));
        if r.has_status {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// `GET /openapi/v3`: the index of per-group-version documents.
pub fn openapi_v3_root() -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({ "serverRelativeURL": "/openapi/v3/api/v1" }),
    );
    for (g, v) in groups() {
        paths.insert(
            format!("apis/{g}/{v}"),
            json!({ "serverRelativeURL": format!("/openapi/v3/apis/{g}/{v}") }),
        );
    }
    json!({ "paths": paths })
}

/// `GET /openapi/v3/{api/v1 | apis/group/version}`: a deliberately small OpenAPI document. It
/// lists only each resource's PATCH operation and its query parameters, which is what kubectl
/// reads to learn that the server validates fields itself (`fieldValidation`), so it skips
/// client-side schema validation. No schemas are served.
pub fn openapi_v3_group_version(group: &str, version: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let param = |name: &str| json!({ "name": name, "in": "query", "schema": { "type": "string" } });
    for r in CATALOG
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        paths.insert(
            path,
            json!({ "patch": {
                "operationId": format!("patch{}", r.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": { "group": r.group, "version": r.version, "kind": r.kind },
                "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation"), param("force")],
                "responses": { "200": { "description": "OK" } },
            }}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.32.0" },
        "paths": paths,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_a_resource_list() {
        for (g, v) in groups() {
            let list = resource_list(g, v).unwrap();
            assert!(!list["resources"].as_array().unwrap().is_empty());
        }
        assert!(resource_list("", "v1").is_some());
        assert!(resource_list("nope", "v1").is_none());
    }

    #[test]
    fn keys_are_unique() {
        for r in CATALOG {
            assert_eq!(CATALOG.iter().filter(|x| x.key() == r.key()).count(), 1);
        }
    }
}
