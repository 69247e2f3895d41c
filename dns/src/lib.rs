//! fedraft-dns: every fedraft node serves cross-cluster service discovery as an authoritative
//! DNS server (UDP and TCP, hickory-server), answering from its own applied state.
//!
//! Start at [`server::DnsServer::start`]; the zone (`zone`) is rebuilt from core's discovery
//! views after applied entries, and `answer` answers one question from it (the pure part, where
//! NXDOMAIN / NODATA / weighted order / locality live). Eligibility and weights are core's
//! decision (`fedraft_core::discovery`), so what DNS answered at any index can be rebuilt from
//! the log. Queries and answers by response code are counted in `metrics`. `rrl` limits UDP
//! responses per source network; `answer` caps every answer's size.
//!
//! Must not: propose to the log, depend on the HTTP API, or recurse (names outside the zone
//! are REFUSED).

pub mod answer;
pub mod config;
pub mod error;
pub mod metrics;
pub mod rrl;
pub mod server;
pub mod zone;

pub use config::{DnsConfig, RateLimitConfig};
pub use error::DnsError;
pub use metrics::DnsMetrics;
pub use server::DnsServer;
