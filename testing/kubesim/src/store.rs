//! The object store: every object of every kind, one global resourceVersion counter, and the
//! bounded event history that watches resume from.
//!
//! All writes go through [`Store::write`], which runs the caller's decision (create, replace,
//! delete, or keep) under the store lock and then stamps what the server owns: uid,
//! creationTimestamp, generation (bumped only when something outside metadata and status
//! changed), resourceVersion. A replace that changes nothing but those stamps is dropped, so it
//! neither bumps resourceVersion nor reaches watchers. This module must not know about HTTP,
//! apply semantics or controllers.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::discovery::{ResourceDef, CATALOG};
use crate::meta;
use crate::status::{ApiError, Subject};

/// At most how many undelivered notices a slow watcher may fall behind before it is expired (it
/// then relists, as a real client does after a 410). A store with a shorter history gets a
/// channel that long instead: the channel's ring is allocated whole up front, and a watcher
/// further behind than the history could not have resumed from it anyway.
const WATCH_CHANNEL_CAPACITY: usize = 4096;
/// The shortest channel, so that a tiny history does not expire watchers in one burst.
const MIN_WATCH_CHANNEL: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, as watchers see it. The object is the very one the store holds while
/// it is current, so retained history costs only the versions that were replaced since.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub res: &'static ResourceDef,
    pub ns: String,
    pub etype: EventType,
    pub object: Arc<Value>,
}

/// What the broadcast channel carries: a change, or word that history was compacted and every
/// open watch must end with 410.
#[derive(Debug)]
pub enum Notice {
    Event(Event),
    Compacted,
}

/// The caller's decision inside [`Store::write`].
pub enum Change {
    Create(Value),
    Replace(Value),
    Delete,
}

/// What a write did.
#[derive(Debug, Clone)]
pub enum Outcome {
    Created(Value),
    Updated(Value),
    /// The write would not change the object; nothing was stored. The stored object itself,
    /// shared: the controllers' writes mostly end here, and a copy of each would cost more than
    /// the write.
    Unchanged(Arc<Value>),
    Deleted(Value),
}

impl Outcome {
    pub fn object(&self) -> &Value {
        match self {
            Outcome::Created(v) | Outcome::Updated(v) | Outcome::Deleted(v) => v,
            Outcome::Unchanged(v) => v,
        }
    }

    pub fn changed(&self) -> bool {
        !matches!(self, Outcome::Unchanged(_))
    }
}

type Objects = BTreeMap<(String, String), Arc<Value>>;

struct Inner {
    /// resource key -> (namespace, name) -> object. Cluster-scoped objects use namespace "".
    objects: BTreeMap<String, Objects>,
    rv: u64,
    /// resource key -> how many changes of that kind were committed.
    changes: BTreeMap<String, u64>,
    history: VecDeque<Arc<Notice>>,
    /// History is complete for every rv greater than this; a watch from an older rv gets 410.
    floor_rv: u64,
    history_limit: usize,
}

pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Notice>>,
}

/// What a new watch starts with: the retained events after its resourceVersion, and the live
/// channel subscribed under the same lock so nothing falls in between.
pub struct Subscription {
    pub backlog: Vec<Arc<Notice>>,
    pub rx: broadcast::Receiver<Arc<Notice>>,
    /// Current objects, when the watch asked for initial ADDED events (resourceVersion "" or "0").
    pub initial: Vec<Arc<Value>>,
    pub rv: u64,
}

