//! fedraft-jepsen's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft-jepsen --test it MODULE::`.

mod common;

mod proxy;
mod register;
mod register_prop;
mod run_nemeses;
mod run_rollout;
mod set;
