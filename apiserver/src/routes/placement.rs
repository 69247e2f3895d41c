//! Read views of placement the console needs and no resource route answers: every placement
//! policy with the objects it actually selects and where each was placed (`GET /v1/policies`),
//! and the replicas placed on each cluster summed over every object (`GET
//! /v1/placement/clusters`).
//!
//! Both are computed from the applied state on each request: the door's policy table, its
//! template records (`bound_to`, the propagation policy core chose for each template) and the
//! federated objects' status. There is no second store and no cache that could drift from the
//! log. A Karmada propagation policy's objects are the templates core bound to it; an override
//! policy's are the templates its `resourceSelectors` select (`karmada::best_match`, the rule core
//! applies); a KubeFed FederatedX's is the object of its target, an RSP's the object of the
//! FederatedX it shapes, and a FederatedNamespace's every FederatedX in its namespace.
//!
//! Operators and admins only, like the cluster list: a placement names clusters. Member-cluster
//! documents and their Secrets are never listed. Must not: change state, or hold the state's
//! lock longer than building one page (the policies of a page, at most [`BOUND_SHOWN`] objects
//! each).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::{Extension, Json};
use fedraft_core::command::LOG_ENTRY_VERSION;
use fedraft_core::door::{PolicyKindTag, PolicyRecord, PolicyRef, ResourceKey};
use fedraft_core::karmada::{self, best_match, TemplateIdentity};
use fedraft_core::kubefed::{self, FederatedKind};
use fedraft_core::state::State as FedState;
use serde_json::{json, Value};

use super::common::{allow, read, ReadParams, Q};
use super::paging::{with_metadata, ListParams};
use crate::auth::{Access, Principal};
use crate::error::ApiError;
use crate::App;

/// Objects listed per policy; `boundCount` says how many there are in all. A cluster-wide
/// policy may select every Deployment of a fleet: its page must stay small.
pub const BOUND_SHOWN: usize = 50;

/// Policies per page when the request names no `limit`.
const DEFAULT_PAGE: usize = 100;

/// `GET /v1/policies?q=&limit=&continue=`: the door's placement documents in the order of
/// `kind/namespace/name`, each with what it selects and where that was placed.
pub async fn policies(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ListParams>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadClusters)?;
    let mut page = q.page()?;
    page.limit = Some(page.limit.unwrap_or(DEFAULT_PAGE));
    let doc = read(&app, q.stale, move |s| {
        let mut keyed: Vec<(String, &PolicyRef, &PolicyRecord)> = s
            .door()
            .policies
            .iter()
            .filter(|(r, _)| !r.kind.is_member())
            .map(|(r, rec)| (sort_key(r), r, rec))
            .filter(|(k, _, _)| page.after_token(k))
            .filter(|(k, _, _)| page.matches(&[k.as_str()]))
            .collect();
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let (keyed, meta) = page.cut(keyed, |(k, _, _)| k.clone());
        let items: Vec<Value> = keyed
            .iter()
            .map(|(_, r, rec)| policy_json(s, r, rec))
            .collect();
        with_metadata(
            json!({"kind": "PolicyList", "resourceVersion": s.applied_index(), "items": items}),
            meta,
        )
    })
    .await?;
    Ok(Json(doc))
}

/// `GET /v1/placement/clusters`: cluster name -> replicas placed there, over every object.
pub async fn by_cluster(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadClusters)?;
    let doc = read(&app, q.stale, |s| {
        let mut placed: BTreeMap<&str, u64> =
            s.clusters().map(|c| (c.spec.name.as_str(), 0)).collect();
        for o in s.objects() {
            for c in &o.status.clusters {
                *placed.entry(&*c.cluster).or_default() += u64::from(c.replicas);
            }
        }
        json!({"resourceVersion": s.applied_index(), "replicas": placed})
    })
    .await?;
    Ok(Json(doc))
}

/// The key a policy is paged by: its kind's name, namespace and name.
fn sort_key(r: &PolicyRef) -> String {
    format!("{}/{}/{}", r.kind.api_version_kind().1, r.namespace, r.name)
}

fn policy_json(s: &FedState, r: &PolicyRef, rec: &PolicyRecord) -> Value {
    let (api_version, kind) = r.kind.api_version_kind();
    let manifest: Value = serde_json::from_str(&rec.manifest).unwrap_or(Value::Null);
    let (role, targets) = selected(s, r, &manifest);
    let bound: Vec<Value> = targets
        .iter()
        .take(BOUND_SHOWN)
        .map(|(ns, name)| bound_json(s, ns, name))
        .collect();
    json!({
        "kind": kind,
        "apiVersion": api_version,
        "namespace": (!r.namespace.is_empty()).then_some(&r.namespace),
        "name": r.name,
        "resourceVersion": rec.resource_version,
        "spec": manifest.get("spec").cloned().unwrap_or(Value::Null),
        "role": role,
        "boundCount": targets.len(),
        "bound": bound,
    })
}

