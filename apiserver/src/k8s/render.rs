//! The door's objects as Kubernetes shows them, read out of the one model: a template is its
//! door record plus its federated object, a policy its record, a cluster or tenant the native
//! model's, a namespace a `Namespace` template or a namespace in use, a user or token its
//! record of the user database (drawn by `users`).
//!
//! [`Loaded`] is what a read takes under the state's lock (records cloned, objects shared);
//! [`Loaded::render`] builds the document after the lock is released. Server-populated
//! metadata comes from the log: `resourceVersion` is the index of the entry that last changed
//! it, `uid` is derived from the index of the entry that created it, `creationTimestamp` from
//! that entry's log time.
//!
//! Status of a template (documented in the README): `status.clusters` lists every member it
//! is placed on (replicas, ready replicas, applied, message) and condition `Placed` says why it
//! is or is not placed; for Deployments, StatefulSets and ReplicaSets `replicas`,
//! `updatedReplicas`, `readyReplicas` and `availableReplicas` are summed over the members, so
//! `kubectl get deploy` and `kubectl rollout status` read the federation as one cluster. Under
//! a rollout strategy, updated replicas are those the members report on the target revision,
//! condition `Progressing` follows the rollout's phase, and a Deployment's `spec.paused` is
//! shown from it (core keeps it out of the template: `door_rollout`).
//!
//! Must not: read anything but the state it is given; change it.

use std::sync::Arc;

use fedraft_core::door::{
    self, PolicyKindTag, PolicyRecord, PolicyRef, ResourceKey, TemplateRecord,
};
use fedraft_core::model::{Cluster, FederatedObject, Health, Tenant};
use fedraft_core::rollout::Phase;
use fedraft_core::state::State;
use fedraft_core::users::{TokenRecord, User};
use fedraft_kubeapi::meta;
use serde_json::{json, Map, Value};

use super::catalog::{FEDRAFT_GROUP, FEDRAFT_VERSION};
use super::conditions;
pub use super::conditions::RolloutView;
use crate::wire::{cluster_json, tenant_json};

/// One object as read under the state's lock.
#[derive(Debug, Clone)]
pub enum Loaded {
    Template {
        key: ResourceKey,
        rec: TemplateRecord,
        obj: Arc<FederatedObject>,
        /// Its rollout, when it rolls out under a strategy.
        rollout: Option<Box<RolloutView>>,
    },
    /// A namespace; `tpl` when it was created through the door (a `Namespace` template).
    Namespace {
        name: String,
        tpl: Option<(TemplateRecord, Arc<FederatedObject>)>,
    },
    Policy {
        key: PolicyRef,
        rec: PolicyRecord,
        /// For a member cluster document, the cluster it registered (its health and the
        /// conditions status writes gave it are the document's status).
        member: Option<Box<Member>>,
    },
    Cluster(Box<Cluster>),
    Tenant(Box<Tenant>),
    /// A user of the user database, with its live tokens counted (`super::users`).
    User {
        user: Box<User>,
        live_tokens: usize,
    },
    /// A token's record; `live` by the reading node's clock and log time.
    Token {
        rec: Box<TokenRecord>,
        live: bool,
    },
}

/// The key of the template a namespace created through the door is stored as: a `Namespace`
/// in its own namespace (core stores namespaced templates only).
pub fn namespace_key(name: &str) -> ResourceKey {
    ResourceKey {
        group: String::new(),
        kind: "Namespace".into(),
        namespace: name.to_string(),
        name: name.to_string(),
    }
}

pub fn load_template(s: &State, key: &ResourceKey) -> Option<Loaded> {
    let rec = s.door().templates.get(key)?;
    let obj = s.object_shared(key.object_namespace(), &key.object_name())?;
    Some(Loaded::Template {
        key: key.clone(),
        rec: rec.clone(),
        rollout: RolloutView::load(s, key),
        obj,
    })
}

/// A namespace exists when a `Namespace` template names it, a tenant owns it or an object
/// lives in it.
pub fn load_namespace(s: &State, name: &str) -> Option<Loaded> {
    // Where cluster-scoped templates' objects live: not a namespace a client sees.
    if name == door::CLUSTER_SCOPE_NAMESPACE {
        return None;
    }
    let key = namespace_key(name);
    let tpl = s.door().templates.get(&key).and_then(|rec| {
        s.object_shared(name, &key.object_name())
            .map(|o| (rec.clone(), o))
    });
    let exists = tpl.is_some()
        || s.tenant_of_namespace(name).is_some()
        || s.objects_in_shared(name).next().is_some();
    exists.then(|| Loaded::Namespace {
        name: name.to_string(),
        tpl,
    })
}

