//! `[executors]`: how this node's executors probe, reconcile and share member clusters.
//!
//! Parsing and defaults only: the executors themselves are fedraft-executors'.

use serde::Deserialize;

/// Executor settings; each absent duration keeps fedraft-executors' default
/// (`ExecutorConfig::default()`: probe 5 s, probe timeout 3 s, capacity scan 10 s, resync 60 s).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorTiming {
    /// Run executors on this node (while it leads). Default `true`; `false` makes a node that never
    /// touches member clusters (useful for a witness node or for tests of the log alone).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Health probe period per member cluster.
    pub probe_interval_ms: Option<u64>,
    /// A probe with no answer within this counts as failed.
    pub probe_timeout_ms: Option<u64>,
    /// Capacity scan period per member cluster.
    pub capacity_interval_ms: Option<u64>,
    /// Full reconcile period even without changes.
    pub resync_period_ms: Option<u64>,
    /// How often per-object status is flushed into the log (one entry for all clusters).
    pub status_flush_interval_ms: Option<u64>,
    /// Upper bound of the retry backoff for member-API errors.
    pub backoff_max_ms: Option<u64>,
    /// Commands a member cluster's kubeconfig may run as an `exec` credential plugin on this
    /// node (exact match, e.g. `["aws-iam-authenticator"]`). Applies both to registration (the
    /// API refuses others with 400) and to the executors. Default empty: kubeconfigs must be
    /// self-contained (no exec or auth-provider plugins, no file paths).
    #[serde(default)]
    pub kubeconfig_exec_plugins: Vec<String>,
    /// Member API calls in flight at once on this node, over all clusters (watches and health
    /// probes excepted). Default 256.
    pub max_member_calls: Option<usize>,
    /// Period of this node's light prober, which probes every member cluster from this node
    /// whether or not it leads, so that one broken link is told from a dead cluster. Default
    /// 10000; 0 turns it off (the leader's executors alone then decide, as before).
    pub prober_interval_ms: Option<u64>,
    /// Spread ownership: this node's executors renew an ownership lease of this length in the
    /// log and converge the member clusters the log assigns to this node (preferring clusters
    /// in its region, then zone; balanced otherwise), handed over when the lease lapses.
    /// Default (absent): [`DEFAULT_OWNER_LEASE`], see [`SPREAD_BY_DEFAULT`]. 0: off, the
    /// executors run on the leader only (as every node does while no node holds a lease).
    /// 10000 suits most fleets (see [`DEFAULT_OWNER_LEASE`] for the trade-off). Clamped to
    /// 1000..=600000.
    pub owner_lease_ms: Option<u64>,
    /// This node's region and zone, matched against member clusters' labels for the
    /// assignment. Default none.
    pub region: Option<String>,
    pub zone: Option<String>,
    /// The cluster labels naming a region and a zone. Default `topology.kubernetes.io/region`
    /// and `topology.kubernetes.io/zone`.
    pub region_label: Option<String>,
    pub zone_label: Option<String>,
}

impl Default for ExecutorTiming {
    fn default() -> Self {
        ExecutorTiming {
            enabled: true,
            probe_interval_ms: None,
            probe_timeout_ms: None,
            capacity_interval_ms: None,
            resync_period_ms: None,
            status_flush_interval_ms: None,
            backoff_max_ms: None,
            kubeconfig_exec_plugins: Vec::new(),
            max_member_calls: None,
            prober_interval_ms: None,
            owner_lease_ms: None,
            region: None,
            zone: None,
            region_label: None,
            zone_label: None,
        }
    }
}

impl ExecutorTiming {
    /// The executor configuration, with `actor` naming this node in the log.
    pub fn to_config(&self, node_id: u64) -> fedraft_executors::ExecutorConfig {
        let mut cfg = fedraft_executors::ExecutorConfig {
            actor: format!("system:executor:node{node_id}"),
            ..fedraft_executors::ExecutorConfig::default()
        };
        let ms = std::time::Duration::from_millis;
        let set = |slot: &mut std::time::Duration, v: Option<u64>| {
            if let Some(v) = v {
                *slot = ms(v);
            }
        };
        set(&mut cfg.probe_interval, self.probe_interval_ms);
        set(&mut cfg.probe_timeout, self.probe_timeout_ms);
        set(&mut cfg.capacity_interval, self.capacity_interval_ms);
        set(&mut cfg.resync_period, self.resync_period_ms);
        set(
            &mut cfg.status_flush_interval,
            self.status_flush_interval_ms,
        );
        set(&mut cfg.backoff_max, self.backoff_max_ms);
        cfg.kubeconfig_exec_allow = self.kubeconfig_exec_plugins.clone();
        if let Some(n) = self.max_member_calls {
            cfg.member_calls = fedraft_executors::client::CallGate::new(n);
        }
        cfg.prober_interval = match self.prober_interval_ms {
            Some(0) => None,
            Some(v) => Some(ms(v)),
            None => Some(DEFAULT_PROBER_INTERVAL),
        };
        cfg.owner_lease = match self.owner_lease_ms {
            Some(0) => None,
            Some(v) => Some(ms(v)),
            None => SPREAD_BY_DEFAULT.then_some(DEFAULT_OWNER_LEASE),
        };
        cfg.locality = self.locality();
        cfg
    }

    /// (label key, value) pairs this node declares with its lease: region, then zone.
    fn locality(&self) -> Vec<(String, String)> {
        let pair = |key: &Option<String>, default: &str, value: &Option<String>| {
            let key = key.clone().unwrap_or_else(|| default.to_string());
            value.clone().map(|v| (key, v))
        };
        [
            pair(
                &self.region_label,
                "topology.kubernetes.io/region",
                &self.region,
            ),
            pair(&self.zone_label, "topology.kubernetes.io/zone", &self.zone),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// The prober's default period: a third of a vantage point's lease, so one renewal per round.
const DEFAULT_PROBER_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// The ownership lease: a dead node's clusters wait for it (plus a takeover), live nodes' never
/// stop. Shorter moves sooner, but renews more (every eighth of a lease per node) and hands
/// over on shorter stalls; 10 s: 2.4 renewals a second over three nodes, well under a 30 s
/// threshold.
pub(super) const DEFAULT_OWNER_LEASE: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether a node without `owner_lease_ms` spreads ownership: yes, since `fedraft bench fleet`
/// converges with it at 300 clusters and every executor node carries a third of the member
/// load (docs/ownership.md, "On by default").
pub(super) const SPREAD_BY_DEFAULT: bool = true;

fn default_true() -> bool {
    true
}
