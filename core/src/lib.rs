//! fedraft-core: the pure, deterministic heart of fedraft.
//!
//! It owns the domain model (clusters, federated objects, tenants), the versioned log entry
//! envelope, the state machine that applies committed entries, the scheduler that derives
//! placement, and the rendering of per-cluster manifests.
//!
//! Architecture invariant: nothing here does I/O, reads a clock, spawns a task or draws a random
//! number, and no `HashMap` iteration order reaches a result. Time enters only as the timestamp
//! carried by a log entry. Same log, same state, byte for byte.

pub mod admission;
pub mod audit;
pub mod command;
pub mod discovery;
pub mod door;
pub mod error;
pub mod health;
pub mod karmada;
pub mod kubefed;
pub mod model;
pub mod owners;
pub mod policy;
pub mod render;
pub mod rollout;
pub mod scheduler;
pub mod service;
pub mod state;
pub mod users;