pub fn load_policy(s: &State, key: &PolicyRef) -> Option<Loaded> {
    let rec = s.door().policies.get(key)?;
    Some(Loaded::Policy {
        key: key.clone(),
        rec: rec.clone(),
        member: registered(s, key),
    })
}

/// Whether documents of `tag` register member clusters, whose health is their status.
pub fn is_cluster_document(tag: PolicyKindTag) -> bool {
    matches!(
        tag,
        PolicyKindTag::KarmadaCluster | PolicyKindTag::KubeFedCluster
    )
}

/// A registered member as its cluster document shows it.
#[derive(Debug, Clone)]
pub struct Member {
    pub cluster: Cluster,
    /// The conditions status writes gave it (`cluster_status`), rendered.
    pub conditions: Vec<Value>,
}

/// The cluster the member cluster document `key` registered, if it is one and did.
pub fn registered(s: &State, key: &PolicyRef) -> Option<Box<Member>> {
    if !is_cluster_document(key.kind) {
        return None;
    }
    let cluster = s.cluster(&key.name)?.clone();
    let conditions = s
        .cluster_conditions(&key.name)
        .into_iter()
        .flatten()
        .map(|(t, c)| {
            json!({"type": t, "status": c.status, "reason": c.reason, "message": c.message,
                "lastTransitionTime": rfc3339(c.since_ms)})
        })
        .collect();
    Some(Box::new(Member {
        cluster,
        conditions,
    }))
}

impl Loaded {
    /// The resourceVersion a write must name to replace this object.
    pub fn resource_version(&self) -> u64 {
        match self {
            Loaded::Template { obj, .. } => obj.resource_version,
            Loaded::Namespace { tpl, .. } => tpl.as_ref().map_or(0, |(_, o)| o.resource_version),
            Loaded::Policy { rec, .. } => rec.resource_version,
            Loaded::Cluster(c) => c.resource_version,
            Loaded::Tenant(t) => t.resource_version,
            Loaded::User { user, .. } => user.resource_version,
            // A token changes once (its revocation) and is never replaced.
            Loaded::Token { .. } => 0,
        }
    }

    /// Namespace and name, the order lists and continue tokens use.
    pub fn sort_key(&self) -> (&str, &str) {
        match self {
            Loaded::Template { key, .. } => (&key.namespace, &key.name),
            Loaded::Namespace { name, .. } => ("", name),
            Loaded::Policy { key, .. } => (&key.namespace, &key.name),
            Loaded::Cluster(c) => ("", &c.spec.name),
            Loaded::Tenant(t) => ("", &t.spec.name),
            Loaded::User { user, .. } => ("", &user.spec.name),
            Loaded::Token { rec, .. } => ("", &rec.id),
        }
    }

    pub fn render(&self) -> Value {
        // What the door stored as written: its managedFields come back out of their annotation.
        let lifted = |mut v: Value| {
            super::managed::lift(&mut v);
            v
        };
        match self {
            Loaded::Template {
                key,
                rec,
                obj,
                rollout,
            } => lifted(template_object(key, rec, obj, rollout.as_deref())),
            Loaded::Namespace { name, tpl } => lifted(namespace_object(name, tpl.as_ref())),
            Loaded::Policy { key, rec, member } => {
                lifted(policy_object(key, rec, member.as_deref()))
            }
            Loaded::Cluster(c) => cluster_object(c),
            Loaded::Tenant(t) => tenant_object(t),
            Loaded::User { user, live_tokens } => super::users::render_user(user, *live_tokens),
            Loaded::Token { rec, live } => super::users::render_token(rec, *live),
        }
    }
}

/// RFC 3339 in seconds, as metav1.Time is written.
pub fn rfc3339(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) => "1970-01-01T00:00:00Z".into(),
    }
}

/// A uid that names the entry that created the object: stable across nodes and restarts.
pub fn uid(created_index: u64) -> String {
    format!("00000000-0000-4000-8000-{created_index:012x}")
}

fn stamp(doc: &mut Value, namespace: &str, name: &str, rv: u64, created: (u64, u64), gen: u64) {
    let m = meta::metadata_mut(doc);
    if !namespace.is_empty() {
        m.insert("namespace".into(), json!(namespace));
    }
    m.insert("name".into(), json!(name));
    m.insert("resourceVersion".into(), json!(rv.to_string()));
    m.insert("uid".into(), json!(uid(created.1)));
    m.insert("generation".into(), json!(gen));
    m.insert("creationTimestamp".into(), json!(rfc3339(created.0)));
}

