//! Audit: what the archive's records mean, without reading them. Pure functions over decoded
//! records and states: which records a query selects (`filter`), what a state looked like
//! (`view`), what changed between two states (`diff`), and why an object's placement changed
//! (`explain`). Times stay milliseconds of log time: nothing here reads a clock or writes
//! calendar text (the API's JSON and the CLI do that at the edge).
//!
//! Must not: read the archive, replay it, or decode raft's bytes (fedraft-raft's `audit` module
//! does that and hands over [`Record`]s and [`State`](crate::state::State)s).

pub mod diff;
pub mod explain;
pub mod filter;
pub mod view;

use std::collections::BTreeSet;

use crate::command::{Command, LogEntry};
use crate::state::Applied;

pub use diff::{diff, FieldChange, FieldKind, ItemDiff, StateDiff};
pub use explain::{explain_step, rollout_steps, PlacementChange, ReadySample};
pub use filter::Filter;
pub use view::StateView;

/// One archived command, decoded: its place in the command sequence (the resource version it
/// was applied at), the raft term, the entry and what applying it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub index: u64,
    pub term: u64,
    pub entry: LogEntry,
    pub applied: Applied,
}

impl Record {
    /// The object the command itself addresses, as `(namespace, name)`.
    pub fn command_object(&self) -> Option<(&str, &str)> {
        match &self.entry.command {
            Command::PutObject {
                namespace, name, ..
            }
            | Command::PutObjectWithDiscovery {
                namespace, name, ..
            }
            | Command::PutObjectWithFailBack {
                namespace, name, ..
            }
            | Command::PutObjectWithDescheduling {
                namespace, name, ..
            }
            | Command::DeleteObject {
                namespace, name, ..
            }
            | Command::RevokePlacement { namespace, name } => Some((namespace, name)),
            _ => None,
        }
    }

    /// Clusters the command names or whose placement the entry changed.
    pub fn clusters(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        match &self.entry.command {
            Command::RegisterCluster(spec) | Command::UpdateCluster { spec, .. } => {
                out.insert(spec.name.as_str());
            }
            Command::DeregisterCluster { name, .. }
            | Command::Cordon { name }
            | Command::Uncordon { name }
            | Command::Drain { name } => {
                out.insert(name.as_str());
            }
            Command::ClusterUnreachable { cluster } => {
                out.insert(cluster.as_str());
            }
            Command::Heartbeats(hb) => out.extend(hb.iter().map(|h| h.cluster.as_str())),
            Command::Reachability(rs) => out.extend(rs.iter().map(|r| r.cluster.as_str())),
            Command::StatusReports(rs) => out.extend(rs.iter().map(|r| r.cluster.as_str())),
            Command::StatusReportsAt(rs) => {
                out.extend(rs.iter().map(|r| r.report.cluster.as_str()))
            }
            Command::StatusValues(rs) => out.extend(rs.iter().map(|r| r.cluster.as_str())),
            Command::RewrapCredentials(items) => {
                out.extend(items.iter().map(|i| i.cluster.as_str()))
            }
            _ => {}
        }
        for (_, d) in &self.applied.decisions {
            out.extend(d.moved.iter().map(|m| m.cluster.as_str()));
        }
        out
    }

    /// Every `namespace/name` the entry addressed, re-placed or changed.
    pub fn objects(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if let Some((ns, n)) = self.command_object() {
            out.insert(format!("{ns}/{n}"));
        }
        match &self.entry.command {
            Command::StatusReports(rs) => {
                out.extend(rs.iter().map(|r| format!("{}/{}", r.namespace, r.name)))
            }
            Command::StatusReportsAt(rs) => out.extend(
                rs.iter()
                    .map(|r| format!("{}/{}", r.report.namespace, r.report.name)),
            ),
            Command::StatusValues(rs) => {
                out.extend(rs.iter().map(|r| format!("{}/{}", r.namespace, r.name)))
            }
            _ => {}
        }
        out.extend(self.applied.decisions.iter().map(|(k, _)| k.to_string()));
        out.extend(
            self.applied
                .changes
                .iter()
                .filter(|c| c.kind == crate::state::ChangeKind::Object)
                .map(|c| c.key.clone()),
        );
        out
    }

    /// Namespaces of every object the entry touched.
    pub fn namespaces(&self) -> BTreeSet<String> {
        self.objects()
            .into_iter()
            .filter_map(|k| k.split_once('/').map(|(ns, _)| ns.to_string()))
            .collect()
    }
}