fn subject(res: &ResourceDef, name: &str) -> Subject {
    Subject {
        group: res.group.to_string(),
        kind: res.plural.to_string(),
        name: name.to_string(),
    }
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        let (tx, _) =
            broadcast::channel(history_limit.clamp(MIN_WATCH_CHANNEL, WATCH_CHANNEL_CAPACITY));
        Store {
            inner: Mutex::new(Inner {
                objects: BTreeMap::new(),
                rv: 0,
                changes: BTreeMap::new(),
                history: VecDeque::new(),
                floor_rv: 0,
                history_limit: history_limit.max(1),
            }),
            tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// How many changes to objects of these kinds were committed so far: a reader of a few
    /// kinds can tell whether anything it reads changed without looking, whatever else did.
    pub fn changes_of(&self, kinds: &[&ResourceDef]) -> u64 {
        let g = self.lock();
        kinds.iter().filter_map(|r| g.changes.get(&r.key())).sum()
    }

    pub fn get(&self, res: &ResourceDef, ns: &str, name: &str) -> Option<Value> {
        let g = self.lock();
        g.objects
            .get(&res.key())
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .map(|v| Value::clone(v))
    }

    /// Objects of one kind, optionally in one namespace, ordered by (namespace, name), and the
    /// resourceVersion they are consistent at. The objects are the stored ones, shared: the
    /// controllers list every workload many times a second, and deep copies of them were most
    /// of a busy fleet host's CPU.
    pub fn list(&self, res: &ResourceDef, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let g = self.lock();
        let items = list_locked(&g, res, ns).cloned().collect();
        (items, g.rv)
    }

    /// Runs `decide` on the current object (if any) and commits its decision atomically.
    /// With `dry_run`, returns what would have been stored and stores nothing.
    pub fn write(
        &self,
        res: &'static ResourceDef,
        ns: &str,
        name: &str,
        dry_run: bool,
        decide: impl FnOnce(Option<&Value>) -> Result<Change, ApiError>,
    ) -> Result<Outcome, ApiError> {
        let mut g = self.lock();
        let key = (ns.to_string(), name.to_string());
        let current = g.objects.get(&res.key()).and_then(|m| m.get(&key)).cloned();
        match (decide(current.as_deref())?, current) {
            (Change::Create(_), Some(_)) => Err(ApiError::AlreadyExists {
                subject: subject(res, name),
                message: format!("{} \"{}\" already exists", qualified(res), name),
            }),
            (Change::Create(mut obj), None) => {
                if res.namespaced && !namespace_exists(&g, ns) {
                    return Err(ApiError::not_found(Subject {
                        group: String::new(),
                        kind: "namespaces".into(),
                        name: ns.to_string(),
                    }));
                }
                let rv = g.rv + 1;
                stamp_identity(&mut obj, res, ns, name);
                let m = meta::metadata_mut(&mut obj);
                m.insert("uid".into(), json!(meta::new_uid()));
                m.insert("creationTimestamp".into(), json!(meta::now_rfc3339()));
                m.insert("generation".into(), json!(1));
                m.insert("resourceVersion".into(), json!(rv.to_string()));
                if !dry_run {
                    commit(
                        &mut g,
                        &self.tx,
                        res,
                        ns,
                        name,
                        Some(obj.clone()),
                        EventType::Added,
                    );
                }
                Ok(Outcome::Created(obj))
            }
            (Change::Replace(mut obj), Some(old)) => {
                stamp_identity(&mut obj, res, ns, name);
                let m = meta::metadata_mut(&mut obj);
                for field in ["uid", "creationTimestamp", "resourceVersion"] {
                    match meta::metadata(&old).and_then(|o| o.get(field)) {
                        Some(v) => m.insert(field.into(), v.clone()),
                        None => m.remove(field),
                    };
                }
                let old_gen = meta::metadata(&old)
                    .and_then(|o| o.get("generation"))
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                let gen = if meta::spec_part(&old) == meta::spec_part(&obj) {
                    old_gen
                } else {
                    old_gen + 1
                };
                meta::metadata_mut(&mut obj).insert("generation".into(), json!(gen));
                if meta::same_content(&old, &obj) {
                    return Ok(Outcome::Unchanged(old));
                }
                let rv = g.rv + 1;
                meta::metadata_mut(&mut obj)
                    .insert("resourceVersion".into(), json!(rv.to_string()));
                if !dry_run {
                    commit(
                        &mut g,
                        &self.tx,
                        res,
                        ns,
                        name,
                        Some(obj.clone()),
                        EventType::Modified,
                    );
                }
                Ok(Outcome::Updated(obj))
            }
            (Change::Delete, Some(old)) => {
                let mut old = Arc::unwrap_or_clone(old);
                if dry_run {
                    return Ok(Outcome::Deleted(old));
                }
                if res.plural == "namespaces" && res.group.is_empty() {
                    // A real namespace lingers in Terminating while its contents go; here the
                    // contents go at once, each with its own DELETED event, then the namespace.
                    for r in CATALOG.iter().filter(|r| r.namespaced) {
                        let names: Vec<String> = list_locked(&g, r, Some(name))
                            .map(|o| meta::name(o).to_string())
                            .collect();
                        for n in names {
                            commit(&mut g, &self.tx, r, name, &n, None, EventType::Deleted);
                        }
                    }
                }
                let rv = commit(&mut g, &self.tx, res, ns, name, None, EventType::Deleted);
                meta::metadata_mut(&mut old)
                    .insert("resourceVersion".into(), json!(rv.to_string()));
                Ok(Outcome::Deleted(old))
            }
            (Change::Replace(_) | Change::Delete, None) => {
                Err(ApiError::not_found(subject(res, name)))
            }
        }
    }

    /// Starts a watch from `from_rv` (None: from now, after initial ADDED events of the
    /// current objects). Returns 410 if `from_rv` is older than the retained history.
    pub fn subscribe(
        &self,
        res: &ResourceDef,
        ns: Option<&str>,
        from_rv: Option<u64>,
    ) -> Result<Subscription, ApiError> {
        let g = self.lock();
        let rx = self.tx.subscribe();
        match from_rv {
            None => Ok(Subscription {
                backlog: Vec::new(),
                rx,
                initial: list_locked(&g, res, ns).cloned().collect(),
                rv: g.rv,
            }),
            Some(rv) if rv < g.floor_rv => Err(ApiError::Expired(format!(
                "too old resource version: {rv} ({})",
                g.floor_rv
            ))),
            Some(rv) => {
                let backlog = g
                    .history
                    .iter()
                    .filter(|n| matches!(&***n, Notice::Event(e) if e.rv > rv))
                    .cloned()
                    .collect();
                Ok(Subscription {
                    backlog,
                    rx,
                    initial: Vec::new(),
                    rv: g.rv,
                })
            }
        }
    }

    /// Whether a list may be served at `rv`: only the current state is kept, so a list at an
    /// older version is served from now (as "NotOlderThan" allows) unless history lost it.
    pub fn floor_rv(&self) -> u64 {
        self.lock().floor_rv
    }

    /// Drops all watch history: watches from any earlier version now get 410, and open watches
    /// end with a 410 ERROR event so their clients relist.
    pub fn compact(&self) {
        let mut g = self.lock();
        g.history.clear();
        g.floor_rv = g.rv;
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(Arc::new(Notice::Compacted));
    }
}

fn qualified(res: &ResourceDef) -> String {
    if res.group.is_empty() {
        res.plural.to_string()
    } else {
        format!("{}.{}", res.plural, res.group)
    }
}

fn namespace_exists(g: &Inner, ns: &str) -> bool {
    g.objects
        .get("/namespaces")
        .is_some_and(|m| m.contains_key(&(String::new(), ns.to_string())))
}

fn list_locked<'a>(
    g: &'a Inner,
    res: &ResourceDef,
    ns: Option<&'a str>,
) -> impl Iterator<Item = &'a Arc<Value>> + 'a {
    let m = g.objects.get(&res.key());
    let from = (ns.unwrap_or("").to_string(), String::new());
    m.into_iter()
        .flat_map(move |m| m.range(from.clone()..))
        .take_while(move |((n, _), _)| ns.is_none_or(|ns| n == ns))
        .map(|(_, v)| v)
}

