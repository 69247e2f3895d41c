//! fedraft's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft --test it MODULE::`.

mod deploy_common;
mod support;

/// The fedraft crate's directory, as cargo names it when it runs the tests: read at run time,
/// so a test binary built from another checkout into a shared target directory still reads
/// this checkout's files.
pub fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

mod abuse_files;
mod abuse_listeners;
mod audit_cli;
mod bench;
mod cli;
mod cli_habits;
mod console;
mod demo;
mod deploy_backup;
mod deploy_members;
mod deploy_tls;
mod deploy_upgrade;
mod deschedule_procs;
mod disk_full_cluster;
mod e2e_affinity_groups;
mod e2e_converge;
mod e2e_failover;
mod e2e_leader_kill;
mod e2e_link_cut;
mod e2e_overflow;
mod e2e_owners;
mod failpoints;
mod fleet;
mod gpu_procs;
mod helm_door;
mod karmada_lifecycle;
mod kubectl_door;
mod kubectl_rollout;
mod kubectl_watch;
mod kubefed_door;
mod members_door;
mod metrics_exposition;
mod peer_overriders;
mod peer_samples;
mod secrets_at_rest;
mod taint_policy_door;
mod tidy;
mod users_door_procs;
mod users_procs;
