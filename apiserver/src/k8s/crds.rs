//! The types CustomResourceDefinitions define: read from the CRD templates in the state each
//! time a request names a group the static catalog does not serve (and for discovery), so a
//! CRD applied through the door is served as soon as its entry applied, and a deleted one stops
//! being served, with no second copy of the CRDs to keep in step.
//!
//! Each served version of a CRD is one [`Served`] of `Store::Template`: its objects are
//! resource templates like any other, keyed by group and kind (all versions share them, as a
//! CRD without conversion webhooks does). The CRD's `openAPIV3Schema` is not enforced: objects
//! are stored as written. Must not: write, or serve a type of a group the static catalog owns.

use fedraft_core::door::{self, ResourceKey, CLUSTER_SCOPE_NAMESPACE, CRD_GROUP, CRD_KIND};
use fedraft_core::state::State;
use fedraft_kubeapi::resource::ResourceDef;
use serde_json::Value;

use super::catalog::{self, Served, Store};

/// Most CRDs read for one request: a bound on the work a request for an unknown group does.
const MAX_CRDS: usize = 1024;

/// Every type the stored CRDs define, in key order.
pub fn served(s: &State) -> Vec<Served> {
    let from = ResourceKey {
        group: CRD_GROUP.to_string(),
        kind: CRD_KIND.to_string(),
        namespace: String::new(),
        name: String::new(),
    };
    s.door()
        .templates
        .range(from..)
        .take_while(|(k, _)| k.is_crd())
        .take(MAX_CRDS)
        .filter_map(|(k, _)| s.object_shared(CLUSTER_SCOPE_NAMESPACE, &k.object_name()))
        .filter_map(|o| serde_json::from_str::<Value>(&o.spec.template).ok())
        .flat_map(|doc| of_manifest(&doc))
        .collect()
}

/// The types one CRD manifest defines: one per served version. A CRD naming a group of the
/// static catalog, or lacking its names, defines nothing the door serves.
pub fn of_manifest(doc: &Value) -> Vec<Served> {
    let Some((group, kind)) = door::crd_names(doc) else {
        return Vec::new();
    };
    let text = |p: &str| doc.pointer(p).and_then(Value::as_str).unwrap_or("");
    let list = |p: &str| -> Vec<&str> {
        doc.pointer(p)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let plural = text("/spec/names/plural");
    if plural.is_empty() || catalog::serves_group(group) {
        return Vec::new();
    }
    let singular = match text("/spec/names/singular") {
        "" => kind.to_ascii_lowercase(),
        s => s.to_string(),
    };
    let Some(versions) = doc.pointer("/spec/versions").and_then(Value::as_array) else {
        return Vec::new();
    };
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .filter_map(|v| {
            let version = v.get("name").and_then(Value::as_str)?;
            let mut def = ResourceDef::new(group, version, plural, kind)
                .singular(&singular)
                .short_names(&list("/spec/names/shortNames"))
                .categories(&list("/spec/names/categories"))
                .verbs(&[
                    "create", "delete", "get", "list", "patch", "update", "watch",
                ]);
            if text("/spec/scope") == "Cluster" {
                def = def.cluster_scoped();
            }
            let columns = v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            Some(Served {
                def,
                store: Store::Template,
                columns: Some(columns),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn served_versions_scope_names_and_columns() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"],
                    "categories": ["all"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer",
                        "jsonPath": ".spec.size"}]},
                    {"name": "v0", "served": false, "storage": false}]}});
        let served = of_manifest(&crd);
        assert_eq!(served.len(), 1);
        let w = &served[0];
        assert_eq!(
            (
                w.def.api_version(),
                w.def.plural.as_str(),
                w.def.singular.as_str()
            ),
            ("example.com/v1".to_string(), "widgets", "widget")
        );
        assert!(!w.def.namespaced);
        assert_eq!(w.def.short_names, ["wd"]);
        assert_eq!(w.def.categories, ["all"]);
        assert_eq!(w.store, Store::Template);
        assert_eq!(w.columns.as_ref().map(Vec::len), Some(1));
        // A CRD may not take over a group the door serves itself.
        let mut apps = crd.clone();
        apps["spec"]["group"] = json!("apps");
        assert!(of_manifest(&apps).is_empty());
        assert!(of_manifest(&json!({"spec": {}})).is_empty());
    }
}
