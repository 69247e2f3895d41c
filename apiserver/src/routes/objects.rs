//! `/v1/namespaces/{ns}/objects[/{name}]` and `/v1/objects`: federated objects.
//!
//! PUT is create-or-replace. Without an expected resource version it goes straight to the log
//! (core validates again at apply); with one, the version is pre-checked on linearizable state so
//! a stale writer gets 409 without a log entry. GET of one object adds the scheduler's current
//! reasoning (candidates, dropped clusters with reasons) to `status.lastDecision`; a tenant
//! member sees it without the clusters outside its tenant's slices (`common::decision_for`).
//! `POST .../{name}/reschedule` forgets the placement and schedules the object from scratch
//! (`Command::RevokePlacement`): the explicit fail-back or rebalance of one object.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fedraft_core::command::Command;
use fedraft_core::model::{FederatedObject, ObjectSpec};
use fedraft_core::state::validate;
use serde_json::{json, Value};

use super::common::{
    allow, check_version, decision_for, expected_version, read, resource_version, submit,
    tenant_namespaces, ReadParams, P, Q,
};
use super::paging::{with_metadata, ListParams};
use crate::auth::{Access, Principal, Role};
use crate::body::decode_body;
use crate::error::ApiError;
use crate::view::ObjectView;
use crate::wire::{
    self, check_same, object_json, refuse_template_write, valid_label, valid_object_ref, Envelope,
    ObjectIn,
};
use crate::App;

pub async fn list_all(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ListParams>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadAllObjects)?;
    let page = q.page()?;
    // Tenant members see only their tenant's namespaces; others see everything.
    let only = matches!(p.role, Role::Tenant(_)).then(|| tenant_namespaces(&app, &p));
    // Only the objects' handles are taken under the state's lock; rendering a long list there
    // would hold back every apply for as long.
    let (at, objects, meta) = read(&app, q.stale, move |s| {
        let objects: Vec<_> = s
            .objects_shared()
            .filter(|o| only.as_ref().is_none_or(|ns| ns.contains(&o.namespace)))
            .filter(|o| page_has(&page, o))
            .cloned()
            .collect();
        let (objects, meta) = page.cut(objects, |o| object_key(o));
        (s.applied_index(), objects, meta)
    })
    .await?;
    Ok(Json(with_metadata(object_list(at, &objects), meta)))
}

/// An object's list key and filter text (a namespace is a DNS label: it holds no `/`).
fn object_key(o: &FederatedObject) -> String {
    format!("{}/{}", o.namespace, o.name)
}

fn page_has(page: &super::paging::Page, o: &FederatedObject) -> bool {
    page.after_object(&o.namespace, &o.name) && page.matches(&[&object_key(o)])
}

pub async fn list_ns(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(ns): P<String>,
    Q(q): Q<ListParams>,
) -> Result<Json<Value>, ApiError> {
    valid_label(&ns, "namespace")?;
    allow(&app, &p, Access::ReadNamespace(&ns))?;
    let page = q.page()?;
    let (at, objects, meta) = read(&app, q.stale, move |s| {
        let objects: Vec<_> = s
            .objects_in_shared(&ns)
            .filter(|o| page_has(&page, o))
            .cloned()
            .collect();
        let (objects, meta) = page.cut(objects, |o| object_key(o));
        (s.applied_index(), objects, meta)
    })
    .await?;
    Ok(Json(with_metadata(object_list(at, &objects), meta)))
}

pub async fn get_one(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    valid_label(&ns, "namespace")?;
    valid_object_ref(&name, "name")?;
    allow(&app, &p, Access::ReadNamespace(&ns))?;
    let (n, m) = (ns.clone(), name.clone());
    let role = p.role.clone();
    read(&app, q.stale, move |s| {
        let o = s.object(&n, &m)?;
        let decision = s.explain(&n, &m).map(|d| decision_for(s, &role, d));
        let mut doc = object_json(o, decision.as_ref());
        if let Some(d) = s.discovery(&n, &m) {
            doc["discovery"] = serde_json::to_value(d).unwrap_or(Value::Null);
        }
        Some(doc)
    })
    .await?
    .map(Json)
    .ok_or_else(|| ApiError::not_found("object", format!("{ns}/{name}")))
}

