//! What a `fedraft bench fleet` run is asked to do (its command line), and the latency samples
//! its phases collect: shared by the driver (`fleet`) and the report (`fleet_report`), so neither
//! needs the other's insides. Must not: run or measure anything.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    /// Member clusters.
    #[arg(long, default_value_t = 1000)]
    pub clusters: u32,
    /// Federated objects written in the convergence phase.
    #[arg(long, default_value_t = 100_000)]
    pub objects: u64,
    /// Regions the clusters are split into (contiguously); the first one goes dark.
    #[arg(long, default_value_t = 10)]
    pub regions: u32,
    /// Closed-loop writers in the convergence phase.
    #[arg(long, default_value_t = 16)]
    pub writers: usize,
    /// Writes per second in the distribution-latency phase.
    #[arg(long, default_value_t = 100.0)]
    pub steady_rate: f64,
    /// Seconds of the distribution-latency phase (0 skips it).
    #[arg(long, default_value_t = 30)]
    pub steady_secs: u64,
    /// Seconds after convergence before sampling what the nodes hold once the executors'
    /// passes verified their writes (0 skips it).
    #[arg(long, default_value_t = 30)]
    pub settle_secs: u64,
    /// Failover grace period of every object, seconds.
    #[arg(long, default_value_t = 10)]
    pub grace_secs: u64,
    /// Clusters' failure threshold (seconds without a heartbeat before NotReady).
    #[arg(long, default_value_t = 5)]
    pub failure_secs: u64,
    /// Skip the dark-region phase.
    #[arg(long)]
    pub no_dark: bool,
    /// Percentage of the clusters that go dark at once in the brake phase (0 skips it).
    #[arg(long, default_value_t = 60)]
    pub brake_percent: u32,
    /// Objects written after the other phases, onto the healed and settled fleet, to measure
    /// what one more object costs (0 skips it). Default: half of `--objects`.
    #[arg(long)]
    pub more_objects: Option<u64>,
    /// Give up on convergence after this many seconds.
    #[arg(long, default_value_t = 1800)]
    pub converge_timeout_secs: u64,
    /// The nodes' ownership lease in milliseconds (0: executors on the leader only). Default:
    /// the server's default.
    #[arg(long)]
    pub owner_lease_ms: Option<u64>,
    /// Nodes per simulated cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
    /// Seed of the workload mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw the convergence curve as SVG to this file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// The fedraft binary for the started nodes and the fleet host. Default: this executable.
    #[arg(long)]
    pub fedraft_bin: Option<PathBuf>,
    /// Keep the temporary directory (data, configs, logs).
    #[arg(long)]
    pub keep: bool,
}

/// Latency samples of one phase, shared by its tasks.
#[derive(Default)]
pub struct Samples {
    pub writes: Vec<Duration>,
    pub reads: Vec<Duration>,
    pub errors: u64,
    /// Writes that failed and were sent again (counted apart from errors: they succeeded).
    pub retries: u64,
}
