//! The watch hub: one task per node that turns every applied entry into watch events and pushes
//! them into the ring.
//!
//! Events are built from the entry's `changes` (one per resource, collapsed within the entry) and
//! the node's local state at the time the hub handles the entry. That state may already include
//! later entries, so an event's object can be newer than its `resourceVersion`; it is never older.
//! If the hub falls behind the node's broadcast (lagged), it cannot know what it missed: it resets
//! the ring (resumes from before that point get 410) and live watchers get an ERROR line.

use std::collections::BTreeMap;
use std::sync::Arc;

use fedraft_core::state::{ChangeKind, ChangeOp, State};
use fedraft_raft::{AppliedEntry, FedNode};
use tokio::sync::broadcast::error::RecvError;

use super::ring::{EventType, Ring, WatchEvent};
use crate::wire::{cluster_json, object_json, tenant_json};

/// Starts the hub and returns the ring it feeds.
pub fn start(node: &FedNode, history_events: usize) -> Arc<Ring> {
    // Subscribe before reading the start index, so no entry falls between the two.
    let mut sub = node.subscribe();
    let start_index = node.read_stale(|s| s.applied_index());
    let ring = Arc::new(Ring::new(history_events, start_index));
    let (node, r) = (node.clone(), ring.clone());
    tokio::spawn(async move {
        loop {
            match sub.recv().await {
                Ok(entry) => {
                    let events = node.read_stale(|s| events_for(s, &entry));
                    r.push(entry.index, events);
                }
                Err(RecvError::Lagged(missed)) => {
                    let at = node.read_stale(|s| s.applied_index());
                    tracing::warn!(missed, at, "watch hub fell behind; watch history reset");
                    r.reset(at);
                }
                Err(RecvError::Closed) => break,
            }
        }
    });
    ring
}

/// The events one entry produces: changes collapsed per resource (added then deleted = nothing).
pub fn events_for(state: &State, entry: &AppliedEntry) -> Vec<WatchEvent> {
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
        let op = match (first, last) {
            (ChangeOp::Added, ChangeOp::Deleted) => continue,
            (ChangeOp::Added, _) => EventType::Added,
            (_, ChangeOp::Deleted) => EventType::Deleted,
            (ChangeOp::Deleted, _) => EventType::Added,
            _ => EventType::Modified,
        };
        out.push(event(state, entry.index, kind, k.1, op));
    }
    out
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
            ChangeKind::Cluster => state.cluster(&name).map(cluster_json),
            ChangeKind::Tenant => state.tenant(&name).map(tenant_json),
            ChangeKind::Object => namespace
                .as_deref()
                .and_then(|ns| state.object(ns, &name))
                .map(|o| object_json(o, None)),
        },
    };
    WatchEvent {
        event_type: op,
        kind: Some(kind_name),
        namespace,
        name: Some(name),
        resource_version: index,
        object,
    }
}
