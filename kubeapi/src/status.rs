//! Kubernetes `Status` error bodies: how a refused request is said.
//!
//! An [`ApiError`] variant picks the HTTP code and `reason` exactly as kube-apiserver does, so
//! kube-rs (`kube::Error::Api`) and kubectl print them as they would for a real cluster; the
//! server turns [`ApiError::to_status`] into its reply. This module must not decide *whether* a
//! request is refused, and knows no HTTP framework.

use serde_json::{json, Value};

/// Names the object a Status is about (`details` in the body).
#[derive(Debug, Clone, Default)]
pub struct Subject {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// A refused request. Variants map one-to-one to Kubernetes `reason`s.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 400: the request itself is malformed (bad body, bad selector, name mismatch).
    #[error("{0}")]
    BadRequest(String),
    /// 401: a bearer token is configured and the request did not carry it.
    #[error("Unauthorized")]
    Unauthorized,
    /// 404: the object (or its namespace, or the resource type) does not exist.
    #[error("{message}")]
    NotFound { subject: Subject, message: String },
    /// 405: the verb is not served for this resource or subresource.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 409: create of an existing name.
    #[error("{message}")]
    AlreadyExists { subject: Subject, message: String },
    /// 409: stale resourceVersion on update, or a server-side apply field conflict.
    #[error("{message}")]
    Conflict {
        subject: Subject,
        message: String,
        /// `(field path, message)` for SSA conflicts, shown in `details.causes`. Boxed (not a
        /// Vec) to keep `ApiError` small enough to return by value everywhere.
        causes: Box<[(String, String)]>,
    },
    /// 410: the watch or list resourceVersion is older than the retained history.
    #[error("{0}")]
    Expired(String),
    /// 415: a PATCH content type the server does not accept for this resource.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: the object fails validation.
    #[error("{message}")]
    Invalid {
        subject: Subject,
        message: String,
        causes: Box<[(String, String)]>,
    },
    /// 5xx: the server failed (an injected fault, or a bug reported rather than panicking).
    #[error("{message}")]
    Internal { code: u16, message: String },
}

impl ApiError {
    pub fn not_found(subject: Subject) -> Self {
        let message = format!(
            "{} \"{}\" not found",
            qualified(&subject.group, &subject.kind),
            subject.name
        );
        ApiError::NotFound { subject, message }
    }

    /// `subject.kind` is the Kind here ("Deployment"), as kube-apiserver reports it.
    pub fn invalid(subject: Subject, field: &str, detail: &str) -> Self {
        let message = format!(
            "{} \"{}\" is invalid: {}: {}",
            qualified(&subject.group, &subject.kind),
            subject.name,
            field,
            detail
        );
        ApiError::Invalid {
            subject,
            message,
            causes: Box::new([(field.to_string(), detail.to_string())]),
        }
    }

    pub fn code(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized => 401,
            ApiError::NotFound { .. } => 404,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Expired(_) => 410,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Invalid { .. } => 422,
            ApiError::Internal { code, .. } => *code,
        }
    }

    /// The `reason` field of the Status ("NotFound", "Conflict", ...).
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::NotFound { .. } => "NotFound",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Expired(_) => "Expired",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::Internal { code: 503, .. } => "ServiceUnavailable",
            ApiError::Internal { .. } => "InternalError",
        }
    }

    /// The `Status` object, also used as the payload of a watch `ERROR` event.
    pub fn to_status(&self) -> Value {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let (subject, causes) = match self {
            ApiError::NotFound { subject, .. } | ApiError::AlreadyExists { subject, .. } => {
                (Some(subject), None)
            }
            ApiError::Conflict {
                subject, causes, ..
            }
            | ApiError::Invalid {
                subject, causes, ..
            } => (Some(subject), Some(causes)),
            _ => (None, None),
        };
        if let Some(s) = subject {
            let mut details = json!({ "name": s.name, "kind": s.kind });
            if !s.group.is_empty() {
                details["group"] = json!(s.group);
            }
            if let Some(causes) = causes.filter(|c| !c.is_empty()) {
                let cause_type = if matches!(self, ApiError::Conflict { .. }) {
                    "FieldManagerConflict"
                } else {
                    "FieldValueInvalid"
                };
                details["causes"] = causes
                    .iter()
                    .map(|(field, message)| {
                        json!({ "type": cause_type, "message": message, "field": field })
                    })
                    .collect();
            }
            body["details"] = details;
        }
        body
    }
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_kube_apiserver() {
        let e = ApiError::not_found(Subject {
            group: "apps".into(),
            kind: "deployments".into(),
            name: "web".into(),
        });
        let s = e.to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["details"]["group"], "apps");
    }
}
