//! The bounded history of watch events, and the fan-out to live watchers.
//!
//! Invariant: every event with `resource_version > horizon` that the hub has seen is still in the
//! ring, in order. A watcher resuming from `N >= horizon` gets the retained events after `N` and then
//! the live ones, with no gap and no duplicate, because copying the backlog and subscribing to the
//! live feed happen under the same lock as [`Ring::push`]. Resuming from `N < horizon` is 410 Gone.
//!
//! Events are rendered lazily: an event keeps the resource as it was when the hub saw the entry
//! ([`Payload`]) and turns it into its JSON line the first time a watcher sends it
//! ([`WatchEvent::line`]), once for all watchers. A node nobody watches renders nothing.
//!
//! The ring holds at most `capacity_events` events (default [`DEFAULT_HISTORY_EVENTS`]); when full
//! it drops whole log entries from the front and raises the horizon to their index.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use fedraft_core::door::{self, PolicyKindTag, PolicyRecord};
use fedraft_core::model::{Cluster, FederatedObject, Tenant};
use fedraft_core::state::Tombstone;
use serde::{Serialize, Serializer};
use tokio::sync::broadcast;

use crate::view::ObjectView;
use crate::wire::{cluster_json, tenant_json};

/// Default retained history: 8192 events (each holds one resource as it was: objects are shared
/// with the state, clusters and tenants copied; a few MiB in all for typical objects).
pub const DEFAULT_HISTORY_EVENTS: usize = 8192;
/// How many messages a live watcher may fall behind before it is cut off with a 410 ERROR line.
pub const LIVE_BUFFER_EVENTS: usize = 4096;
/// The `kind` of an event of the door's policy table; [`WatchEvent::policy`] says which kind of
/// document it is.
pub const POLICY: &str = "Policy";

/// The kind of change an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventType {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
}

/// What an event carries as `object`: the resource as it was, rendered only when sent.
#[derive(Clone)]
pub enum Payload {
    Cluster(Box<Cluster>),
    /// Shared with the state (`State::object_shared`), which leaves this version intact.
    Object(Arc<FederatedObject>),
    Tenant(Box<Tenant>),
    /// A policy document as stored (never a member Secret's: the hub makes no event of those),
    /// shared with the hub's table of them (`hub::LastSeen`).
    Policy(Arc<PolicyRecord>),
    /// A document that is JSON already (the `{code, message}` of an ERROR line).
    Json(serde_json::Value),
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            // Through `cluster_json`, which has no path to the credentials the copy holds.
            Payload::Cluster(c) => cluster_json(c).serialize(s),
            Payload::Object(o) => ObjectView(o).serialize(s),
            Payload::Tenant(t) => tenant_json(t).serialize(s),
            Payload::Policy(p) => policy_json(p).serialize(s),
            Payload::Json(v) => v.serialize(s),
        }
    }
}

impl fmt::Debug for Payload {
    // Names only: a cluster copy holds credentials, and events are not for printing whole.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Cluster(c) => write!(f, "Cluster({})", c.spec.name),
            Payload::Object(o) => write!(f, "Object({}/{})", o.namespace, o.name),
            Payload::Tenant(t) => write!(f, "Tenant({})", t.spec.name),
            Payload::Policy(p) => write!(f, "Policy(at {})", p.resource_version),
            Payload::Json(v) => write!(f, "Json({v})"),
        }
    }
}

/// A policy document as written. Only the door's watch sends these, and it renders them
/// itself; this is what a line would hold otherwise, and it drops a member Secret's
/// credentials even though none ever reaches the ring.
fn policy_json(p: &PolicyRecord) -> serde_json::Value {
    let mut doc: serde_json::Value =
        serde_json::from_str(&p.manifest).unwrap_or(serde_json::Value::Null);
    if let Some(o) = doc.as_object_mut() {
        o.remove(door::SECRET_CREDENTIALS_FIELD);
    }
    doc
}

/// One line of a watch stream.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchEvent {
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// `Cluster`, `FederatedObject`, `Tenant` or [`POLICY`] (absent on BOOKMARK and ERROR).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// Which kind of document a [`POLICY`] event is about; None for every other event.
    #[serde(skip)]
    pub policy: Option<PolicyKindTag>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The log index of the entry that produced the event.
    pub resource_version: u64,
    /// The resource as the API shows it (never with credentials); absent on DELETED.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Payload>,
    /// A deleted object as it was (`State::deleted_object`), for streams that show deletes
    /// whole (the Kubernetes watch); not part of this API's own line.
    #[serde(skip)]
    pub last_seen: Option<Arc<Tombstone>>,
    /// The rendered NDJSON line, filled by the first [`WatchEvent::line`].
    #[serde(skip)]
    line: OnceLock<Bytes>,
}

