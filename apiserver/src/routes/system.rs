//! Unauthenticated endpoints: liveness, readiness, metrics and the OpenAPI document. None of
//! them reveals a resource.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::metrics::RaftGauges;
use crate::App;

pub async fn healthz() -> Response {
    (StatusCode::OK, Json(json!({"status": "ok"}))).into_response()
}

/// Ready = this node is in a cluster that has a leader.
pub async fn readyz(State(app): State<App>) -> Response {
    let st = app.node.status();
    let body = json!({"ready": st.leader_id.is_some(), "nodeId": st.id, "leaderId": st.leader_id, "term": st.term});
    let code = if st.leader_id.is_some() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

pub async fn metrics(State(app): State<App>) -> Response {
    let st = app.node.status();
    let gauges = RaftGauges {
        term: st.term,
        commit_index: st.commit_index,
        applied_index: st.applied_index,
        is_leader: st.is_leader,
        has_leader: st.leader_id.is_some(),
    };
    let text = app.metrics.render(gauges);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub async fn openapi() -> Response {
    Json(crate::openapi::document()).into_response()
}
