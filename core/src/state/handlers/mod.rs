//! The commands' homes: each file is an `impl State` block with the `on_*` functions of one
//! group of commands (propose-side checks, apply-time checks against the current state, the
//! change, and what the caller gets back), plus what they share: `validate` (input checks that
//! never look at the state) and `outcome` (results, changes and refusals).
//!
//! Dispatch is not here: `State::apply` in `state/mod.rs` is the one `match` that hands each
//! command to its handler. Must not: hold storage structures of their own (those live in
//! `state/store/`), do I/O, or read clocks.

mod admission;
pub(crate) mod affinity_groups;
pub mod app_failover;
mod binding;
mod cluster_quota;
mod clusters;
mod credentials;
mod deps;
pub mod deschedule;
pub mod desired;
pub(crate) mod door;
mod door_identity;
mod door_rollout;
pub(crate) mod extended;
pub mod failback;
pub mod handover;
mod health;
mod kubefed;
pub mod lifecycle;
pub mod member_quota;
mod members;
mod objects;
pub mod outcome;
mod overflow;
mod owners;
pub mod placement;
pub mod preserve;
pub mod queue;
mod reports;
pub mod rollout;
pub mod services;
pub mod taint_policy;
mod tenants;
mod users;
pub mod validate;
mod vantage;
pub(crate) mod workload_affinity;

pub use handover::Handovers;
