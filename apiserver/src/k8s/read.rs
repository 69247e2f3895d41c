//! The read verbs: get one object and list (one namespace or all), with label selectors,
//! `metadata.name`/`metadata.namespace` field selectors, `limit`/`continue` paging and the
//! answer forms kubectl asks for (objects, `Table`, partial metadata).
//!
//! Reads are linearizable. A list walks the ordered tables from its continue key and takes at
//! most one page of handles under the state's lock (records cloned, objects shared): never a
//! copy of the whole state, and rendering happens after the lock is released. A page is cut
//! from current state, so a continue token carries the key of the last item served, not a
//! snapshot. Must not write.

use std::collections::BTreeSet;
use std::ops::Bound;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fedraft_core::door::{PolicyRef, ResourceKey};
use fedraft_core::state::State;
use fedraft_kubeapi::negotiate::{self, ObjectForm};
use fedraft_kubeapi::paging::ContinueToken;
use fedraft_kubeapi::selector::{FieldSelector, LabelSelector};
use fedraft_kubeapi::table::{self, IncludeObject};
use serde_json::{json, Map, Value};

use super::render::{self, Loaded};
use super::{Call, KResult, Refusal, Store, Target};
use crate::auth::{Access, Principal, Role};
use crate::routes::common::{allow, member_scope, read, tenant_for_scope, tenant_namespaces};

/// Authorises reading `target` in `ns` (None: every namespace, or a cluster-scoped type).
pub fn authorize_read(call: &Call, ns: Option<&str>) -> KResult<()> {
    let (app, p) = (&call.app, &call.principal);
    let access = match (call.target.store(), ns) {
        (Store::User | Store::UserToken, _) => return super::users::authorize_read(call),
        (Store::Cluster, _) => Access::ReadClusters,
        (Store::Tenant, _) => match call.target.name.as_deref() {
            Some(name) => Access::ReadTenant(name),
            None => Access::ReadAllObjects,
        },
        (Store::Namespace, _) => match call.target.name.as_deref() {
            Some(name) => Access::ReadNamespace(name),
            None => Access::ReadAllObjects,
        },
        (Store::Policy(tag), _) if !tag.namespaced() || tag.is_member() => Access::ReadClusters,
        (_, Some(ns)) => Access::ReadNamespace(ns),
        (_, None) => Access::ReadAllObjects,
    };
    Ok(allow(app, p, access)?)
}

/// The object `name` of the call's type in its namespace, read linearizably.
pub async fn load_one(call: &Call, name: &str) -> KResult<Option<Loaded>> {
    let t = call.target.clone();
    let name = name.to_string();
    let p = call.principal.clone();
    Ok(read(&call.app, false, move |s| {
        load(s, &t, &name).map(|l| as_seen(s, &p, l))
    })
    .await?)
}

pub fn load(s: &State, t: &Target, name: &str) -> Option<Loaded> {
    let def = &t.served.def;
    match t.store() {
        Store::Template => render::load_template(
            s,
            &ResourceKey {
                group: def.group.clone(),
                kind: def.kind.clone(),
                namespace: t.ns_str().to_string(),
                name: name.to_string(),
            },
        ),
        Store::Namespace => render::load_namespace(s, name),
        Store::Policy(kind) => render::load_policy(
            s,
            &PolicyRef {
                kind,
                namespace: t.ns_str().to_string(),
                name: name.to_string(),
            },
        ),
        Store::Cluster => s
            .cluster(name)
            .cloned()
            .map(|c| Loaded::Cluster(Box::new(c))),
        Store::Tenant => s.tenant(name).cloned().map(|t| Loaded::Tenant(Box::new(t))),
        Store::User => super::users::load_user(s, name),
        Store::UserToken => super::users::load_token(s, name),
        Store::Internal(_) => None,
    }
}

/// `l` as `p` may see it: a tenant member whose role is scoped to some of its tenant's
/// namespaces sees the tenant with those only (`common::tenant_for_scope`).
pub fn as_seen(s: &State, p: &Principal, l: Loaded) -> Loaded {
    match l {
        Loaded::Tenant(t) => match member_scope(s, p) {
            Some(ns) => Loaded::Tenant(Box::new(tenant_for_scope(s, &t, &ns, &p.name))),
            None => Loaded::Tenant(t),
        },
        other => other,
    }
}

pub async fn get(call: &Call) -> KResult<Response> {
    let t = &call.target;
    let name = t.name.clone().unwrap_or_default();
    authorize_read(call, t.ns.as_deref())?;
    let loaded = load_one(call, &name)
        .await?
        .ok_or_else(|| Refusal::not_found(t.subject(&name)))?;
    Ok(reply(call, StatusCode::OK, loaded.render(), false))
}

