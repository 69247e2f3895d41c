//! fedraft-raft's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft-raft --test it MODULE::`.

mod common;

mod audit_incident;
mod audit_restart;
mod backlog;
mod cluster;
mod crash;
mod forwarding;
mod storage_suite;
