//! Why a patch could not be applied, and the Kubernetes `Status` each reason is answered with.
//! Must not: apply anything.

use crate::resource::ResourceDef;
use crate::status::{ApiError, Subject};

/// A patch that could not be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    /// The body is not a patch of its type (400 in Kubernetes).
    #[error("invalid {patch} patch: {message}")]
    Malformed {
        patch: &'static str,
        message: String,
    },
    /// The patch is well formed but fails against this object (422); `path` is a JSON pointer.
    #[error("{message}")]
    Failed { path: String, message: String },
    /// Strategic merge patch of a kind without a patch schema (a custom resource): 415.
    #[error("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")]
    StrategicUnsupported,
}

impl PatchError {
    /// The Status a server answers with, about the object `name` of type `res`.
    pub fn into_api_error(self, res: &ResourceDef, name: &str) -> ApiError {
        match self {
            PatchError::Malformed { .. } => ApiError::BadRequest(self.to_string()),
            PatchError::Failed { message, .. } => ApiError::invalid(
                Subject {
                    group: res.group.clone(),
                    kind: res.kind.clone(),
                    name: name.to_string(),
                },
                "patch",
                &message,
            ),
            PatchError::StrategicUnsupported => ApiError::UnsupportedMediaType(self.to_string()),
        }
    }
}
