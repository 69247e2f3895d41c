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
//! The door's policy documents are shared with the hub's own table of them ([`LastSeen`]),
//! which outlives a delete: a DELETED event carries the document as it was last seen, so a
//! label selector matches it as it matched the document. A deleted object's event keeps the
//! object and its template's record as they were (`State::deleted_object`, read as the hub
//! handles the delete) for the Kubernetes watch. A member Secret's changes make no event: the
//! ring never holds credentials, sealed or not.
//! If the hub falls behind the node's broadcast (lagged), it cannot know what it missed: it resets
//! the ring (resumes from before that point get 410) and live watchers get an ERROR line.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use fedraft_core::door::{PolicyKindTag, PolicyRecord, PolicyRef};
use fedraft_core::state::{Change, ChangeKind, ChangeOp, State};
use fedraft_raft::{AppliedEntry, FedNode};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::ring::{EventType, Payload, Ring, WatchEvent, POLICY};

/// Starts the hub and returns the ring it feeds.
pub fn start(node: &FedNode, history_events: usize) -> Arc<Ring> {
    // Subscribe before reading the start index, so no entry falls between the two.
    let mut sub = node.subscribe();
    let (start_index, mut seen) = node.read_stale(|s| (s.applied_index(), LastSeen::of(s)));
    let ring = Arc::new(Ring::new(history_events, start_index));
    let (node, r) = (node.clone(), ring.clone());
    tokio::spawn(async move {
        let mut last = start_index;
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
                        .map(|e| {
                            // A snapshot install skips entries: what they changed is unknown.
                            if e.index > last + 1 {
                                seen = LastSeen::of(s);
                            }
                            last = last.max(e.index);
                            (e.index, events_for(s, &mut seen, e))
                        })
                        .collect()
                });
                r.push_entries(events);
            }
            if let Some(missed) = missed {
                let at = node.read_stale(|s| {
                    seen = LastSeen::of(s);
                    s.applied_index()
                });
                last = at;
                tracing::warn!(missed, at, "watch hub fell behind; watch history reset");
                r.reset(at);
            }
        }
    });
    ring
}

/// Most applied entries the hub takes from its queue at once (the node's largest raft batch).
const DRAIN_ENTRIES: usize = 256;

/// The door's policy documents (member Secrets aside) as the hub last saw them.
#[derive(Debug, Default)]
pub struct LastSeen(HashMap<PolicyRef, Arc<PolicyRecord>>);

impl LastSeen {
    /// Every document `state` holds now.
    pub fn of(state: &State) -> Self {
        LastSeen(
            state
                .door()
                .policies
                .iter()
                .filter(|(k, _)| watched(k.kind))
                .map(|(k, r)| (k.clone(), Arc::new(r.clone())))
                .collect(),
        )
    }

    /// The document an event of `op` carries: as `state` holds it now, or for a delete, as it
    /// was last seen (then forgotten).
    fn take(&mut self, state: &State, key: PolicyRef, op: EventType) -> Option<Arc<PolicyRecord>> {
        if op == EventType::Deleted {
            return self.0.remove(&key);
        }
        match state.door().policies.get(&key) {
            Some(rec) => {
                let rec = Arc::new(rec.clone());
                self.0.insert(key, rec.clone());
                Some(rec)
            }
            // Already gone again in the state this read sees: its delete comes next.
            None => self.0.get(&key).cloned(),
        }
    }
}

/// Whether a policy table kind's changes become events.
fn watched(kind: PolicyKindTag) -> bool {
    kind != PolicyKindTag::MemberSecret
}

