//! One managed member object as an executor keeps it between passes: small, because a node
//! holds one per object per cluster it runs (a hundred thousand and more in a large fleet).
//!
//! A watch delivers the whole object. Held as a `serde_json::Value`, a Deployment with its
//! `managedFields` took about 15 KiB, most of it per-key allocations. What a pass reads of every
//! object on every pass (labels, annotations, resourceVersion, deletion, status, the replica
//! counts) stays parsed in [`LiveObject::view`]; the rest (spec, data) is kept as compact JSON
//! and parsed only when a pass must compare it with a manifest ([`LiveObject::full`]), which
//! the skip rule makes rare. `metadata.managedFields` is dropped: nothing in fedraft reads it.
//!
//! Must not: lose a field a manifest can set (`full` gives back everything but managedFields),
//! or parse the compact part on the every-pass path.

use serde_json::{Map, Value};

use fedraft_core::render::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// Top-level fields kept parsed.
const VIEW_FIELDS: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// Spec fields a pass reads on every object (workload reports), copied into the view.
const VIEW_SPEC_FIELDS: [&str; 2] = ["replicas", "completions"];

/// A live object as the watch last delivered it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveObject {
    pub resource_version: Option<String>,
    /// apiVersion, kind, metadata (without managedFields), status, and spec's replica counts.
    view: Value,
    /// Every other top-level field (spec whole, data, ...) as compact JSON of an object.
    rest: Box<str>,
}

impl LiveObject {
    pub fn from_value(object: Value) -> Self {
        let Value::Object(mut map) = object else {
            return LiveObject {
                resource_version: None,
                view: object,
                rest: "{}".into(),
            };
        };
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.remove("managedFields");
        }
        let mut view = Map::new();
        for field in VIEW_FIELDS {
            if let Some(v) = map.remove(field) {
                view.insert(field.to_string(), v);
            }
        }
        if let Some(Value::Object(spec)) = map.get("spec") {
            let counts: Map<String, Value> = VIEW_SPEC_FIELDS
                .iter()
                .filter_map(|f| spec.get(*f).map(|v| (f.to_string(), v.clone())))
                .collect();
            if !counts.is_empty() {
                view.insert("spec".into(), Value::Object(counts));
            }
        }
        let view = Value::Object(view);
        let resource_version = crate::plan::at(&view, "/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        // Serializing a map of plain JSON values cannot fail.
        let rest = serde_json::to_string(&map).unwrap_or_else(|_| "{}".into());
        LiveObject {
            resource_version,
            view,
            rest: rest.into_boxed_str(),
        }
    }

    /// What every pass reads: apiVersion, kind, metadata, status, spec.replicas and
    /// spec.completions. Other fields are absent here; use [`LiveObject::full`] for them.
    pub fn view(&self) -> &Value {
        &self.view
    }

    /// What a status report reads: the view, or the whole object when a health rule's path
    /// (which may point anywhere) is read too.
    pub fn observed(&self, whole: bool) -> std::borrow::Cow<'_, Value> {
        if whole {
            std::borrow::Cow::Owned(self.full())
        } else {
            std::borrow::Cow::Borrowed(&self.view)
        }
    }

    /// The whole object (without managedFields), parsed again.
    pub fn full(&self) -> Value {
        let mut map: Map<String, Value> = serde_json::from_str(&self.rest).unwrap_or_default();
        if let Value::Object(view) = &self.view {
            for (k, v) in view {
                // The view's spec holds only copies; the whole spec is in `rest`.
                if k != "spec" || !map.contains_key("spec") {
                    map.insert(k.clone(), v.clone());
                }
            }
        }
        Value::Object(map)
    }

    /// Whether the object holds every field of `desired` with an equal value
    /// ([`crate::compare::covers`]), parsing only the compact part.
    pub fn holds(&self, desired: &Value) -> bool {
        let Value::Object(d) = desired else {
            return crate::compare::covers(desired, &self.full());
        };
        let rest: Map<String, Value> = serde_json::from_str(&self.rest).unwrap_or_default();
        // A spec in the view only exists when the whole one is in `rest`, which wins.
        crate::compare::covers_fields(d, |k| rest.get(k).or_else(|| self.view.get(k)))
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        crate::plan::at(&self.view, "/metadata/annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        crate::plan::at(&self.view, "/metadata/labels")
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
    }

    pub fn is_managed(&self) -> bool {
        self.label(MANAGED_BY_LABEL) == Some(MANAGED_BY_VALUE)
    }

    pub fn is_deleting(&self) -> bool {
        crate::plan::at(&self.view, "/metadata/deletionTimestamp").is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "shop", "resourceVersion": "42",
                "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
                "annotations": {"a": "b"},
                "managedFields": [{"manager": "fedraft", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            "status": {"readyReplicas": 2},
        })
    }

    #[test]
    fn full_gives_back_everything_but_managed_fields() {
        let live = LiveObject::from_value(deployment());
        let mut want = deployment();
        want["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        assert_eq!(live.full(), want);
        assert_eq!(live.resource_version.as_deref(), Some("42"));
        assert!(live.is_managed() && !live.is_deleting());
        assert_eq!(live.annotation("a"), Some("b"));
    }

    #[test]
    fn the_view_holds_what_every_pass_reads_and_not_the_spec() {
        let live = LiveObject::from_value(deployment());
        let view = live.view();
        assert_eq!(view["status"]["readyReplicas"], 2);
        assert_eq!(view["spec"], json!({"replicas": 3}));
        assert!(view["metadata"].get("managedFields").is_none());
        assert!(!live.rest.contains("readyReplicas"), "{}", live.rest);
    }

    /// A manifest as fedraft would apply it: no status, no managedFields.
    fn manifest() -> Value {
        let mut m = deployment();
        m.as_object_mut().map(|m| m.remove("status"));
        m["metadata"]
            .as_object_mut()
            .map(|m| m.remove("managedFields"));
        m
    }

    #[test]
    fn holds_agrees_with_covers_on_the_whole_object() {
        let live = LiveObject::from_value(deployment());
        assert!(live.holds(&manifest()));
        let edits = [
            ("/spec/replicas", json!(4)),
            ("/metadata/annotations/a", json!("c")),
            // A field only the compact part holds.
            ("/spec/template/spec/containers/0/image", json!("j")),
        ];
        for (path, value) in edits {
            let mut desired = manifest();
            if let Some(v) = desired.pointer_mut(path) {
                *v = value;
            }
            assert!(!live.holds(&desired), "{path}");
            assert!(!crate::compare::covers(&desired, &live.full()), "{path}");
        }
        let mut extra = manifest();
        extra["data"] = json!({});
        assert!(live.holds(&extra), "an empty field asks for nothing");
    }

    #[test]
    fn objects_without_spec_or_status_round_trip() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "shop"}, "data": {"k": "v"}});
        let live = LiveObject::from_value(cm.clone());
        assert_eq!(live.full(), cm);
        assert!(live.view().get("spec").is_none());
        assert!(live.view().get("data").is_none());
    }
}