fn parse_or_empty(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

fn template_object(
    key: &ResourceKey,
    rec: &TemplateRecord,
    obj: &FederatedObject,
    rollout: Option<&RolloutView>,
) -> Value {
    let mut doc = parse_or_empty(&obj.spec.template);
    // A Deployment's pause is its rollout's, kept out of the template (core's `door_rollout`).
    if rollout.is_some_and(|r| r.phase == Phase::Paused)
        && key.group == "apps"
        && key.kind == "Deployment"
    {
        if let Some(spec) = doc.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("paused".into(), json!(true));
        }
    }
    doc["apiVersion"] = json!(rec.api_version);
    doc["kind"] = json!(key.kind);
    stamp(
        &mut doc,
        &key.namespace,
        &key.name,
        obj.resource_version,
        (rec.created_ms, rec.created_index),
        rec.generation,
    );
    let status = template_status(key, rec, obj, rollout, doc.get("spec"));
    doc["status"] = status;
    doc
}

fn template_status(
    key: &ResourceKey,
    rec: &TemplateRecord,
    obj: &FederatedObject,
    rollout: Option<&RolloutView>,
    spec: Option<&Value>,
) -> Value {
    let st = &obj.status;
    let clusters: Vec<Value> = st
        .clusters
        .iter()
        .map(|c| {
            json!({
                "name": c.cluster,
                "replicas": c.replicas,
                "readyReplicas": c.ready_replicas,
                "applied": c.applied,
                "message": c.message,
            })
        })
        .collect();
    let placed = !st.clusters.is_empty();
    let (status, reason, message) = match (placed, &rec.bound_to) {
        (true, _) => ("True", "Placed", st.decision_summary.to_string()),
        (false, None) if door::is_helm_release(&key.group, &key.kind, &rec.labels) => (
            "False",
            "HelmRelease",
            "a Helm release record: propagated only by a policy selector naming it".to_string(),
        ),
        (false, None) => (
            "False",
            "NoPolicy",
            "no PropagationPolicy or ClusterPropagationPolicy selects it: stored, not propagated"
                .to_string(),
        ),
        (false, Some(p)) => (
            "False",
            "NoCluster",
            format!(
                "policy {} places it nowhere: {}",
                p.name, st.decision_summary
            ),
        ),
    };
    let mut out = json!({
        "observedGeneration": rec.generation,
        "clusters": clusters,
        "conditions": [{
            "type": "Placed",
            "status": status,
            "reason": reason,
            "message": message,
        }],
    });
    if key.group == "apps"
        && matches!(
            key.kind.as_str(),
            "Deployment" | "StatefulSet" | "ReplicaSet"
        )
    {
        let replicas: u32 = st.clusters.iter().map(|c| c.replicas).sum();
        // Under a rollout, updated means running the target revision (as each member reports
        // it), so `kubectl rollout status` waits for the last wave; otherwise applied.
        let (updated, available) = match rollout {
            Some(r) => (
                st.clusters
                    .iter()
                    .map(|c| r.updated_on(&c.cluster, c.replicas))
                    .sum(),
                st.clusters
                    .iter()
                    .map(|c| r.available_on(&c.cluster, c.replicas))
                    .sum(),
            ),
            None => (
                st.clusters
                    .iter()
                    .filter(|c| c.applied)
                    .map(|c| c.replicas)
                    .sum::<u32>(),
                st.ready_replicas,
            ),
        };
        out["replicas"] = json!(replicas);
        out["updatedReplicas"] = json!(updated);
        out["readyReplicas"] = json!(st.ready_replicas);
        out["availableReplicas"] = json!(available);
        let counts = conditions::Counts {
            replicas,
            updated,
            available,
        };
        let deployment = key.kind == "Deployment";
        if let Some(conds) = out["conditions"].as_array_mut() {
            if deployment {
                conds.push(conditions::available(spec, counts));
            }
            match rollout {
                Some(r) => conds.push(r.progressing()),
                None if deployment => conds.push(conditions::progressing(counts)),
                None => {}
            }
        }
        if key.kind == "StatefulSet" {
            out["currentReplicas"] = json!(updated);
        }
    }
    out
}

fn namespace_object(name: &str, tpl: Option<&(TemplateRecord, Arc<FederatedObject>)>) -> Value {
    let mut doc = match tpl {
        Some((_, obj)) => parse_or_empty(&obj.spec.template),
        None => Value::Object(Map::new()),
    };
    doc["apiVersion"] = json!("v1");
    doc["kind"] = json!("Namespace");
    match tpl {
        Some((rec, obj)) => stamp(
            &mut doc,
            "",
            name,
            obj.resource_version,
            (rec.created_ms, rec.created_index),
            rec.generation,
        ),
        None => {
            meta::metadata_mut(&mut doc).insert("name".into(), json!(name));
        }
    }
    // A namespace is cluster-scoped; the template keeps one only because core stores it so.
    meta::metadata_mut(&mut doc).remove("namespace");
    doc["status"] = json!({ "phase": "Active" });
    doc
}

