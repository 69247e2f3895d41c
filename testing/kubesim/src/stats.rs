//! Request and write counters, read through the admin API.
//!
//! Executors' tests assert that applying the same desired state twice writes nothing; for that
//! the simulator counts, per verb, the requests it served, the mutating ones among them, and
//! the ones that actually changed stored state. Controller writes are counted apart so they do
//! not hide client no-ops. This module must not decide anything.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// The verbs the API serves, as Kubernetes audit logs name them (`apply` split out of patch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Apply,
    Delete,
    DeleteCollection,
}

const VERBS: [Verb; 9] = [
    Verb::Get,
    Verb::List,
    Verb::Watch,
    Verb::Create,
    Verb::Update,
    Verb::Patch,
    Verb::Apply,
    Verb::Delete,
    Verb::DeleteCollection,
];

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Apply => "apply",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    pub fn is_mutating(self) -> bool {
        !matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Default)]
pub struct Stats {
    requests: [AtomicU64; 9],
    changes: [AtomicU64; 9],
    controller_writes: AtomicU64,
    injected_errors: AtomicU64,
}

/// A point-in-time copy of the counters.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StatsSnapshot {
    /// Requests that reached a resource handler, per verb.
    pub requests: BTreeMap<String, u64>,
    /// Requests whose verb can write (create, update, patch, apply, delete, deletecollection).
    pub mutating_requests: u64,
    /// Mutating requests that changed stored state, per verb.
    pub changes: BTreeMap<String, u64>,
    /// Sum of `changes`.
    pub total_changes: u64,
    /// Writes made by the simulated controllers (status, load-balancer addresses).
    pub controller_writes: u64,
    /// Requests answered with an injected 5xx.
    pub injected_errors: u64,
}

impl Stats {
    pub fn request(&self, verb: Verb) {
        self.requests[verb.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn changed(&self, verb: Verb) {
        self.changes[verb.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn controller_write(&self) {
        self.controller_writes.fetch_add(1, Ordering::Relaxed);
    }

    pub fn injected_error(&self) {
        self.injected_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let mut s = StatsSnapshot::default();
        for v in VERBS {
            let r = self.requests[v.index()].load(Ordering::Relaxed);
            let c = self.changes[v.index()].load(Ordering::Relaxed);
            s.requests.insert(v.as_str().into(), r);
            s.changes.insert(v.as_str().into(), c);
            if v.is_mutating() {
                s.mutating_requests += r;
            }
            s.total_changes += c;
        }
        s.controller_writes = self.controller_writes.load(Ordering::Relaxed);
        s.injected_errors = self.injected_errors.load(Ordering::Relaxed);
        s
    }

    pub fn reset(&self) {
        for a in self.requests.iter().chain(self.changes.iter()) {
            a.store(0, Ordering::Relaxed);
        }
        self.controller_writes.store(0, Ordering::Relaxed);
        self.injected_errors.store(0, Ordering::Relaxed);
    }
}