impl WatchEvent {
    pub fn new(
        event_type: EventType,
        kind: Option<&'static str>,
        namespace: Option<String>,
        name: Option<String>,
        resource_version: u64,
        object: Option<Payload>,
    ) -> Self {
        WatchEvent {
            event_type,
            kind,
            policy: None,
            namespace,
            name,
            resource_version,
            object,
            last_seen: None,
            line: OnceLock::new(),
        }
    }

    /// The event with what its deleted object last was.
    pub fn with_last_seen(mut self, last_seen: Option<Tombstone>) -> Self {
        self.last_seen = last_seen.map(Arc::new);
        self
    }

    pub fn bookmark(resource_version: u64) -> Self {
        WatchEvent::new(
            EventType::Bookmark,
            None,
            None,
            None,
            resource_version,
            None,
        )
    }

    pub fn gone(resource_version: u64, message: &str) -> Self {
        let object = serde_json::json!({"code": 410, "message": message});
        WatchEvent::new(
            EventType::Error,
            None,
            None,
            None,
            resource_version,
            Some(Payload::Json(object)),
        )
    }

    /// The event as one NDJSON line (with its newline). Rendered on the first call and shared by
    /// every later one, so N watchers of one event cost one rendering.
    pub fn line(&self) -> Bytes {
        self.line
            .get_or_init(|| {
                let mut v = serde_json::to_vec(self).unwrap_or_default();
                v.push(b'\n');
                Bytes::from(v)
            })
            .clone()
    }

    /// Whether [`WatchEvent::line`] has rendered this event yet.
    pub fn is_rendered(&self) -> bool {
        self.line.get().is_some()
    }
}

/// What live watchers receive.
#[derive(Debug, Clone)]
pub enum LiveMsg {
    Event(Arc<WatchEvent>),
    /// The log advanced to this index (lets idle watchers send bookmarks).
    Progress(u64),
    /// History was lost (the hub fell behind the node); watchers must restart.
    Reset,
}

#[derive(Debug)]
struct Inner {
    events: VecDeque<Arc<WatchEvent>>,
    horizon: u64,
    last_index: u64,
}

/// Why a resume failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooOld {
    pub requested: u64,
    pub horizon: u64,
}

/// The retained history plus the live feed.
#[derive(Debug)]
pub struct Ring {
    inner: Mutex<Inner>,
    live: broadcast::Sender<LiveMsg>,
    capacity_events: usize,
}

