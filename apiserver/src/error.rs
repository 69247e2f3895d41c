//! The API's one error type and its one mapping to HTTP.
//!
//! Every failure a handler can meet becomes an [`ApiError`]; [`ApiError::status`] is the only place
//! that chooses an HTTP status, and [`ApiError::into_response`] the only place that shapes the body
//! `{"error": {"code", "message", "field"}}`. Core rejections, core validation failures and raft
//! errors are translated here too ([`ApiError::from_rejection`], [`ApiError::from_field_error`],
//! [`ApiError::from_raft`]), so a new variant upstream shows up as one compile error in this file.
//! Messages must never carry cluster credentials: callers build them from names and field paths
//! only.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use fedraft_core::error::FieldError;
use fedraft_core::state::{RejectCode, Rejection};
use fedraft_raft::RaftError;

/// How many seconds a client should wait before retrying after a 503.
pub const RETRY_AFTER_S: u64 = 1;

/// Everything that can make a request fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The body is not valid JSON or YAML at all.
    #[error("malformed body: {message}")]
    Malformed { message: String },
    /// A document names a kind this API does not serve.
    #[error("unknown kind {kind:?}")]
    UnknownKind { kind: String, field: String },
    /// A name in the path or body is not a DNS-1123 label.
    #[error("invalid name {name:?}: {message}")]
    InvalidName {
        name: String,
        field: String,
        message: String,
    },
    /// A required field is absent.
    #[error("missing field {field}")]
    MissingField { field: String },
    /// A field has the wrong type or an unacceptable value, or is not known.
    #[error("{field}: {message}")]
    InvalidField { field: String, message: String },
    /// The body is larger than the configured limit.
    #[error("body larger than {limit_bytes} bytes")]
    PayloadTooLarge { limit_bytes: usize },
    /// The body is within the size limit but describes more than it may (YAML aliases).
    #[error("{message}")]
    TooLarge { message: String },
    /// No bearer token, or one that maps to no principal.
    #[error("{message}")]
    Unauthenticated { message: String },
    /// The principal may not do this.
    #[error("{message}")]
    Forbidden { message: String },
    /// Core's admission refused the principal this write at apply (403), naming the field and
    /// the rule.
    #[error("{message}")]
    Refused {
        message: String,
        field: Option<String>,
    },
    /// The addressed resource does not exist.
    #[error("{message}")]
    NotFound { message: String },
    /// The expected resource version did not match, or the resource already exists.
    #[error("{message}")]
    Conflict {
        message: String,
        expected: Option<u64>,
        found: Option<u64>,
    },
    /// Well-formed, but the state machine refuses it (quota, a reference to a missing cluster...).
    #[error("{message}")]
    Unprocessable {
        message: String,
        field: Option<String>,
    },
    /// The watch asked for history no longer retained.
    #[error("{message}")]
    Gone { message: String },
    /// This node runs as many queries of this kind as it allows; retry after Retry-After.
    #[error("{message}")]
    TooManyRequests { message: String },
    /// No quorum (or no leader) within the bounded wait.
    #[error("{message}")]
    Unavailable { message: String },
    /// A leader with its quorum exists but did not commit within the bounded wait (overload).
    /// Same status and Retry-After as `Unavailable`; the code tells a client that backing off,
    /// not failing over, is what helps.
    #[error("{message}")]
    Timeout { message: String },
    /// No route for this method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A bug or a storage failure; the message is logged, the client gets a short one.
    #[error("internal error: {message}")]
    Internal { message: String },
}

