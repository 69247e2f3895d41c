//! The desired objects of one member cluster, rendered incrementally, and the prepared form
//! ([`Prepared`]) the reconciler applies.
//!
//! `State::desired_for_cluster` renders every object placed on a cluster, and the reconciler
//! reads the state under the state machine's read lock on every applied entry. Rendering (and
//! resolving and hashing) everything on each pass made a burst of N puts cost O(N²) renders,
//! all of them holding the lock the apply path needs: on a busy machine a single-node group
//! could not commit its own proposals in time. Here a pass only walks the objects and renders
//! those whose resource version (spec and placement) or the cluster's labels changed since the
//! pass before; the rest reuse the previous, already prepared result.
//!
//! Must not: diverge from `desired_for_cluster` (a test compares the two on the same state), or
//! hold the state longer than one walk over the objects.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use fedraft_core::model::ObjectKey;
use fedraft_core::state::{DesiredObject, State};
use serde_json::{json, Value};

use crate::compare::{manifest_hash, APPLIED_HASH_ANNOTATION};
use crate::error::ExecError;
use crate::plan::{self, LiveId};
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

/// A desired object ready to be applied: resolved kind, body with its hash annotation. The
/// reconciler prepares it ([`prepare`]); this cache keeps it until the object changes. The body
/// is kept as compact JSON: one is held per object per cluster, and a pass that finds the
/// object up to date never looks inside it (`plan::verdict`).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub key: ObjectKey,
    pub id: LiveId,
    pub resolved: Arc<Resolved>,
    /// The manifest to apply, as compact JSON.
    pub body: Box<str>,
    pub hash: String,
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
    items: HashMap<ObjectKey, Item>,
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
                let replicas = s.replicas_running(obj, cluster);
                // The same rendering as `desired_for_cluster`: the cluster's rollout revision,
                // checked against the identity the object was admitted with.
                let (manifest, admitted) = s.render_for(obj, cluster, &c.spec.labels);
                out.rendered.push((
                    obj.resource_version,
                    DesiredObject {
                        key: key.clone(),
                        replicas,
                        manifest,
                        admitted,
                    },
                ));
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
    pub fn insert(&mut self, key: ObjectKey, version: u64, entry: Entry) {
        self.items.insert(key, Item { version, entry });
    }

    /// The cached entry of `key`, if any.
    pub fn get(&self, key: &ObjectKey) -> Option<&Entry> {
        self.items.get(key).map(|i| &i.entry)
    }

    /// Drops everything not placed on the cluster any more.
    pub fn retain(&mut self, keys: &[ObjectKey]) {
        let keep: BTreeSet<&ObjectKey> = keys.iter().collect();
        self.items.retain(|k, _| keep.contains(k));
    }
}

impl Prepared {
    /// The body parsed, for a write.
    pub fn body_value(&self) -> Result<Value, ExecError> {
        serde_json::from_str(&self.body).map_err(|e| ExecError::Manifest(e.to_string()))
    }
}

/// Resolves and stamps one rendered desired object.
pub async fn prepare(ctx: &ClusterCtx, d: &DesiredObject) -> Result<Prepared, ExecError> {
    let manifest = d
        .manifest
        .as_ref()
        .map_err(|e| ExecError::Manifest(e.to_string()))?;
    let (api_version, kind, namespace, name) =
        plan::manifest_identity(manifest).map_err(ExecError::Manifest)?;
    let resolved = ctx.resolver.resolve(&api_version, &kind).await?;
    plan::check_admitted(
        d.admitted.as_ref(),
        (&api_version, &kind, &namespace, &name),
        resolved.namespaced,
    )
    .map_err(ExecError::Manifest)?;
    let mut body = manifest.clone();
    if !resolved.namespaced {
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
                Value::from(hash.clone()),
            );
        }
    }
    let id = LiveId {
        api_version,
        kind,
        namespace: if resolved.namespaced {
            namespace
        } else {
            String::new()
        },
        name,
    };
    let body = serde_json::to_string(&body)
        .map_err(|e| ExecError::Manifest(e.to_string()))?
        .into_boxed_str();
    Ok(Prepared {
        key: d.key.clone(),
        id,
        resolved,
        body,
        hash,
        replicas: d.replicas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::command::{Command, LogEntry};
    use fedraft_core::model::{ClusterSpec, ObjectSpec};
    use serde_json::json;

    fn apply(s: &mut State, i: &mut u64, cmd: Command) {
        *i += 1;
        let a = s.apply(*i, &LogEntry::new(format!("r{i}"), "admin", 1000 + *i, cmd));
        assert!(a.outcome.is_accepted(), "{:?}", a.outcome);
    }

    fn spec(weights: serde_json::Value, tag: &str) -> ObjectSpec {
        serde_json::from_value(json!({
            "template": json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": 6, "template": {"spec": {"containers": [
                    {"name": "app", "image": "nginx:1"}]}}},
            }).to_string(),
            "placement": {"replicas": {"mode": "Divided",
                "division": {"staticWeights": {"weights": weights}}}},
            "overrides": [{"clusterName": "b", "image": {"tag": tag}}],
        }))
        .unwrap()
    }

    fn manifests(v: &[DesiredObject]) -> Vec<(ObjectKey, u32, String)> {
        v.iter()
            .map(|d| (d.key.clone(), d.replicas, format!("{:?}", d.manifest)))
            .collect()
    }

    /// The cache's view (rendered now or earlier) equals `desired_for_cluster` after every
    /// kind of change: new objects, new weights, new overrides, new cluster labels, removal.
    #[test]
    fn matches_desired_for_cluster() {
        let mut s = State::new();
        let mut i = 0;
        for c in ["a", "b"] {
            apply(
                &mut s,
                &mut i,
                Command::RegisterCluster(ClusterSpec::new(c, format!("http://{c}:1"))),
            );
        }
        let mut caches: BTreeMap<&str, (DesiredCache, BTreeMap<ObjectKey, DesiredObject>)> =
            BTreeMap::new();
        let steps: Vec<Command> = vec![
            Command::PutObject {
                namespace: "ns".into(),
                name: "web".into(),
                spec: spec(json!({"a": {"weight": 1}, "b": {"weight": 1}}), "2"),
                expected_version: None,
            },
            Command::PutObject {
                namespace: "ns".into(),
                name: "api".into(),
                spec: spec(json!({"a": {"weight": 1}, "b": {"weight": 2}}), "2"),
                expected_version: None,
            },
            Command::PutObject {
                namespace: "ns".into(),
                name: "web".into(),
                spec: spec(json!({"a": {"weight": 1}, "b": {"weight": 5}}), "3"),
                expected_version: None,
            },
            Command::UpdateCluster {
                spec: {
                    let mut c = ClusterSpec::new("b", "http://b:1");
                    c.labels.insert("region".into(), "x".into());
                    c
                },
                expected_version: None,
            },
            Command::DeleteObject {
                namespace: "ns".into(),
                name: "api".into(),
                expected_version: None,
            },
        ];
        for cmd in steps {
            apply(&mut s, &mut i, cmd);
            for c in ["a", "b"] {
                let (cache, seen) = caches.entry(c).or_default();
                let scan = cache.scan(&s, c);
                for (v, d) in scan.rendered {
                    cache.insert(d.key.clone(), v, Entry::Unusable(String::new()));
                    seen.insert(d.key.clone(), d);
                }
                cache.retain(&scan.keys);
                seen.retain(|k, _| scan.keys.contains(k));
                let got: Vec<DesiredObject> = seen.values().cloned().collect();
                assert_eq!(manifests(&got), manifests(&s.desired_for_cluster(c)));
            }
        }
    }
}
