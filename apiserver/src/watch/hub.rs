//! The watch hub: one task per node that turns every applied entry into watch events and pushes
//! them into the ring.
//!
//! Events are built from the entry's `changes` (one per resource, collapsed within the entry) and
//! the node's local state at the time the hub handles the entry. That state may already include
//! later entries, so an event's object can be newer than its `resourceVersion`; it is never older.
//! The hub keeps each changed resource as it is now (under the state's read lock, briefly):
//! objects are shared with the state, which copies one only if it changes while still held here;
//! clusters and tenants, rarely written, are copied. It renders nothing: JSON is made only when a
//! watcher sends the event (see `ring`).
//! If the hub falls behind the node's broadcast (lagged), it cannot know what it missed: it resets
//! the ring (resumes from before that point get 410) and live watchers get an ERROR line.

use std::collections::BTreeMap;
use std::sync::Arc;

use fedraft_core::state::{ChangeKind, ChangeOp, State};
use fedraft_raft::{AppliedEntry, FedNode};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::ring::{EventType, Payload, Ring, WatchEvent};

/// Starts the hub and returns the ring it feeds.
pub fn start(node: &FedNode, history_events: usize) -> Arc<Ring> {
    // Subscribe before reading the start index, so no entry falls between the two.
    let mut sub = node.subscribe();
    let start_index = node.read_stale(|s| s.applied_index());
    let ring = Arc::new(Ring::new(history_events, start_index));
    let (node, r) = (node.clone(), ring.clone());
    tokio::spawn(async move {
        loop {
            let mut entries = Vec::new();
            let mut missed = None;
            match sub.recv().await {
                Ok(entry) => entries.push(entry),
                Err(RecvError::Lagged(n)) => missed = Some(n),
                Err(RecvError::Closed) => break,
            }
            // Whatever else is queued shares one read lock and one ring lock: under load the
            // entries arrive a raft batch at a time, and a wakeup per command cost more than the
            // copies.
            while missed.is_none() && entries.len() < DRAIN_ENTRIES {
                match sub.try_recv() {
                    Ok(entry) => entries.push(entry),
                    Err(TryRecvError::Lagged(n)) => missed = Some(n),
                    // Closed shows again on the next `recv`.
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                }
            }
            if !entries.is_empty() {
                let events = node.read_stale(|s| {
                    entries
                        .iter()
                        .map(|e| (e.index, events_for(s, e)))
                        .collect()
                });
                r.push_entries(events);
            }
            if let Some(missed) = missed {
                let at = node.read_stale(|s| s.applied_index());
                tracing::warn!(missed, at, "watch hub fell behind; watch history reset");
                r.reset(at);
            }
        }
    });
    ring
}

/// Most applied entries the hub takes from its queue at once (the node's largest raft batch).
const DRAIN_ENTRIES: usize = 256;

/// The events one entry produces: changes collapsed per resource (added then deleted = nothing).
pub fn events_for(state: &State, entry: &AppliedEntry) -> Vec<WatchEvent> {
    // Most commands change one resource: nothing to collapse.
    if let [c] = entry.applied.changes.as_slice() {
        return collapsed(c.op, c.op)
            .map(|op| event(state, entry.index, c.kind, &c.key, op))
            .into_iter()
            .collect();
    }
    let mut per: BTreeMap<(u8, &str), (ChangeKind, ChangeOp, ChangeOp)> = BTreeMap::new();
    let mut order = Vec::new();
    for c in &entry.applied.changes {
        let k = (c.kind as u8, c.key.as_str());
        match per.get_mut(&k) {
            Some(slot) => slot.2 = c.op,
            None => {
                per.insert(k, (c.kind, c.op, c.op));
                order.push(k);
            }
        }
    }
    let mut out = Vec::new();
    for k in order {
        let Some(&(kind, first, last)) = per.get(&k) else {
            continue;
        };
        if let Some(op) = collapsed(first, last) {
            out.push(event(state, entry.index, kind, k.1, op));
        }
    }
    out
}

/// What a resource's first and last change within one entry amount to; `None` when it was
/// added and deleted again.
fn collapsed(first: ChangeOp, last: ChangeOp) -> Option<EventType> {
    Some(match (first, last) {
        (ChangeOp::Added, ChangeOp::Deleted) => return None,
        (ChangeOp::Added, _) => EventType::Added,
        (_, ChangeOp::Deleted) => EventType::Deleted,
        (ChangeOp::Deleted, _) => EventType::Added,
        _ => EventType::Modified,
    })
}