impl Ring {
    /// A ring that knows nothing before `start_index` (the applied index when the hub started).
    pub fn new(capacity_events: usize, start_index: u64) -> Self {
        let (live, _) = broadcast::channel(LIVE_BUFFER_EVENTS);
        Ring {
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                horizon: start_index,
                last_index: start_index,
            }),
            live,
            capacity_events: capacity_events.max(1),
        }
    }

    /// Appends the events of the entry at `index` (possibly none) and wakes live watchers.
    #[cfg(test)]
    pub fn push(&self, index: u64, events: Vec<WatchEvent>) {
        self.push_entries(vec![(index, events)]);
    }

    /// Appends the events of consecutive entries (each possibly with none) under one lock, and
    /// wakes live watchers; they hear of the progress once, at the last index.
    pub fn push_entries(&self, entries: Vec<(u64, Vec<WatchEvent>)>) {
        let Ok(mut g) = self.inner.lock() else { return };
        let before = g.last_index;
        for (index, events) in entries {
            if index <= g.last_index {
                continue;
            }
            g.last_index = index;
            for e in events {
                let e = Arc::new(e);
                g.events.push_back(e.clone());
                let _ = self.live.send(LiveMsg::Event(e));
            }
        }
        while g.events.len() > self.capacity_events {
            let Some(front) = g.events.pop_front() else {
                break;
            };
            let rv = front.resource_version;
            while g.events.front().is_some_and(|e| e.resource_version == rv) {
                g.events.pop_front();
            }
            g.horizon = g.horizon.max(rv);
        }
        if g.last_index > before {
            let _ = self.live.send(LiveMsg::Progress(g.last_index));
        }
    }

    /// Forgets everything up to `index` (entries were missed) and tells watchers to restart.
    pub fn reset(&self, index: u64) {
        let Ok(mut g) = self.inner.lock() else { return };
        g.events.clear();
        g.horizon = g.horizon.max(index);
        g.last_index = g.last_index.max(index);
        let _ = self.live.send(LiveMsg::Reset);
    }

    /// The retained events after `from` plus a live receiver, atomically.
    pub fn resume(
        &self,
        from: u64,
    ) -> Result<(Vec<Arc<WatchEvent>>, broadcast::Receiver<LiveMsg>), TooOld> {
        let g = self.inner.lock().map_err(|_| TooOld {
            requested: from,
            horizon: u64::MAX,
        })?;
        if from < g.horizon {
            return Err(TooOld {
                requested: from,
                horizon: g.horizon,
            });
        }
        let backlog = g
            .events
            .iter()
            .filter(|e| e.resource_version > from)
            .cloned()
            .collect();
        Ok((backlog, self.live.subscribe()))
    }

    /// The last log index the ring has seen.
    pub fn last_index(&self) -> u64 {
        self.inner.lock().map(|g| g.last_index).unwrap_or(0)
    }

    /// The oldest resume point still served.
    pub fn horizon(&self) -> u64 {
        self.inner.lock().map(|g| g.horizon).unwrap_or(u64::MAX)
    }

    /// A live receiver without backlog (for waiting on progress).
    pub fn subscribe(&self) -> broadcast::Receiver<LiveMsg> {
        self.live.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(rv: u64, name: &str) -> WatchEvent {
        WatchEvent::new(
            EventType::Added,
            Some("Cluster"),
            None,
            Some(name.into()),
            rv,
            None,
        )
    }

    #[test]
    fn resumes_without_gaps_and_refuses_trimmed_history() {
        let ring = Ring::new(3, 10);
        ring.push(11, vec![ev(11, "a")]);
        ring.push(12, vec![]);
        ring.push(13, vec![ev(13, "b"), ev(13, "c")]);
        let (backlog, _) = ring.resume(11).unwrap();
        assert_eq!(
            backlog
                .iter()
                .map(|e| e.resource_version)
                .collect::<Vec<_>>(),
            vec![13, 13]
        );
        assert_eq!(ring.resume(9).unwrap_err().horizon, 10);
        ring.push(14, vec![ev(14, "d")]);
        // Capacity 3: entry 11 is gone, so resuming at 10 is too old; at 11 is fine.
        assert!(ring.resume(10).is_err());
        let (backlog, _) = ring.resume(11).unwrap();
        assert_eq!(backlog.len(), 3);
    }

    #[tokio::test]
    async fn entries_pushed_together_read_as_if_pushed_one_by_one() {
        let ring = Ring::new(3, 10);
        let (_, mut rx) = ring.resume(10).unwrap();
        ring.push_entries(vec![
            (11, vec![ev(11, "a")]),
            // Already seen by the time it arrives: skipped, as `push` would.
            (11, vec![ev(11, "again")]),
            (12, vec![]),
            (13, vec![ev(13, "b"), ev(13, "c")]),
            (14, vec![ev(14, "d")]),
        ]);
        // Capacity 3 trimmed entry 11 as a whole.
        assert_eq!(ring.horizon(), 11);
        assert_eq!(ring.last_index(), 14);
        let (backlog, _) = ring.resume(11).unwrap();
        let names: Vec<_> = backlog.iter().filter_map(|e| e.name.clone()).collect();
        assert_eq!(names, ["b", "c", "d"]);
        // Live watchers get every event in order, then one progress mark at the last index.
        let mut live = Vec::new();
        while let Ok(m) = rx.try_recv() {
            live.push(match m {
                LiveMsg::Event(e) => e.name.clone().unwrap_or_default(),
                LiveMsg::Progress(i) => format!("progress {i}"),
                LiveMsg::Reset => "reset".into(),
            });
        }
        assert_eq!(live, ["a", "b", "c", "d", "progress 14"]);
        // Nothing new: no progress mark.
        ring.push_entries(vec![(14, vec![])]);
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn live_receivers_get_later_pushes() {
        let ring = Ring::new(8, 0);
        let (_, mut rx) = ring.resume(0).unwrap();
        ring.push(1, vec![ev(1, "a")]);
        assert!(matches!(rx.recv().await.unwrap(), LiveMsg::Event(e) if e.resource_version == 1));
        assert!(matches!(rx.recv().await.unwrap(), LiveMsg::Progress(1)));
    }
}
