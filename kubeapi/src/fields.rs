//! Field paths and `metadata.managedFields`: who owns which field of an object.
//!
//! Ownership is tracked per leaf path through maps. Lists are atomic (one leaf for the whole
//! list), which is coarser than Kubernetes' per-key list ownership but exact for every field a
//! federation writes as a whole. The set is stored in the object in the real `FieldsV1` shape
//! (`{"f:spec":{"f:replicas":{}}}`), so kubectl and kube-rs read it as from a real server. This
//! module must not decide conflicts (`apply` does) or read a clock (callers pass `now`).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use crate::meta;

pub type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// Which top-level parts of an object users own. `metadata` is special: only these children are
/// user fields; the rest (name, uid, resourceVersion, ...) belong to the server.
const USER_METADATA: &[&str] = &["labels", "annotations", "finalizers", "ownerReferences"];
/// Children of these metadata maps are owned one by one; the others are atomic.
const KEYED_METADATA: &[&str] = &["labels", "annotations"];

/// The leaf paths of the user-owned part of `obj`. `status` counts only when the kind has no
/// status subresource.
pub fn leaf_paths(obj: &Value, has_status: bool) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(top) = obj.as_object() else {
        return out;
    };
    for (k, v) in top {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "status" if has_status => {}
            "metadata" => {
                let Some(m) = v.as_object() else { continue };
                for field in USER_METADATA {
                    match m.get(*field) {
                        Some(Value::Object(inner)) if KEYED_METADATA.contains(field) => {
                            for key in inner.keys() {
                                out.insert(vec!["metadata".into(), field.to_string(), key.clone()]);
                            }
                        }
                        Some(Value::Null) | None => {}
                        Some(_) => {
                            out.insert(vec!["metadata".into(), field.to_string()]);
                        }
                    }
                }
            }
            _ => collect(v, &mut vec![k.clone()], &mut out),
        }
    }
    out
}

fn collect(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                prefix.push(k.clone());
                collect(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

pub fn get_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |cur, k| cur.get(k))
}

pub fn set_path(obj: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for k in parents {
        cur = meta::ensure_object(cur)
            .entry(k.clone())
            .or_insert(Value::Null);
    }
    meta::ensure_object(cur).insert(last.clone(), value);
}

/// Removes the leaf at `path`, then any map it leaves empty below the top level (an emptied
/// `spec.selector` goes; `spec` itself stays).
pub fn remove_path(obj: &mut Value, path: &[String]) {
    fn go(cur: &mut Value, path: &[String], depth: usize) {
        let Some(m) = cur.as_object_mut() else { return };
        match path {
            [] => {}
            [last] => {
                m.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(child) = m.get_mut(first) {
                    go(child, rest, depth + 1);
                    if depth > 0 && child.as_object().is_some_and(Map::is_empty) {
                        m.remove(first);
                    }
                }
            }
        }
    }
    go(obj, path, 0);
}

/// Two paths overlap when one is a prefix of the other (one owner's atomic value covers the
/// other's leaf).
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Value::Object(Map::new());
    for path in set {
        let mut cur = &mut root;
        for k in path {
            cur = meta::ensure_object(cur)
                .entry(format!("f:{k}"))
                .or_insert_with(|| json!({}));
        }
    }
    root
}

/// Reads a `FieldsV1` tree back. Keys this module never writes (`k:`/`v:` list items, `.`)
/// end the path there, which treats the enclosing value as atomic.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn go(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
        let children: Vec<(&String, &Value)> = v
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect())
            .unwrap_or_default();
        let foreign = v
            .as_object()
            .is_some_and(|m| m.keys().any(|k| !k.starts_with("f:")));
        if children.is_empty() || foreign {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            return;
        }
        for (k, child) in children {
            prefix.push(k[2..].to_string());
            go(child, prefix, out);
            prefix.pop();
        }
    }
    let mut out = FieldSet::new();
    go(v, &mut Vec::new(), &mut out);
    out
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: String,
    /// "Apply" or "Update".
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    pub fn is(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }
}

pub fn read_managed(obj: &Value) -> Vec<Entry> {
    let Some(Value::Array(items)) = meta::metadata(obj).and_then(|m| m.get("managedFields")) else {
        return Vec::new();
    };
    let s = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    items
        .iter()
        .map(|e| Entry {
            manager: s(e, "manager"),
            operation: s(e, "operation"),
            api_version: s(e, "apiVersion"),
            time: s(e, "time"),
            subresource: e
                .get("subresource")
                .and_then(Value::as_str)
                .map(str::to_string),
            fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
        })
        .collect()
}

