//! The reporter task: flushes the executors' [`Observations`] into log entries, health every
//! probe interval and statuses every status flush interval (what each flush holds: `report`).
//!
//! The two flushes run side by side, not in one loop: a status flush of thousands of reports can
//! take seconds to commit under load (longer on a follower, whose proposals are forwarded), and
//! heartbeats waiting behind it turned a follower's healthy clusters NotReady. Each flush keeps
//! its own [`Sent`]; they touch disjoint parts of it.
//!
//! The status flush compares every report with the state once per `RESEND_AFTER` and, between
//! those, only the reports of clusters a pass reported on since (`report::Sweep`).
//!
//! Must not: read member clusters, or let one flush wait for the other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use fedraft_core::command::Command;

use crate::config::ExecutorConfig;
use crate::node::ControlPlane;
use crate::report::{Observations, Sent, Sweep, RESEND_AFTER};

/// Runs both flushes until the task is dropped.
pub async fn run_reporter<C: ControlPlane>(ctrl: C, obs: Arc<Observations>, cfg: ExecutorConfig) {
    let tag: u64 = rand::random();
    let seq = AtomicU64::new(0);
    let next_id = || {
        let n = seq.fetch_add(1, Ordering::Relaxed) + 1;
        format!("executor-{tag:016x}-{n}")
    };
    tokio::join!(
        flush_health(&ctrl, &obs, &cfg, &next_id),
        flush_statuses(&ctrl, &obs, &cfg, &next_id),
    );
}

async fn flush_health<C: ControlPlane>(
    ctrl: &C,
    obs: &Observations,
    cfg: &ExecutorConfig,
    next_id: &impl Fn() -> String,
) {
    let mut sent = Sent::default();
    let fresh = cfg.probe_interval + cfg.probe_timeout;
    let mut health = tokio::time::interval(cfg.probe_interval);
    health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        health.tick().await;
        let flush = ctrl.read_state(|s| obs.take_health(s, &mut sent, fresh, Instant::now()));
        if !flush.unreachable.is_empty() {
            let reports = flush.unreachable;
            propose(ctrl, next_id(), &cfg.actor, Command::Reachability(reports)).await;
        }
        if !flush.heartbeats.is_empty() {
            propose(
                ctrl,
                next_id(),
                &cfg.actor,
                Command::Heartbeats(flush.heartbeats),
            )
            .await;
        }
        let details = ctrl.read_state(|s| obs.take_details(s, &mut sent, Instant::now()));
        if !details.is_empty() {
            propose(
                ctrl,
                next_id(),
                &cfg.actor,
                Command::CapacityDetails(details),
            )
            .await;
        }
    }
}

async fn flush_statuses<C: ControlPlane>(
    ctrl: &C,
    obs: &Observations,
    cfg: &ExecutorConfig,
    next_id: &impl Fn() -> String,
) {
    let mut sent = Sent::default();
    let mut sent_values = crate::preserve::SentValues::default();
    let mut statuses = tokio::time::interval(cfg.status_flush_interval);
    statuses.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_full: Option<Instant> = None;
    loop {
        statuses.tick().await;
        let now = Instant::now();
        let sweep = match last_full {
            Some(t) if now.saturating_duration_since(t) < RESEND_AFTER => Sweep::Changed,
            _ => {
                last_full = Some(now);
                Sweep::Full
            }
        };
        let batch = ctrl.read_state(|s| obs.take_statuses(s, &mut sent, now, sweep));
        if !batch.is_empty() {
            propose(ctrl, next_id(), &cfg.actor, Command::StatusReportsAt(batch)).await;
        }
        let batch = ctrl.read_state(|s| obs.take_workloads(s, &mut sent, now, sweep));
        if !batch.is_empty() {
            propose(ctrl, next_id(), &cfg.actor, Command::WorkloadReports(batch)).await;
        }
        let batch = ctrl.read_state(|s| obs.values.take(s, &mut sent_values, Instant::now()));
        if !batch.is_empty() {
            propose(ctrl, next_id(), &cfg.actor, Command::StatusValues(batch)).await;
        }
    }
}