/// One selected object and where it is placed now.
fn bound_json(s: &FedState, ns: &str, name: &str) -> Value {
    match s.object(ns, name) {
        Some(o) => {
            let placement: BTreeMap<&str, u32> = o
                .status
                .clusters
                .iter()
                .map(|c| (&*c.cluster, c.replicas))
                .collect();
            json!({
                "namespace": ns,
                "name": name,
                "exists": true,
                "placement": placement,
                "readyReplicas": o.status.ready_replicas,
                "decision": o.status.decision_summary,
                "decidedIndex": o.status.decided_index,
            })
        }
        None => json!({"namespace": ns, "name": name, "exists": false}),
    }
}

/// What the policy does to the objects it concerns, and those objects as (namespace, object
/// name), sorted.
fn selected(
    s: &FedState,
    r: &PolicyRef,
    manifest: &Value,
) -> (&'static str, Vec<(String, String)>) {
    let templates = &s.door().templates;
    let object_of = |k: &ResourceKey| (k.namespace.clone(), k.object_name());
    let mut out: Vec<(String, String)> = match r.kind {
        PolicyKindTag::Propagation | PolicyKindTag::ClusterPropagation => templates
            .iter()
            .filter(|(_, t)| t.bound_to.as_ref() == Some(r))
            .map(|(k, _)| object_of(k))
            .collect(),
        PolicyKindTag::Override | PolicyKindTag::ClusterOverride => {
            let Some(kind) = r.kind.karmada() else {
                return ("overrides", Vec::new());
            };
            // Accepted once, so it parses under the current version (see `karmada::parse_spec`).
            let Ok(spec) = karmada::parse_spec(kind, manifest, LOG_ENTRY_VERSION) else {
                return ("overrides", Vec::new());
            };
            let ns = (!r.namespace.is_empty()).then_some(r.namespace.as_str());
            templates
                .iter()
                .filter(|(k, t)| {
                    let ident = TemplateIdentity {
                        api_version: &t.api_version,
                        kind: &k.kind,
                        namespace: &k.namespace,
                        name: &k.name,
                        labels: &t.labels,
                    };
                    best_match(spec.resource_selectors(), &ident, ns).is_some()
                })
                .map(|(k, _)| object_of(k))
                .collect()
        }
        PolicyKindTag::Federated(FederatedKind::Namespace) => s
            .door()
            .policies
            .keys()
            .filter_map(|p| match p.kind {
                PolicyKindTag::Federated(k) if p.namespace == r.name && k.namespaced_target() => {
                    Some(object_of(&target_key(k, &p.namespace, &p.name)))
                }
                _ => None,
            })
            .collect(),
        PolicyKindTag::Federated(k) if k.namespaced_target() => {
            vec![object_of(&target_key(k, &r.namespace, &r.name))]
        }
        PolicyKindTag::ReplicaSchedulingPreference => manifest
            .pointer("/spec/targetKind")
            .and_then(Value::as_str)
            .and_then(|t| {
                FederatedKind::of(
                    &format!("{}/{}", kubefed::TYPES_GROUP, kubefed::TYPES_VERSION),
                    t,
                )
            })
            .map(|k| object_of(&target_key(k, &r.namespace, &r.name)))
            .into_iter()
            .collect(),
        _ => Vec::new(),
    };
    out.sort();
    out.dedup();
    let role = match r.kind {
        PolicyKindTag::Propagation | PolicyKindTag::ClusterPropagation => "places",
        PolicyKindTag::Override | PolicyKindTag::ClusterOverride => "overrides",
        PolicyKindTag::ReplicaSchedulingPreference => "divides",
        PolicyKindTag::Federated(FederatedKind::Namespace) => "bounds",
        _ => "federates",
    };
    (role, out)
}

/// The resource template a KubeFed FederatedX of `kind` named `name` in `namespace` federates:
/// the same key core derives the federated object from (`state/handlers/kubefed.rs`).
fn target_key(kind: FederatedKind, namespace: &str, name: &str) -> ResourceKey {
    let (api_version, target) = kind.target();
    ResourceKey {
        group: api_version
            .split_once('/')
            .map_or(String::new(), |(g, _)| g.to_string()),
        kind: target.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_federated_deployment_federates_the_object_a_plain_deployment_would_be() {
        let k = target_key(FederatedKind::Deployment, "shop", "web");
        assert_eq!(k.object_name(), "deployment.apps:web");
        let k = target_key(FederatedKind::ConfigMap, "shop", "cfg");
        assert_eq!(k.object_name(), "configmap:cfg");
    }

    #[test]
    fn policies_page_by_kind_then_namespace_then_name() {
        let r = |kind, ns: &str, name: &str| PolicyRef {
            kind,
            namespace: ns.into(),
            name: name.into(),
        };
        let mut keys = [
            sort_key(&r(PolicyKindTag::Propagation, "ops", "b")),
            sort_key(&r(PolicyKindTag::ClusterPropagation, "", "z")),
            sort_key(&r(PolicyKindTag::Propagation, "ops", "a")),
        ];
        keys.sort();
        assert_eq!(
            keys,
            [
                "ClusterPropagationPolicy//z",
                "PropagationPolicy/ops/a",
                "PropagationPolicy/ops/b"
            ]
        );
    }
}
