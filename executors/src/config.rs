//! Settings of the executors: probe and scan cadence, resync, retry bounds, batching limits.
//!
//! Defaults follow the Clusterless design's "scan, do not watch every node event": a health
//! probe every 5 s with a 3 s timeout and a capacity scan every 10 s. Tests shorten them.

use std::time::Duration;

use std::sync::Arc;

use fedraft_secrets::Keyring;

use crate::client::CallGate;
use crate::lateness::Lateness;
use crate::metrics::ExecutorMetrics;

/// How the executors of one fedraft node behave.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Name this node's executors use as the actor of the events they propose.
    pub actor: String,
    /// Health probe (`GET /readyz`) period per member cluster.
    pub probe_interval: Duration,
    /// A probe with no answer within this is a failure (widened by as much as this node ran
    /// late meanwhile, at most doubled: `lateness.rs`).
    pub probe_timeout: Duration,
    /// This node's runtime lateness, which the probes read. Clones share it.
    pub lateness: Lateness,
    /// Capacity scan (nodes, and pods fedraft does not manage) period per member cluster.
    pub capacity_interval: Duration,
    /// Full reconcile of every cluster even without any change (watches can miss events).
    pub resync_period: Duration,
    /// How often the leadership is checked; keep well below the election timeout so executors
    /// start or stop within 2x of it after a leadership change.
    pub leadership_poll: Duration,
    /// Retry bounds for member-API errors, per object.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Member API requests in flight at once per cluster (applies and deletes).
    pub apply_concurrency: usize,
    /// Member API requests in flight at once on this node, over all clusters (watches and
    /// health probes excepted; see `client.rs`). Clones share it.
    pub member_calls: CallGate,
    /// Status reports are flushed at most this often (one entry for all clusters).
    pub status_flush_interval: Duration,
    /// Bound on a single member-API request other than watches.
    pub request_timeout: Duration,
    /// How long the leader keeps trying to remove fedraft's objects from a cluster after it was
    /// deregistered (a dark cluster cannot be cleaned; what is left carries fedraft's label).
    pub deregister_cleanup_timeout: Duration,
    /// Where the executors record what they measure. The default records into series no
    /// registry holds; the binary sets one it registered.
    pub metrics: ExecutorMetrics,
    /// Opens sealed member credentials. Default none: sealed credentials cannot be used (the
    /// cluster's client is not built, and the failure is logged and retried).
    pub credentials_keys: Option<Arc<Keyring>>,
    /// Commands a member kubeconfig's `exec` plugin may run on this node (exact match). Default
    /// none: kubeconfigs must be self-contained (see `client.rs`).
    pub kubeconfig_exec_allow: Vec<String>,
    /// Period of this node's light prober (`prober.rs`), which runs whether or not the node
    /// leads. Default None: no prober (the binary turns it on; the executors' own tests see
    /// only the owner's entries).
    pub prober_interval: Option<Duration>,
    /// Spread ownership (`lease.rs`): this node renews an ownership lease of this length in
    /// the log and runs executors for the clusters the log assigns to it. Default None:
    /// leader-only ownership (also what every node does while no lease is live).
    pub owner_lease: Option<Duration>,
    /// Where this node is, for the assignment: (label key, value) pairs in order of
    /// preference (region, then zone).
    pub locality: Vec<(String, String)>,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            actor: "system:executor".to_string(),
            probe_interval: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(3),
            lateness: Lateness::default(),
            capacity_interval: Duration::from_secs(10),
            resync_period: Duration::from_secs(60),
            leadership_poll: Duration::from_millis(100),
            backoff_min: Duration::from_millis(200),
            backoff_max: Duration::from_secs(30),
            apply_concurrency: 16,
            member_calls: CallGate::default(),
            status_flush_interval: Duration::from_millis(500),
            request_timeout: Duration::from_secs(10),
            deregister_cleanup_timeout: Duration::from_secs(120),
            metrics: ExecutorMetrics::default(),
            credentials_keys: None,
            kubeconfig_exec_allow: Vec::new(),
            prober_interval: None,
            owner_lease: None,
            locality: Vec::new(),
        }
    }
}
