//! What the executors measure, per member cluster: reconciles by result, and every call to the
//! member's API (latency, and errors by reason), timed by a tower layer on the cluster's kube
//! client so that the reconciler, the probe, the capacity scan and the watches are all counted
//! without instrumenting each call.
//!
//! A cluster's series are created once, when its executor starts ([`ExecutorMetrics::cluster`]),
//! and the executor keeps the handles: recording is an atomic add or one histogram observation,
//! with no label lookup per call. A deregistered cluster's series are removed.
//!
//! Must not: decide anything from what it measures, or know about HTTP beyond timing requests.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    cluster: String,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    cluster: String,
    reason: &'static str,
}

/// Results of one object's reconcile, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reconciled {
    /// The live object already matched: nothing written.
    Unchanged,
    /// Written with server-side apply.
    Applied,
    /// The write failed; the object is retried with backoff.
    ApplyFailed,
    /// A managed object no longer desired was deleted.
    Deleted,
    DeleteFailed,
}

const RESULTS: [(Reconciled, &str); 5] = [
    (Reconciled::Unchanged, "unchanged"),
    (Reconciled::Applied, "applied"),
    (Reconciled::ApplyFailed, "apply_error"),
    (Reconciled::Deleted, "deleted"),
    (Reconciled::DeleteFailed, "delete_error"),
];

/// Why a member API call counts as failed.
const REASONS: [&str; 3] = [
    // No response: connection refused or reset, TLS, DNS.
    "transport",
    // The member answered 5xx or 429: it is unwell or shedding load.
    "server",
    // The caller gave up first (its own timeout, or the executor stopped).
    "abandoned",
];

/// Every executor's measurements on this node. Cheap to clone: every clone records into the
/// same series. Set it in [`ExecutorConfig::metrics`](crate::ExecutorConfig) and register it
/// into the binary's registry with [`ExecutorMetrics::register`].
#[derive(Debug, Clone)]
pub struct ExecutorMetrics {
    reconciles: Family<ReconcileLabels, Counter>,
    call_seconds: Family<ClusterLabel, Histogram>,
    call_errors: Family<ErrorLabels, Counter>,
}

impl Default for ExecutorMetrics {
    fn default() -> Self {
        ExecutorMetrics {
            reconciles: Family::default(),
            // 5 ms .. 10 s: the request timeout's order of magnitude.
            call_seconds: Family::new_with_constructor(
                (|| Histogram::new(exponential_buckets(0.005, 2.0, 12))) as fn() -> Histogram,
            ),
            call_errors: Family::default(),
        }
    }
}

impl ExecutorMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "fedraft_executor_reconciles",
            "Objects reconciled in member clusters, by cluster and result",
            self.reconciles.clone(),
        );
        registry.register(
            "fedraft_member_api_request_duration_seconds",
            "Latency of calls to a member cluster's API until the response headers, by cluster",
            self.call_seconds.clone(),
        );
        registry.register(
            "fedraft_member_api_errors",
            "Failed calls to a member cluster's API, by cluster and reason",
            self.call_errors.clone(),
        );
    }

    /// The series of `cluster`, created now if new.
    pub fn cluster(&self, cluster: &str) -> ClusterMetrics {
        let label = |result| ReconcileLabels {
            cluster: cluster.to_string(),
            result,
        };
        let reconciles = RESULTS.map(|(_, r)| self.reconciles.get_or_create_owned(&label(r)));
        let errors = REASONS.map(|reason| {
            self.call_errors.get_or_create_owned(&ErrorLabels {
                cluster: cluster.to_string(),
                reason,
            })
        });
        let calls = self.call_seconds.get_or_create_owned(&ClusterLabel {
            cluster: cluster.to_string(),
        });
        ClusterMetrics {
            reconciles,
            calls: CallMetrics { calls, errors },
        }
    }

    /// Removes `cluster`'s series (it was deregistered).
    pub fn forget(&self, cluster: &str) {
        for (_, result) in RESULTS {
            self.reconciles.remove(&ReconcileLabels {
                cluster: cluster.to_string(),
                result,
            });
        }
        for reason in REASONS {
            self.call_errors.remove(&ErrorLabels {
                cluster: cluster.to_string(),
                reason,
            });
        }
        self.call_seconds.remove(&ClusterLabel {
            cluster: cluster.to_string(),
        });
    }
}

/// One cluster's series, held by its executor.
#[derive(Debug, Clone)]
pub struct ClusterMetrics {
    /// In the order of [`RESULTS`].
    reconciles: [Counter; 5],
    calls: CallMetrics,
}

