//! Validation errors shared by every part of core.

/// One invalid input field: the JSON path of the field (camelCase, as the API shows it) and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Why a log entry or a snapshot could not be encoded or decoded.
///
/// An undecodable committed entry means the log is corrupt or was written by a newer binary: the
/// caller must stop, never skip it (skipping would make this node's state diverge).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error(
        "entry format version {found} is newer than the newest this binary knows ({supported})"
    )]
    UnsupportedVersion { found: u16, supported: u16 },
    #[error("cannot encode: {0}")]
    Encode(String),
    #[error("cannot decode: {0}")]
    Decode(String),
    #[error("{trailing} unexpected bytes after the encoded value")]
    TrailingBytes { trailing: usize },
}
