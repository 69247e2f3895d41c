//! Which member clusters' reconcilers an applied entry wakes.
//!
//! Waking every reconciler on every entry made a node's executor cost clusters x entries x
//! objects per cluster: with a hundred clusters, a status report about one object ran a hundred
//! passes. An entry whose only changes are objects concerns the clusters those objects are placed
//! on now and the clusters that held them at their last pass ([`Interest`]); an observation that
//! changed nothing concerns none; anything else (a cluster, tenant or policy change, a lease, an
//! unknown command) still wakes them all. Each reconciler also wakes on its own watches and at
//! its resync, so a narrower wake never loses a change for long, but it must never lose one.
//!
//! Must not: read the state for anything but placements, or decide anything a pass decides.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Mutex, PoisonError};

use fedraft_core::command::Command;
use fedraft_core::state::{Applied, ChangeKind};

/// What an applied entry (or several, merged) asks of the reconcilers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum WakeScope {
    /// Nothing a pass reads changed.
    #[default]
    Nothing,
    /// Only these objects (`namespace/name`) changed.
    Objects(BTreeSet<String>),
    /// Every reconciler.
    All,
}

impl WakeScope {
    /// The scope of one applied entry, from its command and the changes it made.
    pub fn of(command: &Command, applied: &Applied) -> WakeScope {
        if applied.changes.is_empty() {
            return if observation(command) {
                WakeScope::Nothing
            } else {
                WakeScope::All
            };
        }
        let mut objects = BTreeSet::new();
        for c in &applied.changes {
            if c.kind != ChangeKind::Object {
                return WakeScope::All;
            }
            objects.insert(c.key.clone());
        }
        WakeScope::Objects(objects)
    }

    /// Both scopes at once.
    pub fn merge(&mut self, other: WakeScope) {
        match (&mut *self, other) {
            (WakeScope::All, _) | (_, WakeScope::Nothing) => {}
            (s, WakeScope::All) => *s = WakeScope::All,
            (s @ WakeScope::Nothing, o) => *s = o,
            (WakeScope::Objects(mine), WakeScope::Objects(theirs)) => mine.extend(theirs),
        }
    }
}

/// Commands that only record what executors and probers saw. When one changes nothing, no pass
/// would read anything new; every other command (leases, registrations, timers) wakes all.
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

    #[test]
    fn an_observation_that_changed_nothing_wakes_nobody_and_anything_else_everybody() {
        let none = applied(Vec::new());
        assert_eq!(
            WakeScope::of(&Command::Heartbeats(Vec::new()), &none),
            WakeScope::Nothing
        );
        assert_eq!(WakeScope::of(&Command::Tick, &none), WakeScope::All);
    }

    #[test]
    fn object_changes_name_their_objects_and_any_other_change_wakes_all() {
        let objects = applied(vec![
            change(ChangeKind::Object, "ns/a"),
            change(ChangeKind::Object, "ns/b"),
        ]);
        let cmd = Command::StatusReports(Vec::new());
        let want: BTreeSet<String> = ["ns/a", "ns/b"].map(String::from).into();
        assert_eq!(WakeScope::of(&cmd, &objects), WakeScope::Objects(want));
        let mixed = applied(vec![
            change(ChangeKind::Object, "ns/a"),
            change(ChangeKind::Cluster, "m1"),
        ]);
        assert_eq!(WakeScope::of(&cmd, &mixed), WakeScope::All);
    }

    #[test]
    fn merging_widens_and_never_narrows() {
        let a: BTreeSet<String> = ["ns/a".to_string()].into();
        let b: BTreeSet<String> = ["ns/b".to_string()].into();
        let mut s = WakeScope::Nothing;
        s.merge(WakeScope::Objects(a.clone()));
        assert_eq!(s, WakeScope::Objects(a.clone()));
        s.merge(WakeScope::Objects(b));
        assert_eq!(
            s,
            WakeScope::Objects(["ns/a", "ns/b"].map(String::from).into())
        );
        s.merge(WakeScope::Nothing);
        assert!(matches!(s, WakeScope::Objects(_)));
        s.merge(WakeScope::All);
        assert_eq!(s, WakeScope::All);
        s.merge(WakeScope::Objects(a));
        assert_eq!(s, WakeScope::All);
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
