//! Settings of the DNS server (`[dns]` in `fedraft server`'s configuration file).
//!
//! Defaults: listen `127.0.0.1:5353` (UDP and TCP on the same port; 53 needs privileges), zone
//! `fed.internal` (not `.local`, which resolvers hand to mDNS), at most 8 address records per
//! answer, SERVFAIL after 10 s without an applied entry (the leader ticks every second, so ten
//! missed ticks mean this node lost the leader or the leader lost its quorum), no locality,
//! UDP responses limited to 100 per second per source /24 (IPv4) or /56 (IPv6) with every second
//! response over the limit sent truncated (`[dns.rate_limit]`, see `rrl`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use crate::error::DnsError;

pub const DEFAULT_ZONE: &str = "fed.internal";
pub const DEFAULT_LISTEN: &str = "127.0.0.1:5353";
pub const DEFAULT_MAX_ANSWERS: usize = 8;
pub const DEFAULT_LEADER_CONTACT_BOUND_MS: u64 = 10_000;
/// TTL of the apex records and of negative answers outside any Service.
pub const DEFAULT_ZONE_TTL_SECONDS: u32 = 5;
/// A TCP connection idle this long is closed.
pub const DEFAULT_TCP_IDLE_TIMEOUT_MS: u64 = 10_000;
/// UDP responses per second per source prefix: far above what one resolver network asks of an
/// authoritative server with 5 s TTLs, far below what a reflection attack needs.
pub const DEFAULT_RESPONSES_PER_SECOND: u32 = 100;
/// Every second response over the limit is sent truncated (BIND's default).
pub const DEFAULT_SLIP: u32 = 2;
pub const DEFAULT_IPV4_PREFIX_LEN: u8 = 24;
pub const DEFAULT_IPV6_PREFIX_LEN: u8 = 56;
/// Buckets kept at once: 65,536 x about 64 bytes is 4 MiB at most.
pub const DEFAULT_MAX_TRACKED_PREFIXES: usize = 65_536;

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 5353))
}
fn default_zone() -> String {
    DEFAULT_ZONE.to_string()
}
fn default_max_answers() -> usize {
    DEFAULT_MAX_ANSWERS
}
fn default_bound() -> u64 {
    DEFAULT_LEADER_CONTACT_BOUND_MS
}
fn default_tcp_idle() -> u64 {
    DEFAULT_TCP_IDLE_TIMEOUT_MS
}

/// How one node serves DNS.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct DnsConfig {
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    #[serde(default = "default_zone")]
    pub zone: String,
    /// Most A/AAAA (or SRV) records in one answer.
    #[serde(default = "default_max_answers")]
    pub max_answers: usize,
    /// Answer SERVFAIL once no entry was applied for this long.
    #[serde(default = "default_bound")]
    pub leader_contact_bound_ms: u64,
    #[serde(default = "default_tcp_idle")]
    pub tcp_idle_timeout_ms: u64,
    /// cluster -> client networks: queries from them (source address, or EDNS client subnet)
    /// get that cluster first.
    #[serde(default)]
    pub locality: BTreeMap<String, Vec<IpNet>>,
    /// Response rate limiting of UDP answers per source network (`[dns.rate_limit]`).
    #[serde(default)]
    pub rate_limit: RateLimitConfig,
}

