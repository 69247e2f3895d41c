//! Which member clusters' reconcilers an applied entry wakes.
//!
//! A pass costs in proportion to the objects placed on its cluster, so waking every reconciler
//! costs the node every object it converges. An entry concerns:
//! - for each object it changed, the clusters the object is placed on now and the clusters that
//!   held it at their last pass ([`Interest`]);
//! - for each cluster whose own record it changed (labels, health, registration), that cluster's
//!   reconciler only: a pass reads no other cluster's record, and what a cluster's change does
//!   to placement reaches the objects as object changes;
//! - for a lease renewal or a tick that changed nothing, no reconciler: ownership may have moved
//!   (the set re-reads who runs where, `owners`), and a runner paused for a stale lease waits
//!   on the lease clock itself (`crate::lease`);
//! - for an observation that changed nothing, nobody;
//! - for anything else (a tenant or policy change, an unknown command), every reconciler.
//!
//! Each reconciler also wakes on its own watches and at its resync, so a narrower wake never
//! loses a change for long, but it must never lose one.
//!
//! Must not: read the state for anything but placements, or decide anything a pass decides.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Mutex, PoisonError};

use fedraft_core::command::Command;
use fedraft_core::state::{Applied, ChangeKind};

/// What an applied entry (or several, merged) asks of the reconcilers. The default asks
/// nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WakeScope {
    /// Every reconciler (the sets below are then left empty).
    pub all: bool,
    /// Objects (`namespace/name`) that changed.
    pub objects: BTreeSet<String>,
    /// Clusters whose own record changed.
    pub clusters: BTreeSet<String>,
    /// Ownership may have moved (log time passed, a lease was renewed, a cluster changed). The
    /// set re-reads which runners it should have on any scope but nothing; this marks the
    /// scopes that wake no one and still ask for that.
    pub owners: bool,
}

impl WakeScope {
    /// Every reconciler, and a fresh look at ownership: always correct, never cheap.
    pub fn everything() -> WakeScope {
        WakeScope {
            all: true,
            owners: true,
            ..WakeScope::default()
        }
    }

    /// Whether the entries asked nothing at all (an observation that changed nothing).
    pub fn is_nothing(&self) -> bool {
        *self == WakeScope::default()
    }

    /// The scope of one applied entry, from its command and the changes it made.
    pub fn of(command: &Command, applied: &Applied) -> WakeScope {
        if applied.changes.is_empty() {
            return match command {
                c if observation(c) => WakeScope::default(),
                Command::Tick | Command::ExecutorLease(_) => WakeScope {
                    owners: true,
                    ..WakeScope::default()
                },
                _ => WakeScope::everything(),
            };
        }
        let mut scope = WakeScope::default();
        for c in &applied.changes {
            match c.kind {
                ChangeKind::Object => scope.objects.insert(c.key.clone()),
                ChangeKind::Cluster => scope.clusters.insert(c.key.clone()),
                ChangeKind::Tenant | ChangeKind::Policy(_) => return WakeScope::everything(),
            };
        }
        // A cluster registered, changed or gone may start or stop a runner.
        scope.owners |= !scope.clusters.is_empty();
        scope
    }

    /// Both scopes at once.
    pub fn merge(&mut self, other: WakeScope) {
        self.owners |= other.owners;
        if self.all {
            return;
        }
        if other.all {
            self.all = true;
            self.objects.clear();
            self.clusters.clear();
            return;
        }
        self.objects.extend(other.objects);
        self.clusters.extend(other.clusters);
    }
}

/// Commands that only record what executors and probers saw. When one changes nothing, no pass
/// would read anything new.
fn observation(command: &Command) -> bool {
    matches!(
        command,
        Command::Heartbeats(_)
            | Command::StatusReports(_)
            | Command::StatusReportsAt(_)
            | Command::WorkloadReports(_)
            | Command::ServiceEndpoints(_)
            | Command::CapacityDetails(_)
            | Command::Reachability(_)
    )
}

/// The objects (`namespace/name`) one cluster's reconciler last scanned as placed there: a
/// change to one of them concerns the cluster even once the object has moved away or is gone.
#[derive(Debug, Default)]
pub struct Interest {
    keys: Mutex<HashSet<String>>,
}

