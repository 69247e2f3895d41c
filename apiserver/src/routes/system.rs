//! Unauthenticated endpoints: liveness, readiness, metrics, the replicated-state fingerprint and
//! the OpenAPI document. None of them reveals a resource.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

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

/// Everything the registry holds, in the Prometheus text format.
pub async fn metrics(State(app): State<App>) -> Response {
    let text = crate::metrics::render(&app.registry);
    let content_type = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

/// This node's local (stale) view of the replicated state: the last applied command index, the
/// state hash and the log time, all from one consistent snapshot. Two nodes at the same
/// `stateIndex` must report the same `stateHash`; fault-injection runs compare them.
pub async fn state(State(app): State<App>) -> Response {
    let (state_index, state_hash, log_time_ms) = app
        .node
        .read_stale(|s| (s.applied_index(), s.state_hash_hex(), s.log_time_ms()));
    let st = app.node.status();
    let body = json!({
        "nodeId": st.id,
        "raftAppliedIndex": st.applied_index,
        "stateIndex": state_index,
        "stateHash": state_hash,
        "logTimeMs": log_time_ms,
    });
    (StatusCode::OK, Json(body)).into_response()
}

pub async fn openapi() -> Response {
    Json(crate::openapi::document()).into_response()
}