/// apiVersion, kind, name and namespace always reflect where the object is stored.
fn stamp_identity(obj: &mut Value, res: &ResourceDef, ns: &str, name: &str) {
    let o = meta::ensure_object(obj);
    o.insert("apiVersion".into(), json!(res.api_version()));
    o.insert("kind".into(), json!(res.kind));
    let m = meta::metadata_mut(obj);
    m.insert("name".into(), json!(name));
    if res.namespaced {
        m.insert("namespace".into(), json!(ns));
    } else {
        m.remove("namespace");
    }
}

/// Stores (`Some`) or removes (`None`) one object under a fresh resourceVersion, records the
/// event and tells watchers. Returns the new resourceVersion.
fn commit(
    g: &mut Inner,
    tx: &broadcast::Sender<Arc<Notice>>,
    res: &'static ResourceDef,
    ns: &str,
    name: &str,
    obj: Option<Value>,
    etype: EventType,
) -> u64 {
    g.rv += 1;
    let rv = g.rv;
    *g.changes.entry(res.key()).or_default() += 1;
    let key = (ns.to_string(), name.to_string());
    let objects = g.objects.entry(res.key()).or_default();
    let object = match obj {
        Some(o) => {
            let o = Arc::new(o);
            objects.insert(key, o.clone());
            o
        }
        None => {
            let mut o = objects
                .remove(&key)
                .map(Arc::unwrap_or_clone)
                .unwrap_or(Value::Null);
            meta::metadata_mut(&mut o).insert("resourceVersion".into(), json!(rv.to_string()));
            Arc::new(o)
        }
    };
    let notice = Arc::new(Notice::Event(Event {
        rv,
        res,
        ns: ns.to_string(),
        etype,
        object,
    }));
    g.history.push_back(notice.clone());
    while g.history.len() > g.history_limit {
        if let Some(old) = g.history.pop_front() {
            if let Notice::Event(e) = &*old {
                g.floor_rv = e.rv;
            }
        }
    }
    // No receivers is fine: nobody is watching.
    let _ = tx.send(notice);
    rv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::find;

    fn ns_res() -> &'static ResourceDef {
        find("", "v1", "namespaces").unwrap()
    }
    fn cm_res() -> &'static ResourceDef {
        find("", "v1", "configmaps").unwrap()
    }

    #[test]
    fn noop_replace_keeps_version_and_generation() {
        let s = Store::new(100);
        s.write(ns_res(), "", "a", false, |_| Ok(Change::Create(json!({}))))
            .unwrap();
        let created = s
            .write(cm_res(), "a", "c", false, |_| {
                Ok(Change::Create(json!({"data": {"k": "v"}})))
            })
            .unwrap();
        let rv = s.current_rv();
        let out = s
            .write(cm_res(), "a", "c", false, |cur| {
                Ok(Change::Replace(cur.unwrap().clone()))
            })
            .unwrap();
        assert!(!out.changed());
        assert_eq!(s.current_rv(), rv);
        let out = s
            .write(cm_res(), "a", "c", false, |_| {
                Ok(Change::Replace(json!({"data": {"k": "w"}})))
            })
            .unwrap();
        assert!(out.changed());
        assert_eq!(out.object()["metadata"]["generation"], 2);
        assert_eq!(
            out.object()["metadata"]["uid"],
            created.object()["metadata"]["uid"]
        );
    }

    #[test]
    fn create_needs_namespace_and_namespace_delete_cascades() {
        let s = Store::new(100);
        let err = s
            .write(cm_res(), "x", "c", false, |_| Ok(Change::Create(json!({}))))
            .unwrap_err();
        assert_eq!(err.code(), 404);
        s.write(ns_res(), "", "x", false, |_| Ok(Change::Create(json!({}))))
            .unwrap();
        s.write(cm_res(), "x", "c", false, |_| Ok(Change::Create(json!({}))))
            .unwrap();
        s.write(ns_res(), "", "x", false, |_| Ok(Change::Delete))
            .unwrap();
        assert!(s.get(cm_res(), "x", "c").is_none());
    }

    #[test]
    fn history_limit_expires_old_versions() {
        let s = Store::new(2);
        for n in ["a", "b", "c", "d"] {
            s.write(ns_res(), "", n, false, |_| Ok(Change::Create(json!({}))))
                .unwrap();
        }
        assert!(s.subscribe(ns_res(), None, Some(1)).is_err());
        let sub = s.subscribe(ns_res(), None, Some(2)).unwrap();
        assert_eq!(sub.backlog.len(), 2);
    }
}
