//! fedraft's test harness, shared by every crate's integration tests and by the fault harness:
//! polling with a deadline, free loopback ports, temporary data directories, Deployment
//! manifests, a size-limited tmpfs (`tmpfs`), one slot for the tests that start a whole federation (`serial`), in-process raft groups (feature `cluster`), simulated member clusters (feature
//! `members`) and `fedraft server` processes (feature `procs`).
//!
//! Dev-only: no product crate may depend on it. It owns starting and stopping what a test
//! drives and waiting for conditions; it must not assert anything about the system under test
//! beyond "this came up" (the tests do the asserting), and nothing in it sleeps as an assertion.

pub mod manifests;
pub mod net;
pub mod serial;
pub mod tmpfs;
pub mod wait;

#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "members")]
pub mod members;
#[cfg(feature = "procs")]
pub mod procs;

pub use net::{free_port, free_ports, temp_dir};
pub use serial::{heavy_slot, HeavySlot};
pub use wait::{eventually, eventually_blocking, init_tracing};
