//! fedraft-kubesim's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft-kubesim --test it MODULE::`.

mod common;

mod faults;
mod fleet;
mod kube_client;
mod kubectl;
