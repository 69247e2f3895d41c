//! Watch: the bounded event history (`ring`), the task that turns applied log entries into events
//! (`hub`), and the NDJSON stream handler (`stream`).

pub mod hub;
pub mod ring;
pub(crate) mod stream;