/// Turns a decoded body into a validated spec (the same checks core makes, with the API's
/// field names, so a bad spec never reaches the log).
pub fn spec_from(doc: ObjectIn) -> Result<ObjectSpec, ApiError> {
    if !doc.template.is_object() {
        return Err(ApiError::invalid(
            "template",
            "must be an object (a Kubernetes manifest)",
        ));
    }
    let template = doc.template.to_string();
    validate::template(&template, "template").map_err(ApiError::from_field_error)?;
    doc.placement
        .validate("placement")
        .map_err(ApiError::from_field_error)?;
    for (i, o) in doc.overrides.iter().enumerate() {
        o.validate(&format!("overrides[{i}]"))
            .map_err(ApiError::from_field_error)?;
    }
    Ok(ObjectSpec {
        template,
        placement: doc.placement,
        overrides: doc.overrides,
    })
}

/// Checks the envelope of an object body against the path.
pub fn check_envelope(doc: &ObjectIn, ns: &str, name: &str) -> Result<(), ApiError> {
    doc.check_kind()?;
    check_same("namespace", doc.namespace.as_deref(), ns)?;
    check_same("name", doc.name.as_deref(), name)?;
    let meta = doc.metadata.as_ref();
    check_same(
        "metadata.namespace",
        meta.and_then(|m| m.namespace.as_deref()),
        ns,
    )?;
    check_same("metadata.name", meta.and_then(|m| m.name.as_deref()), name)
}

async fn current_version(app: &App, ns: &str, name: &str) -> Result<Option<u64>, ApiError> {
    let (n, m) = (ns.to_string(), name.to_string());
    read(app, false, move |s| {
        s.object(&n, &m).map(|o| o.resource_version)
    })
    .await
}

pub async fn put(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    valid_label(&ns, "namespace")?;
    refuse_template_write(&name)?;
    allow(&app, &p, Access::WriteNamespace(&ns))?;
    let doc = decode_body::<ObjectIn>(&headers, body, app.cfg.body_limit_bytes).await?;
    check_envelope(&doc, &ns, &name)?;
    let expected = expected_version(&headers, doc.expected_version())?;
    let discovery = doc.discovery.clone();
    let rollout = doc.rollout.clone();
    if let Some(r) = &rollout {
        r.validate("rollout").map_err(ApiError::from_field_error)?;
        if discovery.is_some() {
            return Err(ApiError::invalid(
                "rollout",
                "a Service with discovery takes no rollout strategy",
            ));
        }
    }
    let failback = doc.fail_back;
    if let Some(f) = &failback {
        f.validate("failBack").map_err(ApiError::from_field_error)?;
        if discovery.is_some() {
            return Err(ApiError::invalid(
                "failBack",
                "a Service with discovery takes no fail-back choice",
            ));
        }
    }
    let descheduling = doc.descheduling;
    if let Some(d) = &descheduling {
        d.validate("descheduling")
            .map_err(ApiError::from_field_error)?;
        if discovery.is_some() {
            return Err(ApiError::invalid(
                "descheduling",
                "a Service with discovery takes no descheduling policy",
            ));
        }
    }
    let spec = spec_from(doc)?;
    if let Some(d) = &discovery {
        d.validate("discovery")
            .map_err(ApiError::from_field_error)?;
        fedraft_core::discovery::validate_service_template(&spec.template, &name, "discovery")
            .map_err(ApiError::from_field_error)?;
    }
    if expected.is_some() {
        check_version(expected, current_version(&app, &ns, &name).await?)?;
    }
    let command = match (discovery, rollout, failback, descheduling) {
        (_, rollout, failback, Some(descheduling)) => Command::PutObjectWithDescheduling {
            namespace: ns.clone(),
            name: name.clone(),
            spec,
            rollout,
            failback,
            descheduling,
            expected_version: expected,
        },
        (_, rollout, Some(failback), None) => Command::PutObjectWithFailBack {
            namespace: ns.clone(),
            name: name.clone(),
            spec,
            rollout,
            failback,
            expected_version: expected,
        },
        (_, Some(rollout), None, None) => Command::PutObjectWithRollout {
            namespace: ns.clone(),
            name: name.clone(),
            spec,
            rollout,
            expected_version: expected,
        },
        (Some(discovery), None, None, None) => Command::PutObjectWithDiscovery {
            namespace: ns.clone(),
            name: name.clone(),
            spec,
            discovery,
            expected_version: expected,
        },
        (None, None, None, None) => Command::PutObject {
            namespace: ns.clone(),
            name: name.clone(),
            spec,
            expected_version: expected,
        },
    };
    let applied = submit(&app, &as_actor(&p), &headers, command).await?;
    let rv = resource_version(&applied);
    // The stored object is shared, not copied, and written out after the state's lock is
    // released: rendering under it would hold back the next apply.
    let doc = app
        .node
        .read_stale(|s| s.object_shared(&ns, &name))
        .map(|o| render_object(&o));
    match doc {
        Some(Ok(bytes)) => Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response()),
        // Deleted again before this answer (or unrenderable): the write itself still succeeded.
        _ => {
            let doc = json!({"kind": "FederatedObject", "namespace": ns, "name": name, "resourceVersion": rv});
            Ok((StatusCode::OK, Json(doc)).into_response())
        }
    }
}

