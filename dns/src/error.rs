//! The one error type of fedraft-dns.

use std::net::SocketAddr;

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// A name built from the zone and the state is not a valid DNS name (e.g. a zone with a bad
    /// label in the configuration).
    #[error("invalid DNS name {name:?}: {message}")]
    Name { name: String, message: String },
    #[error("cannot bind DNS {proto} on {addr}: {source}")]
    Bind {
        proto: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("invalid DNS configuration: {field}: {message}")]
    Config { field: String, message: String },
}
