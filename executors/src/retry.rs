//! When a failed member write is tried again: per object, and per cluster when the cluster
//! itself refuses connections.
//!
//! Per object ([`Retries`]): exponential backoff with jitter ([`error_policy`]), so one broken
//! manifest never slows the rest; a changed manifest is tried at once.
//!
//! Per cluster ([`Refusal`]): a write whose connection was never made (refused, no route, a
//! failed handshake) says nothing about the object and everything about the cluster. A dark
//! cluster holding a few hundred objects that moved away would otherwise get one delete per
//! object per backoff, each a failed connect and a warning: across a region of such clusters,
//! thousands a second, enough to starve the node's heartbeats for healthy clusters. So the first
//! refused connection holds every write to that cluster for one backoff of its own, writes
//! already queued in the pass are skipped, and one line says so; after the hold one write goes
//! first, and the first that gets through lifts the hold.
//!
//! Must not: hold writes for an error the member answered (a status code is about the request),
//! or for a timeout (a slow object, a webhook, must not stop the others).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::compare::ManifestHash;
use crate::config::ExecutorConfig;
use crate::error::ExecError;
use crate::live_id::LiveId;

/// The delay before the next attempt of an object that failed `attempt` times in a row.
pub fn error_policy(err: &ExecError, attempt: u32, cfg: &ExecutorConfig) -> Duration {
    let backoff = Backoff::new(cfg.backoff_min, cfg.backoff_max);
    // Errors the manifest causes will not heal by hammering: start them further up the curve.
    let attempt = if err.is_transient() {
        attempt
    } else {
        attempt.saturating_add(3)
    };
    backoff.delay_random(attempt)
}

/// One object's failed write.
#[derive(Debug)]
pub struct Retry {
    attempt: u32,
    pub next_at: Instant,
    /// The manifest hash that failed (`None` for a delete); a changed manifest is tried at once.
    pub hash: Option<ManifestHash>,
    pub message: String,
}

/// The failed writes of one cluster's objects, by object.
#[derive(Debug, Default)]
pub struct Retries(HashMap<LiveId, Retry>);

impl Retries {
    pub fn get(&self, id: &LiveId) -> Option<&Retry> {
        self.0.get(id)
    }

    pub fn remove(&mut self, id: &LiveId) {
        self.0.remove(id);
    }

    /// Records a failure of `id`'s write of `hash` (`None` for a delete); returns when to try
    /// again.
    pub fn fail(
        &mut self,
        id: &LiveId,
        hash: Option<ManifestHash>,
        e: &ExecError,
        now: Instant,
        cfg: &ExecutorConfig,
    ) -> Instant {
        let attempt = self
            .0
            .get(id)
            .filter(|r| r.hash == hash)
            .map_or(1, |r| r.attempt.saturating_add(1));
        let at = now + error_policy(e, attempt, cfg);
        self.0.insert(
            id.clone(),
            Retry {
                attempt,
                next_at: at,
                hash,
                message: e.to_string(),
            },
        );
        at
    }
}

