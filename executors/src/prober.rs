//! The light prober every fedraft node runs, leader or not: one `GET /readyz` per registered
//! member cluster every `prober_interval`, so that the state machine hears how each cluster
//! looks from every node (vantage point), not only from the owner's executors.
//!
//! What it proposes is this node's view as a change against what the applied state already
//! holds for this node (`HealthBook::reach`): a cluster turning unreachable (with the error or
//! timeout) or reachable again. When nothing changed it proposes an empty `Reachability`
//! every `PROBER_RENEW` only, renewing its lease (`fedraft_core::health::VANTAGE_LEASE_MS`): a
//! node that stops renewing is gone, and its last view no longer counts. So a quiet fleet of any
//! size costs one small entry per node every 10 s. Proposals go through the local node, which
//! forwards them to the leader.
//!
//! Must not: decide health (the state machine weighs the views), touch member clusters beyond
//! the probe, or hold up the executors (it runs as its own task, with its own clients).

use std::collections::BTreeMap;
use std::time::Duration;

use fedraft_core::command::{Command, ReachabilityReport};
use fedraft_core::health::{FailureKind, ProbeFailure, VANTAGE_LEASE_MS};
use fedraft_core::model::ClusterSpec;
use fedraft_core::state::State;
use futures::future::join_all;
use tokio::time::Instant;

use crate::client::build_client;
use crate::config::ExecutorConfig;
use crate::node::ControlPlane;
use crate::probe::{failure_of, probe};

/// An empty report renews this node's lease at least this often (a third of the lease).
pub const PROBER_RENEW: Duration = Duration::from_millis(VANTAGE_LEASE_MS / 3);

/// One cluster's client, kept while its registration is unchanged.
struct Target {
    spec: ClusterSpec,
    client: Result<kube::Client, ProbeFailure>,
}

/// Whether `mine` differs from what the state holds for `actor`: reachable or not, and the
/// kind of failure (the text alone changing is no news worth an entry).
fn is_news(state: &State, actor: &str, cluster: &str, mine: &Option<ProbeFailure>) -> bool {
    let held = state
        .health()
        .reach
        .get(cluster)
        .and_then(|views| views.get(actor));
    match (held, mine) {
        (None, _) => true,
        (Some(r), mine) => r.failure.as_ref().map(|f| f.kind) != mine.as_ref().map(|f| f.kind),
    }
}

/// The changes this round observed, against the state.
pub fn changes(
    state: &State,
    actor: &str,
    views: &BTreeMap<String, Option<ProbeFailure>>,
) -> Vec<ReachabilityReport> {
    views
        .iter()
        .filter(|(c, f)| state.cluster(c).is_some() && is_news(state, actor, c, f))
        .map(|(c, f)| ReachabilityReport {
            cluster: c.clone(),
            failure: f.clone(),
        })
        .collect()
}

/// Runs until the task is aborted.
pub async fn run_prober<C: ControlPlane>(ctrl: C, cfg: ExecutorConfig, interval: Duration) {
    let mut targets: BTreeMap<String, Target> = BTreeMap::new();
    let mut last_proposal: Option<Instant> = None;
    let mut seq: u64 = 0;
    let tag: u64 = rand::random();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let specs: BTreeMap<String, ClusterSpec> = ctrl.read_state(|s| {
            s.clusters()
                .map(|c| (c.spec.name.clone(), c.spec.clone()))
                .collect()
        });
        targets.retain(|name, t| {
            specs.get(name).is_some_and(|s| {
                s.api_endpoint == t.spec.api_endpoint && s.credentials == t.spec.credentials
            })
        });
        for (name, spec) in &specs {
            if targets.contains_key(name) {
                continue;
            }
            let client = build_client(
                spec,
                cfg.probe_timeout,
                &cfg.kubeconfig_exec_allow,
                cfg.credentials_keys.as_deref(),
                Some(fedraft_core::health::vantage_name(&cfg.actor)),
            )
            .await
            .map_err(|e| ProbeFailure::new(FailureKind::Error, &e.to_string()));
            let spec = spec.clone();
            targets.insert(name.clone(), Target { spec, client });
        }
        let lateness = &cfg.lateness;
        let rounds = targets.iter().map(|(name, t)| async move {
            let view = match &t.client {
                Ok(c) => probe(c, cfg.probe_timeout, lateness)
                    .await
                    .err()
                    .map(|e| failure_of(&e)),
                Err(f) => Some(f.clone()),
            };
            (name.clone(), view)
        });
        let views: BTreeMap<String, Option<ProbeFailure>> =
            join_all(rounds).await.into_iter().collect();
        let reports = ctrl.read_state(|s| changes(s, &cfg.actor, &views));
        let due = last_proposal.is_none_or(|t| t.elapsed() >= PROBER_RENEW);
        if reports.is_empty() && !due {
            continue;
        }
        for r in &reports {
            match &r.failure {
                Some(f) => {
                    tracing::info!(cluster = %r.cluster, failure = %f.describe(), "cluster unreachable from this node")
                }
                None => tracing::info!(cluster = %r.cluster, "cluster reachable from this node"),
            }
        }
        seq += 1;
        let id = format!("prober-{tag:016x}-{seq}");
        match ctrl
            .propose(id, cfg.actor.clone(), Command::Reachability(reports))
            .await
        {
            Ok(()) => last_proposal = Some(Instant::now()),
            // The next round compares with the state again: nothing is lost.
            Err(e) => tracing::warn!(error = %e, "proposing this node's reachability failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::command::{Heartbeat, LogEntry};

    #[test]
    fn only_changes_of_reachability_or_kind_are_news() {
        let mut s = State::new();
        let spec = ClusterSpec::new("m1", "http://127.0.0.1:1");
        s.apply(
            1,
            &LogEntry::new("", "a", 1, Command::RegisterCluster(spec)),
        );
        let hb = Command::Heartbeats(vec![Heartbeat {
            cluster: "m1".into(),
            capacity: None,
        }]);
        s.apply(2, &LogEntry::new("", "n1", 2, hb));
        let down = |m: &str| Some(ProbeFailure::new(FailureKind::Timeout, m));
        let mut views = BTreeMap::from([("m1".to_string(), down("first"))]);
        views.insert("gone".into(), None);
        let first = changes(&s, "n2", &views);
        assert_eq!(first.len(), 1, "unregistered clusters are skipped");
        s.apply(3, &LogEntry::new("", "n2", 3, Command::Reachability(first)));
        views.insert("m1".into(), down("other text"));
        assert!(changes(&s, "n2", &views).is_empty());
        views.insert("m1".into(), None);
        assert_eq!(changes(&s, "n2", &views).len(), 1);
    }
}
