//! fedraft-jepsen: black-box fault injection against real fedraft processes (nemeses, workloads, recorded
//! histories, checkers). It is never linked into the server and never reaches into fedraft's internals: it
//! sees fedraft only through its network API and the processes it starts.
//!
//! Where to start reading:
//! - [`history`]: the recorded operations (JSON lines) every checker reads.
//! - [`check`]: linearizability of per-key registers (`check::register`, on the search in `check::wgl`) and
//!   the set checker (`check::set`).
//! - [`proxy`] and [`mesh`]: user-space TCP proxies between nodes, to cut, heal and delay links without root.
//! - [`nemesis`]: seeded fault schedules.
//! - [`routed`]: the proxies the harness really uses: one listener per node, links told apart by which
//!   process opened the connection, so the nodes need no per-node `[peer_dial]` table (which `mesh` needs:
//!   fedraft's peer addresses are replicated, the same for all).
//! - [`run`]: the `fedraft-jepsen run` harness (processes, workloads, fault execution, results); [`plot`]
//!   draws its latency plot.

pub mod check;
pub mod error;
pub mod history;
pub mod mesh;
pub mod nemesis;
pub mod plot;
pub mod proxy;
pub mod routed;
pub mod run;

pub use check::Verdict;
pub use error::Error;
pub use mesh::Mesh;
pub use proxy::LinkProxy;
