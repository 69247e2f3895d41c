//! Refusals as Kubernetes `Status` bodies, for every answer of the door.
//!
//! kubectl prints `Error from server (Reason): message` from a Status and branches on its code
//! (404 on apply means create, 409 means retry), so the door never answers with the native API's
//! `{"error": ...}` shape. [`Refusal`] wraps either a `fedraft_kubeapi::ApiError` (said exactly
//! as kube-apiserver says it) or a native [`crate::ApiError`] (auth, raft, core refusals),
//! translated here once. Must not decide whether a request is refused.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use fedraft_kubeapi::status::Subject;
use serde_json::{json, Value};

use crate::error::RETRY_AFTER_S;

/// A refused door request: its HTTP code and Status body.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: u16,
    pub body: Value,
}

pub type KResult<T> = Result<T, Refusal>;

impl Refusal {
    pub fn reason(&self) -> &str {
        self.body["reason"].as_str().unwrap_or("")
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        fedraft_kubeapi::ApiError::BadRequest(message.into()).into()
    }

    pub fn not_found(subject: Subject) -> Self {
        fedraft_kubeapi::ApiError::not_found(subject).into()
    }

    pub fn invalid(subject: Subject, field: &str, detail: &str) -> Self {
        fedraft_kubeapi::ApiError::invalid(subject, field, detail).into()
    }

    pub fn already_exists(subject: Subject, plural: &str) -> Self {
        let message = format!("{plural} \"{}\" already exists", subject.name);
        fedraft_kubeapi::ApiError::AlreadyExists { subject, message }.into()
    }

    /// kube-apiserver's stale-write wording.
    pub fn stale(subject: Subject, plural: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {plural} \"{}\": the object has been modified; \
             please apply your changes to the latest version and try again",
            subject.name
        );
        fedraft_kubeapi::ApiError::Conflict {
            subject,
            message,
            causes: Box::default(),
        }
        .into()
    }

    pub fn method_not_allowed(what: &str) -> Self {
        fedraft_kubeapi::ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({what})"
        ))
        .into()
    }

    pub fn no_route(path: &str) -> Self {
        fedraft_kubeapi::ApiError::NotFound {
            subject: Subject::default(),
            message: format!("the server could not find the requested resource ({path})"),
        }
        .into()
    }

    pub fn is_conflict(&self) -> bool {
        self.code == 409 && self.reason() == "Conflict"
    }
}

fn status(code: u16, reason: &str, message: String, field: Option<&str>) -> Refusal {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(f) = field {
        body["details"] = json!({ "causes": [{ "field": f, "message": message }] });
    }
    Refusal { code, body }
}

impl From<fedraft_kubeapi::ApiError> for Refusal {
    fn from(e: fedraft_kubeapi::ApiError) -> Self {
        Refusal {
            code: e.code(),
            body: e.to_status(),
        }
    }
}

impl From<crate::ApiError> for Refusal {
    fn from(e: crate::ApiError) -> Self {
        use crate::ApiError as E;
        let field = e.field().map(str::to_string);
        let (code, reason) = match &e {
            E::Malformed { .. }
            | E::UnknownKind { .. }
            | E::InvalidName { .. }
            | E::MissingField { .. }
            | E::InvalidField { .. } => (400, "BadRequest"),
            E::PayloadTooLarge { .. } | E::TooLarge { .. } => (413, "RequestEntityTooLarge"),
            E::Unauthenticated { .. } => (401, "Unauthorized"),
            E::Forbidden { .. } | E::Refused { .. } => (403, "Forbidden"),
            E::NotFound { .. } => (404, "NotFound"),
            E::MethodNotAllowed => (405, "MethodNotAllowed"),
            E::Conflict { .. } => (409, "Conflict"),
            E::Gone { .. } => (410, "Expired"),
            E::Unprocessable { .. } => (422, "Invalid"),
            E::TooManyRequests { .. } => (429, "TooManyRequests"),
            E::Unavailable { .. } | E::Timeout { .. } => (503, "ServiceUnavailable"),
            E::Internal { message } => {
                tracing::error!(%message, "door request failed");
                return status(500, "InternalError", "internal error".into(), None);
            }
        };
        status(code, reason, e.to_string(), field.as_deref())
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, axum::Json(self.body)).into_response();
        if code == StatusCode::SERVICE_UNAVAILABLE || code == StatusCode::TOO_MANY_REQUESTS {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_refusals_keep_code_and_name_the_field() {
        let r: Refusal = crate::ApiError::InvalidField {
            field: "metadata.name".into(),
            message: "bad".into(),
        }
        .into();
        assert_eq!(r.code, 400);
        assert_eq!(r.body["kind"], "Status");
        assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");
        let r: Refusal = crate::ApiError::forbidden("nope").into();
        assert_eq!((r.code, r.reason()), (403, "Forbidden"));
        let r = Refusal::stale(
            Subject {
                group: "apps".into(),
                kind: "deployments".into(),
                name: "web".into(),
            },
            "deployments.apps",
        );
        assert!(r.is_conflict());
        assert!(r.body["message"]
            .as_str()
            .unwrap()
            .contains("the object has been modified"));
    }
}
