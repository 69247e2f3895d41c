//! The desired objects of one member cluster, rendered incrementally, and the prepared form
//! ([`Prepared`]) the reconciler applies.
//!
//! `State::desired_for_cluster` renders every object placed on a cluster, and the reconciler
//! reads the state under the state machine's read lock on every applied entry. Rendering (and
//! resolving and hashing) everything on each pass made a burst of N puts cost O(N²) renders,
//! all of them holding the lock the apply path needs: on a busy machine a single-node group
//! could not commit its own proposals in time. Here a pass only walks the objects and renders
//! those whose resource version (spec and placement) or the cluster's labels changed since the
//! pass before; the rest reuse the previous, already prepared result. A prepared body is let go
//! once its live copy settled, and rendered again only for a pass that must compare or write
//! it ([`restore_bodies`]). An object's key and id are made once and kept across its versions;
//! the live cache keys the object's settled copy by the same id.
//!
//! Must not: diverge from `desired_for_cluster` (a test compares the two on the same state), or
//! hold the state longer than one walk over the objects.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use fedraft_core::model::ObjectKey;
use fedraft_core::state::{DesiredObject, State};
use serde_json::{json, Value};

use crate::compare::{manifest_hash, ManifestHash, APPLIED_HASH_ANNOTATION};
use crate::error::ExecError;
use crate::live::Snapshot;
use crate::live_id::LiveId;
use crate::node::ControlPlane;
use crate::plan::{self, Memo};
use crate::reconciler::ClusterCtx;
use crate::resolve::Resolved;

/// What a pass found: every object placed on the cluster, and the ones that need preparing.
#[derive(Debug, Default)]
pub struct Scan {
    /// Every object placed on the cluster, in key order.
    pub keys: Vec<ObjectKey>,
    /// Newly rendered objects (not in the cache, or changed), with the version they were
    /// rendered at.
    pub rendered: Vec<(u64, DesiredObject)>,
}

/// An object's key as a cluster's executor holds it: one allocation shared by the object's
/// cache entry, its prepared manifest and the reports a pass makes of it (`report::HeldStatus`),
/// which each held their own copy of both names. Looked up as the key itself.
pub type SharedKey = Arc<ObjectKey>;

/// A desired object ready to be applied: resolved kind, body with its hash annotation. The
/// reconciler prepares it ([`prepare`]); this cache keeps it until the object changes.
///
/// One is held per object per cluster, and a pass that finds the object up to date never
/// looks inside the body (`plan::verdict`). So the body is kept as compact JSON, and only until
/// the live copy settles ([`DesiredCache::settle`]): a later pass that must compare or write
/// renders it again ([`DesiredCache::restore`]), which a changed object or a drifted, deleted
/// or foreign copy calls for, never a quiet one.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub key: SharedKey,
    pub id: LiveId,
    pub resolved: Arc<Resolved>,
    /// The manifest to apply, as compact JSON; `None` once the live copy settled.
    pub body: Option<Box<str>>,
    pub hash: ManifestHash,
    pub replicas: u32,
}

/// A prepared object, or why its manifest cannot be used (a deterministic failure of this
/// version, so it is not retried until the object changes).
#[derive(Debug, Clone)]
pub enum Entry {
    Ready(Arc<Prepared>),
    Unusable(String),
}

#[derive(Debug)]
struct Item {
    version: u64,
    entry: Entry,
}

/// Per-cluster cache of prepared desired objects, keyed by object.
#[derive(Debug, Default)]
pub struct DesiredCache {
    labels: Option<BTreeMap<String, String>>,
    items: HashMap<SharedKey, Item>,
}

impl DesiredCache {
    /// Walks the state for the objects placed on `cluster` and renders the changed ones. A
    /// change of the cluster's labels (an input of every override) renders everything again.
    pub fn scan(&mut self, s: &State, cluster: &str) -> Scan {
        let mut out = Scan::default();
        let Some(c) = s.cluster(cluster) else {
            self.items.clear();
            return out;
        };
        if self.labels.as_ref() != Some(&c.spec.labels) {
            self.items.clear();
            self.labels = Some(c.spec.labels.clone());
        }
        for obj in s.objects_on(cluster) {
            let key = obj.key();
            let cached = self
                .items
                .get(&key)
                .is_some_and(|i| i.version == obj.resource_version);
            if !cached {
                let d = render(s, obj, cluster, &c.spec.labels, key.clone());
                out.rendered.push((obj.resource_version, d));
            }
            out.keys.push(key);
        }
        // Tenant quotas derived for this cluster: re-rendered only when their tenant changed.
        for (version, d) in s.derived_for_cluster(cluster) {
            let cached = self.items.get(&d.key).is_some_and(|i| i.version == version);
            out.keys.push(d.key.clone());
            if !cached {
                out.rendered.push((version, d));
            }
        }
        out.keys.sort();
        out
    }

    /// Records the outcome of preparing an object rendered at `version`.
    pub fn insert(&mut self, key: SharedKey, version: u64, entry: Entry) {
        self.items.insert(key, Item { version, entry });
    }

