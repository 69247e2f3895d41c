//! Discovery documents built from a list of [`ResourceDef`]s: the legacy ones (`/api`,
//! `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`), the aggregated ones
//! (`apidiscovery.k8s.io` v2 and v2beta1, one document per `/api` or `/apis`), `/version`, and
//! the small OpenAPI v3 documents kubectl reads before an apply. Which form to answer is
//! `negotiate::discovery_form`. This module must not decide what is served; the caller's list
//! does.

use serde_json::{json, Map, Value};

use crate::resource::ResourceDef;

/// The groups other than core in first-seen order, each with its first-seen version.
pub fn groups(defs: &[ResourceDef]) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in defs.iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, _)| *g == r.group) {
            out.push((&r.group, &r.version));
        }
    }
    out
}

/// `GET /version` for a server claiming Kubernetes 1.32.
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
pub fn group_list(defs: &[ResourceDef]) -> Value {
    let groups: Vec<Value> = groups(defs)
        .into_iter()
        .map(|(g, v)| group_doc(g, v))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `GET /apis/{group}`, or None if no resource is in that group.
pub fn group(defs: &[ResourceDef], group: &str) -> Option<Value> {
    groups(defs)
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, v)| {
            let mut doc = group_doc(g, v);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

/// The verbs of a `status` or `scale` subresource.
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// `GET /api/v1` and `GET /apis/{group}/{version}`: an APIResourceList, or None if not served.
pub fn resource_list(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for r in defs
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut doc = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
            "shortNames": r.short_names,
        });
        if !r.categories.is_empty() {
            doc["categories"] = json!(r.categories);
        }
        resources.push(doc);
        for sub in &r.subresources {
            let mut doc = json!({
                "name": format!("{}/{sub}", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": SUBRESOURCE_VERBS,
            });
            if sub == "scale" {
                doc["group"] = json!("autoscaling");
                doc["version"] = json!("v1");
                doc["kind"] = json!("Scale");
            }
            resources.push(doc);
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

/// Which aggregated discovery version to write (`apidiscovery.k8s.io/...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregatedVersion {
    V2,
    V2Beta1,
}

impl AggregatedVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            AggregatedVersion::V2 => "v2",
            AggregatedVersion::V2Beta1 => "v2beta1",
        }
    }
}

fn aggregated_resource(r: &ResourceDef) -> Value {
    let kind = |g: &str, v: &str, k: &str| json!({ "group": g, "version": v, "kind": k });
    let mut doc = json!({
        "resource": r.plural,
        "responseKind": kind(&r.group, &r.version, &r.kind),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        doc["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        doc["categories"] = json!(r.categories);
    }
    let subs: Vec<Value> = r
        .subresources
        .iter()
        .map(|sub| {
            let response = if sub == "scale" {
                kind("autoscaling", "v1", "Scale")
            } else {
                kind(&r.group, &r.version, &r.kind)
            };
            json!({ "subresource": sub, "responseKind": response, "verbs": SUBRESOURCE_VERBS })
        })
        .collect();
    if !subs.is_empty() {
        doc["subresources"] = Value::Array(subs);
    }
    doc
}

/// One `APIGroupDiscovery` item: a group with each served version and its resources.
fn aggregated_group(defs: &[ResourceDef], group: &str) -> Value {
    let mut versions: Vec<(&str, Vec<Value>)> = Vec::new();
    for r in defs.iter().filter(|r| r.group == group) {
        let res = aggregated_resource(r);
        match versions.iter_mut().find(|(v, _)| *v == r.version) {
            Some((_, list)) => list.push(res),
            None => versions.push((&r.version, vec![res])),
        }
    }
    let versions: Vec<Value> = versions
        .into_iter()
        .map(|(v, resources)| json!({ "version": v, "resources": resources, "freshness": "Current" }))
        .collect();
    let mut metadata = json!({ "creationTimestamp": null });
    if !group.is_empty() {
        metadata["name"] = json!(group);
    }
    json!({ "metadata": metadata, "versions": versions })
}

/// Aggregated discovery: `GET /api` (`core` true: the core group alone) or `GET /apis` (every
/// other group) answered as an `APIGroupDiscoveryList`.
pub fn aggregated(defs: &[ResourceDef], core: bool, version: AggregatedVersion) -> Value {
    let items: Vec<Value> = if core {
        if defs.iter().any(|r| r.group.is_empty()) {
            vec![aggregated_group(defs, "")]
        } else {
            Vec::new()
        }
    } else {
        groups(defs)
            .into_iter()
            .map(|(g, _)| aggregated_group(defs, g))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{}", version.as_str()),
        "metadata": {},
        "items": items,
    })
}

/// `GET /openapi/v3`: the index of per-group-version documents.
pub fn openapi_v3_root(defs: &[ResourceDef]) -> Value {
    let mut paths = Map::new();
    if defs.iter().any(|r| r.group.is_empty()) {
        paths.insert(
            "api/v1".into(),
            json!({ "serverRelativeURL": "/openapi/v3/api/v1" }),
        );
    }
    for (g, v) in groups(defs) {
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
pub fn openapi_v3_group_version(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let param = |name: &str| json!({ "name": name, "in": "query", "schema": { "type": "string" } });
    for r in defs
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
    use crate::resource::builtin;

    #[test]
    fn every_group_has_a_resource_list() {
        let defs = builtin();
        for (g, v) in groups(defs) {
            let list = resource_list(defs, g, v).unwrap();
            assert!(!list["resources"].as_array().unwrap().is_empty());
            assert!(group(defs, g).is_some());
            assert!(openapi_v3_group_version(defs, g, v).is_some());
        }
        assert!(resource_list(defs, "", "v1").is_some());
        assert!(resource_list(defs, "nope", "v1").is_none());
        assert!(group(defs, "nope").is_none());
    }

    #[test]
    fn legacy_resource_list_shape() {
        let list = resource_list(builtin(), "apps", "v1").unwrap();
        let res = list["resources"].as_array().unwrap();
        let deploy = res.iter().find(|r| r["name"] == "deployments").unwrap();
        assert_eq!(deploy["kind"], "Deployment");
        assert_eq!(deploy["shortNames"], json!(["deploy"]));
        assert_eq!(deploy["categories"], json!(["all"]));
        let scale = res
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(scale["kind"], "Scale");
        assert_eq!(scale["group"], "autoscaling");
        let status = res
            .iter()
            .find(|r| r["name"] == "deployments/status")
            .unwrap();
        assert_eq!(status["kind"], "Deployment");
    }

    #[test]
    fn aggregated_documents() {
        let defs = builtin();
        let core = aggregated(defs, true, AggregatedVersion::V2);
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        let items = core["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        assert!(items[0]["metadata"].get("name").is_none());
        let v1 = &items[0]["versions"][0];
        assert_eq!(v1["version"], "v1");
        let ns = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "namespaces")
            .unwrap();
        assert_eq!(ns["scope"], "Cluster");
        assert_eq!(ns["responseKind"]["kind"], "Namespace");

        let apis = aggregated(defs, false, AggregatedVersion::V2Beta1);
        assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        let apps = apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .unwrap();
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        assert_eq!(deploy["subresources"][0]["subresource"], "scale");
        assert_eq!(deploy["subresources"][0]["responseKind"]["kind"], "Scale");
        assert_eq!(deploy["singularResource"], "deployment");
        assert!(apis["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["metadata"]["name"] != ""));
    }
}
