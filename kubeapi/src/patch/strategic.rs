//! Strategic merge patch (`application/strategic-merge-patch+json`), as kube-apiserver applies
//! it to the built-in kinds and as `kubectl apply` (client-side) and `kubectl patch` send it.
//!
//! Maps merge key by key and `null` deletes a key, as in a JSON merge patch; lists follow the
//! field's tag in `strategy`: replaced whole (untagged), merged item by item on a merge key, or
//! united (scalar lists such as `finalizers`). Directives:
//! - `$patch: replace` (a map: take the patch's map; a list item: take the patch's list),
//!   `$patch: delete` (a map: remove it; a list item: remove the item with that key),
//!   `$patch: merge` (the default, accepted and ignored);
//! - `$retainKeys: [..]`: after merging, the map keeps only these keys;
//! - `$deleteFromPrimitiveList/F: [..]`: remove these values from the scalar list F;
//! - `$setElementOrder/F: [..]`: the order of list F after merging. Items it names come in its
//!   order; items only the server has keep their place relative to them, by their index in the
//!   original list (the rule kube-apiserver's sorted merge follows).
//!
//! Kinds without a schema (custom resources) get JSON merge patch semantics; kube-apiserver
//! refuses them with 415, so the caller should check `strategy::supports_strategic` first.
//! This module must not know storage, managed fields or HTTP.

use serde_json::{Map, Value};

use super::error::PatchError;
use super::merge::merge_patch;
use crate::strategy::{self, Strategy};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// Applies `patch` to `current`, an object of `group`/`kind`. Kinds without a strategic
/// schema are patched as by a JSON merge patch.
pub fn strategic_merge_patch(
    group: &str,
    kind: &str,
    current: &Value,
    patch: &Value,
) -> Result<Value, PatchError> {
    let Some(root) = strategy::root_type(group, kind) else {
        return Ok(merge_patch(current, patch));
    };
    let Value::Object(p) = patch else {
        return Err(PatchError::Malformed {
            patch: "strategic merge",
            message: "the patch is not a JSON object".into(),
        });
    };
    let empty = Map::new();
    let cur = current.as_object().unwrap_or(&empty);
    match merge_object(cur, p, Some(root), "")? {
        Some(m) => Ok(Value::Object(m)),
        None => Ok(Value::Object(Map::new())),
    }
}

fn failed(path: &str, message: String) -> PatchError {
    PatchError::Failed {
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
        message: format!("{}: {message}", if path.is_empty() { "/" } else { path }),
    }
}

