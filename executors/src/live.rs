//! The managed objects of one member cluster as its watches see them.
//!
//! One kube-rs watcher per resource type, filtered by fedraft's ownership label, keeps a map of
//! live objects; every event wakes the cluster's reconciler, which is how drift is noticed
//! within a second or so instead of at the next resync. A type counts as ready once its first
//! list completed; until then the reconciler neither skips writes nor deletes for that type.
//! The watcher relists on its own after a 410 and retries with kube's default backoff while the
//! cluster is unreachable (the map keeps its last view meanwhile, less what the executor itself
//! deleted: `forget`).
//!
//! Must not: write to the cluster, or hold objects without the ownership label.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fedraft_core::render::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::live_id::LiveId;
use crate::live_object::{LiveObject, SharedReads};
use crate::resolve::Resolved;

/// Objects are shared (`Arc`) so that a reconcile pass can take a snapshot without copying
/// every object's JSON.
type Objects = Arc<Mutex<BTreeMap<LiveId, Arc<LiveObject>>>>;

/// A snapshot of the ready types: type key -> live objects.
pub type Snapshot = BTreeMap<(String, String), BTreeMap<LiveId, Arc<LiveObject>>>;

type Failure = Arc<Mutex<Option<String>>>;

/// Settled copies read again at once by one pass ([`LiveCache::reread`]): rare (a rule or a
/// preserved path new to objects already in place), so kept well below the writes' bound.
const REREAD_CONCURRENCY: usize = 4;

struct Watched {
    objects: Objects,
    ready: watch::Receiver<bool>,
    /// Why the watch last failed to list or watch, until its next complete list: what a status
    /// says while the first list is still missing.
    failure: Failure,
    task: JoinHandle<()>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Watches of one cluster, keyed by (apiVersion, kind).
pub struct LiveCache {
    client: Client,
    cluster: String,
    wake: Arc<Notify>,
    types: Mutex<HashMap<(String, String), Watched>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a map half-updated in a way that matters: the
    // next relist replaces it. Keep going rather than poisoning every later pass.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LiveCache {
    pub fn new(client: Client, cluster: String, wake: Arc<Notify>) -> Self {
        LiveCache {
            client,
            cluster,
            wake,
            types: Mutex::new(HashMap::new()),
        }
    }

    /// Starts watching `r` unless already watched.
    pub fn ensure(&self, r: &Resolved) {
        let key = (r.resource.api_version.clone(), r.resource.kind.clone());
        let mut types = lock(&self.types);
        if types.contains_key(&key) {
            return;
        }
        let objects: Objects = Arc::default();
        let failure: Failure = Arc::default();
        let (ready_tx, ready) = watch::channel(false);
        let task = tokio::spawn(run_watch(
            self.client.clone(),
            self.cluster.clone(),
            r.clone(),
            (objects.clone(), failure.clone()),
            ready_tx,
            self.wake.clone(),
        ));
        types.insert(
            key,
            Watched {
                objects,
                ready,
                failure,
                task,
            },
        );
    }

    /// Whether the type's first list has completed.
    pub fn is_ready(&self, api_version: &str, kind: &str) -> bool {
        lock(&self.types)
            .get(&(api_version.to_string(), kind.to_string()))
            .is_some_and(|w| *w.ready.borrow())
    }

    /// Why the type's watch last failed, while it has not listed since.
    pub fn list_error(&self, api_version: &str, kind: &str) -> Option<String> {
        let types = lock(&self.types);
        let w = types.get(&(api_version.to_string(), kind.to_string()))?;
        let failure = lock(&w.failure).clone();
        failure
    }

