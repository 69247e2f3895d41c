//! Server-side apply (`application/apply-patch+yaml`): the object after a manager applies a
//! configuration, and its managed fields.
//!
//! Apply semantics, at leaf-path granularity (lists atomic, see `fields`):
//! - the applied configuration's leaves are set on the object; this manager's Apply entry
//!   becomes exactly that set;
//! - a leaf owned by another manager (Apply or Update) whose current value differs from the
//!   applied one is a conflict: 409 listing every such field, unless `force`, which moves
//!   ownership to this manager; an equal value makes the managers co-owners;
//! - leaves this manager applied before and no longer applies are removed from the object,
//!   unless another manager still owns them;
//! - status is ignored for kinds with a status subresource.
//!
//! The caller stores the result and should drop it if nothing but timestamps changed
//! (`meta::same_content`); so an apply of the same configuration twice writes once. This module
//! must not touch storage or read a clock: `now` stamps the managedFields entry.

use serde_json::Value;

use crate::fields::{self, Entry, FieldSet};
use crate::meta;
use crate::resource::ResourceDef;
use crate::status::{ApiError, Subject};

/// Computes the object after `manager` applies `applied` to `current` (None: creates it).
pub fn apply(
    res: &ResourceDef,
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    let applied_set = fields::leaf_paths(applied, res.has_status());
    let empty = Value::Object(Default::default());
    let cur = current.unwrap_or(&empty);
    let mut entries = fields::read_managed(cur);

    let mut conflicts: Vec<(String, String)> = Vec::new();
    for e in entries.iter_mut().filter(|e| !e.is(manager, "Apply", None)) {
        let clashing: FieldSet = e
            .fields
            .iter()
            .filter(|q| {
                applied_set.iter().any(|p| {
                    fields::overlaps(p, q)
                        && fields::get_path(cur, p) != fields::get_path(applied, p)
                })
            })
            .cloned()
            .collect();
        if clashing.is_empty() {
            continue;
        }
        if force {
            e.fields.retain(|q| !clashing.contains(q));
        } else {
            for q in clashing {
                let field = format!(".{}", q.join("."));
                let message = format!(
                    "conflict with \"{}\" using {}: {}",
                    e.manager, e.api_version, field
                );
                conflicts.push((field, message));
            }
        }
    }
    if !conflicts.is_empty() {
        let n = conflicts.len();
        let plural = if n == 1 { "" } else { "s" };
        let listed: Vec<String> = conflicts.iter().map(|(_, m)| format!("- {m}")).collect();
        return Err(ApiError::Conflict {
            subject: Subject {
                group: res.group.to_string(),
                kind: res.plural.clone(),
                name: meta::name(applied).to_string(),
            },
            message: format!(
                "Apply failed with {n} conflict{plural}: {}",
                listed.join("\n")
            ),
            causes: conflicts.into_boxed_slice(),
        });
    }

    let mut out = cur.clone();
    let previous: FieldSet = entries
        .iter()
        .find(|e| e.is(manager, "Apply", None))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    for dropped in previous.difference(&applied_set) {
        let still_owned = applied_set.iter().any(|p| fields::overlaps(p, dropped))
            || entries
                .iter()
                .filter(|e| !e.is(manager, "Apply", None))
                .any(|e| e.fields.iter().any(|q| fields::overlaps(q, dropped)));
        if !still_owned {
            fields::remove_path(&mut out, dropped);
        }
    }
    for p in &applied_set {
        if let Some(v) = fields::get_path(applied, p) {
            fields::set_path(&mut out, p, v.clone());
        }
    }

    match entries.iter_mut().find(|e| e.is(manager, "Apply", None)) {
        Some(e) => {
            if e.fields != applied_set {
                e.time = now.to_string();
            }
            e.fields = applied_set;
            e.api_version = res.api_version();
        }
        None => entries.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: res.api_version(),
            time: now.to_string(),
            subresource: None,
            fields: applied_set,
        }),
    }
    fields::write_managed(&mut out, entries);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::find_builtin as find;
    use serde_json::json;

    const NOW: &str = "2026-01-01T00:00:00Z";

    fn deploy(replicas: i64, labels: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": labels},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
        })
    }

    #[test]
    fn apply_twice_is_identical() {
        let res = find("apps", "v1", "deployments").unwrap();
        let a = deploy(2, json!({"app": "web"}));
        let first = apply(res, None, &a, "fedraft", false, NOW).unwrap();
        let second = apply(res, Some(&first), &a, "fedraft", false, NOW).unwrap();
        assert!(meta::same_content(&first, &second));
    }

    #[test]
    fn conflicts_with_another_manager_unless_forced() {
        let res = find("apps", "v1", "deployments").unwrap();
        let mine = apply(res, None, &deploy(2, json!({})), "fedraft", false, NOW).unwrap();
        // Same value: co-ownership, no conflict.
        let shared = apply(res, Some(&mine), &deploy(2, json!({})), "other", false, NOW).unwrap();
        assert_eq!(fields::read_managed(&shared).len(), 2);
        let err = apply(res, Some(&mine), &deploy(3, json!({})), "other", false, NOW).unwrap_err();
        assert_eq!(err.code(), 409);
        assert!(err.to_string().contains(".spec.replicas"), "{err}");
        let forced = apply(res, Some(&mine), &deploy(3, json!({})), "other", true, NOW).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        let fedraft = fields::read_managed(&forced)
            .into_iter()
            .find(|e| e.manager == "fedraft")
            .unwrap();
        assert!(!fedraft
            .fields
            .contains(&vec!["spec".to_string(), "replicas".to_string()]));
    }

    #[test]
    fn dropped_fields_are_removed_unless_owned_elsewhere() {
        let res = find("apps", "v1", "deployments").unwrap();
        let v1 = apply(
            res,
            None,
            &deploy(2, json!({"a": "1", "b": "2"})),
            "fedraft",
            false,
            NOW,
        )
        .unwrap();
        let v2 = apply(
            res,
            Some(&v1),
            &deploy(2, json!({"a": "1"})),
            "fedraft",
            false,
            NOW,
        )
        .unwrap();
        assert_eq!(v2["metadata"]["labels"], json!({"a": "1"}));
    }

    #[test]
    fn status_is_not_applied_on_main_resource() {
        let res = find("apps", "v1", "deployments").unwrap();
        let mut a = deploy(1, json!({}));
        a["status"] = json!({"replicas": 9});
        let out = apply(res, None, &a, "fedraft", false, NOW).unwrap();
        assert!(out.get("status").is_none());
    }
}
