//! fedraft-store's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns the module list and `child`, the one way a test re-runs this
//! binary as a child process.
//!
//! One module: `cargo test -p fedraft-store --test it MODULE::`.

mod audit_archive;
mod corruption;
mod crash;
mod disk_full;
mod store;
mod wal_sync_failure;

/// This test binary, set to run only the test `name` of the module at `module_path` (a caller's
/// `module_path!()`), as a child process that a parent can crash or inspect.
fn child(module_path: &str, name: &str) -> std::process::Command {
    let test = match module_path.split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    };
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"]);
    cmd
}
