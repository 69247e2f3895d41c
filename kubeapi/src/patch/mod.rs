//! The PATCH content types and their entry points: JSON patch (RFC 6902), JSON merge patch
//! (RFC 7386) and strategic merge patch (see `strategic`), with errors that name the failing
//! path. Server-side apply is `apply`. This module must not know storage or managed fields:
//! the caller records who changed what.

use serde_json::Value;

use crate::meta;
use crate::resource::ResourceDef;
use crate::status::{ApiError, Subject};
use crate::{strategic, strategy};

/// A PATCH body's media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`: built-in kinds only.
    StrategicMerge,
    /// `application/apply-patch+yaml` (or `+cbor`): server-side apply, see `apply`.
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type` header (parameters ignored); None is a 415.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// A patch that could not be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The body is not a patch of its type (400 in Kubernetes).
    #[error("invalid {patch} patch: {message}")]
    Malformed {
        patch: &'static str,
        message: String,
    },
    /// The patch is well formed but fails against this object (422); `path` is a JSON pointer.
    #[error("{message}")]
    Failed { path: String, message: String },
    /// Strategic merge patch of a kind without a patch schema (a custom resource): 415.
    #[error("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")]
    StrategicUnsupported,
}

impl PatchError {
    /// The Status a server answers with, about the object `name` of type `res`.
    pub fn into_api_error(self, res: &ResourceDef, name: &str) -> ApiError {
        match self {
            PatchError::Malformed { .. } => ApiError::BadRequest(self.to_string()),
            PatchError::Failed { message, .. } => ApiError::invalid(
                Subject {
                    group: res.group.clone(),
                    kind: res.kind.clone(),
                    name: name.to_string(),
                },
                "patch",
                &message,
            ),
            PatchError::StrategicUnsupported => ApiError::UnsupportedMediaType(self.to_string()),
        }
    }
}

/// Applies a JSON merge patch (RFC 7386): maps merge, null deletes, anything else replaces.
pub fn merge_patch(current: &Value, patch: &Value) -> Value {
    let mut out = current.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// The JSON merge patch that turns `from` into `to` (removed keys become `null`). Exact when
/// `to` holds no `null` values, which a merge patch cannot express.
pub fn merge_diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = serde_json::Map::new();
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            for (k, v) in b {
                match a.get(k) {
                    Some(old) if old == v => {}
                    Some(old) => {
                        out.insert(k.clone(), merge_diff(old, v));
                    }
                    None => {
                        out.insert(k.clone(), merge_diff(&Value::Null, v));
                    }
                }
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}

/// Applies a JSON patch (RFC 6902) atomically: on failure nothing is applied and the error
/// names the operation's path.
pub fn json_patch(current: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| PatchError::Malformed {
            patch: "JSON",
            message: e.to_string(),
        })?;
    let mut out = current.clone();
    json_patch::patch(&mut out, &ops).map_err(|e| PatchError::Failed {
        path: e.path.to_string(),
        message: e.to_string(),
    })?;
    Ok(out)
}

/// Applies a PATCH of `kind` (not Apply, which needs a manager: see `apply::apply`) to
/// `current`, the object of type `res`, and says any refusal as kube-apiserver would: a
/// strategic merge patch of a kind without a patch schema (a custom resource) is 415.
pub fn patch(
    res: &ResourceDef,
    kind: PatchType,
    current: &Value,
    body: &Value,
) -> Result<Value, ApiError> {
    let name = meta::name(current);
    match kind {
        PatchType::Json => json_patch(current, body).map_err(|e| e.into_api_error(res, name)),
        PatchType::Merge => Ok(merge_patch(current, body)),
        PatchType::StrategicMerge if !strategy::supports_strategic(&res.group, &res.kind) => {
            Err(PatchError::StrategicUnsupported.into_api_error(res, name))
        }
        PatchType::StrategicMerge => {
            strategic::strategic_merge_patch(&res.group, &res.kind, current, body)
                .map_err(|e| e.into_api_error(res, name))
        }
        PatchType::Apply => Err(ApiError::UnsupportedMediaType(
            "server-side apply needs a field manager; use apply::apply".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types() {
        let cases = [
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::StrategicMerge),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            ("application/json", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct}");
            if let Some(t) = want {
                assert_eq!(PatchType::from_content_type(t.content_type()), want);
            }
        }
    }

    #[test]
    fn merge_patch_deletes_with_null_and_replaces_lists() {
        let cur = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        let out = merge_patch(&cur, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(out, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_errors_name_the_path() {
        let cur = json!({"spec": {"replicas": 1}});
        let ok = json_patch(
            &cur,
            &json!([{"op": "replace", "path": "/spec/replicas", "value": 2}]),
        );
        assert_eq!(ok.unwrap()["spec"]["replicas"], 2);
        let err = json_patch(
            &cur,
            &json!([{"op": "add", "path": "/spec/x", "value": 1}, {"op": "remove", "path": "/spec/missing/deep"}]),
        )
        .unwrap_err();
        match &err {
            PatchError::Failed { path, message } => {
                assert_eq!(path, "/spec/missing/deep");
                assert!(message.contains("/spec/missing/deep"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let malformed = json_patch(&cur, &json!({"op": "add"})).unwrap_err();
        assert!(matches!(malformed, PatchError::Malformed { .. }));
        let res = crate::resource::find_builtin("apps", "v1", "deployments").unwrap();
        let api = err.into_api_error(res, "web");
        assert_eq!(api.code(), 422);
        assert_eq!(malformed.into_api_error(res, "web").code(), 400);
    }
}