/// Whether no connection to the member was made: the request never reached it.
pub fn refused_connection(e: &ExecError) -> bool {
    let ExecError::Kube { source, .. } = e else {
        return false;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source);
    while let Some(c) = cause {
        if let Some(h) = c.downcast_ref::<hyper_util::client::legacy::Error>() {
            if h.is_connect() {
                return true;
            }
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::HostUnreachable
            ) {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

/// A cluster that refuses connections: every write waits for `next_at`.
#[derive(Debug)]
struct Held {
    attempt: u32,
    next_at: Instant,
    message: String,
}

/// The cluster-wide hold of one reconciler.
#[derive(Debug, Default)]
pub struct Refusal {
    held: Option<Held>,
}

/// What a pass's writes see: whether an earlier write of the same pass was refused.
#[derive(Debug, Clone, Default)]
pub struct RefusalFlag(Arc<AtomicBool>);

impl RefusalFlag {
    /// Whether to skip this write: the cluster refused one already in this pass.
    pub fn skip(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Notes a write's outcome; returns whether it was refused.
    pub fn note<T>(&self, r: &Result<T, ExecError>) -> bool {
        let refused = r.as_ref().err().is_some_and(refused_connection);
        if refused {
            self.0.store(true, Ordering::Relaxed);
        }
        refused
    }
}

impl Refusal {
    /// While the cluster is held: when the hold ends, and what its objects' statuses say.
    pub fn holding(&self, now: Instant) -> Option<(Instant, &str)> {
        self.held
            .as_ref()
            .filter(|h| h.next_at > now)
            .map(|h| (h.next_at, h.message.as_str()))
    }

    /// How many writes a pass may have in flight: one while the cluster is (or was, until a
    /// write gets through) refusing, so a pass after the hold costs one failed connect, not a
    /// burst of them.
    pub fn concurrency(&self, cfg: &ExecutorConfig) -> usize {
        match self.held {
            Some(_) => 1,
            None => cfg.apply_concurrency.max(1),
        }
    }

    /// Starts a pass's writes: none refused yet.
    pub fn flag(&self) -> RefusalFlag {
        RefusalFlag::default()
    }

    /// Ends a pass's writes. A refused one (its error in `refused`) holds the cluster for the
    /// next backoff step, returned; else a write that got through lifts any hold.
    pub fn settle(
        &mut self,
        cluster: &str,
        refused: Option<&ExecError>,
        any_through: bool,
        now: Instant,
        cfg: &ExecutorConfig,
    ) -> Option<Instant> {
        let Some(e) = refused else {
            if any_through && self.held.take().is_some() {
                tracing::info!(%cluster, "member cluster accepts connections again: writes resume");
            }
            return None;
        };
        let attempt = self
            .held
            .as_ref()
            .map_or(1, |h| h.attempt.saturating_add(1));
        let next_at = now + error_policy(e, attempt, cfg);
        tracing::warn!(
            %cluster,
            attempt,
            retry_in_ms = next_at.duration_since(now).as_millis() as u64,
            error = %e,
            "member cluster refuses connections: every write to it waits"
        );
        self.held = Some(Held {
            attempt,
            next_at,
            message: format!("cluster refuses connections: {e}"),
        });
        Some(next_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ExecutorConfig {
        ExecutorConfig {
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            ..ExecutorConfig::default()
        }
    }

    fn connect_refused() -> ExecError {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        ExecError::kube(
            "deleting v1/ConfigMap a/b",
            kube::Error::Service(Box::new(io)),
        )
    }

    fn answered(code: u16) -> ExecError {
        let status = kube::core::Status {
            code,
            ..Default::default()
        };
        ExecError::kube(
            "applying v1/ConfigMap a/b",
            kube::Error::Api(Box::new(status)),
        )
    }

    #[test]
    fn only_a_connection_never_made_counts_as_refused() {
        assert!(refused_connection(&connect_refused()));
        assert!(!refused_connection(&answered(503)));
        let timeout = ExecError::Timeout {
            action: "applying".into(),
            waited_ms: 10_000,
        };
        assert!(!refused_connection(&timeout));
        assert!(!refused_connection(&ExecError::Manifest("no kind".into())));
    }

    #[test]
    fn a_refusal_holds_the_cluster_until_a_write_gets_through() {
        let (cfg, mut r) = (cfg(), Refusal::default());
        let now = Instant::now();
        assert!(r.holding(now).is_none());
        assert_eq!(r.concurrency(&cfg), cfg.apply_concurrency);
        let flag = r.flag();
        assert!(!flag.skip());
        assert!(flag.note(&Err::<(), _>(connect_refused())));
        assert!(flag.skip(), "the pass's other writes are skipped");
        assert!(!flag.note(&Err::<(), _>(answered(500))));
        let until = r
            .settle("c", Some(&connect_refused()), false, now, &cfg)
            .unwrap();
        let (held_until, message) = r.holding(now).unwrap();
        assert_eq!(held_until, until);
        assert!(
            message.starts_with("cluster refuses connections"),
            "{message}"
        );
        // The next pass starts with a fresh flag; held writes wait for the hold to end.
        assert!(!r.flag().skip());
        assert!(r.holding(until).is_none());
        assert_eq!(
            r.concurrency(&cfg),
            1,
            "one write goes first after the hold"
        );
        // Refused again: a longer hold on average, never beyond the ceiling.
        let again = r
            .settle("c", Some(&connect_refused()), false, until, &cfg)
            .unwrap();
        assert!(again > until && again <= until + cfg.backoff_max);
        // A pass whose writes got through lifts it.
        assert!(r.settle("c", None, true, again, &cfg).is_none());
        assert!(r.holding(again).is_none());
        assert_eq!(r.concurrency(&cfg), cfg.apply_concurrency);
    }

    #[test]
    fn per_object_retries_back_off_and_a_new_manifest_starts_over() {
        let (cfg, mut retries) = (cfg(), Retries::default());
        let id = LiveId::new("v1", "ConfigMap", "a", "b");
        let now = Instant::now();
        let h1 = crate::compare::manifest_hash(&serde_json::json!(1));
        let h2 = crate::compare::manifest_hash(&serde_json::json!(2));
        for _ in 0..10 {
            retries.fail(&id, Some(h1), &answered(500), now, &cfg);
        }
        assert_eq!(retries.get(&id).map(|r| r.attempt), Some(10));
        retries.fail(&id, Some(h2), &answered(500), now, &cfg);
        assert_eq!(retries.get(&id).map(|r| r.attempt), Some(1));
        retries.remove(&id);
        assert!(retries.get(&id).is_none());
    }
}