async fn propose<C: ControlPlane>(ctrl: &C, request_id: String, actor: &str, command: Command) {
    let kind = command.kind();
    if let Err(e) = ctrl.propose(request_id, actor.to_string(), command).await {
        // The next flush sends fresh observations; nothing is lost by dropping this one.
        tracing::warn!(command = kind, error = %e, "proposing executor events failed");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fedraft_core::command::LogEntry;
    use fedraft_core::state::State;

    use super::*;
    use fedraft_core::command::Heartbeat;

    use crate::report::object_report;
    use crate::report::tests::{cap, state_with};

    /// A control plane whose log takes heartbeats and never commits anything else, as a
    /// follower's under load takes seconds to commit a big status flush.
    #[derive(Clone)]
    struct StuckStatuses {
        state: Arc<State>,
        heartbeats: Arc<AtomicU64>,
        applied: tokio::sync::broadcast::Sender<()>,
    }

    impl ControlPlane for StuckStatuses {
        type Applied = ();

        fn is_leader(&self) -> bool {
            true
        }

        fn read_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
            f(&self.state)
        }

        fn subscribe(&self) -> tokio::sync::broadcast::Receiver<()> {
            self.applied.subscribe()
        }

        fn propose(
            &self,
            _request_id: String,
            _actor: String,
            command: Command,
        ) -> impl std::future::Future<Output = Result<(), String>> + Send {
            let heartbeats = self.heartbeats.clone();
            async move {
                if let Command::Heartbeats(_) = command {
                    heartbeats.fetch_add(1, Ordering::SeqCst);
                    return Ok(());
                }
                std::future::pending().await
            }
        }
    }

    #[tokio::test]
    async fn heartbeats_go_out_while_a_status_flush_waits_on_the_log() {
        let mut s = state_with(&["a"]);
        let spec = serde_json::from_value(serde_json::json!({
            "template": serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"replicas": 2, "template": {"spec": {"containers": [
                    {"name": "app", "image": "nginx:1"}]}}},
            }).to_string(),
            "placement": {"replicas": {"mode": "Divided",
                "division": {"staticWeights": {"weights": {"a": {"weight": 1}}}}}},
        }))
        .expect("an object spec");
        let put = Command::PutObject {
            namespace: "ns".into(),
            name: "web".into(),
            spec,
            expected_version: None,
        };
        let up = Command::Heartbeats(vec![Heartbeat {
            cluster: "a".into(),
            capacity: Some(cap(1000)),
        }]);
        s.apply(2, &LogEntry::new("up", "executor", 1500, up));
        let applied = s.apply(3, &LogEntry::new("put", "admin", 2000, put));
        assert!(applied.outcome.is_accepted(), "{:?}", applied.outcome);
        let obs = Arc::new(Observations::default());
        obs.probe_ok("a", None);
        let key = Arc::new(fedraft_core::model::ObjectKey::new("ns", "web"));
        let report = object_report(&key, true, 2, None);
        obs.set_statuses("a", 3, vec![report], Vec::new());
        let cfg = ExecutorConfig {
            probe_interval: Duration::from_millis(20),
            status_flush_interval: Duration::from_millis(10),
            ..ExecutorConfig::default()
        };
        let ctrl = StuckStatuses {
            state: Arc::new(s),
            heartbeats: Arc::new(AtomicU64::new(0)),
            applied: tokio::sync::broadcast::channel(1).0,
        };
        let statuses = ctrl.read_state(|s| {
            obs.take_statuses(s, &mut Sent::default(), Instant::now(), Sweep::Full)
        });
        assert_eq!(
            statuses.len(),
            1,
            "the status flush has a report to propose"
        );
        let reporter = tokio::spawn(run_reporter(ctrl.clone(), obs.clone(), cfg));
        tokio::time::sleep(Duration::from_millis(500)).await;
        reporter.abort();
        // A heartbeat every probe interval (up to 25 here), although the first status proposal
        // never returned; one loop for both sent at most one.
        let sent = ctrl.heartbeats.load(Ordering::SeqCst);
        assert!(sent >= 3, "{sent} heartbeats");
    }
}