impl ClusterMetrics {
    pub fn reconciled(&self, result: Reconciled) {
        if let Some(i) = RESULTS.iter().position(|(r, _)| *r == result) {
            self.reconciles[i].inc();
        }
    }

    /// The layer that times this cluster's API calls; see [`CallLayer`].
    pub fn call_layer(&self) -> CallLayer {
        CallLayer {
            metrics: self.calls.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct CallMetrics {
    calls: Histogram,
    /// In the order of [`REASONS`].
    errors: [Counter; 3],
}

/// A tower layer for a member cluster's kube client: times every request until its response
/// headers arrive and counts the failed ones. 4xx answers other than 429 are the caller's
/// business (a 404 on a lookup, a 409 on a conflict) and do not count as errors.
#[derive(Debug, Clone)]
pub struct CallLayer {
    metrics: CallMetrics,
}

impl<S> tower::Layer<S> for CallLayer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`CallLayer`] wraps around the client's stack.
#[derive(Debug, Clone)]
pub struct Timed<S> {
    inner: S,
    metrics: CallMetrics,
}

type BoxedCall<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, Req, B> tower::Service<Req> for Timed<S>
where
    S: tower::Service<Req, Response = http::Response<B>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    B: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxedCall<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let call = self.inner.call(req);
        let mut pending = Pending {
            metrics: Some(self.metrics.clone()),
            started: Instant::now(),
        };
        Box::pin(async move {
            let result = call.await;
            let failed = match &result {
                Ok(resp) => {
                    let s = resp.status();
                    (s.is_server_error() || s == http::StatusCode::TOO_MANY_REQUESTS).then_some(1)
                }
                Err(_) => Some(0),
            };
            pending.finish(failed);
            result
        })
    }
}

/// One call in flight: recorded when it finishes, or as abandoned if its future is dropped
/// first (the caller's timeout fired).
struct Pending {
    metrics: Option<CallMetrics>,
    started: Instant,
}

impl Pending {
    /// `failed`: the index of the error reason, if the call failed.
    fn finish(&mut self, failed: Option<usize>) {
        if let Some(m) = self.metrics.take() {
            m.calls.observe(self.started.elapsed().as_secs_f64());
            if let Some(i) = failed {
                m.errors[i].inc();
            }
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.finish(Some(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, ServiceExt};

    fn text(r: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, r).unwrap();
        out
    }

    #[tokio::test]
    async fn calls_are_timed_and_failures_counted_per_cluster() {
        let m = ExecutorMetrics::default();
        let mut r = Registry::default();
        m.register(&mut r);
        let dc1 = m.cluster("dc1");
        let layer = dc1.call_layer();
        for status in [200u16, 404, 503, 429] {
            let answering = tower::service_fn(move |()| async move {
                let resp = http::Response::builder().status(status).body(()).unwrap();
                Ok::<_, &'static str>(resp)
            });
            layer.layer(answering).oneshot(()).await.unwrap();
        }
        let broken = tower::service_fn(|()| async { Err::<http::Response<()>, _>("refused") });
        assert!(layer.layer(broken).oneshot(()).await.is_err());
        // Dropped before it finished: the caller's timeout.
        let slow =
            tower::service_fn(|()| std::future::pending::<Result<http::Response<()>, &str>>());
        let call = layer.layer(slow).oneshot(());
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(5), call)
                .await
                .is_err()
        );
        dc1.reconciled(Reconciled::Applied);
        dc1.reconciled(Reconciled::Applied);
        m.cluster("dc2").reconciled(Reconciled::DeleteFailed);
        let t = text(&r);
        for series in [
            "fedraft_member_api_request_duration_seconds_count{cluster=\"dc1\"} 6",
            "fedraft_member_api_errors_total{cluster=\"dc1\",reason=\"server\"} 2",
            "fedraft_member_api_errors_total{cluster=\"dc1\",reason=\"transport\"} 1",
            "fedraft_member_api_errors_total{cluster=\"dc1\",reason=\"abandoned\"} 1",
            "fedraft_executor_reconciles_total{cluster=\"dc1\",result=\"applied\"} 2",
            "fedraft_executor_reconciles_total{cluster=\"dc2\",result=\"delete_error\"} 1",
            "fedraft_executor_reconciles_total{cluster=\"dc2\",result=\"unchanged\"} 0",
        ] {
            assert!(t.contains(series), "{series} missing:\n{t}");
        }
        m.forget("dc2");
        assert!(!text(&r).contains("dc2"));
    }
}
