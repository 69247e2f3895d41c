//! The `scale` subresource of Deployments, StatefulSets and ReplicaSets (`kubectl scale`): an
//! `autoscaling/v1` Scale read from the template, and writes of it that set the template's
//! `spec.replicas` through the same one-proposal path as every other write (`write`). Must not:
//! change anything of the template but `spec.replicas`.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fedraft_kubeapi::{meta, patch, PatchType};
use serde_json::{json, Value};

use super::read::{authorize_read, load_one, reply};
use super::write::{
    kind_subject, patch_request, precondition, preview, propose_put, replacement, written,
    CONFLICT_ATTEMPTS,
};
use super::{Call, KResult, Refusal};

/// The `autoscaling/v1` Scale of a template.
fn scale_of(obj: &Value) -> Value {
    let m = meta::metadata(obj).cloned().unwrap_or_default();
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m.get("name"),
            "namespace": m.get("namespace"),
            "resourceVersion": m.get("resourceVersion"),
            "uid": m.get("uid"),
            "creationTimestamp": m.get("creationTimestamp"),
        },
        "spec": { "replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1)) },
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        },
    })
}

pub async fn get(call: &Call) -> KResult<Response> {
    let t = &call.target;
    let name = t.name.clone().unwrap_or_default();
    authorize_read(call, t.ns.as_deref())?;
    let cur = load_one(call, &name)
        .await?
        .ok_or_else(|| Refusal::not_found(t.subject(&name)))?;
    Ok(reply(call, StatusCode::OK, scale_of(&cur.render()), false))
}

/// `kubectl scale`: a PUT of the whole Scale.
pub async fn replace(call: &Call, body: Body) -> KResult<Response> {
    let (obj, name) = replacement(call, body).await?;
    let replicas = obj.pointer("/spec/replicas").cloned();
    set_replicas(call, &name, replicas, precondition(&obj)).await
}

/// A JSON or merge patch of the Scale (`kubectl patch --subresource=scale`).
pub async fn patch(call: &Call, body: Body) -> KResult<Response> {
    let (name, kind, body) = patch_request(call, body).await?;
    let name = name.as_str();
    let t = &call.target;
    let cur = load_one(call, name)
        .await?
        .ok_or_else(|| Refusal::not_found(t.subject(name)))?;
    let scale = scale_of(&cur.render());
    let next = match kind {
        PatchType::Json => {
            patch::json_patch(&scale, &body).map_err(|e| e.into_api_error(&t.served.def, name))?
        }
        _ => patch::merge_patch(&scale, &body),
    };
    let replicas = next.pointer("/spec/replicas").cloned();
    set_replicas(call, name, replicas, precondition(&body)).await
}

/// Sets `spec.replicas` of the template (the scale subresource's one write).
async fn set_replicas(
    call: &Call,
    name: &str,
    replicas: Option<Value>,
    pre: Option<String>,
) -> KResult<Response> {
    let t = &call.target;
    let replicas = replicas.and_then(|r| r.as_u64()).ok_or_else(|| {
        Refusal::invalid(
            kind_subject(t, name),
            "spec.replicas",
            "Required value: a non-negative integer",
        )
    })?;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let cur = load_one(call, name)
            .await?
            .ok_or_else(|| Refusal::not_found(t.subject(name)))?;
        let rv = cur.resource_version();
        if pre.as_ref().is_some_and(|p| *p != rv.to_string()) {
            return Err(Refusal::stale(t.subject(name), &t.plural()));
        }
        let mut next = cur.render();
        next["spec"]["replicas"] = json!(replicas);
        if call.params.dry_run() {
            return Ok(Json(scale_of(&preview(Some(&cur), next))).into_response());
        }
        match propose_put(call, &next, rv).await {
            Err(e) if e.is_conflict() && pre.is_none() && attempts < CONFLICT_ATTEMPTS => continue,
            Err(e) => return Err(e),
            Ok(()) => return Ok(Json(scale_of(&written(call, name)?)).into_response()),
        }
    }
}
