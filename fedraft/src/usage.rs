//! The one error kind the verbs share that is not the server's: a command line that cannot
//! work as given, found after clap's own checks. `main` maps it to exit code 2.
//!
//! Must not: carry anything but the sentence the user needs.

/// A command line that cannot work as given (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