fn event(state: &State, index: u64, kind: ChangeKind, key: &str, op: EventType) -> WatchEvent {
    let (kind_name, namespace, name) = match kind {
        ChangeKind::Cluster => ("Cluster", None, key.to_string()),
        ChangeKind::Tenant => ("Tenant", None, key.to_string()),
        ChangeKind::Object => match key.split_once('/') {
            Some((ns, n)) => ("FederatedObject", Some(ns.to_string()), n.to_string()),
            None => ("FederatedObject", None, key.to_string()),
        },
    };
    let object = match op {
        EventType::Deleted => None,
        _ => match kind {
            ChangeKind::Cluster => state
                .cluster(&name)
                .map(|c| Payload::Cluster(Box::new(c.clone()))),
            ChangeKind::Tenant => state
                .tenant(&name)
                .map(|t| Payload::Tenant(Box::new(t.clone()))),
            ChangeKind::Object => namespace
                .as_deref()
                .and_then(|ns| state.object_shared(ns, &name))
                .map(Payload::Object),
        },
    };
    WatchEvent::new(op, Some(kind_name), namespace, Some(name), index, object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::command::{Command, LogEntry};
    use fedraft_core::model::ObjectSpec;
    use serde_json::Value;

    fn put(replicas: u32) -> LogEntry {
        let template = format!(
            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"web"}},"spec":{{"replicas":{replicas}}}}}"#
        );
        let spec = ObjectSpec {
            template,
            placement: Default::default(),
            overrides: Vec::new(),
        };
        let command = Command::PutObject {
            namespace: "team".into(),
            name: "web".into(),
            spec,
            expected_version: None,
        };
        LogEntry::new(format!("r{replicas}"), "alice", 1_000, command)
    }

    fn apply(state: &mut State, index: u64, entry: LogEntry) -> AppliedEntry {
        let applied = state.apply(index, &entry);
        assert!(applied.outcome.is_accepted(), "{:?}", applied.outcome);
        AppliedEntry::single(index, entry, applied)
    }

    fn line_json(e: &WatchEvent) -> Value {
        serde_json::from_slice(&e.line()).unwrap()
    }

    #[test]
    fn events_render_on_first_send_and_show_the_object_as_it_was() {
        let mut state = State::new();
        let first = apply(&mut state, 1, put(1));
        let events = events_for(&state, &first);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event_type, EventType::Added);
        // Nothing is rendered while nobody sends the event.
        assert!(!events[0].is_rendered());

        // The state moves on before any watcher asks.
        let second = apply(&mut state, 2, put(4));
        let later = events_for(&state, &second);
        assert_eq!(later[0].event_type, EventType::Modified);

        // The first event still renders the object as of its own entry.
        let doc = line_json(&events[0]);
        assert!(events[0].is_rendered());
        assert_eq!(doc["type"], "ADDED");
        assert_eq!(doc["resourceVersion"], 1);
        assert_eq!(doc["object"]["resourceVersion"], 1);
        assert_eq!(doc["object"]["template"]["spec"]["replicas"], 1);
        let doc = line_json(&later[0]);
        assert_eq!(doc["object"]["template"]["spec"]["replicas"], 4);
        // Rendered once: later sends share the same bytes.
        assert_eq!(events[0].line(), events[0].line());
        // The line is exactly what the object's GET shows, plus the event envelope.
        assert_eq!(
            doc["object"],
            crate::wire::object_json(state.object("team", "web").unwrap(), None)
        );
    }

    #[test]
    fn an_entry_that_changes_several_resources_gives_one_event_each() {
        use fedraft_core::state::Change;
        let mut state = State::new();
        let mut entry = apply(&mut state, 1, put(1));
        let change = |kind, key: &str, op| Change {
            kind,
            key: key.into(),
            op,
        };
        // As a command that touches several resources (a failover, a cluster leaving) records
        // them: in order, some more than once.
        entry.applied.changes = vec![
            change(ChangeKind::Object, "team/web", ChangeOp::Added),
            change(ChangeKind::Cluster, "east", ChangeOp::Modified),
            change(ChangeKind::Object, "team/web", ChangeOp::Modified),
            change(ChangeKind::Tenant, "gone", ChangeOp::Added),
            change(ChangeKind::Tenant, "gone", ChangeOp::Deleted),
            change(ChangeKind::Cluster, "west", ChangeOp::Deleted),
        ];
        let seen: Vec<_> = events_for(&state, &entry)
            .iter()
            .map(|e| (e.event_type, e.kind, e.name.clone().unwrap_or_default()))
            .collect();
        let want = |t, k, n: &str| (t, Some(k), n.to_string());
        assert_eq!(
            seen,
            [
                // Added then modified within the entry: one ADDED.
                want(EventType::Added, "FederatedObject", "web"),
                want(EventType::Modified, "Cluster", "east"),
                // Added then deleted within the entry: nothing.
                want(EventType::Deleted, "Cluster", "west"),
            ]
        );
    }

    #[test]
    fn a_delete_carries_no_object() {
        let mut state = State::new();
        apply(&mut state, 1, put(1));
        let delete = LogEntry::new(
            "d",
            "alice",
            1_000,
            Command::DeleteObject {
                namespace: "team".into(),
                name: "web".into(),
                expected_version: None,
            },
        );
        let gone = apply(&mut state, 2, delete);
        let events = events_for(&state, &gone);
        let doc = line_json(&events[0]);
        assert_eq!(doc["type"], "DELETED");
        assert_eq!(doc["namespace"], "team");
        assert!(doc.get("object").is_none(), "{doc}");
    }
}