impl ApiError {
    /// The HTTP status of each variant: the one place it is decided.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Malformed { .. }
            | ApiError::UnknownKind { .. }
            | ApiError::InvalidName { .. }
            | ApiError::MissingField { .. }
            | ApiError::InvalidField { .. } => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge { .. } | ApiError::TooLarge { .. } => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ApiError::Unauthenticated { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } | ApiError::Refused { .. } => StatusCode::FORBIDDEN,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::Gone { .. } => StatusCode::GONE,
            ApiError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable { .. } | ApiError::Timeout { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// A stable machine-readable code clients can branch on.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Malformed { .. } => "MalformedBody",
            ApiError::UnknownKind { .. } => "UnknownKind",
            ApiError::InvalidName { .. } => "InvalidName",
            ApiError::MissingField { .. } => "MissingField",
            ApiError::InvalidField { .. } => "InvalidField",
            ApiError::PayloadTooLarge { .. } | ApiError::TooLarge { .. } => "PayloadTooLarge",
            ApiError::Unauthenticated { .. } => "Unauthorized",
            ApiError::Forbidden { .. } | ApiError::Refused { .. } => "Forbidden",
            ApiError::NotFound { .. } => "NotFound",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Gone { .. } => "Gone",
            ApiError::Unprocessable { .. } => "Unprocessable",
            ApiError::Unavailable { .. } => "Unavailable",
            ApiError::Timeout { .. } => "Timeout",
            ApiError::Internal { .. } => "Internal",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
        }
    }

    /// The offending field's path, when one is known.
    pub fn field(&self) -> Option<&str> {
        match self {
            ApiError::UnknownKind { field, .. }
            | ApiError::InvalidName { field, .. }
            | ApiError::MissingField { field }
            | ApiError::InvalidField { field, .. } => Some(field),
            ApiError::Unprocessable { field, .. } | ApiError::Refused { field, .. } => {
                field.as_deref()
            }
            _ => None,
        }
    }

    /// The JSON body for this error.
    pub fn body(&self) -> serde_json::Value {
        let message = match self {
            // Internal details stay in the log.
            ApiError::Internal { .. } => "internal error".to_string(),
            other => other.to_string(),
        };
        serde_json::json!({
            "error": { "code": self.code(), "message": message, "field": self.field() }
        })
    }

    pub fn not_found(kind: &str, name: impl std::fmt::Display) -> Self {
        ApiError::NotFound {
            message: format!("{kind} {name} not found"),
        }
    }

    /// The one translation of a core refusal into an API error.
    pub fn from_rejection(r: &Rejection) -> Self {
        let field = r.field.as_deref().map(api_field);
        match r.code {
            RejectCode::Invalid => match field {
                Some(field) => ApiError::InvalidField {
                    field,
                    message: r.message.clone(),
                },
                None => ApiError::Malformed {
                    message: r.message.clone(),
                },
            },
            RejectCode::NotFound => ApiError::NotFound {
                message: r.message.clone(),
            },
            RejectCode::Conflict | RejectCode::AlreadyExists => ApiError::Conflict {
                message: r.message.clone(),
                expected: None,
                found: None,
            },
            RejectCode::FailedPrecondition => ApiError::Unprocessable {
                message: r.message.clone(),
                field,
            },
            RejectCode::Forbidden => ApiError::Refused {
                message: r.message.clone(),
                field,
            },
        }
    }

    /// The one translation of a core validation failure into an API error: a failing name or
    /// namespace is `InvalidName`, anything else `InvalidField`.
    pub fn from_field_error(e: FieldError) -> Self {
        let field = api_field(&e.field);
        let leaf = field.rsplit('.').next().unwrap_or(&field);
        if leaf == "name" || leaf == "namespace" {
            ApiError::InvalidName {
                name: String::new(),
                field,
                message: e.message,
            }
        } else {
            ApiError::InvalidField {
                field,
                message: e.message,
            }
        }
    }

    /// The one translation of a raft failure into an API error.
    pub fn from_raft(e: &RaftError) -> Self {
        match e {
            RaftError::NoQuorum { .. } | RaftError::NotLeader { .. } | RaftError::Shutdown => {
                ApiError::Unavailable {
                    message: e.to_string(),
                }
            }
            RaftError::Timeout { .. } => ApiError::Timeout {
                message: e.to_string(),
            },
            // The leader may have received the request: the client retries with the same
            // Idempotency-Key, which makes the retry safe.
            RaftError::Forward(_) => ApiError::Unavailable {
                message: e.to_string(),
            },
            // The previous membership change is still committing: retrying succeeds.
            RaftError::Busy(_) => ApiError::Unavailable {
                message: e.to_string(),
            },
            RaftError::Invalid(m) => ApiError::Unprocessable {
                message: m.clone(),
                field: None,
            },
            RaftError::Storage(_) | RaftError::Codec(_) | RaftError::Fatal(_) => {
                ApiError::internal(e.to_string())
            }
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        ApiError::Forbidden {
            message: message.into(),
        }
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::InvalidField {
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::Internal {
            message: message.into(),
        }
    }
}

/// Core's field paths say `spec.x`; the API's documents are flat, so the prefix goes.
fn api_field(core_field: &str) -> String {
    core_field
        .strip_prefix("spec.")
        .unwrap_or(core_field)
        .to_string()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::error!(code = self.code(), error = %self, "request failed");
        } else {
            tracing::debug!(code = self.code(), error = %self, "request refused");
        }
        let mut resp = (status, axum::Json(self.body())).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
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
    fn every_variant_has_a_status_and_body_shape() {
        let cases = [
            (
                ApiError::MissingField {
                    field: "apiEndpoint".into(),
                },
                400,
                Some("apiEndpoint"),
            ),
            (ApiError::PayloadTooLarge { limit_bytes: 10 }, 413, None),
            (ApiError::not_found("cluster", "dc1"), 404, None),
            (
                ApiError::Unavailable {
                    message: "no quorum".into(),
                },
                503,
                None,
            ),
        ];
        for (err, status, field) in cases {
            assert_eq!(err.status().as_u16(), status);
            let body = err.body();
            assert_eq!(body["error"]["code"], err.code());
            assert_eq!(body["error"]["field"].as_str(), field);
        }
    }

    #[test]
    fn unavailable_carries_retry_after() {
        let resp = ApiError::Unavailable {
            message: "x".into(),
        }
        .into_response();
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn no_quorum_and_overload_are_both_503_with_different_codes() {
        let no_quorum = ApiError::from_raft(&RaftError::NoQuorum { waited_ms: 5000 });
        let overload = ApiError::from_raft(&RaftError::Timeout { waited_ms: 5000 });
        let busy = ApiError::from_raft(&RaftError::Busy(
            "the cluster is already undergoing a configuration change".into(),
        ));
        for (err, code, words) in [
            (&no_quorum, "Unavailable", "no quorum"),
            (&overload, "Timeout", "overloaded"),
            (&busy, "Unavailable", "configuration change"),
        ] {
            assert_eq!(err.status(), StatusCode::SERVICE_UNAVAILABLE);
            let body = err.body();
            assert_eq!(body["error"]["code"], code);
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains(words), "{message}");
            let resp = err.clone().into_response();
            assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        }
    }
}