/// Writes `entries` into `obj`, dropping empty ones and fields that no longer exist in `obj`.
pub fn write_managed(obj: &mut Value, entries: Vec<Entry>) {
    let mut out = Vec::new();
    for mut e in entries {
        e.fields.retain(|p| get_path(obj, p).is_some());
        if e.fields.is_empty() {
            continue;
        }
        let mut v = json!({
            "manager": e.manager,
            "operation": e.operation,
            "apiVersion": e.api_version,
            "time": e.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&e.fields),
        });
        if let Some(sub) = &e.subresource {
            v["subresource"] = json!(sub);
        }
        out.push(v);
    }
    let m = meta::metadata_mut(obj);
    if out.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(out));
    }
}

/// The field manager of a write, as kube-apiserver names it: the `fieldManager` parameter, else
/// the client's User-Agent up to its first '/', at most 128 characters ("unknown" without one).
pub fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager {
        return m.to_string();
    }
    user_agent
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .chars()
        .take(128)
        .collect()
}

/// Records an Update-style write (create, PUT, merge or JSON patch, an out-of-band edit) by
/// `manager`: it takes every field whose value it changed, from whoever owned it before.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    has_status: bool,
    now: &str,
) {
    let null = Value::Null;
    let old_obj = old.unwrap_or(&null);
    let old_leaves = leaf_paths(old_obj, has_status);
    let new_leaves = leaf_paths(new, has_status);
    let changed: FieldSet = new_leaves
        .iter()
        .filter(|p| get_path(old_obj, p) != get_path(new, p))
        .chain(old_leaves.difference(&new_leaves))
        .cloned()
        .collect();
    let mut entries = read_managed(old_obj);
    if changed.is_empty() {
        write_managed(new, entries);
        return;
    }
    for e in entries.iter_mut() {
        if !e.is(manager, "Update", None) {
            e.fields.retain(|q| !changed.iter().any(|p| overlaps(p, q)));
        }
    }
    let mine: FieldSet = changed
        .iter()
        .filter(|p| new_leaves.contains(*p))
        .cloned()
        .collect();
    match entries.iter_mut().find(|e| e.is(manager, "Update", None)) {
        Some(e) => {
            e.fields.extend(mine);
            e.time = now.to_string();
        }
        None => entries.push(Entry {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version: api_version.to_string(),
            time: now.to_string(),
            subresource: None,
            fields: mine,
        }),
    }
    write_managed(new, entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Path {
        s.split('.').map(str::to_string).collect()
    }

    #[test]
    fn leaves_and_fields_v1_round_trip() {
        let obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "a", "uid": "u", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"replicas": 2}
        });
        let set = leaf_paths(&obj, true);
        let want: FieldSet = [
            p("metadata.labels.app"),
            p("spec.replicas"),
            p("spec.template.spec.containers"),
        ]
        .into_iter()
        .collect();
        assert_eq!(set, want);
        assert_eq!(from_fields_v1(&to_fields_v1(&set)), set);
        assert_eq!(
            to_fields_v1(&set)["f:spec"]["f:replicas"],
            json!({}),
            "real FieldsV1 shape"
        );
    }

    #[test]
    fn remove_prunes_empty_maps() {
        let mut obj = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}});
        remove_path(&mut obj, &p("spec.selector.matchLabels.a"));
        assert_eq!(obj, json!({"spec": {}}));
    }

    #[test]
    fn update_takes_changed_fields() {
        let mut old = json!({"metadata": {"name": "a"}, "spec": {"replicas": 1, "paused": false}});
        write_managed(
            &mut old,
            vec![Entry {
                manager: "fedraft".into(),
                operation: "Apply".into(),
                api_version: "apps/v1".into(),
                time: "t".into(),
                subresource: None,
                fields: [p("spec.replicas"), p("spec.paused")].into_iter().collect(),
            }],
        );
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(5);
        record_update(
            Some(&old),
            &mut new,
            "kubectl-edit",
            "apps/v1",
            true,
            "2026-01-01T00:00:00Z",
        );
        let entries = read_managed(&new);
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].fields, [p("spec.paused")].into_iter().collect());
        assert_eq!(entries[1].manager, "kubectl-edit");
        assert_eq!(
            entries[1].fields,
            [p("spec.replicas")].into_iter().collect()
        );
    }
}