/// The selectors of a list or watch; field selectors on name and namespace only, as
/// kube-apiserver serves them for most kinds.
pub fn selectors(call: &Call) -> KResult<(LabelSelector, FieldSelector)> {
    let p = &call.params;
    let fields = p.get("fieldSelector").unwrap_or("");
    for part in fields.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let label = part.split(['=', '!']).next().unwrap_or("").trim();
        if !matches!(label, "metadata.name" | "metadata.namespace") {
            return Err(Refusal::bad_request(format!(
                "field label not supported: {label}"
            )));
        }
    }
    Ok((
        LabelSelector::parse(p.get("labelSelector").unwrap_or(""))?,
        FieldSelector::parse(fields)?,
    ))
}

/// The part of an object selectors look at, without rendering it.
pub fn stub(l: &Loaded) -> Value {
    let (ns, name) = l.sort_key();
    let labels: Map<String, Value> = match l {
        Loaded::Template { rec, .. } => rec
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect(),
        Loaded::Cluster(c) => c
            .spec
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect(),
        other => fedraft_kubeapi::meta::labels(&other.render()),
    };
    json!({ "metadata": { "namespace": ns, "name": name, "labels": labels } })
}

/// What a list walks: the call's type in `ns` (None: all), after `after`.
pub fn candidates<'s>(
    s: &'s State,
    t: &Target,
    ns: Option<&str>,
    after: Option<&ContinueToken>,
) -> Box<dyn Iterator<Item = Loaded> + 's> {
    let def = &t.served.def;
    let (after_ns, after_name) = match after {
        Some(a) => (a.namespace.clone(), a.name.clone()),
        None => (ns.unwrap_or("").to_string(), String::new()),
    };
    let ns_owned = ns.map(str::to_string);
    let continuing = after.is_some();
    match t.store() {
        Store::Template => {
            let (group, kind) = (def.group.clone(), def.kind.clone());
            let from = ResourceKey {
                group: group.clone(),
                kind: kind.clone(),
                namespace: after_ns,
                name: after_name,
            };
            let lower = if continuing {
                Bound::Excluded(from)
            } else {
                Bound::Included(from)
            };
            Box::new(
                s.door()
                    .templates
                    .range((lower, Bound::Unbounded))
                    .take_while(move |(k, _)| {
                        k.group == group
                            && k.kind == kind
                            && ns_owned.as_deref().is_none_or(|n| k.namespace == n)
                    })
                    .filter_map(move |(k, _)| render::load_template(s, k)),
            )
        }
        Store::Policy(tag) => {
            let from = PolicyRef {
                kind: tag,
                namespace: after_ns,
                name: after_name,
            };
            let lower = if continuing {
                Bound::Excluded(from)
            } else {
                Bound::Included(from)
            };
            Box::new(
                s.door()
                    .policies
                    .range((lower, Bound::Unbounded))
                    .take_while(move |(k, _)| {
                        k.kind == tag && ns_owned.as_deref().is_none_or(|n| k.namespace == n)
                    })
                    .filter_map(move |(k, _)| render::load_policy(s, k)),
            )
        }
        Store::Namespace => {
            // Namespaces have no table of their own: the ones created through the door, the
            // tenants' and those objects live in. Counting the last costs a pass over the
            // objects' keys (no copies); namespaces are few, so the page is small.
            let mut names: BTreeSet<&str> = BTreeSet::new();
            for t in s.tenants() {
                names.extend(t.spec.namespaces.iter().map(String::as_str));
            }
            for o in s.objects_shared() {
                names.insert(o.namespace.as_str());
            }
            names.remove(fedraft_core::door::CLUSTER_SCOPE_NAMESPACE);
            let names: Vec<String> = names
                .into_iter()
                .filter(|n| !continuing || *n > after_name.as_str())
                .map(str::to_string)
                .collect();
            Box::new(
                names
                    .into_iter()
                    .filter_map(move |n| render::load_namespace(s, &n)),
            )
        }
        Store::Cluster => Box::new(
            s.clusters()
                .filter(move |c| !continuing || c.spec.name > after_name)
                .map(|c| Loaded::Cluster(Box::new(c.clone()))),
        ),
        Store::Tenant => Box::new(
            s.tenants()
                .filter(move |t| !continuing || t.spec.name > after_name)
                .map(|t| Loaded::Tenant(Box::new(t.clone()))),
        ),
        Store::User => Box::new(super::users::users_after(
            s,
            continuing.then_some(after_name),
        )),
        Store::UserToken => Box::new(super::users::tokens_after(
            s,
            continuing.then_some(after_name),
        )),
        Store::Internal(_) => Box::new(std::iter::empty()),
    }
}

