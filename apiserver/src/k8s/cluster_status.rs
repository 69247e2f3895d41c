//! The `status` subresource of Karmada's `Cluster` documents: what an external health checker
//! writes (`kubectl patch cluster.cluster.karmada.io m1 --subresource=status --type=merge -p
//! '{"status":{"conditions":[...]}}'`) so that `ClusterTaintPolicy` documents can match on it.
//! The conditions are proposed as one `ClusterConditions` command for the cluster the document
//! registered; `Ready` stays fedraft's own (from its probes), so a write that repeats it
//! unchanged leaves it out, and one that changes it is refused by core, naming the field.
//!
//! Must not: write anything of the document but its conditions, or keep anything itself.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fedraft_core::command::Command;
use fedraft_core::karmada::{ClusterCondition, READY_CONDITION};
use fedraft_kubeapi::{patch, PatchType};
use serde_json::Value;

use super::read::{authorize_read, load_one, reply};
use super::render::Loaded;
use super::write::{kind_subject, patch_request, preview, replacement, written};
use super::{Call, KResult, Refusal};
use crate::routes::common::submit;
use crate::routes::objects::as_actor;

pub async fn get(call: &Call) -> KResult<Response> {
    let t = &call.target;
    let name = t.name.clone().unwrap_or_default();
    authorize_read(call, None)?;
    let cur = load_one(call, &name)
        .await?
        .ok_or_else(|| Refusal::not_found(t.subject(&name)))?;
    Ok(reply(call, StatusCode::OK, cur.render(), false))
}

/// A PUT of the whole document: only its status is read.
pub async fn replace(call: &Call, body: Body) -> KResult<Response> {
    let (obj, name) = replacement(call, body).await?;
    write(call, &name, &obj).await
}

/// A merge or JSON patch of the document's status.
pub async fn patch(call: &Call, body: Body) -> KResult<Response> {
    let (name, kind, body) = patch_request(call, body).await?;
    let t = &call.target;
    let cur = current(call, &name).await?;
    let current = cur.render();
    let next = match kind {
        PatchType::Json => patch::json_patch(&current, &body)
            .map_err(|e| e.into_api_error(&t.served.def, &name))?,
        // Conditions are replaced as a list, as for a custom resource.
        PatchType::Merge | PatchType::StrategicMerge => patch::merge_patch(&current, &body),
        _ => {
            return Err(Refusal::bad_request(
                "the status of a Cluster is written with a merge or JSON patch",
            ))
        }
    };
    write(call, &name, &next).await
}

async fn current(call: &Call, name: &str) -> KResult<Loaded> {
    load_one(call, name)
        .await?
        .ok_or_else(|| Refusal::not_found(call.target.subject(name)))
}

/// The conditions of `next` (the document as the write leaves it), checked for shape.
fn conditions_of(
    call: &Call,
    name: &str,
    next: &Value,
    ready: Option<&str>,
) -> KResult<Vec<ClusterCondition>> {
    let invalid = |field: String, detail: &str| {
        Refusal::invalid(kind_subject(&call.target, name), &field, detail)
    };
    let list = match next.pointer("/status/conditions") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(invalid("status.conditions".into(), "must be a list")),
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let text = |f: &str| c.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let (condition_type, status) = (text("type"), text("status"));
        if condition_type.is_empty() {
            return Err(invalid(
                format!("status.conditions[{i}].type"),
                "Required value",
            ));
        }
        // fedraft's own Ready, as the read showed it: not the writer's to record.
        if condition_type == READY_CONDITION && ready == Some(status.as_str()) {
            continue;
        }
        out.push(ClusterCondition {
            condition_type,
            status,
            reason: text("reason"),
            message: text("message"),
        });
    }
    Ok(out)
}

async fn write(call: &Call, name: &str, next: &Value) -> KResult<Response> {
    let cur = current(call, name).await?;
    let current = cur.render();
    let ready = current
        .pointer("/status/conditions/0/status")
        .and_then(Value::as_str);
    let registered = matches!(
        &cur,
        Loaded::Policy {
            member: Some(_),
            ..
        }
    );
    let conditions = conditions_of(call, name, next, ready)?;
    if !registered {
        return Err(Refusal::invalid(
            kind_subject(&call.target, name),
            "status.conditions",
            "the cluster is not registered yet (its Secret is missing); conditions are kept for \
             registered clusters only",
        ));
    }
    if call.params.dry_run() {
        let mut shown = current.clone();
        shown["status"] = next.get("status").cloned().unwrap_or(Value::Null);
        return Ok((StatusCode::OK, Json(preview(Some(&cur), shown))).into_response());
    }
    let command = Command::ClusterConditions {
        cluster: name.to_string(),
        conditions,
    };
    submit(
        &call.app,
        &as_actor(&call.principal),
        &call.headers,
        command,
    )
    .await?;
    Ok(Json(written(call, name)?).into_response())
}
