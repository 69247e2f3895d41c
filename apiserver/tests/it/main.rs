//! fedraft-apiserver's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft-apiserver --test it MODULE::`.

mod common;

mod abuse;
mod abuse_state;
mod admission;
mod api;
mod audit_api;
mod endpoints;
mod failback_api;
mod health_api;
mod k8s_door;
mod list_paging;
mod node_health;
mod rendered;
mod reschedule;
mod tenant_status;
mod users_api;
mod users_door;
mod users_scoped;
mod watch_resume;
