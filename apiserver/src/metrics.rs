//! Prometheus text exposition for request counts and latencies, plus gauges the caller supplies
//! (raft term, commit and applied index, apply lag).
//!
//! Hand-written on purpose: the set is small and fixed, and the format is simple. Labels come from
//! the matched route template (never the raw path), the method and the status code, so the number
//! of series is bounded by routes x methods x codes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS_S: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Default, Clone)]
struct Series {
    count: u64,
    sum_s: f64,
    /// Cumulative is computed at render time; this holds per-bucket counts.
    buckets: [u64; BUCKETS_S.len()],
}

type Key = (String, String, u16);

/// Request metrics, shared by every handler.
#[derive(Default)]
pub struct Metrics {
    series: Mutex<BTreeMap<Key, Series>>,
}

/// Gauges read from the raft node at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub struct RaftGauges {
    pub term: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub is_leader: bool,
    pub has_leader: bool,
}

impl Metrics {
    /// Records one finished request.
    pub fn observe(&self, route: &str, method: &str, code: u16, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let Ok(mut map) = self.series.lock() else {
            return;
        };
        let s = map
            .entry((route.to_string(), method.to_string(), code))
            .or_default();
        s.count += 1;
        s.sum_s += secs;
        if let Some(i) = BUCKETS_S.iter().position(|b| secs <= *b) {
            s.buckets[i] += 1;
        }
    }

    /// The whole exposition text.
    pub fn render(&self, raft: RaftGauges) -> String {
        let mut out = String::new();
        let snapshot: Vec<(Key, Series)> = match self.series.lock() {
            Ok(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Err(_) => Vec::new(),
        };
        out.push_str(
            "# HELP fedraft_http_requests_total HTTP requests by route, method and status code.\n",
        );
        out.push_str("# TYPE fedraft_http_requests_total counter\n");
        for ((route, method, code), s) in &snapshot {
            let _ = writeln!(
                out,
                "fedraft_http_requests_total{{route=\"{}\",method=\"{method}\",code=\"{code}\"}} {}",
                escape(route),
                s.count
            );
        }
        out.push_str("# HELP fedraft_http_request_duration_seconds HTTP request latency.\n");
        out.push_str("# TYPE fedraft_http_request_duration_seconds histogram\n");
        for ((route, method, code), s) in &snapshot {
            let labels = format!(
                "route=\"{}\",method=\"{method}\",code=\"{code}\"",
                escape(route)
            );
            let mut cumulative = 0;
            for (i, bound) in BUCKETS_S.iter().enumerate() {
                cumulative += s.buckets[i];
                let _ = writeln!(
                    out,
                    "fedraft_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                out,
                "fedraft_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "fedraft_http_request_duration_seconds_sum{{{labels}}} {}",
                s.sum_s
            );
            let _ = writeln!(
                out,
                "fedraft_http_request_duration_seconds_count{{{labels}}} {}",
                s.count
            );
        }
        let lag = raft.commit_index.saturating_sub(raft.applied_index);
        let gauges = [
            ("fedraft_raft_term", "Current raft term.", raft.term),
            (
                "fedraft_raft_commit_index",
                "Highest log index known committed.",
                raft.commit_index,
            ),
            (
                "fedraft_raft_applied_index",
                "Highest log index applied to the state.",
                raft.applied_index,
            ),
            (
                "fedraft_raft_apply_lag",
                "Committed entries not yet applied.",
                lag,
            ),
            (
                "fedraft_raft_is_leader",
                "1 when this node is the leader.",
                u64::from(raft.is_leader),
            ),
            (
                "fedraft_raft_has_leader",
                "1 when this node knows a leader.",
                u64::from(raft.has_leader),
            ),
        ];
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_buckets_and_gauges() {
        let m = Metrics::default();
        m.observe("/v1/clusters", "GET", 200, Duration::from_millis(3));
        m.observe("/v1/clusters", "GET", 200, Duration::from_millis(30));
        let text = m.render(RaftGauges {
            term: 2,
            commit_index: 9,
            applied_index: 7,
            ..Default::default()
        });
        assert!(text.contains(
            "fedraft_http_requests_total{route=\"/v1/clusters\",method=\"GET\",code=\"200\"} 2"
        ));
        assert!(text.contains("le=\"0.005\"} 1"));
        assert!(text.contains("le=\"+Inf\"} 2"));
        assert!(text.contains("fedraft_raft_apply_lag 2"));
        assert!(text.contains("fedraft_raft_term 2"));
    }
}
