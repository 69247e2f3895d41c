//! What the DNS server measures: queries received, answers by response code, answers that
//! could not be sent, and UDP responses the rate limiter dropped or truncated.
//!
//! The response-code series are created with the server, one per code it can answer, so a query
//! costs two atomic adds and no label lookup. The binary's registry receives them through
//! [`DnsServer::metrics`](crate::DnsServer::metrics) and [`DnsMetrics::register`].
//!
//! Must not: depend on the HTTP API.

use hickory_proto::op::ResponseCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabel {
    action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RcodeLabel {
    rcode: &'static str,
}

/// The codes this server answers with, as labelled; anything else counts as "other".
const RCODES: [(ResponseCode, &str); 6] = [
    (ResponseCode::NoError, "NOERROR"),
    (ResponseCode::NXDomain, "NXDOMAIN"),
    (ResponseCode::ServFail, "SERVFAIL"),
    (ResponseCode::FormErr, "FORMERR"),
    (ResponseCode::NotImp, "NOTIMP"),
    (ResponseCode::Refused, "REFUSED"),
];

/// The server's measurements. Cheap to clone: every clone records into the same series.
#[derive(Debug, Clone)]
pub struct DnsMetrics {
    queries: Counter,
    responses: Family<RcodeLabel, Counter>,
    /// In the order of [`RCODES`], then "other".
    by_rcode: [Counter; 7],
    send_errors: Counter,
    rate_limited: Family<ActionLabel, Counter>,
    /// "drop", then "slip".
    by_action: [Counter; 2],
}

impl Default for DnsMetrics {
    fn default() -> Self {
        let responses = Family::<RcodeLabel, Counter>::default();
        let child = |rcode| responses.get_or_create_owned(&RcodeLabel { rcode });
        let by_rcode = [
            child(RCODES[0].1),
            child(RCODES[1].1),
            child(RCODES[2].1),
            child(RCODES[3].1),
            child(RCODES[4].1),
            child(RCODES[5].1),
            child("other"),
        ];
        let rate_limited = Family::<ActionLabel, Counter>::default();
        let by_action = [
            rate_limited.get_or_create_owned(&ActionLabel { action: "drop" }),
            rate_limited.get_or_create_owned(&ActionLabel { action: "slip" }),
        ];
        DnsMetrics {
            queries: Counter::default(),
            responses,
            by_rcode,
            send_errors: Counter::default(),
            rate_limited,
            by_action,
        }
    }
}

impl DnsMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "fedraft_dns_queries",
            "DNS requests received (UDP and TCP)",
            self.queries.clone(),
        );
        registry.register(
            "fedraft_dns_responses",
            "DNS answers by response code",
            self.responses.clone(),
        );
        registry.register(
            "fedraft_dns_send_errors",
            "DNS answers that could not be sent to the client",
            self.send_errors.clone(),
        );
        registry.register(
            "fedraft_dns_rate_limited",
            "UDP responses over the per-source rate limit, dropped or sent truncated (slip)",
            self.rate_limited.clone(),
        );
    }

    /// One response over the rate limit: `slipped` when it went out truncated, else dropped.
    pub(crate) fn rate_limited(&self, slipped: bool) {
        self.by_action[usize::from(slipped)].inc();
    }

    pub(crate) fn query(&self) {
        self.queries.inc();
    }

    pub(crate) fn answered(&self, rcode: ResponseCode) {
        let i = RCODES
            .iter()
            .position(|(c, _)| *c == rcode)
            .unwrap_or(RCODES.len());
        self.by_rcode[i].inc();
    }

    pub(crate) fn send_failed(&self) {
        self.send_errors.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_count_under_their_code_and_unknown_codes_under_other() {
        let m = DnsMetrics::default();
        let mut r = Registry::default();
        m.register(&mut r);
        m.query();
        m.query();
        m.answered(ResponseCode::NXDomain);
        m.answered(ResponseCode::BADCOOKIE);
        m.rate_limited(true);
        m.rate_limited(false);
        m.rate_limited(false);
        let mut t = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut t, &r).unwrap();
        for series in [
            "fedraft_dns_queries_total 2",
            "fedraft_dns_responses_total{rcode=\"NXDOMAIN\"} 1",
            "fedraft_dns_responses_total{rcode=\"other\"} 1",
            "fedraft_dns_responses_total{rcode=\"SERVFAIL\"} 0",
            "fedraft_dns_rate_limited_total{action=\"drop\"} 2",
            "fedraft_dns_rate_limited_total{action=\"slip\"} 1",
        ] {
            assert!(t.contains(series), "{series} missing:\n{t}");
        }
    }
}