    /// The cached entry of `key`, if any.
    pub fn get(&self, key: &ObjectKey) -> Option<&Entry> {
        self.items.get(key).map(|i| &i.entry)
    }

    /// Lets go of the body of `key`'s prepared manifest: its live copy settled, so passes find
    /// it up to date without reading the body.
    pub fn settle(&mut self, key: &ObjectKey) {
        let Some(item) = self.items.get_mut(key) else {
            return;
        };
        if let Entry::Ready(p) = &mut item.entry {
            if p.body.is_some() {
                // Built field by field: a clone would copy the body only to drop it.
                *p = Arc::new(Prepared {
                    key: p.key.clone(),
                    id: p.id.clone(),
                    resolved: p.resolved.clone(),
                    body: None,
                    hash: p.hash,
                    replicas: p.replicas,
                });
            }
        }
    }

    /// `p` with its body rendered again from the state, for a pass that must compare or write
    /// it; `None` if the object changed since it was prepared (the version it was rendered at
    /// is gone, or the render hashes otherwise): the change wakes a pass that prepares it anew.
    /// Rendered with the labels the cache was filled with, as the first time. Taking a render
    /// of a newer version whose hash matches was measured slower and larger in a fleet run
    /// (docs/performance.md), so a moved object waits for that pass.
    pub fn restore(&mut self, s: &State, cluster: &str, p: &Prepared) -> Option<Arc<Prepared>> {
        let labels = self.labels.as_ref()?;
        let item = self.items.get_mut(&p.key)?;
        let d = match s.object(&p.key.namespace, &p.key.name) {
            Some(obj) if obj.resource_version == item.version => {
                render(s, obj, cluster, labels, (*p.key).clone())
            }
            Some(_) => return None,
            None => {
                s.derived_for_cluster(cluster)
                    .into_iter()
                    .find(|(v, d)| *v == item.version && d.key == *p.key)?
                    .1
            }
        };
        let (manifest, identity) = identity(&d).ok()?;
        // The hash covers the identity too: an equal hash is an equal object id.
        let resolved = p.resolved.clone();
        let mut whole = prepared_as(&d, manifest, identity, (p.key.clone(), resolved)).ok()?;
        if whole.hash != p.hash {
            return None;
        }
        // The id the live cache may key the copy by (`keep_id`); equal, as the hash says.
        whole.id.share_with(&p.id);
        let whole = Arc::new(whole);
        item.entry = Entry::Ready(whole.clone());
        Some(whole)
    }

    /// Prepares what a scan rendered and keeps the outcomes; returns why the others could not
    /// be prepared (unknown kinds, unreachable discovery: tried again next pass).
    pub async fn prepare_rendered(
        &mut self,
        ctx: &ClusterCtx,
        rendered: Vec<(u64, DesiredObject)>,
    ) -> HashMap<ObjectKey, String> {
        let mut not_prepared = HashMap::new();
        for (version, d) in rendered {
            let key = self.key_of(&d.key);
            match prepare(ctx, &d, key.clone()).await {
                Ok(p) => {
                    let p = self.keep_id(p);
                    self.insert(key, version, Entry::Ready(Arc::new(p)))
                }
                // The manifest itself is unusable: nothing changes until the object does.
                Err(e @ ExecError::Manifest(_)) => {
                    self.insert(key, version, Entry::Unusable(e.to_string()))
                }
                Err(e) => {
                    not_prepared.insert(d.key, e.to_string());
                }
            }
        }
        not_prepared
    }

    /// The key `key`'s entry is held under, or a new one. An object rendered again keeps its
    /// entry's: the map keeps the first key it was given, so a new one in the prepared
    /// manifest would be a second copy of the names for as long as the object stays.
    fn key_of(&self, key: &ObjectKey) -> SharedKey {
        match self.items.get_key_value(key) {
            Some((held, _)) => held.clone(),
            None => Arc::new(key.clone()),
        }
    }

    /// `p` with the id of the manifest held for the same object, when both name the same
    /// member object: the live cache keys the object's copy by that id once it settles
    /// ([`crate::live::LiveCache::settle`]), so the object keeps one id however often it
    /// changes.
    fn keep_id(&self, mut p: Prepared) -> Prepared {
        if let Some(Entry::Ready(held)) = self.get(&p.key) {
            p.id.share_with(&held.id);
        }
        p
    }

    /// Drops everything not placed on the cluster any more.
    pub fn retain(&mut self, keys: &[ObjectKey]) {
        let keep: BTreeSet<&ObjectKey> = keys.iter().collect();
        self.items.retain(|k, _| keep.contains(&**k));
    }
}

impl Prepared {
    /// The body parsed, for a write. A pass restores the body of a settled object before it
    /// writes ([`DesiredCache::restore`]), so a missing one is a bug, reported as such.
    pub fn body_value(&self) -> Result<Value, ExecError> {
        let body = self.body.as_deref().ok_or_else(|| {
            ExecError::Manifest(format!("{}: the manifest was not rendered again", self.id))
        })?;
        serde_json::from_str(body).map_err(|e| ExecError::Manifest(e.to_string()))
    }
}