fn policy_object(key: &PolicyRef, rec: &PolicyRecord, member: Option<&Member>) -> Value {
    let mut doc = parse_or_empty(&rec.manifest);
    if let Some(o) = doc.as_object_mut() {
        // A member Secret's credentials, sealed or not, are never shown.
        o.remove(door::SECRET_CREDENTIALS_FIELD);
    }
    let (api_version, kind) = key.kind.api_version_kind();
    doc["apiVersion"] = json!(api_version);
    doc["kind"] = json!(kind);
    stamp(
        &mut doc,
        &key.namespace,
        &key.name,
        rec.resource_version,
        (rec.created_ms, rec.created_index),
        rec.generation,
    );
    if is_cluster_document(key.kind) {
        doc["status"] = member_status(key.kind, &doc, member);
    }
    doc
}

/// A cluster document's status as Karmada and KubeFed write it: condition `Ready` from the
/// health of the cluster the document registered, or False while its Secret is missing.
fn member_status(tag: PolicyKindTag, doc: &Value, member: Option<&Member>) -> Value {
    let Some(Member {
        cluster: c,
        conditions: written,
    }) = member
    else {
        let secret = door::parse_member(tag, doc)
            .and_then(Result::ok)
            .map(|m| format!("{}/{}", m.secret.namespace, m.secret.name))
            .unwrap_or_default();
        return json!({"conditions": [{
            "type": "Ready",
            "status": "False",
            "reason": "WaitingForSecret",
            "message": format!(
                "waiting for Secret {secret} (spec.secretRef) holding the member's token; \
                 nothing is registered until it exists"
            ),
        }]});
    };
    let (status, reason, message) = match c.status.health {
        Health::Ready => (
            "True",
            "ClusterReady",
            "cluster is healthy and ready to accept workloads",
        ),
        Health::NotReady => ("False", "ClusterNotReady", "cluster missed its heartbeats"),
        Health::Unknown => (
            "Unknown",
            "ClusterUnknown",
            "no heartbeat from the cluster yet",
        ),
    };
    let since = rfc3339(c.status.health_since_ms);
    let mut condition = json!({
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    });
    if tag == PolicyKindTag::KubeFedCluster {
        condition["lastProbeTime"] = json!(c.status.last_heartbeat_ms.map_or(since, rfc3339));
    }
    let mut all = vec![condition];
    all.extend(written.iter().cloned());
    json!({"conditions": all})
}

pub fn policy_kind(tag: PolicyKindTag) -> &'static str {
    tag.api_version_kind().1
}

fn fedraft_meta(name: &str, rv: u64, labels: Value) -> Value {
    json!({ "name": name, "resourceVersion": rv.to_string(), "labels": labels })
}

fn cluster_object(c: &Cluster) -> Value {
    // cluster_json never carries credentials.
    let native = cluster_json(c);
    json!({
        "apiVersion": format!("{FEDRAFT_GROUP}/{FEDRAFT_VERSION}"),
        "kind": "Cluster",
        "metadata": fedraft_meta(&c.spec.name, c.resource_version, native["labels"].clone()),
        "spec": {
            "apiEndpoint": native["apiEndpoint"],
            "taints": native["taints"],
            "failureThresholdSeconds": native["failureThresholdSeconds"],
            "successThresholdSeconds": native["successThresholdSeconds"],
            "cordoned": native["cordoned"],
            "drained": native["drained"],
        },
        "status": native["status"],
    })
}

fn tenant_object(t: &Tenant) -> Value {
    let native = tenant_json(t);
    json!({
        "apiVersion": format!("{FEDRAFT_GROUP}/{FEDRAFT_VERSION}"),
        "kind": "Tenant",
        "metadata": fedraft_meta(&t.spec.name, t.resource_version, json!({})),
        "spec": {
            "namespaces": native["namespaces"],
            "quota": native["quota"],
            "sliceSize": native["sliceSize"],
            "members": native["members"],
        },
        "status": native["status"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_uids_are_kubernetes_shaped() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_764_633_600_123), "2025-12-02T00:00:00Z");
        assert_eq!(uid(255), "00000000-0000-4000-8000-0000000000ff");
    }
}
