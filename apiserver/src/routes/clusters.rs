//! `/v1/clusters`: register, list, read, replace, deregister, cordon, uncordon, drain.
//!
//! Writes are pre-checked against linearizable state (existence, resource version) so a doomed
//! write is answered without touching the log; core repeats every check at apply time, which is
//! what makes concurrent writers safe. Credentials are write-only: a PUT without `credentials`
//! keeps the stored ones (read from the state, never shown). Credentials are sealed (or
//! refused) by `crate::sealing` before the command is built, so the log never holds them in
//! the clear on a node with a key.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fedraft_core::command::Command;
use fedraft_core::model::{ClusterSpec, Credentials};
use fedraft_core::state::validate;
use serde_json::json;

use super::common::{
    allow, check_version, expected_version, read, resource_version, submit, ReadParams, P, Q,
};
use super::paging::{with_metadata, ListParams};
use crate::auth::{Access, Principal};
use crate::body::decode_body;
use crate::error::ApiError;
use crate::wire::{self, check_same, valid_label, ClusterIn, Envelope};
use crate::App;

/// Filtered and paged on request (`super::paging`).
pub async fn list(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ListParams>,
) -> Result<Json<serde_json::Value>, ApiError> {
    allow(&app, &p, Access::ReadClusters)?;
    let page = q.page()?;
    let doc = read(&app, q.stale, move |s| {
        let items: Vec<_> = s
            .clusters()
            .filter(|c| page.after_token(&c.spec.name))
            .filter(|c| {
                page.health
                    .as_deref()
                    .is_none_or(|h| serde_json::to_value(c.status.health).ok() == Some(h.into()))
            })
            .filter(|c| {
                if page.q.is_none() {
                    return true;
                }
                let labels: Vec<String> = c
                    .spec
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let mut texts: Vec<&str> = labels.iter().map(String::as_str).collect();
                texts.push(&c.spec.name);
                page.matches(&texts)
            })
            .collect();
        let (items, meta) = page.cut(items, |c| c.spec.name.clone());
        with_metadata(
            wire::list_json(
                "Cluster",
                s.applied_index(),
                items.into_iter().map(|c| cluster_doc(s, c)).collect(),
            ),
            meta,
        )
    })
    .await?;
    Ok(Json(doc))
}

/// A cluster's document with its last detailed scan, when it has one: extended resources
/// allocatable and available over the cluster, the largest free amount of each on one node
/// (what a single replica can get there) and the node shapes themselves.
fn cluster_doc(
    s: &fedraft_core::state::State,
    c: &fedraft_core::model::Cluster,
) -> serde_json::Value {
    let mut doc = wire::cluster_json_in(s, c);
    if let Some(ext) = s.cluster_extended(&c.spec.name) {
        let largest: std::collections::BTreeMap<&str, u64> = ext
            .allocatable
            .0
            .keys()
            .map(|name| (name.as_str(), ext.largest_chunk(name)))
            .collect();
        doc["status"]["extended"] = json!({
            "allocatable": ext.allocatable,
            "available": ext.available,
            "largestFreeOnNode": largest,
            "nodeShapes": ext.nodes,
        });
    }
    doc
}

pub async fn get_one(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    Q(q): Q<ReadParams>,
) -> Result<Json<serde_json::Value>, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::ReadClusters)?;
    let n = name.clone();
    read(&app, q.stale, move |s| {
        s.cluster(&n).map(|c| cluster_doc(s, c))
    })
    .await?
    .map(Json)
    .ok_or_else(|| ApiError::not_found("cluster", &name))
}

/// Builds and validates a spec from a body; `credentials` fills in absent credentials, and
/// what is proposed is sealed as this node's config says.
fn spec_from(
    app: &App,
    body: ClusterIn,
    name: String,
    credentials: Credentials,
) -> Result<ClusterSpec, ApiError> {
    if let Some(Credentials::Kubeconfig(text)) = &body.credentials {
        super::kubeconfig::check(
            text,
            &app.cfg.kubeconfig_exec_allow,
            app.cfg.body_limit_bytes,
        )?;
    }
    if body.api_endpoint.is_empty() {
        return Err(ApiError::MissingField {
            field: "apiEndpoint".into(),
        });
    }
    if !(body.api_endpoint.starts_with("https://") || body.api_endpoint.starts_with("http://")) {
        return Err(ApiError::invalid(
            "apiEndpoint",
            "must be an http:// or https:// URL",
        ));
    }
    validate::labels(&body.labels, "labels").map_err(ApiError::from_field_error)?;
    validate::taints(&body.taints, "taints").map_err(ApiError::from_field_error)?;
    let sealed = app
        .cfg
        .credentials
        .prepare(&name, body.credentials, credentials)?;
    let mut spec = ClusterSpec::new(name, body.api_endpoint);
    spec.labels = body.labels;
    spec.taints = body.taints;
    spec.credentials = sealed;
    if let Some(v) = body.failure_threshold_seconds {
        spec.failure_threshold_seconds = v;
    }
    if let Some(v) = body.success_threshold_seconds {
        spec.success_threshold_seconds = v;
    }
    Ok(spec)
}