impl Interest {
    /// Replaces the set. Called under the same state read as the scan, so an entry applied after
    /// the scan is judged against it.
    pub fn set(&self, keys: HashSet<String>) {
        *self.keys.lock().unwrap_or_else(PoisonError::into_inner) = keys;
    }

    /// Whether any of `objects` was placed on the cluster at its last scan.
    pub fn any(&self, objects: &BTreeSet<String>) -> bool {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        objects.iter().any(|o| keys.contains(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::state::{Change, ChangeOp, Outcome};

    fn applied(changes: Vec<Change>) -> Applied {
        Applied {
            index: 7,
            outcome: Outcome::Accepted {
                resource_version: None,
            },
            changes,
            decisions: Vec::new(),
            duplicate_of: None,
        }
    }

    fn change(kind: ChangeKind, key: &str) -> Change {
        Change {
            kind,
            key: key.to_string(),
            op: ChangeOp::Modified,
        }
    }

    fn objects(keys: &[&str]) -> BTreeSet<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn what_changed_nothing_wakes_nobody_and_time_or_leases_only_reread_owners() {
        let none = applied(Vec::new());
        let heartbeats = WakeScope::of(&Command::Heartbeats(Vec::new()), &none);
        assert!(heartbeats.is_nothing());
        let tick = WakeScope::of(&Command::Tick, &none);
        assert_eq!(
            tick,
            WakeScope {
                owners: true,
                ..WakeScope::default()
            }
        );
        assert!(!tick.is_nothing(), "the set must re-read ownership");
        // A command with no known reach that changed nothing still wakes everybody.
        let policy = Command::SetHealthPolicy(Default::default());
        assert_eq!(WakeScope::of(&policy, &none), WakeScope::everything());
    }

    #[test]
    fn changes_name_their_objects_and_clusters_and_tenants_wake_all() {
        let cmd = Command::StatusReports(Vec::new());
        let changed = applied(vec![
            change(ChangeKind::Object, "ns/a"),
            change(ChangeKind::Object, "ns/b"),
        ]);
        let scope = WakeScope::of(&cmd, &changed);
        assert_eq!(scope.objects, objects(&["ns/a", "ns/b"]));
        assert!(!scope.all && !scope.owners && scope.clusters.is_empty());
        let mixed = applied(vec![
            change(ChangeKind::Object, "ns/a"),
            change(ChangeKind::Cluster, "m1"),
        ]);
        let scope = WakeScope::of(&cmd, &mixed);
        assert_eq!(scope.clusters, objects(&["m1"]));
        assert!(
            !scope.all && scope.owners,
            "a cluster change may start or stop a runner"
        );
        let tenant = applied(vec![change(ChangeKind::Tenant, "t1")]);
        assert_eq!(WakeScope::of(&cmd, &tenant), WakeScope::everything());
    }

    #[test]
    fn merging_widens_and_never_narrows() {
        let mut s = WakeScope::default();
        s.merge(WakeScope {
            objects: objects(&["ns/a"]),
            ..WakeScope::default()
        });
        s.merge(WakeScope {
            objects: objects(&["ns/b"]),
            clusters: objects(&["m1"]),
            ..WakeScope::default()
        });
        assert_eq!(s.objects, objects(&["ns/a", "ns/b"]));
        assert_eq!(s.clusters, objects(&["m1"]));
        s.merge(WakeScope::default());
        assert_eq!(s.objects.len(), 2);
        s.merge(WakeScope {
            owners: true,
            ..WakeScope::default()
        });
        assert!(s.owners && !s.all);
        s.merge(WakeScope::everything());
        assert!(s.all && s.objects.is_empty());
        s.merge(WakeScope {
            objects: objects(&["ns/c"]),
            ..WakeScope::default()
        });
        assert_eq!(s, WakeScope::everything());
    }

    #[test]
    fn interest_answers_for_the_last_scan_only() {
        let i = Interest::default();
        let ab: BTreeSet<String> = ["ns/a".to_string()].into();
        assert!(!i.any(&ab));
        i.set(["ns/a".to_string()].into());
        assert!(i.any(&ab));
        i.set(HashSet::new());
        assert!(!i.any(&ab));
    }
}
