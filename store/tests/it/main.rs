//! fedraft-store's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft-store --test it MODULE::`.

mod audit_archive;
mod crash;
mod store;
mod wal_sync_failure;