/// Renders again the bodies of `prepared` dropped when their copies settled, for those a pass
/// must compare or write (`plan::needs_manifest` against the live `snapshot` and the write
/// memos), under one read of the state. Returns the objects that changed since the scan,
/// whose bodies were not restored.
pub fn restore_bodies(
    ctrl: &impl ControlPlane,
    (cache, cluster): (&mut DesiredCache, &str),
    prepared: &mut [Arc<Prepared>],
    (snapshot, memo): (&Snapshot, &HashMap<LiveId, Memo>),
) -> HashSet<SharedKey> {
    let wanted: Vec<usize> = (0..prepared.len())
        .filter(|&i| {
            let p = &prepared[i];
            if p.body.is_some() {
                return false;
            }
            // A handful of types: found without building an owned key per object.
            let live = snapshot
                .iter()
                .find(|((a, k), _)| *a == p.id.api_version() && *k == p.id.kind())
                .and_then(|(_, objects)| objects.get(&p.id));
            plan::needs_manifest(p.hash, live.map(|l| &**l), memo.get(&p.id))
        })
        .collect();
    if wanted.is_empty() {
        return HashSet::new();
    }
    let restored: Vec<Option<Arc<Prepared>>> = ctrl.read_state(|s| {
        wanted
            .iter()
            .map(|&i| cache.restore(s, cluster, &prepared[i]))
            .collect()
    });
    let mut unrestored = HashSet::new();
    for (i, whole) in wanted.into_iter().zip(restored) {
        match whole {
            Some(p) => prepared[i] = p,
            None => {
                unrestored.insert(prepared[i].key.clone());
            }
        }
    }
    unrestored
}

/// `obj` as `cluster` runs it: the same rendering as `desired_for_cluster` (the cluster's
/// rollout revision, checked against the identity the object was admitted with).
fn render(
    s: &State,
    obj: &fedraft_core::model::FederatedObject,
    cluster: &str,
    labels: &BTreeMap<String, String>,
    key: ObjectKey,
) -> DesiredObject {
    let replicas = s.replicas_running(obj, cluster);
    let (manifest, admitted) = s.render_for(obj, cluster, labels);
    DesiredObject {
        key,
        replicas,
        manifest,
        admitted,
    }
}

/// The body to apply and its hash: `manifest` without a namespace for cluster-scoped kinds,
/// stamped with the hash of what it holds (`APPLIED_HASH_ANNOTATION`).
fn stamp(manifest: &Value, namespaced: bool) -> Result<(Box<str>, ManifestHash), ExecError> {
    let mut body = manifest.clone();
    if !namespaced {
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("namespace");
        }
    }
    let hash = manifest_hash(&body);
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                APPLIED_HASH_ANNOTATION.to_string(),
                Value::from(hash.to_string()),
            );
        }
    }
    let body = serde_json::to_string(&body)
        .map_err(|e| ExecError::Manifest(e.to_string()))?
        .into_boxed_str();
    Ok((body, hash))
}

/// Resolves and stamps one rendered desired object, to be held under `key` (`d`'s).
pub async fn prepare(
    ctx: &ClusterCtx,
    d: &DesiredObject,
    key: SharedKey,
) -> Result<Prepared, ExecError> {
    let (manifest, identity) = identity(d)?;
    let resolved = ctx.resolver.resolve(&identity.0, &identity.1).await?;
    prepared_as(d, manifest, identity, (key, resolved))
}

/// A manifest's apiVersion, kind, namespace and name (`plan::manifest_identity`).
type Identity = (String, String, String, String);

/// `d`'s manifest and its identity, read once for both resolving and stamping.
fn identity(d: &DesiredObject) -> Result<(&Value, Identity), ExecError> {
    let manifest = d
        .manifest
        .as_ref()
        .map_err(|e| ExecError::Manifest(e.to_string()))?;
    let identity = plan::manifest_identity(manifest).map_err(ExecError::Manifest)?;
    Ok((manifest, identity))
}

/// Stamps `d` (its `manifest` of `identity`) as the member's discovery (`resolved`) has its
/// kind, under `key`: `d`'s key, shared with the cache entry when rendered again.
fn prepared_as(
    d: &DesiredObject,
    manifest: &Value,
    (api_version, kind, namespace, name): Identity,
    (key, resolved): (SharedKey, Arc<Resolved>),
) -> Result<Prepared, ExecError> {
    plan::check_admitted(
        d.admitted.as_ref(),
        (&api_version, &kind, &namespace, &name),
        resolved.namespaced,
    )
    .map_err(ExecError::Manifest)?;
    let (body, hash) = stamp(manifest, resolved.namespaced)?;
    let namespace = if resolved.namespaced { &namespace } else { "" };
    // Discovery answers for the kind the manifest names, so the two agree but for a member
    // that serves a kind under other names; its ids then keep the manifest's.
    let id = match resolved.live_type.is(&api_version, &kind) {
        true => LiveId::of_type(&resolved.live_type, namespace, &name),
        false => LiveId::new(&api_version, &kind, namespace, &name),
    };
    Ok(Prepared {
        key,
        id,
        resolved,
        body: Some(body),
        hash,
        replicas: d.replicas,
    })
}

#[cfg(test)]
mod tests;
