//! fedraft-executors's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft-executors --test it MODULE::`.

mod common;

mod converge;
mod deregister;
mod inventory;
mod observe;
mod owners;
mod preserve;
mod raft_e2e;
mod rollout;
mod tenancy;
