//! `POST /v1/schedule/dry-run`: what the scheduler would decide for the given object on the
//! current state, with nothing written.
//!
//! It applies the object's PutObject to a private copy of the (linearizably read) state and
//! returns the decision that produced, so the answer uses exactly the code path a real write
//! would, quota and tenant slices included. The copy costs O(state) per call; this endpoint is for
//! people, not for load. A tenant member's answer names only the clusters its tenant may use
//! (`common::decision_for`).
//!
//! The namespace is in the body, so authorisation happens twice: before the body is read, a
//! principal that may read no namespace at all (a tenant owning none) is refused on its headers
//! alone; after decoding, the namespace named is checked.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use fedraft_core::command::{Command, LogEntry};
use fedraft_core::state::Outcome;
use serde_json::{json, Value};

use super::common::{allow, decision_for, read};
use super::objects::{check_envelope, spec_from};
use crate::auth::{Access, Principal};
use crate::body::decode_body;
use crate::error::ApiError;
use crate::wire::{decision_json, valid_label, valid_subdomain, ObjectIn};
use crate::App;

pub async fn dry_run(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadSomeNamespace)?;
    let doc = decode_body::<ObjectIn>(&headers, body, app.cfg.body_limit_bytes).await?;
    let meta = doc.metadata.clone().unwrap_or_default();
    let ns = doc
        .namespace
        .clone()
        .or(meta.namespace)
        .ok_or(ApiError::MissingField {
            field: "namespace".into(),
        })?;
    let name = doc
        .name
        .clone()
        .or(meta.name)
        .ok_or(ApiError::MissingField {
            field: "name".into(),
        })?;
    valid_label(&ns, "namespace")?;
    valid_subdomain(&name, "name")?;
    allow(&app, &p, Access::ReadNamespace(&ns))?;
    check_envelope(&doc, &ns, &name)?;
    let spec = spec_from(doc)?;
    let actor = p.name.clone();
    let role = p.role.clone();
    let result = read(&app, false, move |s| {
        let basis = s.applied_index();
        let mut scratch = s.clone();
        let command = Command::PutObject {
            namespace: ns.clone(),
            name: name.clone(),
            spec,
            expected_version: None,
        };
        let entry = LogEntry::new("", actor, s.log_time_ms(), command);
        let applied = scratch.apply(basis + 1, &entry);
        if let Outcome::Rejected(r) = &applied.outcome {
            return Err(ApiError::from_rejection(r));
        }
        let decision = applied
            .decisions
            .iter()
            .rev()
            .find(|(k, _)| k.namespace == ns && k.name == name)
            .map(|(_, d)| d.clone())
            .or_else(|| scratch.explain(&ns, &name))
            .map(|d| decision_for(&scratch, &role, d));
        Ok(json!({
            "kind": "ScheduleDecision",
            "namespace": ns,
            "name": name,
            "basedOnResourceVersion": basis,
            "decision": decision.as_ref().map(decision_json),
        }))
    })
    .await??;
    Ok(Json(result))
}