pub async fn list(call: &Call) -> KResult<Response> {
    let t = call.target.clone();
    authorize_read(call, t.ns.as_deref())?;
    let (labels, fields) = selectors(call)?;
    let p = &call.params;
    let after = p.get("continue").map(ContinueToken::parse).transpose()?;
    let limit = fedraft_kubeapi::paging::parse_limit(p.get("limit"))?;
    // A tenant member lists its tenant's namespaces only.
    let only = match &call.principal.role {
        Role::Tenant(_)
            if matches!(
                t.store(),
                Store::Template | Store::Policy(_) | Store::Namespace
            ) =>
        {
            Some(tenant_namespaces(&call.app, &call.principal))
        }
        Role::Tenant(name) if t.store() == Store::Tenant => Some(vec![name.clone()]),
        _ => None,
    };
    let viewer = call.principal.clone();
    let (at, page, more) = read(&call.app, false, move |s| {
        let mut page = Vec::new();
        let mut more = false;
        let visible = |l: &Loaded| {
            only.as_ref().is_none_or(|owned| {
                let (ns, name) = l.sort_key();
                let key = if ns.is_empty() { name } else { ns };
                owned.iter().any(|o| o == key)
            })
        };
        for l in candidates(s, &t, t.ns.as_deref(), after.as_ref()) {
            if !visible(&l) {
                continue;
            }
            let st = stub(&l);
            if !(labels.matches(&st) && fields.matches(&st)) {
                continue;
            }
            if limit.is_some_and(|n| page.len() >= n) {
                more = true;
                break;
            }
            page.push(as_seen(s, &viewer, l));
        }
        (s.applied_index(), page, more)
    })
    .await?;
    let items: Vec<Value> = page.iter().map(Loaded::render).collect();
    let mut metadata = json!({ "resourceVersion": at.to_string() });
    if more {
        if let Some(last) = page.last() {
            let (ns, name) = last.sort_key();
            let tok = ContinueToken {
                resource_version: at,
                namespace: ns.to_string(),
                name: name.to_string(),
            };
            metadata["continue"] = json!(tok.encode());
        }
    }
    let def = &call.target.served.def;
    let doc = json!({
        "kind": format!("{}List", def.kind),
        "apiVersion": def.api_version(),
        "metadata": metadata,
        "items": items,
    });
    Ok(reply(call, StatusCode::OK, doc, true))
}

/// Columns of fedraft's own kinds, the policies and custom resources (a CRD's
/// `additionalPrinterColumns` form; a custom resource's are its CRD version's).
fn printer_columns(t: &Target) -> Option<Vec<Value>> {
    let col =
        |name: &str, ty: &str, path: &str| json!({ "name": name, "type": ty, "jsonPath": path });
    let age = col("Age", "date", ".metadata.creationTimestamp");
    if let Some(cols) = &t.served.columns {
        return Some(cols.clone());
    }
    match t.store() {
        Store::Cluster => Some(vec![
            col("Health", "string", ".status.health"),
            col("Endpoint", "string", ".spec.apiEndpoint"),
            col("Cordoned", "boolean", ".spec.cordoned"),
        ]),
        Store::Tenant => Some(vec![col("Namespaces", "string", ".spec.namespaces[*]")]),
        Store::Policy(_) | Store::Internal(_) => Some(vec![age]),
        Store::User | Store::UserToken => Some(super::users::columns(t.store())),
        Store::Template | Store::Namespace => None,
    }
}

/// The Table of `objects` of the target's type, with kube-apiserver's columns for built-in
/// kinds and fedraft's for its own.
pub fn table_of(t: &Target, objects: &[Value], include: IncludeObject) -> Value {
    let now = jiff::Timestamp::now().as_second();
    match printer_columns(t) {
        Some(cols) => table::custom_table(&cols, objects, now, include),
        None => table::table(&t.served.def, objects, now, include),
    }
}

/// A get or list answered in the form `Accept` asks for.
pub fn reply(call: &Call, code: StatusCode, v: Value, list: bool) -> Response {
    let accept = call.header(header::ACCEPT);
    let form = negotiate::object_form(accept).unwrap_or(ObjectForm::Object);
    let shaped = table::read_body(
        form,
        &v,
        list,
        call.params.get("includeObject"),
        |objects, include| table_of(&call.target, objects, include),
    );
    let body = match shaped {
        Ok(Some(body)) => body,
        Ok(None) => return (code, Json(v)).into_response(),
        Err(e) => return Refusal::from(e).into_response(),
    };
    let mut resp = (code, Json(body)).into_response();
    if let Ok(ct) = HeaderValue::from_str(&form.content_type(list)) {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}
