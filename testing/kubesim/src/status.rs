//! Refusals as HTTP replies. The `Status` body and the code/reason of each refusal are
//! `fedraft_kubeapi::status` (shared with fedraft's door); this module only hands them to axum.
//! It must not decide *whether* a request is refused, only carry the answer.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

pub use fedraft_kubeapi::status::{ApiError, Subject};

/// The reply for a refused request: its code and `Status` body.
pub fn respond(e: ApiError) -> Response {
    let code = StatusCode::from_u16(e.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(e.to_status())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_carries_code_and_status() {
        let r = respond(ApiError::not_found(Subject {
            group: "apps".into(),
            kind: "deployments".into(),
            name: "web".into(),
        }));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = respond(ApiError::Internal {
            code: 503,
            message: "injected".into(),
        });
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
