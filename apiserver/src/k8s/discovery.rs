//! The discovery endpoints: `/version`, `/api`, `/apis` (legacy or aggregated, as `Accept`
//! asks), `/api/v1`, `/apis/{group}[/{version}]` and the small OpenAPI v3 documents kubectl
//! reads before an apply. The documents are `fedraft_kubeapi::discovery`'s, built from the
//! door's catalog and the types the stored CRDs define (`crds`). Must not list anything the
//! door does not serve.

use std::borrow::Cow;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fedraft_kubeapi::discovery::{self as docs, AggregatedVersion};
use fedraft_kubeapi::negotiate::{self, DiscoveryForm};
use fedraft_kubeapi::resource::ResourceDef;
use serde_json::Value;

use super::catalog::DEFS;
use super::errors::Refusal;
use crate::App;

/// The catalog's definitions and those of the stored CRDs (borrowed when there are none).
fn defs(app: &App) -> Cow<'static, [ResourceDef]> {
    let custom = app.node.read_stale(super::crds::served);
    if custom.is_empty() {
        return Cow::Borrowed(&DEFS[..]);
    }
    let mut all = DEFS.clone();
    all.extend(custom.into_iter().map(|s| s.def));
    Cow::Owned(all)
}

pub async fn version() -> Json<Value> {
    Json(docs::version_doc(&format!(
        "v1.32.0-fedraft+{}",
        env!("CARGO_PKG_VERSION")
    )))
}

/// `GET /api`: the core group, aggregated when `Accept` asks (current kubectl does).
pub async fn api(headers: HeaderMap) -> Response {
    // The address the client used is the one it can reach this node at.
    let address = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    reply(&headers, true, &DEFS, || docs::core_versions(&address))
}

/// `GET /apis`: every other group.
pub async fn apis(State(app): State<App>, headers: HeaderMap) -> Response {
    let defs = defs(&app);
    reply(&headers, false, &defs, || docs::group_list(&defs))
}

fn reply(
    headers: &HeaderMap,
    core: bool,
    defs: &[ResourceDef],
    legacy: impl FnOnce() -> Value,
) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok());
    let (form, body) = match negotiate::discovery_form(accept) {
        Some(DiscoveryForm::AggregatedV2) => (
            DiscoveryForm::AggregatedV2,
            docs::aggregated(defs, core, AggregatedVersion::V2),
        ),
        Some(DiscoveryForm::AggregatedV2Beta1) => (
            DiscoveryForm::AggregatedV2Beta1,
            docs::aggregated(defs, core, AggregatedVersion::V2Beta1),
        ),
        Some(DiscoveryForm::Legacy) | None => (DiscoveryForm::Legacy, legacy()),
    };
    let mut resp = Json(body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(form.content_type()),
    );
    resp
}

pub async fn core_list() -> Response {
    resource_list(&DEFS, "", "v1")
}

pub async fn group(State(app): State<App>, Path(group): Path<String>) -> Response {
    match docs::group(&defs(&app), &group) {
        Some(doc) => Json(doc).into_response(),
        None => Refusal::no_route(&format!("/apis/{group}")).into_response(),
    }
}

pub async fn group_list(
    State(app): State<App>,
    Path((group, version)): Path<(String, String)>,
) -> Response {
    resource_list(&defs(&app), &group, &version)
}

fn resource_list(defs: &[ResourceDef], group: &str, version: &str) -> Response {
    match docs::resource_list(defs, group, version) {
        Some(doc) => Json(doc).into_response(),
        None => Refusal::no_route(&format!("/apis/{group}/{version}")).into_response(),
    }
}

pub async fn openapi_root(State(app): State<App>) -> Json<Value> {
    Json(docs::openapi_v3_root(&defs(&app)))
}

pub async fn openapi_core() -> Response {
    openapi(&DEFS, "", "v1")
}

pub async fn openapi_group(
    State(app): State<App>,
    Path((group, version)): Path<(String, String)>,
) -> Response {
    openapi(&defs(&app), &group, &version)
}

fn openapi(defs: &[ResourceDef], group: &str, version: &str) -> Response {
    match docs::openapi_v3_group_version(defs, group, version) {
        Some(doc) => Json(doc).into_response(),
        None => Refusal::no_route(&format!("/openapi/v3/apis/{group}/{version}")).into_response(),
    }
}