    /// Waits until every listed type is ready or `timeout` passes; returns whether all are.
    pub async fn wait_ready(
        &self,
        keys: &[(String, String)],
        timeout: std::time::Duration,
    ) -> bool {
        let receivers: Vec<watch::Receiver<bool>> = {
            let types = lock(&self.types);
            keys.iter()
                .filter_map(|k| types.get(k).map(|w| w.ready.clone()))
                .collect()
        };
        let all = async {
            for mut rx in receivers {
                if rx.wait_for(|r| *r).await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::time::timeout(timeout, all).await.unwrap_or(false)
    }

    /// The types being watched.
    pub fn watched(&self) -> Vec<(String, String)> {
        lock(&self.types).keys().cloned().collect()
    }

    /// Copy of the live objects of every ready type (type key -> objects).
    pub fn snapshot(&self) -> Snapshot {
        lock(&self.types)
            .iter()
            .filter(|(_, w)| *w.ready.borrow())
            .map(|(k, w)| (k.clone(), lock(&w.objects).clone()))
            .collect()
    }

    /// Keeps the settled form ([`LiveObject::settled`]) of each copy a pass verified, unless the
    /// watch delivered a newer copy meanwhile (`seen` is the copy the pass looked at).
    ///
    /// The copy is then keyed by the id the pass gives (its prepared manifest's), which the
    /// watch's own equal id gives way to: the object's later deliveries keep that key (a map
    /// keeps the key it has), so the object's names are held once between the two caches.
    pub fn settle(&self, verified: &[(LiveId, Arc<LiveObject>)]) {
        self.still_held(verified, |objects, id, seen| {
            if !seen.is_settled() {
                objects.remove(id);
                objects.insert(id.clone(), Arc::new(seen.settled()));
            }
        });
    }

    /// Drops the copies of objects the executor deleted (each with the copy the pass acted on),
    /// unless the watch delivered another copy meanwhile; the watch's own delete event then
    /// finds nothing to drop. Until that event, a watch that is down (its cluster just came
    /// back, and kube's backoff has not retried yet) would keep showing the deleted object, and
    /// a pass that wants it back would find it up to date and report it applied.
    pub fn forget(&self, deleted: &[(LiveId, Arc<LiveObject>)]) {
        self.still_held(deleted, |objects, id, _| {
            objects.remove(id);
        });
    }

    /// Calls `f` with its type's map for each of `copies` (an id and the copy a pass looked
    /// at) that the map still holds: the watch delivered nothing newer meanwhile. Each type's
    /// map is locked once.
    fn still_held(
        &self,
        copies: &[(LiveId, Arc<LiveObject>)],
        mut f: impl FnMut(&mut BTreeMap<LiveId, Arc<LiveObject>>, &LiveId, &Arc<LiveObject>),
    ) {
        if copies.is_empty() {
            return;
        }
        let types = lock(&self.types);
        for ((api_version, kind), w) in types.iter() {
            let mut objects = None;
            let of_type = copies
                .iter()
                .filter(|(id, _)| id.api_version() == *api_version && id.kind() == *kind);
            for (id, seen) in of_type {
                let objects = objects.get_or_insert_with(|| lock(&w.objects));
                if objects.get(id).is_some_and(|held| Arc::ptr_eq(held, seen)) {
                    f(objects, id, seen);
                }
            }
        }
    }

    /// Of `wanted`, the objects whose copy in `snapshot` is settled are read again, for a pass
    /// that must read their whole object (a health rule or preserved status paths appeared
    /// since they were settled): each is fetched, kept in the cache while the watch has not
    /// replaced it, and put in `snapshot`. Returns why a copy could not be read, per object;
    /// those stay settled.
    pub async fn reread(
        &self,
        snapshot: &mut Snapshot,
        wanted: Vec<(Arc<Resolved>, LiveId)>,
        timeout: Duration,
    ) -> HashMap<LiveId, String> {
        let settled = |id: &LiveId| {
            let held = snapshot.get(&id.type_key());
            held.and_then(|o| o.get(id)).is_some_and(|l| l.is_settled())
        };
        let wanted: Vec<_> = wanted.into_iter().filter(|(_, id)| settled(id)).collect();
        // After one read fails the rest are not tried: a member that does not answer would
        // otherwise cost this pass a timeout per object.
        let first_failure: Mutex<Option<String>> = Mutex::new(None);
        let first_failure = &first_failure;
        let fetched: Vec<_> = futures::stream::iter(wanted.into_iter().map(|(r, id)| async move {
            if let Some(e) = lock(first_failure).clone() {
                return (
                    r,
                    id,
                    Err(format!("not read after another read failed: {e}")),
                );
            }
            let api: Api<DynamicObject> = if r.namespaced {
                Api::namespaced_with(self.client.clone(), id.namespace(), &r.resource)
            } else {
                Api::all_with(self.client.clone(), &r.resource)
            };
            let got = crate::client::bounded(timeout, || format!("reading {id}"), async {
                api.get_opt(id.name()).await
            })
            .await
            .map_err(|e| e.to_string());
            if let Err(e) = &got {
                lock(first_failure).get_or_insert_with(|| e.clone());
            }
            (r, id, got)
        }))
        .buffer_unordered(REREAD_CONCURRENCY)
        .collect()
        .await;
        let mut failed = HashMap::new();
        let mut shared = SharedReads::default();
        for (r, id, got) in fetched {
            let fresh = match got {
                Ok(Some(o)) => {
                    to_live(&r, o, &mut shared).filter(|(found, l)| *found == id && l.is_managed())
                }
                // Gone: the watch says so too, and the next pass sees it missing.
                Ok(None) => None,
                Err(e) => {
                    failed.insert(id, e);
                    continue;
                }
            };
            let Some((_, fresh)) = fresh else { continue };
            let type_key = id.type_key();
            if let Some(w) = lock(&self.types).get(&type_key) {
                let mut objects = lock(&w.objects);
                if let Some(held) = objects.get_mut(&id).filter(|h| h.is_settled()) {
                    *held = fresh.clone();
                }
            }
            if let Some(held) = snapshot.get_mut(&type_key).and_then(|o| o.get_mut(&id)) {
                *held = fresh;
            }
        }
        failed
    }

    /// Whether every watched type has been listed and holds no managed object (objects already
    /// being deleted do not count).
    pub fn is_clean(&self) -> bool {
        lock(&self.types)
            .values()
            .all(|w| *w.ready.borrow() && lock(&w.objects).values().all(|o| o.is_deleting()))
    }

    /// (namespace, name) of every managed object, any type: what the capacity scan excludes.
    pub fn managed_names(&self) -> std::collections::BTreeSet<(String, String)> {
        lock(&self.types)
            .values()
            .flat_map(|w| {
                lock(&w.objects)
                    .keys()
                    .map(|id| (id.namespace().to_string(), id.name().to_string()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

fn to_live(
    r: &Resolved,
    mut obj: DynamicObject,
    shared: &mut SharedReads,
) -> Option<(LiveId, Arc<LiveObject>)> {
    // Never read, and often the largest part of an object: not even converted.
    obj.metadata.managed_fields = None;
    let mut value = serde_json::to_value(&obj).ok()?;
    // List items may omit apiVersion/kind; the comparison with manifests needs them.
    if let Value::Object(map) = &mut value {
        map.insert(
            "apiVersion".into(),
            Value::from(r.resource.api_version.clone()),
        );
        map.insert("kind".into(), Value::from(r.resource.kind.clone()));
    }
    let namespace = match r.namespaced {
        true => obj.metadata.namespace.as_deref().unwrap_or_default(),
        false => "",
    };
    let id = LiveId::of_type(&r.live_type, namespace, obj.metadata.name.as_deref()?);
    Some((id, Arc::new(LiveObject::read(value, shared))))
}

async fn run_watch(
    client: Client,
    cluster: String,
    r: Resolved,
    (objects, failure): (Objects, Failure),
    ready: watch::Sender<bool>,
    wake: Arc<Notify>,
) {
    let api: Api<DynamicObject> = Api::all_with(client, &r.resource);
    let config =
        watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"));
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    // Collected, then built into a map at once: built from a list, a B-tree's nodes are full,
    // where one filled by inserts in the list's order leaves them about half empty.
    let mut relist: Vec<(LiveId, Arc<LiveObject>)> = Vec::new();
    let mut shared = SharedReads::default();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relist.clear(),
            Ok(Event::InitApply(o)) => {
                if let Some((id, live)) = to_live(&r, o, &mut shared) {
                    relist.push((id, live));
                }
            }
            Ok(Event::InitDone) => {
                // Of one object listed twice the later copy is kept, as inserting did.
                let listed: BTreeMap<_, _> = std::mem::take(&mut relist).into_iter().collect();
                *lock(&objects) = listed;
                *lock(&failure) = None;
                ready.send_replace(true);
                wake.notify_one();
            }
            Ok(Event::Apply(o)) => {
                if let Some((id, live)) = to_live(&r, o, &mut shared) {
                    // A copy released (fedraft's label taken off) left the watch's selector;
                    // not every server says so with a delete.
                    if live.is_managed() {
                        lock(&objects).insert(id, live);
                    } else {
                        lock(&objects).remove(&id);
                    }
                    wake.notify_one();
                }
            }
            Ok(Event::Delete(o)) => {
                if let Some((id, _)) = to_live(&r, o, &mut shared) {
                    lock(&objects).remove(&id);
                    wake.notify_one();
                }
            }
            Err(e) => {
                tracing::debug!(%cluster, kind = %r.resource.kind, error = %e, "watch interrupted; retrying");
                *lock(&failure) = Some(e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::discovery::ApiResource;
    use serde_json::json;

    /// A client of a member that refuses every connection: nothing listens on a port just
    /// released.
    fn refusing_client() -> Client {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let url = format!("http://127.0.0.1:{port}").parse().expect("a url");
        Client::try_from(kube::Config::new(url)).expect("a plain-HTTP client")
    }

    fn config_maps() -> Arc<Resolved> {
        Arc::new(Resolved::new(
            ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            true,
        ))
    }

    /// A cache watching ConfigMaps whose watch never lists (the test alone fills the map).
    fn config_map_cache() -> (LiveCache, Arc<Resolved>) {
        let cache = LiveCache::new(refusing_client(), "m1".into(), Arc::default());
        let r = config_maps();
        cache.ensure(&r);
        (cache, r)
    }

    /// A ConfigMap copy in namespace `shop`, with its id.
    fn config_map_copy(r: &Resolved, name: &str) -> (LiveId, Arc<LiveObject>) {
        let id = LiveId::of_type(&r.live_type, "shop", name);
        let live = LiveObject::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"}}));
        (id, Arc::new(live))
    }

    #[tokio::test]
    async fn a_settled_copy_is_keyed_by_the_id_the_pass_gave() {
        let (cache, r) = config_map_cache();
        let type_key = ("v1".to_string(), "ConfigMap".to_string());
        let copy = |name: &str| config_map_copy(&r, name);
        let (watched, seen) = copy("c");
        let (replaced, old) = copy("d");
        {
            let types = lock(&cache.types);
            let mut objects = lock(&types[&type_key].objects);
            objects.insert(watched.clone(), seen.clone());
            // The watch delivered a newer copy of `d` after the pass looked at `old`.
            objects.insert(replaced.clone(), copy("d").1);
        }
        let given = LiveId::new("v1", "ConfigMap", "shop", "c");
        let given_d = LiveId::new("v1", "ConfigMap", "shop", "d");
        cache.settle(&[(given.clone(), seen), (given_d, old)]);
        let types = lock(&cache.types);
        let objects = lock(&types[&type_key].objects);
        let (key, held) = objects.get_key_value(&watched).expect("still held");
        assert!(key.shares(&given) && !key.shares(&watched) && held.is_settled());
        let (key, held) = objects.get_key_value(&replaced).expect("still held");
        assert!(
            key.shares(&replaced) && !held.is_settled(),
            "left as delivered"
        );
        assert_eq!(objects.len(), 2);
    }

    /// A copy the executor deleted leaves the map at once (its watch may be down for a while),
    /// unless the watch already holds a newer one.
    #[tokio::test]
    async fn a_deleted_copy_is_forgotten_unless_the_watch_replaced_it() {
        let (cache, r) = config_map_cache();
        let type_key = ("v1".to_string(), "ConfigMap".to_string());
        let copy = |name: &str| config_map_copy(&r, name);
        let (deleted, seen) = copy("c");
        let (recreated, old) = copy("d");
        let (kept, _) = copy("e");
        {
            let types = lock(&cache.types);
            let mut objects = lock(&types[&type_key].objects);
            objects.insert(deleted.clone(), seen.clone());
            objects.insert(recreated.clone(), copy("d").1);
            objects.insert(kept.clone(), copy("e").1);
        }
        cache.forget(&[(deleted.clone(), seen), (recreated.clone(), old)]);
        let types = lock(&cache.types);
        let objects = lock(&types[&type_key].objects);
        assert!(!objects.contains_key(&deleted), "the deleted copy is gone");
        assert!(objects.contains_key(&recreated), "a newer copy stays");
        assert!(objects.contains_key(&kept), "others stay");
    }

    #[tokio::test]
    async fn a_member_that_refuses_one_reread_is_not_asked_for_the_others() {
        let cache = LiveCache::new(refusing_client(), "m1".into(), Arc::default());
        let r = config_maps();
        let mut snapshot = Snapshot::new();
        let mut wanted = Vec::new();
        for i in 0..40 {
            let id = LiveId::new("v1", "ConfigMap", "shop", &format!("c{i}"));
            let live = LiveObject::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": id.name(), "namespace": "shop"}}));
            snapshot
                .entry(("v1".into(), "ConfigMap".into()))
                .or_default()
                .insert(id.clone(), Arc::new(live.settled()));
            wanted.push((r.clone(), id));
        }
        let failed = cache
            .reread(&mut snapshot, wanted, Duration::from_secs(5))
            .await;
        assert_eq!(failed.len(), 40, "every copy stays unread: {failed:?}");
        let tried = failed
            .values()
            .filter(|e| !e.starts_with("not read after another read failed"))
            .count();
        assert!(
            (1..=REREAD_CONCURRENCY).contains(&tried),
            "{tried} reads tried against a member refusing connections"
        );
        let held = &snapshot[&("v1".to_string(), "ConfigMap".to_string())];
        assert!(held.values().all(|l| l.is_settled()));
    }
}
