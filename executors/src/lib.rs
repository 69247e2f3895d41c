//! fedraft-executors: per-member-cluster reconcilers and probes over kube-rs. Executors converge
//! member clusters to the placement the state machine derived and report what they observe back
//! into the log; they never decide placement or health themselves.
//!
//! Start reading at [`set`] (who runs executors: the leader only, one task pair per cluster), then
//! [`reconciler`] (one converge pass), [`plan`] and [`compare`] (the pure decisions: what to write,
//! what to delete, when a write is unnecessary), [`retry`] (when a failed write is tried again, per
//! object and per cluster), [`live`], [`live_id`] and [`live_object`] (what the member holds, kept
//! small, and under which name), [`probe`] and [`capacity`] (observing a cluster), [`prober`]
//! (every node's own view of every cluster, leader or not), [`report`] (batching observations into
//! log entries), [`wake`] (which reconcilers an applied entry concerns) and [`services`] (Service
//! addresses and ready endpoints for discovery). What they measure per member cluster (reconciles,
//! member API latency and errors): [`metrics`].
//!
//! Architecture invariants:
//! - A write happens only when the live object differs from the rendered manifest; applying the
//!   same desired state twice writes nothing.
//! - Only objects carrying `fedraft.io/managed-by=fedraft` are ever deleted; namespaces are
//!   created (labelled) where something is placed and never deleted.
//! - Every observation reaches the state as a batched event; the state machine decides.

pub mod backoff;
pub mod capacity;
pub mod client;
pub mod compare;
pub mod config;
pub mod desired;
pub mod error;
pub mod fednode;
pub mod fence;
pub mod lateness;
pub mod lease;
pub mod live;
pub mod live_id;
pub mod live_object;
pub mod metrics;
pub mod node;
pub mod plan;
pub mod preserve;
pub mod probe;
pub mod prober;
pub mod reconciler;
pub mod report;
pub mod reporter;
pub mod resolve;
pub mod retry;
pub mod services;
pub mod set;
pub mod sweep;
pub mod wake;
pub mod workload;

pub use config::ExecutorConfig;
pub use error::ExecError;
pub use metrics::ExecutorMetrics;
pub use node::ControlPlane;
pub use set::ExecutorSet;
