//! `/v1/admin/admission`: the replicated admission policy (`fedraft_core::admission`).
//!
//! GET shows it to any authenticated principal (tenants may read the rules they are held to);
//! PUT replaces it, admins only, through the log (`SetAdmissionPolicy`), where core checks the
//! actor again at apply. Must not: enforce admission itself (core does, at apply).

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use fedraft_core::admission::AdmissionPolicy;
use fedraft_core::command::Command;
use serde_json::{json, Value};

use super::common::{read, resource_version, submit, ReadParams, Q};
use crate::auth::{Principal, Role};
use crate::body::decode_body;
use crate::error::ApiError;
use crate::App;

fn policy_json(at: u64, policy: &AdmissionPolicy) -> Value {
    let mut doc = serde_json::to_value(policy).unwrap_or(Value::Null);
    doc["kind"] = json!("AdmissionPolicy");
    doc["resourceVersion"] = json!(at);
    doc
}

pub async fn get_policy(
    State(app): State<App>,
    Extension(_p): Extension<Principal>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    let (at, policy) = read(&app, q.stale, |s| {
        (s.applied_index(), s.admission_policy().clone())
    })
    .await?;
    Ok(Json(policy_json(at, &policy)))
}

pub async fn put_policy(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    if p.role != Role::Admin {
        return Err(ApiError::forbidden(format!(
            "{} may not set the admission policy",
            p.name
        )));
    }
    let mut doc = decode_body::<Value>(&headers, body, app.cfg.body_limit_bytes).await?;
    // What GET returns may be sent back as it is.
    if let Some(m) = doc.as_object_mut() {
        m.remove("kind");
        m.remove("resourceVersion");
    }
    let policy: AdmissionPolicy = serde_json::from_value(doc)
        .map_err(|e| ApiError::invalid("body", format!("not an admission policy: {e}")))?;
    policy
        .validate("spec")
        .map_err(ApiError::from_field_error)?;
    let applied = submit(
        &app,
        &p,
        &headers,
        Command::SetAdmissionPolicy(policy.clone()),
    )
    .await?;
    Ok(Json(policy_json(resource_version(&applied), &policy)))
}
