//! What the API measures, and the registry `/metrics` encodes: requests by route template,
//! method and status code (count and latency), live watch streams and the ones cut off, and at
//! scrape time the member clusters by health as this node's applied state has them.
//!
//! Labels come from the matched route template (never the raw path), a static method name and
//! the status code, so the number of series is bounded by routes x methods x codes; a request
//! clones the route's shared template (a reference count, no allocation) to find its series.
//! Series are atomics and per-series histograms; nothing takes a lock shared by every request.
//!
//! The registry is the binary's: it registers what the other crates measure and hands it to
//! [`Api::with_registry`](crate::Api::with_registry), which adds this crate's series.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::MatchedPath;
use axum::http::Method;
use fedraft_core::model::Health;
use fedraft_raft::FedNode;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Upper bounds of the request latency buckets, in seconds.
const BUCKETS_S: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// The route template a request matched.
#[derive(Debug, Clone)]
pub enum Route {
    Matched(MatchedPath),
    Unmatched,
}

impl Route {
    fn as_str(&self) -> &str {
        match self {
            Route::Matched(p) => p.as_str(),
            Route::Unmatched => "unmatched",
        }
    }
}

impl PartialEq for Route {
    fn eq(&self, other: &Route) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Route {}

impl std::hash::Hash for Route {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl EncodeLabelValue for Route {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: Route,
    method: &'static str,
    code: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabel {
    stream: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Which watch a subscriber follows.
#[derive(Debug, Clone, Copy)]
pub enum WatchKind {
    /// `GET /v1/watch`: resource events from the watch history.
    Resources,
    /// `GET .../endpoints?watch=true`: one Service's discovery view.
    Endpoints,
}

/// Why a watch stream was refused or cut off.
#[derive(Debug, Clone, Copy)]
pub enum WatchDrop {
    /// It fell behind the live feed by more than its buffer: a final 410 ERROR line.
    Lagged,
    /// The watch history was reset under it (a snapshot install): a final 410 ERROR line.
    Reset,
    /// It asked to resume from before the retained history: 410 before the stream started.
    Expired,
}

/// The API's series. Shared by every handler through the app state.
#[derive(Debug, Clone)]
pub struct ApiMetrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
    subscribers: Family<StreamLabel, Gauge>,
    resource_watchers: Gauge,
    endpoint_watchers: Gauge,
    drops: Family<ReasonLabel, Counter>,
    /// In the order of [`WatchDrop`]'s variants.
    drop_reasons: [Counter; 3],
}

impl Default for ApiMetrics {
    fn default() -> Self {
        let subscribers = Family::<StreamLabel, Gauge>::default();
        let stream = |stream| subscribers.get_or_create_owned(&StreamLabel { stream });
        let (resource_watchers, endpoint_watchers) = (stream("resources"), stream("endpoints"));
        let drops = Family::<ReasonLabel, Counter>::default();
        let reason = |reason| drops.get_or_create_owned(&ReasonLabel { reason });
        let drop_reasons = [reason("lagged"), reason("reset"), reason("expired")];
        ApiMetrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(|| Histogram::new(BUCKETS_S)),
            subscribers,
            resource_watchers,
            endpoint_watchers,
            drops,
            drop_reasons,
        }
    }
}

impl ApiMetrics {
    /// Records one finished request.
    pub fn observe(&self, route: Route, method: &'static str, code: u16, elapsed: Duration) {
        let labels = RequestLabels {
            route,
            method,
            code,
        };
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a watch stream as live until the returned guard is dropped.
    pub fn watching(&self, kind: WatchKind) -> WatchGuard {
        let g = match kind {
            WatchKind::Resources => self.resource_watchers.clone(),
            WatchKind::Endpoints => self.endpoint_watchers.clone(),
        };
        g.inc();
        WatchGuard(g)
    }

    pub fn watch_dropped(&self, why: WatchDrop) {
        let i = match why {
            WatchDrop::Lagged => 0,
            WatchDrop::Reset => 1,
            WatchDrop::Expired => 2,
        };
        self.drop_reasons[i].inc();
    }

    pub(crate) fn register(&self, node: &FedNode, registry: &mut Registry) {
        registry.register(
            "fedraft_http_requests",
            "HTTP requests by route, method and status code",
            self.requests.clone(),
        );
        registry.register(
            "fedraft_http_request_duration_seconds",
            "HTTP request latency by route, method and status code",
            self.latency.clone(),
        );
        registry.register(
            "fedraft_watch_subscribers",
            "Watch streams open on this node, by stream",
            self.subscribers.clone(),
        );
        registry.register(
            "fedraft_watch_dropped",
            "Watch streams refused or cut off with 410, by reason",
            self.drops.clone(),
        );
        registry.register_collector(Box::new(ClusterHealth { node: node.clone() }));
    }
}

/// Keeps a watch stream counted in `fedraft_watch_subscribers` while it lives.
pub struct WatchGuard(Gauge);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The method as a label value; extension methods share one series.
pub fn method_name(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// Member clusters by health in this node's applied state, counted when scraped. A share of
/// NotReady clusters is what the failover alert watches.
struct ClusterHealth {
    node: FedNode,
}

impl std::fmt::Debug for ClusterHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterHealth").finish_non_exhaustive()
    }
}

impl Collector for ClusterHealth {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (clusters, cordoned, brake, links, queued, timers) = self.node.read_stale(|s| {
            let all: Vec<(String, Health)> = s
                .clusters()
                .map(|c| (c.spec.name.clone(), c.status.health))
                .collect();
            let b = &s.health().brake;
            let mut scopes: Vec<String> = b.regions.keys().map(|r| format!("region:{r}")).collect();
            if b.fleet.is_some() {
                scopes.insert(0, "fleet".to_string());
            }
            let links = s.health().links.len();
            (
                all,
                s.clusters().filter(|c| c.cordoned).count(),
                scopes,
                links,
                s.pending_reschedules(),
                s.failover_timers_pending(),
            )
        });
        let count = |h| clusters.iter().filter(|(_, x)| *x == h).count();
        let mut e = encoder.encode_descriptor(
            "fedraft_member_clusters",
            "Registered member clusters by health, in this node's applied state",
            None,
            MetricType::Gauge,
        )?;
        for (health, name) in HEALTHS {
            let labels = [("health", name)];
            ConstGauge::new(count(health) as i64).encode(e.encode_family(&labels)?)?;
        }
        let mut e = encoder.encode_descriptor(
            "fedraft_member_cluster_health",
            "1 for each member cluster's current health, 0 for the others",
            None,
            MetricType::Gauge,
        )?;
        for (cluster, health) in &clusters {
            for (h, name) in HEALTHS {
                let labels = [("cluster", cluster.as_str()), ("health", name)];
                let v = i64::from(*health == h);
                ConstGauge::new(v).encode(e.encode_family(&labels)?)?;
            }
        }
        // One series per scope where the failover brake holds (none while failover runs).
        let mut e = encoder.encode_descriptor(
            "fedraft_failover_brake_engaged",
            "1 per scope (fleet, or region:NAME) where failover is paused for mass failure",
            None,
            MetricType::Gauge,
        )?;
        for scope in &brake {
            let labels = [("scope", scope.as_str())];
            ConstGauge::new(1i64).encode(e.encode_family(&labels)?)?;
        }
        let gauges = [
            (
                "fedraft_member_clusters_link_held",
                "Clusters held Ready because only the owner cannot reach them (a broken link)",
                links,
            ),
            // How far failover is behind: objects whose grace period is running, and objects
            // waiting in the bounded-rate re-placement queue.
            (
                "fedraft_failover_timers_pending",
                "Failover timers armed (an object's grace period on a NotReady cluster), not yet fired",
                timers,
            ),
            (
                "fedraft_reschedules_queued",
                "Objects queued for re-placement (failover, drain, new capacity), drained per entry",
                queued,
            ),
            (
                "fedraft_member_clusters_cordoned",
                "Registered member clusters that are cordoned (or drained)",
                cordoned,
            ),
        ];
        for (name, help, value) in gauges {
            fedraft_raft::encode_gauge(&mut encoder, name, help, value as u64)?;
        }
        Ok(())
    }
}

const HEALTHS: [(Health, &str); 3] = [
    (Health::Ready, "Ready"),
    (Health::NotReady, "NotReady"),
    (Health::Unknown, "Unknown"),
];

/// The registry `/metrics` encodes, shared read-only by the handler.
pub(crate) type SharedRegistry = Arc<Registry>;

/// The exposition text (Prometheus text format 0.0.4).
pub(crate) fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would leave a truncated scrape,
    // which Prometheus reports as a failed scrape.
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, registry) {
        tracing::warn!(error = %e, "encoding metrics failed");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_buckets_and_watch_series() {
        let m = ApiMetrics::default();
        let mut r = Registry::default();
        r.register("fedraft_http_requests", "h", m.requests.clone());
        r.register(
            "fedraft_http_request_duration_seconds",
            "h",
            m.latency.clone(),
        );
        r.register("fedraft_watch_subscribers", "h", m.subscribers.clone());
        r.register("fedraft_watch_dropped", "h", m.drops.clone());
        m.observe(Route::Unmatched, "GET", 200, Duration::from_millis(3));
        m.observe(Route::Unmatched, "GET", 200, Duration::from_millis(30));
        let w = m.watching(WatchKind::Resources);
        let _e = m.watching(WatchKind::Endpoints);
        m.watch_dropped(WatchDrop::Lagged);
        let text = render(&r);
        assert!(text.contains(
            "fedraft_http_requests_total{route=\"unmatched\",method=\"GET\",code=\"200\"} 2"
        ));
        assert!(text.contains("le=\"0.005\"} 1"), "{text}");
        assert!(text.contains("le=\"+Inf\"} 2"), "{text}");
        assert!(text.contains("fedraft_watch_subscribers{stream=\"resources\"} 1"));
        assert!(text.contains("fedraft_watch_dropped_total{reason=\"lagged\"} 1"));
        drop(w);
        let text = render(&r);
        assert!(text.contains("fedraft_watch_subscribers{stream=\"resources\"} 0"));
        assert!(text.contains("fedraft_watch_subscribers{stream=\"endpoints\"} 1"));
    }
}
