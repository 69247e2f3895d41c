//! fedraft-kubeapi: Kubernetes API semantics as pure functions over `serde_json::Value`, shared
//! by the member-cluster simulator (`testing/kubesim`) and fedraft's Kubernetes-compatible door,
//! so both answer kubectl, Helm and kube-rs the way kube-apiserver does and the semantics are
//! implemented and tested once.
//!
//! - What is served: [`resource::ResourceDef`] (and the built-in table), the discovery
//!   documents built from a list of them ([`discovery`]), and which form an `Accept` header
//!   asks for ([`negotiate`]).
//! - Writes: server-side apply with managed fields ([`apply`], [`fields`]), JSON, merge and
//!   strategic merge patches ([`patch`], [`strategic`], [`strategy`]).
//! - Reads: label and field selectors ([`selector`]), `limit`/`continue` ([`paging`]) and
//!   server-side printing as a `Table`
//!   ([`table`], with the built-in kinds' columns in `printers`).
//! - Refusals: the `Status` body ([`status::ApiError`]); object metadata helpers ([`meta`]).
//!
//! Must not: do I/O, read a clock or randomness (callers pass `now` and stamp uids), depend on
//! an HTTP framework or on any other fedraft crate.

pub mod apply;
pub mod discovery;
pub mod fields;
pub mod meta;
pub mod negotiate;
pub mod paging;
pub mod patch;
mod printers;
pub mod resource;
pub mod selector;
pub mod status;
pub mod strategy;
pub mod table;

pub use patch::{PatchError, PatchType};
pub use resource::ResourceDef;
pub use status::{ApiError, Subject};