/// `[dns.rate_limit]`: a token bucket per source prefix for UDP responses (see `rrl`). TCP is
/// never limited: its handshake proves the source, and it is where truncated answers send
/// real clients.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Default true.
    pub enabled: bool,
    /// Responses per second per source prefix; a bucket holds one second of them. Default 100.
    pub responses_per_second: u32,
    /// Every `slip`-th response over the limit is sent empty with TC=1 instead of dropped, so
    /// real clients retry over TCP; 0 drops all of them, 1 truncates all of them. Default 2.
    pub slip: u32,
    /// Default 24.
    pub ipv4_prefix_len: u8,
    /// Default 56.
    pub ipv6_prefix_len: u8,
    /// Most source prefixes tracked at once; beyond, the rest share one bucket. Default 65536.
    pub max_tracked_prefixes: usize,
    /// Client networks never limited (e.g. the resolvers that forward to fedraft). Default none.
    pub exempt: Vec<IpNet>,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            enabled: true,
            responses_per_second: DEFAULT_RESPONSES_PER_SECOND,
            slip: DEFAULT_SLIP,
            ipv4_prefix_len: DEFAULT_IPV4_PREFIX_LEN,
            ipv6_prefix_len: DEFAULT_IPV6_PREFIX_LEN,
            max_tracked_prefixes: DEFAULT_MAX_TRACKED_PREFIXES,
            exempt: Vec::new(),
        }
    }
}

impl RateLimitConfig {
    /// No limit at all (benchmarks, tests that query in tight loops).
    pub fn disabled() -> Self {
        RateLimitConfig {
            enabled: false,
            ..RateLimitConfig::default()
        }
    }

    /// A bucket's size in millionths of a response: one second of responses.
    pub(crate) fn capacity(&self) -> u64 {
        u64::from(self.responses_per_second.max(1)) * 1_000_000
    }

    fn validate(&self) -> Result<(), DnsError> {
        let bad = |field: &str, message: String| DnsError::Config {
            field: format!("rate_limit.{field}"),
            message,
        };
        if self.responses_per_second == 0 || self.responses_per_second > 1_000_000 {
            return Err(bad(
                "responses_per_second",
                format!("{} is outside 1..=1000000", self.responses_per_second),
            ));
        }
        if self.slip > 10 {
            return Err(bad("slip", format!("{} is outside 0..=10", self.slip)));
        }
        if self.ipv4_prefix_len > 32 {
            return Err(bad(
                "ipv4_prefix_len",
                format!("{} is outside 0..=32", self.ipv4_prefix_len),
            ));
        }
        if self.ipv6_prefix_len > 128 {
            return Err(bad(
                "ipv6_prefix_len",
                format!("{} is outside 0..=128", self.ipv6_prefix_len),
            ));
        }
        if self.max_tracked_prefixes == 0 || self.max_tracked_prefixes > 16_777_216 {
            return Err(bad(
                "max_tracked_prefixes",
                format!("{} is outside 1..=16777216", self.max_tracked_prefixes),
            ));
        }
        Ok(())
    }
}

impl Default for DnsConfig {
    fn default() -> Self {
        DnsConfig {
            listen: default_listen(),
            zone: default_zone(),
            max_answers: DEFAULT_MAX_ANSWERS,
            leader_contact_bound_ms: DEFAULT_LEADER_CONTACT_BOUND_MS,
            tcp_idle_timeout_ms: DEFAULT_TCP_IDLE_TIMEOUT_MS,
            locality: BTreeMap::new(),
            rate_limit: RateLimitConfig::default(),
        }
    }
}

impl DnsConfig {
    pub fn validate(&self) -> Result<(), DnsError> {
        let bad = |field: &str, message: String| DnsError::Config {
            field: field.to_string(),
            message,
        };
        let zone = self.zone.trim_end_matches('.');
        let ok = !zone.is_empty()
            && zone.len() <= 200
            && zone.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !ok {
            return Err(bad("zone", format!("{:?} is not a DNS name", self.zone)));
        }
        if self.max_answers == 0 || self.max_answers > 64 {
            return Err(bad(
                "max_answers",
                format!("{} is outside 1..=64", self.max_answers),
            ));
        }
        if self.leader_contact_bound_ms == 0 {
            return Err(bad("leader_contact_bound_ms", "must be positive".into()));
        }
        self.rate_limit.validate()
    }

    pub fn leader_contact_bound(&self) -> Duration {
        Duration::from_millis(self.leader_contact_bound_ms)
    }
}
