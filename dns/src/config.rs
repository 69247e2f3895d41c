//! Settings of the DNS server (`[dns]` in `fedraft server`'s configuration file).
//!
//! Defaults: listen `127.0.0.1:5353` (UDP and TCP on the same port; 53 needs privileges), zone
//! `fed.internal` (not `.local`, which resolvers hand to mDNS), at most 8 address records per
//! answer, SERVFAIL after 10 s without an applied entry (the leader ticks every second, so ten
//! missed ticks mean this node lost the leader or the leader lost its quorum), no locality.

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
        Ok(())
    }

    pub fn leader_contact_bound(&self) -> Duration {
        Duration::from_millis(self.leader_contact_bound_ms)
    }
}
