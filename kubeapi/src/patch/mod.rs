//! The PATCH content types and their entry points: JSON patch (RFC 6902), JSON merge patch
//! (RFC 7386) and strategic merge patch (see `strategic`), with errors that name the failing
//! path. Server-side apply is `apply`. This module must not know storage or managed fields:
//! the caller records who changed what.

use serde_json::Value;

mod error;
mod merge;
mod strategic;

pub use error::PatchError;
pub use merge::{merge_diff, merge_patch};
pub use strategic::strategic_merge_patch;

use crate::meta;
use crate::resource::ResourceDef;
use crate::status::ApiError;
use crate::strategy;

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
        PatchType::StrategicMerge => strategic_merge_patch(&res.group, &res.kind, current, body)
            .map_err(|e| e.into_api_error(res, name)),
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
