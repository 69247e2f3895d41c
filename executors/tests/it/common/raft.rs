//! Real raft groups for the end-to-end executor tests: fedraft-testkit's in-process nodes with
//! this crate's identity and the election timings its assertions are derived from.

use fedraft_raft::NodeConfig;
use fedraft_testkit::cluster::Group;
pub use fedraft_testkit::cluster::{must, wait_leader, Node as RaftNode};

/// Election timeouts used by these tests (a loaded 2-core machine needs slack).
pub const ELECTION_MIN_MS: u64 = 1000;
pub const ELECTION_MAX_MS: u64 = 2000;

/// Starts `n` voters under `root` and waits for a leader.
pub async fn start_group(root: &tempfile::TempDir, n: u64) -> Vec<RaftNode> {
    let tune = |cfg| NodeConfig {
        heartbeat_interval_ms: 200,
        election_timeout_min_ms: ELECTION_MIN_MS,
        election_timeout_max_ms: ELECTION_MAX_MS,
        tick_interval_ms: 500,
        propose_timeout_ms: 10_000,
        ..cfg
    };
    Group::new("executor-test", "executor-test-secret")
        .start_in(root.path(), n, &tune)
        .await
}