fn child(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Merges the patch map `patch` into `orig` (a map of type `ty`); None: `$patch: delete`.
fn merge_object(
    orig: &Map<String, Value>,
    patch: &Map<String, Value>,
    ty: Option<&str>,
    path: &str,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get(PATCH).map(|d| d.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            let mut out = patch.clone();
            out.remove(PATCH);
            return Ok(Some(out));
        }
        Some(Some("delete")) => return Ok(None),
        Some(other) => {
            return Err(failed(
                path,
                format!("unknown patch type {:?}", other.unwrap_or("<not a string>")),
            ))
        }
    }
    let mut out = orig.clone();

    for (k, values) in patch {
        let Some(field) = k.strip_prefix(DELETE_FROM) else {
            continue;
        };
        let Value::Array(values) = values else {
            return Err(failed(&child(path, k), "must be a list".into()));
        };
        if let Some(Value::Array(items)) = out.get_mut(field) {
            items.retain(|v| !values.contains(v));
        }
    }

    for (k, pv) in patch {
        if k.starts_with('$') {
            let known = k == PATCH
                || k == RETAIN_KEYS
                || k.starts_with(DELETE_FROM)
                || k.starts_with(SET_ORDER);
            if !known {
                return Err(failed(&child(path, k), format!("unknown directive {k}")));
            }
            continue;
        }
        let here = child(path, k);
        let field = ty.and_then(|t| strategy::field(t, k));
        let strat = field.map_or(Strategy::Default, |f| f.strategy);
        let of = field.and_then(|f| f.of);
        match pv {
            Value::Null => {
                out.remove(k);
            }
            Value::Array(items) => {
                let merged = match strat {
                    Strategy::MergeByKey(key) | Strategy::MergeByKeyRetainKeys(key) => {
                        merge_keyed(out.get(k), items, key, of, &here)?
                    }
                    Strategy::MergeScalars => merge_scalars(out.get(k), items, &here)?,
                    Strategy::Default | Strategy::RetainKeys => items.clone(),
                };
                out.insert(k.clone(), Value::Array(merged));
            }
            Value::Object(pm) => {
                let empty = Map::new();
                let cur = out.get(k).and_then(Value::as_object).unwrap_or(&empty);
                match merge_object(cur, pm, of, &here)? {
                    Some(m) => {
                        out.insert(k.clone(), Value::Object(m));
                    }
                    None => {
                        out.remove(k);
                    }
                }
            }
            scalar => {
                out.insert(k.clone(), scalar.clone());
            }
        }
    }

    for (k, order) in patch {
        let Some(field) = k.strip_prefix(SET_ORDER) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(failed(&child(path, k), "must be a list".into()));
        };
        let key = match ty
            .and_then(|t| strategy::field(t, field))
            .map(|f| f.strategy)
        {
            Some(Strategy::MergeByKey(key) | Strategy::MergeByKeyRetainKeys(key)) => Some(key),
            _ => None,
        };
        let server: &[Value] = orig
            .get(field)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        if let Some(Value::Array(items)) = out.get_mut(field) {
            let sorted = reorder(std::mem::take(items), order, key, server);
            *items = sorted;
        }
    }

    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let keep: Vec<&str> = match retain.as_array() {
            Some(list) => list.iter().filter_map(Value::as_str).collect(),
            None => return Err(failed(&child(path, RETAIN_KEYS), "must be a list".into())),
        };
        if let Some(missing) = patch
            .iter()
            .find(|(k, v)| !k.starts_with('$') && !v.is_null() && !keep.contains(&k.as_str()))
        {
            return Err(failed(
                path,
                format!("{} is not in the $retainKeys list", missing.0),
            ));
        }
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(Some(out))
}

/// Merges a list whose items are maps matched on `key` (`containers` by `name`).
fn merge_keyed(
    orig: Option<&Value>,
    items: &[Value],
    key: &str,
    of: Option<&str>,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    let is_replace = |v: &Value| v.get(PATCH).and_then(Value::as_str) == Some("replace");
    if items.iter().any(is_replace) {
        return Ok(items.iter().filter(|v| !is_replace(v)).cloned().collect());
    }
    let mut out: Vec<Value> = orig.and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, item) in items.iter().enumerate() {
        let here = format!("{path}/{i}");
        let Value::Object(m) = item else {
            return Err(failed(
                &here,
                format!("list item {item} is not a map with merge key {key:?}"),
            ));
        };
        let Some(id) = m.get(key) else {
            return Err(failed(
                &here,
                format!("map does not contain declared merge key {key:?}"),
            ));
        };
        let at = out.iter().position(|o| o.get(key) == Some(id));
        if m.get(PATCH).and_then(Value::as_str) == Some("delete") {
            out.retain(|o| o.get(key) != Some(id));
            continue;
        }
        let empty = Map::new();
        let cur = at.and_then(|j| out[j].as_object()).unwrap_or(&empty);
        let merged = merge_object(cur, m, of, &here)?;
        match (at, merged) {
            (Some(j), Some(v)) => out[j] = Value::Object(v),
            (Some(j), None) => {
                out.remove(j);
            }
            (None, Some(v)) => out.push(Value::Object(v)),
            (None, None) => {}
        }
    }
    Ok(out)
}

