//! The discovery endpoints: `/version`, `/api`, `/apis` (legacy or aggregated, as `Accept`
//! asks), `/api/v1`, `/apis/{group}[/{version}]` and the small OpenAPI v3 documents kubectl
//! reads before an apply. The documents are `fedraft_kubeapi::discovery`'s, built from the
//! door's catalog. Must not list anything the catalog does not serve.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fedraft_kubeapi::discovery::{self as docs, AggregatedVersion};
use fedraft_kubeapi::negotiate::{self, DiscoveryForm};
use serde_json::Value;

use super::catalog::DEFS;
use super::errors::Refusal;

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
    reply(&headers, true, || docs::core_versions(&address))
}

/// `GET /apis`: every other group.
pub async fn apis(headers: HeaderMap) -> Response {
    reply(&headers, false, || docs::group_list(&DEFS))
}

fn reply(headers: &HeaderMap, core: bool, legacy: impl FnOnce() -> Value) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok());
    let (form, body) = match negotiate::discovery_form(accept) {
        Some(DiscoveryForm::AggregatedV2) => (
            DiscoveryForm::AggregatedV2,
            docs::aggregated(&DEFS, core, AggregatedVersion::V2),
        ),
        Some(DiscoveryForm::AggregatedV2Beta1) => (
            DiscoveryForm::AggregatedV2Beta1,
            docs::aggregated(&DEFS, core, AggregatedVersion::V2Beta1),
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
    resource_list("", "v1")
}

pub async fn group(Path(group): Path<String>) -> Response {
    match docs::group(&DEFS, &group) {
        Some(doc) => Json(doc).into_response(),
        None => Refusal::no_route(&format!("/apis/{group}")).into_response(),
    }
}

pub async fn group_list(Path((group, version)): Path<(String, String)>) -> Response {
    resource_list(&group, &version)
}

fn resource_list(group: &str, version: &str) -> Response {
    match docs::resource_list(&DEFS, group, version) {
        Some(doc) => Json(doc).into_response(),
        None => Refusal::no_route(&format!("/apis/{group}/{version}")).into_response(),
    }
}

pub async fn openapi_root() -> Json<Value> {
    Json(docs::openapi_v3_root(&DEFS))
}

pub async fn openapi_core() -> Response {
    openapi("", "v1")
}

pub async fn openapi_group(Path((group, version)): Path<(String, String)>) -> Response {
    openapi(&group, &version)
}

fn openapi(group: &str, version: &str) -> Response {
    match docs::openapi_v3_group_version(&DEFS, group, version) {
        Some(doc) => Json(doc).into_response(),
        None => Refusal::no_route(&format!("/openapi/v3/apis/{group}/{version}")).into_response(),
    }
}