/// Reads the cluster's resource version and credentials linearizably (None = absent).
async fn current(app: &App, name: &str) -> Result<Option<(u64, Credentials)>, ApiError> {
    let n = name.to_string();
    read(app, false, move |s| {
        s.cluster(&n)
            .map(|c| (c.resource_version, c.spec.credentials.clone()))
    })
    .await
}

fn answer(app: &App, status: StatusCode, name: &str, rv: u64) -> Response {
    let n = name.to_string();
    let doc = app
        .node
        .read_stale(move |s| s.cluster(&n).map(|c| cluster_doc(s, c)))
        .unwrap_or_else(|| json!({"kind": "Cluster", "name": name, "resourceVersion": rv}));
    (status, Json(doc)).into_response()
}

pub async fn create(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    allow(&app, &p, Access::WriteClusters)?;
    let doc = decode_body::<ClusterIn>(&headers, body, app.cfg.body_limit_bytes).await?;
    doc.check_kind()?;
    let meta_name = doc.metadata.as_ref().and_then(|m| m.name.clone());
    let name = doc
        .name
        .clone()
        .or(meta_name)
        .ok_or(ApiError::MissingField {
            field: "name".into(),
        })?;
    valid_label(&name, "name")?;
    let expected = expected_version(&headers, doc.expected_version())?;
    let spec = spec_from(&app, doc, name.clone(), Credentials::None)?;
    let found = current(&app, &name).await?.map(|(v, _)| v);
    if let Some(v) = found {
        return Err(ApiError::Conflict {
            message: format!("cluster {name} already exists at resource version {v}"),
            expected,
            found: Some(v),
        });
    }
    check_version(expected, found)?;
    let applied = submit(&app, &p, &headers, Command::RegisterCluster(spec)).await?;
    Ok(answer(
        &app,
        StatusCode::CREATED,
        &name,
        resource_version(&applied),
    ))
}

pub async fn replace(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::WriteClusters)?;
    let doc = decode_body::<ClusterIn>(&headers, body, app.cfg.body_limit_bytes).await?;
    doc.check_kind()?;
    check_same("name", doc.name.as_deref(), &name)?;
    check_same(
        "metadata.name",
        doc.metadata.as_ref().and_then(|m| m.name.as_deref()),
        &name,
    )?;
    let expected = expected_version(&headers, doc.expected_version())?;
    let existing = current(&app, &name).await?;
    check_version(expected, existing.as_ref().map(|(v, _)| *v))?;
    let (command, status) = match existing {
        Some((_, creds)) => {
            let spec = spec_from(&app, doc, name.clone(), creds)?;
            (
                Command::UpdateCluster {
                    spec,
                    expected_version: expected,
                },
                StatusCode::OK,
            )
        }
        None => (
            Command::RegisterCluster(spec_from(&app, doc, name.clone(), Credentials::None)?),
            StatusCode::CREATED,
        ),
    };
    let applied = submit(&app, &p, &headers, command).await?;
    Ok(answer(&app, status, &name, resource_version(&applied)))
}

pub async fn delete(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::WriteClusters)?;
    let expected = expected_version(&headers, None)?;
    let found = current(&app, &name).await?.map(|(v, _)| v);
    if found.is_none() {
        return Err(ApiError::not_found("cluster", &name));
    }
    check_version(expected, found)?;
    let command = Command::DeregisterCluster {
        name: name.clone(),
        expected_version: expected,
    };
    let applied = submit(&app, &p, &headers, command).await?;
    let body = json!({"kind": "Status", "status": "Success", "name": name, "resourceVersion": applied.index});
    Ok((StatusCode::OK, Json(body)).into_response())
}

/// Cordon, uncordon and drain share this path; only the command differs.
async fn flag(
    app: App,
    p: Principal,
    name: String,
    headers: HeaderMap,
    make: fn(String) -> Command,
) -> Result<Response, ApiError> {
    valid_label(&name, "name")?;
    allow(&app, &p, Access::WriteClusters)?;
    if current(&app, &name).await?.is_none() {
        return Err(ApiError::not_found("cluster", &name));
    }
    let applied = submit(&app, &p, &headers, make(name.clone())).await?;
    Ok(answer(
        &app,
        StatusCode::OK,
        &name,
        resource_version(&applied),
    ))
}

pub async fn cordon(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    flag(app, p, name, headers, |name| Command::Cordon { name }).await
}

pub async fn uncordon(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    flag(app, p, name, headers, |name| Command::Uncordon { name }).await
}

pub async fn drain(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    flag(app, p, name, headers, |name| Command::Drain { name }).await
}
