//! `/v1/tenants[/{name}]`: tenants with their namespaces, quota, slice size and members.
//! Admins write; a tenant member reads its own tenant; operators read all.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fedraft_core::command::Command;
use fedraft_core::model::TenantSpec;
use serde_json::{json, Value};

use super::common::{
    allow, check_version, expected_version, member_scope, read, resource_version, submit,
    tenant_for_scope, ReadParams, P, Q,
};
use crate::auth::{Access, Principal, Role};
use crate::body::decode_body;
use crate::error::ApiError;
use crate::wire::{self, check_same, tenant_json, valid_label, Envelope, TenantIn};
use crate::App;

pub async fn list(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    let only = match &p.role {
        Role::Tenant(t) => Some(t.clone()),
        _ => None,
    };
    let doc = read(&app, q.stale, move |s| {
        let items = s
            .tenants()
            .filter(|t| only.as_ref().is_none_or(|o| *o == t.spec.name))
            .map(|t| with_extended(s, t, &p))
            .collect();
        wire::list_json("Tenant", s.applied_index(), items)
    })
    .await?;
    Ok(Json(doc))
}

pub async fn get_one(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::ReadTenant(&name))?;
    let n = name.clone();
    read(&app, q.stale, move |s| {
        s.tenant(&n).map(|t| with_extended(s, t, &p))
    })
    .await?
    .map(Json)
    .ok_or_else(|| ApiError::not_found("tenant", &name))
}

/// A tenant's document with its extended quota, use and waiting work, as `p` may see it: a
/// member whose role is scoped to some of the tenant's namespaces sees those only
/// (`common::tenant_for_scope`), and no use or waiting work of the others.
fn with_extended(
    s: &fedraft_core::state::State,
    t: &fedraft_core::model::Tenant,
    p: &Principal,
) -> Value {
    let scope = member_scope(s, p);
    let scoped = scope.as_ref().map(|ns| tenant_for_scope(s, t, ns, &p.name));
    let mut doc = tenant_json(scoped.as_ref().unwrap_or(t));
    let (quota, used) = super::quota::extended_json(s, &t.spec.name);
    doc["extendedQuota"] = quota;
    doc["perCluster"] = super::quota::per_cluster_json(s, &t.spec.name);
    let waiting = s.waiting(Some(&t.spec.name));
    match &scoped {
        Some(seen) => {
            // Extended use is kept per tenant only: none of it is the scoped member's to see.
            let mine = waiting
                .iter()
                .filter(|w| seen.spec.namespaces.contains(&w.namespace))
                .count();
            doc["status"]["waiting"] = json!(mine);
        }
        None => {
            // Counted as the quota check counts (Duplicated copies once per cluster they run
            // in), not the stored sum that counts each object once.
            if let Some(u) = s.tenant_used(&t.spec.name) {
                doc["status"]["used"] = json!(u);
            }
            doc["status"]["extendedUsed"] = used;
            doc["status"]["waiting"] = json!(waiting.len());
        }
    }
    doc
}

async fn current_version(app: &App, name: &str) -> Result<Option<u64>, ApiError> {
    let n = name.to_string();
    read(app, false, move |s| {
        s.tenant(&n).map(|t| t.resource_version)
    })
    .await
}

pub async fn put(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::WriteTenant)?;
    let doc = decode_body::<TenantIn>(&headers, body, app.cfg.body_limit_bytes).await?;
    doc.check_kind()?;
    check_same("name", doc.name.as_deref(), &name)?;
    check_same(
        "metadata.name",
        doc.metadata.as_ref().and_then(|m| m.name.as_deref()),
        &name,
    )?;
    for (i, ns) in doc.namespaces.iter().enumerate() {
        valid_label(ns, &format!("namespaces[{i}]"))?;
    }
    let expected = expected_version(&headers, doc.expected_version())?;
    if expected.is_some() {
        check_version(expected, current_version(&app, &name).await?)?;
    }
    let (quota, extended) = super::quota::parse_quota("quota", &doc.quota)?;
    let spec = TenantSpec {
        name: name.clone(),
        namespaces: doc.namespaces,
        quota,
        slice_size: doc.slice_size,
        members: doc.members,
    };
    let per_cluster = super::quota::parse_per_cluster(&doc.per_cluster, &spec.quota, &extended)?;
    // The oldest command that says it all, as before per-cluster and extended quotas existed.
    let command = if !per_cluster.is_empty() {
        Command::PutTenantWithQuotas {
            spec,
            quota: extended,
            per_cluster,
        }
    } else if extended.is_empty() {
        Command::PutTenant(spec)
    } else {
        Command::PutTenantWithExtended {
            spec,
            quota: extended,
        }
    };
    let applied = submit(&app, &p, &headers, command).await?;
    let rv = resource_version(&applied);
    let n = name.clone();
    let out = app
        .node
        .read_stale(move |s| s.tenant(&n).map(|t| with_extended(s, t, &p)))
        .unwrap_or_else(|| json!({"kind": "Tenant", "name": name, "resourceVersion": rv}));
    Ok((StatusCode::OK, Json(out)).into_response())
}

pub async fn delete(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::WriteTenant)?;
    let expected = expected_version(&headers, None)?;
    let found = current_version(&app, &name).await?;
    if found.is_none() {
        return Err(ApiError::not_found("tenant", &name));
    }
    check_version(expected, found)?;
    let applied = submit(
        &app,
        &p,
        &headers,
        Command::DeleteTenant {
            name: name.clone(),
            expected_version: expected,
        },
    )
    .await?;
    let body = json!({"kind": "Status", "status": "Success", "name": name, "resourceVersion": applied.index});
    Ok((StatusCode::OK, Json(body)).into_response())
}
