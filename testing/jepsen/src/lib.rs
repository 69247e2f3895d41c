//! fedraft-jepsen: black-box fault injection against real fedraft processes (nemeses, workloads, recorded
//! histories, checkers). It is never linked into the server and never reaches into fedraft's internals: it
//! sees fedraft only through its network API and the processes it starts.
//!
//! Where to start reading:
//! - [`history`]: the recorded operations (JSON lines) every checker reads.
//! - [`check`]: linearizability of per-key registers (`check::register`, on the search in `check::wgl`) and
//!   the set checker (`check::set`).
//! - [`proxy`] and [`mesh`]: user-space TCP proxies between nodes, one per ordered pair, to cut, heal and
//!   delay links without root; each node dials its peers through its own proxies (`[peer_dial]`).
//! - [`nemesis`]: seeded fault schedules.
//! - [`run`]: the `fedraft-jepsen run` harness (processes, workloads, fault execution, results); [`plot`]
//!   draws its latency plot.
//! - [`campaign`]: `fedraft-jepsen campaign`, many seeded runs rotating workloads and nemeses, one summary.

pub mod campaign;
pub mod check;
pub mod error;
pub mod history;
pub mod mesh;
pub mod nemesis;
pub mod plot;
pub mod proxy;
pub mod run;

pub use check::Verdict;
pub use error::Error;
pub use mesh::Mesh;
pub use proxy::LinkProxy;
