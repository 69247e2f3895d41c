//! fedraft-core's integration tests as one binary: each module here was once its own `tests/*.rs`
//! binary, and every one of them linked the whole dependency tree (RocksDB, openraft, kube,
//! the HTTP stacks) again. Owns nothing but the module list.
//!
//! One module: `cargo test -p fedraft-core --test it MODULE::`.

mod state_support;

mod admission;
mod deschedule;
mod discovery;
mod door;
mod door_affinities;
mod door_changes;
mod door_deps;
mod door_kubefed;
mod door_lifecycle;
mod door_members;
mod door_overflow;
mod door_preservation;
mod door_rollout;
mod door_scope;
mod door_taint;
mod door_workload_affinity;
mod exact_reports;
mod failback;
mod gpu;
mod handover;
mod render_golden;
mod rollout;
mod scheduler_kubefed;
mod scheduler_overflow;
mod scheduler_props;
mod scheduler_rules;
mod state_credentials;
mod state_fleet;
mod state_health;
mod state_intents;
mod state_owners;
mod state_props;
mod state_reject;
mod state_replica_modes;
mod state_vantage;
mod tenant_quota;
mod users;