/// The events one entry produces: changes collapsed per resource (added then deleted = nothing).
pub fn events_for(state: &State, seen: &mut LastSeen, entry: &AppliedEntry) -> Vec<WatchEvent> {
    let changes = entry
        .applied
        .changes
        .iter()
        .filter(|c| !matches!(c.kind, ChangeKind::Policy(k) if !watched(k)));
    // Most commands change one resource: nothing to collapse.
    if let [_] = entry.applied.changes.as_slice() {
        return changes
            .filter_map(|c| collapsed(c.op, c.op).map(|op| event(state, seen, entry.index, c, op)))
            .collect();
    }
    let mut per: BTreeMap<(ChangeKind, &str), (&Change, ChangeOp, ChangeOp)> = BTreeMap::new();
    let mut order = Vec::new();
    for c in changes {
        let k = (c.kind, c.key.as_str());
        match per.get_mut(&k) {
            Some(slot) => slot.2 = c.op,
            None => {
                per.insert(k, (c, c.op, c.op));
                order.push(k);
            }
        }
    }
    let mut out = Vec::new();
    for k in order {
        let Some(&(change, first, last)) = per.get(&k) else {
            continue;
        };
        if let Some(op) = collapsed(first, last) {
            out.push(event(state, seen, entry.index, change, op));
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

fn event(
    state: &State,
    seen: &mut LastSeen,
    index: u64,
    change: &Change,
    op: EventType,
) -> WatchEvent {
    let key = change.key.as_str();
    let (kind_name, namespace, name) = match change.kind {
        ChangeKind::Cluster => ("Cluster", None, key.to_string()),
        ChangeKind::Tenant => ("Tenant", None, key.to_string()),
        ChangeKind::Object => match key.split_once('/') {
            Some((ns, n)) => ("FederatedObject", Some(ns.to_string()), n.to_string()),
            None => ("FederatedObject", None, key.to_string()),
        },
        ChangeKind::Policy(tag) => {
            return policy_event(state, seen, index, Change::policy_of(tag, key), op)
        }
    };
    let object = match op {
        EventType::Deleted => None,
        _ => match change.kind {
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
            ChangeKind::Policy(_) => None,
        },
    };
    let last_seen = match (op, change.kind, namespace.as_deref()) {
        (EventType::Deleted, ChangeKind::Object, Some(ns)) => {
            state.deleted_object(ns, &name, index)
        }
        _ => None,
    };
    WatchEvent::new(op, Some(kind_name), namespace, Some(name), index, object)
        .with_last_seen(last_seen)
}

fn policy_event(
    state: &State,
    seen: &mut LastSeen,
    index: u64,
    key: PolicyRef,
    op: EventType,
) -> WatchEvent {
    let tag = key.kind;
    let namespace = (!key.namespace.is_empty()).then(|| key.namespace.clone());
    let name = key.name.clone();
    let object = seen.take(state, key, op).map(Payload::Policy);
    let mut e = WatchEvent::new(op, Some(POLICY), namespace, Some(name), index, object);
    e.policy = Some(tag);
    e
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
        let events = events_for(&state, &mut LastSeen::default(), &first);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event_type, EventType::Added);
        // Nothing is rendered while nobody sends the event.
        assert!(!events[0].is_rendered());

        // The state moves on before any watcher asks.
        let second = apply(&mut state, 2, put(4));
        let later = events_for(&state, &mut LastSeen::default(), &second);
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
        let policy = ChangeKind::Policy(PolicyKindTag::Propagation);
        let secret = ChangeKind::Policy(PolicyKindTag::MemberSecret);
        // As a command that touches several resources (a failover, a cluster leaving) records
        // them: in order, some more than once.
        entry.applied.changes = vec![
            change(ChangeKind::Object, "team/web", ChangeOp::Added),
            change(ChangeKind::Cluster, "east", ChangeOp::Modified),
            change(ChangeKind::Object, "team/web", ChangeOp::Modified),
            change(ChangeKind::Tenant, "gone", ChangeOp::Added),
            change(ChangeKind::Tenant, "gone", ChangeOp::Deleted),
            change(ChangeKind::Cluster, "west", ChangeOp::Deleted),
            // A policy shares its key with an object of that name: still its own resource.
            change(policy, "team/web", ChangeOp::Deleted),
            // Nothing of a member Secret reaches the ring.
            change(secret, "creds/east", ChangeOp::Added),
        ];
        let seen: Vec<_> = events_for(&state, &mut LastSeen::default(), &entry)
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
                want(EventType::Deleted, POLICY, "web"),
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
        let events = events_for(&state, &mut LastSeen::default(), &gone);
        let doc = line_json(&events[0]);
        assert_eq!(doc["type"], "DELETED");
        assert_eq!(doc["namespace"], "team");
        assert!(doc.get("object").is_none(), "{doc}");
    }

    fn policy_entry(request: &str, labels: Value, clusters: &[&str]) -> LogEntry {
        let doc = serde_json::json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "team", "labels": labels},
            "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap"}],
                "placement": {"clusterAffinity": {"clusterNames": clusters}}}});
        let command = Command::PutResource {
            manifest: doc.to_string(),
            expected_version: None,
        };
        LogEntry::new(request, "alice", 1_000, command)
    }

    fn payload_manifest(e: &WatchEvent) -> Value {
        match &e.object {
            Some(Payload::Policy(rec)) => serde_json::from_str(&rec.manifest).unwrap(),
            other => panic!("no policy payload: {other:?}"),
        }
    }

    #[test]
    fn policy_events_carry_the_document_and_a_delete_the_last_one_seen() {
        let mut state = State::new();
        let mut seen = LastSeen::of(&state);
        let gold = serde_json::json!({"tier": "gold"});
        let added = apply(&mut state, 1, policy_entry("a", gold.clone(), &["east"]));
        let events = events_for(&state, &mut seen, &added);
        assert_eq!(events.len(), 1, "{events:?}");
        let e = &events[0];
        assert_eq!(
            (e.event_type, e.kind, e.policy),
            (
                EventType::Added,
                Some(POLICY),
                Some(PolicyKindTag::Propagation)
            )
        );
        assert_eq!(
            (e.namespace.as_deref(), e.name.as_deref()),
            (Some("team"), Some("web"))
        );
        assert_eq!(payload_manifest(e)["metadata"]["labels"], gold);

        let silver = serde_json::json!({"tier": "silver"});
        let modified = apply(&mut state, 2, policy_entry("b", silver.clone(), &["west"]));
        let events = events_for(&state, &mut seen, &modified);
        assert_eq!(events[0].event_type, EventType::Modified);
        assert_eq!(payload_manifest(&events[0])["metadata"]["labels"], silver);

        let delete = Command::DeleteResource {
            key: fedraft_core::door::ResourceKey {
                group: "policy.karmada.io".into(),
                kind: "PropagationPolicy".into(),
                namespace: "team".into(),
                name: "web".into(),
            },
            expected_version: None,
        };
        let gone = apply(&mut state, 3, LogEntry::new("c", "alice", 1_000, delete));
        let events = events_for(&state, &mut seen, &gone);
        assert_eq!(events[0].event_type, EventType::Deleted);
        // The state no longer has it; the event still carries it, so selectors can match.
        assert!(state.door().policies.is_empty());
        let last = payload_manifest(&events[0]);
        assert_eq!(last["metadata"]["labels"], silver);
        assert_eq!(
            last["spec"]["placement"]["clusterAffinity"]["clusterNames"][0],
            "west"
        );
        // And forgets it: the hub's table holds what the state holds.
        assert!(seen.0.is_empty());
        // The native watch never sends it (`stream` leaves policies to the door's watch); its
        // envelope, were it rendered, names it.
        let line = line_json(&events[0]);
        assert_eq!(
            (line["kind"].as_str(), line["resourceVersion"].as_u64()),
            (Some(POLICY), Some(3))
        );
    }

    #[test]
    fn the_hubs_table_starts_from_the_state_and_leaves_member_secrets_out() {
        let mut state = State::new();
        apply(
            &mut state,
            1,
            policy_entry("a", serde_json::json!({}), &["east"]),
        );
        let seen = LastSeen::of(&state);
        let key = fedraft_core::door::PolicyRef {
            kind: PolicyKindTag::Propagation,
            namespace: "team".into(),
            name: "web".into(),
        };
        assert_eq!(seen.0.len(), 1);
        assert_eq!(seen.0[&key].resource_version, 1);
        assert!(!watched(PolicyKindTag::MemberSecret));
        assert!(watched(PolicyKindTag::ReplicaSchedulingPreference));
    }
}
