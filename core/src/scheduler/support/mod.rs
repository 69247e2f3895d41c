//! Helpers that make the rules cheap without deciding anything: `names` (a record's
//! per-cluster names in one shared buffer, reading as `Vec<String>` / `BTreeMap`), `bytes`
//! (inline byte-string comparisons and a galloping lower bound) and `order` (the static-weights
//! tie-break order: FNV-1 hashes, sorted lazily).
//!
//! Must not: change a result. Each is an exact stand-in for the plain code it replaces (the
//! same order, the same bytes when serialized), and the rules' tests hold them to it.

pub(super) mod bytes;
pub mod names;
pub(super) mod order;