/// A scalar list with `patchStrategy:"merge"`: the original, then new patch values in order.
fn merge_scalars(
    orig: Option<&Value>,
    items: &[Value],
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    let mut out: Vec<Value> = orig.and_then(Value::as_array).cloned().unwrap_or_default();
    for v in items {
        if v.is_object() || v.is_array() {
            return Err(failed(path, format!("{v} is not a scalar")));
        }
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    Ok(out)
}

/// Orders `items` as `$setElementOrder` says (see the module doc): named items in the
/// directive's order, server-only items merged in by their index in `server`.
fn reorder(items: Vec<Value>, order: &[Value], key: Option<&str>, server: &[Value]) -> Vec<Value> {
    let ident = |v: &Value| -> Value {
        match key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let order_ids: Vec<Value> = order.iter().map(&ident).collect();
    let server_ids: Vec<Value> = server.iter().map(&ident).collect();
    let rank = |v: &Value, ids: &[Value]| ids.iter().position(|x| *x == ident(v));
    let (mut named, rest): (Vec<Value>, Vec<Value>) = items
        .into_iter()
        .partition(|v| rank(v, &order_ids).is_some());
    named.sort_by_key(|v| rank(v, &order_ids));
    let mut out = Vec::with_capacity(named.len() + rest.len());
    let (mut left, mut right) = (named.into_iter().peekable(), rest.into_iter().peekable());
    loop {
        let take_right = match (left.peek(), right.peek()) {
            (None, None) => break,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some(l), Some(r)) => match (rank(l, &server_ids), rank(r, &server_ids)) {
                (Some(li), Some(ri)) => ri < li,
                _ => false,
            },
        };
        let next = if take_right {
            right.next()
        } else {
            left.next()
        };
        out.extend(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "finalizers": ["a", "b"], "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:1.27",
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                         "ports": [{"containerPort": 80}]},
                        {"name": "sidecar", "image": "envoy"}
                    ],
                    "tolerations": [{"key": "x", "operator": "Exists"}],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }}
            }
        })
    }

    fn smp(cur: &Value, patch: Value) -> Value {
        strategic_merge_patch("apps", "Deployment", cur, &patch).unwrap()
    }

    fn containers(v: &Value) -> &Vec<Value> {
        v["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
    }

    #[test]
    fn kubectl_apply_changes_one_container_image() {
        // What kubectl 1.32 sends when only the image of `web` changed.
        let out = smp(
            &deploy(),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
                "containers": [{"image": "nginx:1.28", "name": "web"}]
            }}}}),
        );
        let cs = containers(&out);
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0]["image"], "nginx:1.28");
        assert_eq!(
            cs[0]["env"].as_array().unwrap().len(),
            2,
            "merged, not replaced"
        );
        assert_eq!(cs[1]["name"], "sidecar");
    }

    #[test]
    fn kubectl_1_32_client_side_apply_body() {
        // The body kubectl 1.32.4 sent to drop env B and the sidecar (captured from -v=8).
        let body: Value = serde_json::from_str(
            r#"{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}\n"}},"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"$setElementOrder/env":[{"name":"A"}],"env":[{"$patch":"delete","name":"B"}],"image":"nginx:1.28","name":"web"},{"$patch":"delete","name":"sidecar"}]}}}}"#,
        )
        .unwrap();
        let out = smp(&deploy(), body);
        assert_eq!(
            containers(&out),
            &vec![json!({"name": "web", "image": "nginx:1.28",
                         "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]})]
        );
        assert_eq!(
            out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{}\n"
        );
        assert_eq!(out["metadata"]["labels"], json!({"app": "web"}));
    }

    #[test]
    fn delete_directives_in_lists() {
        let out = smp(
            &deploy(),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "web"}],
                "containers": [
                    {"$patch": "delete", "name": "sidecar"},
                    {"name": "web",
                     "$setElementOrder/env": [{"name": "A"}],
                     "env": [{"$patch": "delete", "name": "B"}]}
                ]
            }}}}),
        );
        let cs = containers(&out);
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0]["env"], json!([{"name": "A", "value": "1"}]));
    }

    #[test]
    fn table_of_cases() {
        let base = deploy();
        let cases: Vec<(&str, Value, &str, Value)> = vec![
            (
                "untagged list replaced",
                json!({"spec": {"template": {"spec": {"tolerations": [{"key": "y"}]}}}}),
                "/spec/template/spec/tolerations",
                json!([{"key": "y"}]),
            ),
            (
                "new keyed item appended",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "log", "image": "busybox"}]}}}}),
                "/spec/template/spec/containers/2/name",
                json!("log"),
            ),
            (
                "ports merged by containerPort",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}}}}),
                "/spec/template/spec/containers/0/ports",
                json!([{"containerPort": 80, "name": "http"}, {"containerPort": 443}]),
            ),
            (
                "finalizers united",
                json!({"metadata": {"finalizers": ["b", "c"]}}),
                "/metadata/finalizers",
                json!(["a", "b", "c"]),
            ),
            (
                "deleteFromPrimitiveList",
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                "/metadata/finalizers",
                json!(["b"]),
            ),
            (
                "null deletes a key",
                json!({"metadata": {"labels": {"app": null}}}),
                "/metadata/labels",
                json!({}),
            ),
            (
                "retainKeys drops the other strategy fields",
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}}),
                "/spec/strategy",
                json!({"type": "Recreate"}),
            ),
            (
                "map replace directive",
                json!({"metadata": {"labels": {"$patch": "replace", "tier": "x"}}}),
                "/metadata/labels",
                json!({"tier": "x"}),
            ),
            (
                "list replace directive",
                json!({"spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "i"}]}}}}),
                "/spec/template/spec/containers",
                json!([{"name": "only", "image": "i"}]),
            ),
            (
                "volumes item retainKeys",
                json!({"spec": {"template": {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}]}}}}),
                "/spec/template/spec/volumes",
                json!([{"name": "data", "configMap": {"name": "cm"}}]),
            ),
        ];
        for (what, patch, pointer, want) in cases {
            let out = smp(&base, patch);
            assert_eq!(out.pointer(pointer), Some(&want), "{what}: {out}");
        }
        let gone = smp(&base, json!({"spec": {"strategy": {"$patch": "delete"}}}));
        assert!(gone["spec"].get("strategy").is_none());
    }

    #[test]
    fn set_element_order_reorders_and_keeps_server_only_items() {
        let cur = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
        let out = strategic_merge_patch(
            "",
            "ConfigMap",
            &cur,
            &json!({"metadata": {"$setElementOrder/finalizers": ["c", "a"]}}),
        )
        .unwrap();
        // b is server-only: it sorts before c by its original index.
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c", "a"]));

        let out = smp(
            &deploy(),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "web"}]
            }}}}),
        );
        let names: Vec<&Value> = containers(&out).iter().map(|c| &c["name"]).collect();
        assert_eq!(names, [&json!("sidecar"), &json!("web")]);
    }

    #[test]
    fn service_ports_merge_by_port() {
        let svc = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}});
        let out = strategic_merge_patch(
            "",
            "Service",
            &svc,
            &json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}),
        )
        .unwrap();
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "targetPort": 9090}, {"port": 443}])
        );
    }

    #[test]
    fn errors_name_the_path() {
        let cases = [
            (
                json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
                "/spec/template/spec/containers/0",
            ),
            (json!({"spec": {"$patch": "explode"}}), "/spec"),
            (
                json!({"metadata": {"$frobnicate": 1}}),
                "/metadata/$frobnicate",
            ),
            (
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}}),
                "/spec/strategy",
            ),
        ];
        for (patch, want) in cases {
            match strategic_merge_patch("apps", "Deployment", &deploy(), &patch) {
                Err(PatchError::Failed { path, message }) => {
                    assert_eq!(path, want, "{message}");
                    assert!(message.starts_with(want), "{message}");
                }
                other => panic!("{patch}: {other:?}"),
            }
        }
        assert!(matches!(
            strategic_merge_patch("apps", "Deployment", &deploy(), &json!([1])),
            Err(PatchError::Malformed { .. })
        ));
    }

    #[test]
    fn unknown_kinds_get_merge_patch_semantics() {
        let cr = json!({"spec": {"items": [{"name": "a", "v": 1}], "m": {"x": 1}}});
        let patch = json!({"spec": {"items": [{"name": "b"}], "m": {"y": 2}}});
        let out = strategic_merge_patch("example.com", "Widget", &cr, &patch).unwrap();
        assert_eq!(out, merge_patch(&cr, &patch));
        assert_eq!(out["spec"]["items"], json!([{"name": "b"}]));
    }
}
