//! The one error enum of fedraft-jepsen. Checker verdicts are not errors: a history that fails a check is a
//! `Verdict`, while an `Error` means the input or the environment was unusable.

use std::net::SocketAddr;

/// Everything that can go wrong in this crate outside a verdict.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A line of a JSON-lines history could not be parsed.
    #[error("history line {line}: {source}")]
    HistoryParse {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    /// Reading or writing a history file failed.
    #[error("history i/o: {0}")]
    HistoryIo(#[from] std::io::Error),
    /// Serialising an operation failed (never expected for the types here).
    #[error("history encode: {0}")]
    HistoryEncode(#[source] serde_json::Error),
    /// The history breaks an assumption the checkers rely on, e.g. a completion before its invocation or two
    /// writes of the same value to one register (values must be unique so reads identify their write).
    #[error("invalid history: {0}")]
    InvalidHistory(String),
    /// A proxy could not bind its listening address.
    #[error("proxy bind {addr}: {source}")]
    ProxyBind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A mesh was asked for a link between nodes it does not have.
    #[error("no link {from} -> {to} in a mesh of {nodes} nodes")]
    NoSuchLink {
        from: usize,
        to: usize,
        nodes: usize,
    },
    /// A nemesis schedule configuration cannot produce a schedule.
    #[error("invalid nemesis config: {0}")]
    InvalidNemesisConfig(String),
    /// Drawing the latency plot failed.
    #[error("plot: {0}")]
    Plot(String),
}