/// The principal as its writes name it in the log: a tenant member's actor carries its tenant
/// (`tenant:TENANT/NAME`), so core checks the tenant's rights again at apply, on the log's
/// state rather than this node's (`fedraft_core::admission`).
pub(crate) fn as_actor(p: &Principal) -> Principal {
    match &p.role {
        Role::Tenant(t) => Principal {
            name: fedraft_core::admission::Actor::tenant_actor(t, &p.name),
            role: p.role.clone(),
        },
        _ => p.clone(),
    }
}

fn object_list(at: u64, objects: &[std::sync::Arc<FederatedObject>]) -> Value {
    let items = objects.iter().map(|o| object_json(o, None)).collect();
    wire::list_json("FederatedObject", at, items)
}

/// The object as JSON, in one buffer sized for it up front (the template is most of it; the
/// rest is placement and status, rarely over a kilobyte).
fn render_object(o: &FederatedObject) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(o.spec.template.len() + 1024);
    serde_json::to_writer(&mut out, &ObjectView(o))?;
    Ok(out)
}

pub async fn delete(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    valid_label(&ns, "namespace")?;
    refuse_template_write(&name)?;
    allow(&app, &p, Access::WriteNamespace(&ns))?;
    let expected = expected_version(&headers, None)?;
    let found = current_version(&app, &ns, &name).await?;
    if found.is_none() {
        return Err(ApiError::not_found("object", format!("{ns}/{name}")));
    }
    check_version(expected, found)?;
    let command = Command::DeleteObject {
        namespace: ns.clone(),
        name: name.clone(),
        expected_version: expected,
    };
    let applied = submit(&app, &as_actor(&p), &headers, command).await?;
    let body = json!({"kind": "Status", "status": "Success", "namespace": ns, "name": name, "resourceVersion": applied.index});
    Ok((StatusCode::OK, Json(body)).into_response())
}

/// `POST /v1/namespaces/{ns}/objects/{name}/reschedule`: one `RevokePlacement` entry; answers
/// the object as placed after it (the same placement when the scheduler keeps it).
pub async fn reschedule(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    valid_label(&ns, "namespace")?;
    valid_object_ref(&name, "name")?;
    allow(&app, &p, Access::WriteNamespace(&ns))?;
    if current_version(&app, &ns, &name).await?.is_none() {
        return Err(ApiError::not_found("object", format!("{ns}/{name}")));
    }
    let command = Command::RevokePlacement {
        namespace: ns.clone(),
        name: name.clone(),
    };
    let applied = submit(&app, &as_actor(&p), &headers, command).await?;
    let rv = resource_version(&applied);
    let doc = app
        .node
        .read_stale(|s| s.object_shared(&ns, &name))
        .map(|o| object_json(&o, None))
        .unwrap_or_else(|| json!({"kind": "FederatedObject", "namespace": ns, "name": name}));
    let mut doc = doc;
    doc["resourceVersion"] = json!(rv);
    Ok((StatusCode::OK, Json(doc)).into_response())
}
