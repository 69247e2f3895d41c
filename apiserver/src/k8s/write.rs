//! The write verbs: create (POST), replace (PUT), patch (JSON, merge, strategic merge, apply)
//! and delete, for templates, namespaces, policies and users (the `scale` subresource is
//! `scale`; a token is created by `users::issue`).
//!
//! Each computes the new object on a linearizable read with `fedraft_kubeapi` and proposes it
//! as ONE `PutResource` or `DeleteResource` entry whose `expected_version` is the read's
//! resourceVersion, with the principal as actor; core checks the version again at apply. A
//! write that carries no resourceVersion precondition of its own is retried on a version
//! conflict (a concurrent writer moved the object between read and apply), a bounded number of
//! times. `dryRun=All` answers with the computed object and proposes nothing.
//!
//! Field ownership: every write of a stored manifest (template, namespace, policy) records its
//! field manager in managedFields, kept beside the manifest by `managed`, so server-side apply
//! answers conflicts with 409 and removes what a manager stops applying, and a write that
//! changes nothing but timestamps changes nothing. Must not: write except by proposing.

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fedraft_core::command::Command;
use fedraft_core::door::ResourceKey;
use fedraft_kubeapi::{apply, meta, patch, PatchType};
use serde_json::{json, Value};

use super::managed;
use super::read::{load, load_one};
use super::render::{self, Loaded};
use super::{Call, KResult, Refusal, Store, Target};
use crate::auth::Access;
use crate::routes::common::{allow, submit};
use crate::routes::objects::as_actor;

/// Attempts of a write without its own precondition when another writer got in between.
pub(super) const CONFLICT_ATTEMPTS: usize = 5;

fn authorize_write(call: &Call, name: &str) -> KResult<()> {
    if matches!(call.target.store(), Store::User | Store::UserToken) {
        return super::users::authorize_write(call);
    }
    // Registering a member, or holding its credentials, is the native cluster routes' right.
    if matches!(call.target.store(), Store::Policy(tag) if tag.is_member()) {
        return Ok(allow(&call.app, &call.principal, Access::WriteClusters)?);
    }
    let def = &call.target.served.def;
    if call.target.store() == Store::Template && !def.namespaced {
        if let crate::auth::Role::Tenant(_) = call.principal.role {
            return Err(crate::ApiError::forbidden(format!(
                "{} may not write {} {name:?}: a cluster-scoped kind reaches every namespace of \
                 the members it is placed on, so only an administrator may write it",
                call.principal.name,
                def.qualified_plural()
            ))
            .into());
        }
    }
    let ns = match call.target.store() {
        Store::Namespace => name.to_string(),
        // Cluster-wide policies are an administrator's: no namespace grants them.
        Store::Policy(tag) if !tag.namespaced() => String::new(),
        _ => call.target.ns_str().to_string(),
    };
    Ok(allow(
        &call.app,
        &call.principal,
        Access::WriteNamespace(&ns),
    )?)
}

pub(super) async fn read_body(call: &Call, body: Body) -> KResult<Value> {
    let yaml = call
        .header(header::CONTENT_TYPE)
        .is_some_and(|ct| ct.contains("yaml"));
    read_body_as(call, body, yaml).await
}

/// The body must be an object of the path's type in the path's namespace; what it leaves out
/// (apiVersion, kind, namespace) is taken from the path.
pub(super) fn check_identity(t: &Target, obj: &mut Value) -> KResult<()> {
    if !obj.is_object() {
        return Err(Refusal::bad_request(
            "the body must be a JSON or YAML object",
        ));
    }
    let def = &t.served.def;
    let want_av = def.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != want_av => {
            return Err(Refusal::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )))
        }
        _ => obj["apiVersion"] = json!(want_av),
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some(k) if k != def.kind => {
            return Err(Refusal::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )))
        }
        _ => obj["kind"] = json!(def.kind),
    }
    if !def.namespaced && t.store() == Store::Template {
        // As kube-apiserver does, a namespace given to a cluster-scoped object is dropped.
        meta::metadata_mut(obj).remove("namespace");
    }
    if def.namespaced {
        let Some(ns) = t.ns.as_deref() else {
            return Err(Refusal::bad_request(
                "a namespaced resource must be written under /namespaces/{namespace}/",
            ));
        };
        match meta::meta_str(obj, "namespace").filter(|s| !s.is_empty()) {
            Some(n) if n != ns => {
                return Err(Refusal::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => {
                meta::metadata_mut(obj).insert("namespace".into(), json!(ns));
            }
        }
    }
    Ok(())
}

/// For a named write the body's name must be the URL's (an empty one takes the URL's).
fn check_name(t: &Target, obj: &mut Value) -> KResult<String> {
    let url = t.name.clone().unwrap_or_default();
    match meta::meta_str(obj, "name") {
        Some(n) if !n.is_empty() && n != url => Err(Refusal::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({url})"
        ))),
        _ => {
            meta::metadata_mut(obj).insert("name".into(), json!(url));
            Ok(url)
        }
    }
}

fn validate_name(t: &Target, name: &str) -> KResult<()> {
    let subject = kind_subject(t, name);
    if name.is_empty() {
        return Err(Refusal::invalid(
            subject,
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    }
    // Namespaces are DNS labels; everything else DNS subdomains.
    let label_only = t.store() == Store::Namespace && (name.contains('.') || name.len() > 63);
    if let Some(reason) = meta::invalid_name_reason(name) {
        return Err(Refusal::invalid(
            subject,
            "metadata.name",
            &format!("Invalid value: {name:?}: {reason}"),
        ));
    }
    if label_only {
        return Err(Refusal::invalid(
            subject,
            "metadata.name",
            &format!("Invalid value: {name:?}: a namespace name must be a DNS-1123 label"),
        ));
    }
    Ok(())
}

/// Invalid-object Statuses name the Kind, as kube-apiserver's do.
pub(super) fn kind_subject(t: &Target, name: &str) -> fedraft_kubeapi::Subject {
    fedraft_kubeapi::Subject {
        group: t.served.def.group.clone(),
        kind: t.served.def.kind.clone(),
        name: name.to_string(),
    }
}

/// The precondition a body names, if any.
pub(super) fn precondition(obj: &Value) -> Option<String> {
    meta::meta_str(obj, "resourceVersion")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The document the log stores: a namespace is kept as a template in its own namespace.
fn manifest(t: &Target, obj: &Value) -> String {
    let mut obj = obj.clone();
    managed::stow(&mut obj);
    if t.store() == Store::Namespace {
        let name = meta::name(&obj).to_string();
        meta::metadata_mut(&mut obj).insert("namespace".into(), json!(name));
    }
    obj.to_string()
}

/// Proposes the object, answering a version conflict as kube-apiserver does.
pub(super) async fn propose_put(call: &Call, obj: &Value, expected: u64) -> KResult<()> {
    let command = match call.target.store() {
        Store::Policy(tag) if tag.is_member() => {
            super::members::command(call, tag, obj, expected).await?
        }
        Store::User => super::users::put_command(call, obj, expected).await?,
        _ => Command::PutResource {
            manifest: manifest(&call.target, obj),
            expected_version: Some(expected),
        },
    };
    propose(call, meta::name(obj), command).await
}

async fn propose(call: &Call, name: &str, command: Command) -> KResult<()> {
    let actor = as_actor(&call.principal);
    match submit(&call.app, &actor, &call.headers, command).await {
        Ok(_) => Ok(()),
        Err(crate::ApiError::Conflict { .. }) => Err(Refusal::stale(
            call.target.subject(name),
            &call.target.plural(),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The object as this node holds it right after the write applied here.
pub(super) fn written(call: &Call, name: &str) -> KResult<Value> {
    let t = call.target.clone();
    let owned = name.to_string();
    call.app
        .node
        .read_stale(move |s| load(s, &t, &owned))
        .map(|l| l.render())
        .ok_or_else(|| Refusal::not_found(call.target.subject(name)))
}

/// What a dry run answers: the computed object with the server's metadata of `current`.
pub(super) fn preview(current: Option<&Loaded>, mut next: Value) -> Value {
    if let Some(cur) = current.map(Loaded::render) {
        let m = meta::metadata_mut(&mut next);
        for f in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
            if let Some(v) = meta::metadata(&cur).and_then(|c| c.get(f)) {
                m.insert(f.into(), v.clone());
            }
        }
        if let Some(s) = cur.get("status") {
            next["status"] = s.clone();
        }
    }
    meta::metadata_mut(&mut next).remove("managedFields");
    next
}

pub async fn create(call: &Call, body: Body) -> KResult<Response> {
    let t = &call.target;
    let mut obj = read_body(call, body).await?;
    check_identity(t, &mut obj)?;
    let mut name = meta::meta_str(&obj, "name").unwrap_or("").to_string();
    if name.is_empty() {
        if let Some(prefix) = meta::meta_str(&obj, "generateName").filter(|s| !s.is_empty()) {
            let suffix: String = (0..5)
                .map(|_| (b'a' + rand::random::<u8>() % 26) as char)
                .collect();
            name = format!("{prefix}{suffix}");
            meta::metadata_mut(&mut obj).insert("name".into(), json!(name));
        }
    }
    authorize_write(call, &name)?;
    validate_name(t, &name)?;
    if load_one(call, &name).await?.is_some() {
        return Err(Refusal::already_exists(t.subject(&name), &t.plural()));
    }
    meta::metadata_mut(&mut obj).remove("managedFields");
    managed::record_update(call, None, &mut obj);
    if call.params.dry_run() {
        return Ok((StatusCode::CREATED, Json(preview(None, obj))).into_response());
    }
    propose_put(call, &obj, 0).await?;
    Ok((StatusCode::CREATED, Json(written(call, &name)?)).into_response())
}

/// A PUT body checked against the URL and the caller's rights: the object and its name.
pub(super) async fn replacement(call: &Call, body: Body) -> KResult<(Value, String)> {
    let t = &call.target;
    let mut obj = read_body(call, body).await?;
    check_identity(t, &mut obj)?;
    let name = check_name(t, &mut obj)?;
    authorize_write(call, &name)?;
    Ok((obj, name))
}

pub async fn replace(call: &Call, body: Body) -> KResult<Response> {
    let t = &call.target;
    let (obj, name) = replacement(call, body).await?;
    let pre = precondition(&obj);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let cur = load_one(call, &name)
            .await?
            .ok_or_else(|| Refusal::not_found(t.subject(&name)))?;
        let rv = cur.resource_version();
        if pre.as_ref().is_some_and(|p| *p != rv.to_string()) {
            return Err(Refusal::stale(t.subject(&name), &t.plural()));
        }
        // A body without managedFields keeps the stored ones, as kube-apiserver does.
        let current = cur.render();
        let mut obj = obj.clone();
        if meta::metadata(&obj).is_some_and(|m| !m.contains_key("managedFields")) {
            if let Some(m) = meta::metadata(&current).and_then(|m| m.get("managedFields")) {
                meta::metadata_mut(&mut obj).insert("managedFields".into(), m.clone());
            }
        }
        managed::record_update(call, Some(&current), &mut obj);
        if call.params.dry_run() {
            return Ok(Json(preview(Some(&cur), obj)).into_response());
        }
        match propose_put(call, &obj, rv).await {
            Err(e) if e.is_conflict() && pre.is_none() && attempts < CONFLICT_ATTEMPTS => continue,
            Err(e) => return Err(e),
            Ok(()) => return Ok(Json(written(call, &name)?).into_response()),
        }
    }
}

/// A PATCH request checked against the caller's rights and the patch rules: the object's name,
/// the patch type and the body.
pub(super) async fn patch_request(call: &Call, body: Body) -> KResult<(String, PatchType, Value)> {
    let t = &call.target;
    let name = t.name.clone().unwrap_or_default();
    authorize_write(call, &name)?;
    let ct = call.header(header::CONTENT_TYPE).unwrap_or("").to_string();
    let kind = PatchType::from_content_type(&ct).ok_or_else(|| {
        Refusal::from(fedraft_kubeapi::ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, \
             application/strategic-merge-patch+json, application/apply-patch+yaml ({ct})"
        )))
    })?;
    let force = call.params.flag("force");
    // Custom resources have no patch strategies to merge by, as in Kubernetes.
    if kind == PatchType::StrategicMerge && t.served.columns.is_some() {
        return Err(Refusal::from(fedraft_kubeapi::ApiError::UnsupportedMediaType(
            "strategic merge patch is not supported for custom resources; use a merge or JSON patch"
                .to_string(),
        )));
    }
    if kind == PatchType::Apply && call.params.get("fieldManager").is_none() {
        return Err(Refusal::bad_request(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    if force && kind != PatchType::Apply {
        return Err(Refusal::bad_request(
            "force may only be set for apply patch",
        ));
    }
    // Apply bodies are YAML; JSON is YAML too.
    let body = read_body_as(call, body, kind == PatchType::Apply).await?;
    Ok((name, kind, body))
}

pub async fn patch(call: &Call, body: Body) -> KResult<Response> {
    let t = &call.target;
    let (name, kind, body) = patch_request(call, body).await?;
    let force = call.params.flag("force");
    let mut applied = body.clone();
    if kind == PatchType::Apply {
        check_identity(t, &mut applied)?;
        check_name(t, &mut applied)?;
    }
    let pre = if kind == PatchType::Json {
        None
    } else {
        precondition(&body)
    };
    let mgr = managed::manager(call);
    let def = &t.served.def;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let cur = load_one(call, &name).await?;
        let (next, expected) = match &cur {
            None if kind == PatchType::Apply => {
                validate_name(t, &name)?;
                let now = managed::now();
                (apply::apply(def, None, &applied, &mgr, force, &now)?, 0)
            }
            None => return Err(Refusal::not_found(t.subject(&name))),
            Some(cur) => {
                let rv = cur.resource_version();
                if pre.as_ref().is_some_and(|p| *p != rv.to_string()) {
                    return Err(Refusal::stale(t.subject(&name), &t.plural()));
                }
                let current = cur.render();
                let next = if kind == PatchType::Apply {
                    let now = managed::now();
                    let mut next = apply::apply(def, Some(&current), &applied, &mgr, force, &now)?;
                    managed::keep_times(&current, &mut next);
                    next
                } else {
                    let mut next = patch::patch(def, kind, &current, &body)?;
                    managed::record_update(call, Some(&current), &mut next);
                    next
                };
                (next, rv)
            }
        };
        let mut next = next;
        check_identity(t, &mut next)?;
        // Apply leaves identity to the server; a patch must not change it.
        if meta::name(&next).is_empty() {
            meta::metadata_mut(&mut next).insert("name".into(), json!(name));
        }
        if meta::name(&next) != name {
            return Err(Refusal::invalid(
                kind_subject(t, &name),
                "metadata.name",
                "field is immutable",
            ));
        }
        // A namespace in use but never written has version 0: the write creates its template,
        // yet the namespace was there, so the answer is 200 as for any existing object.
        let created = cur.is_none();
        if call.params.dry_run() {
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            return Ok((code, Json(preview(cur.as_ref(), next))).into_response());
        }
        match propose_put(call, &next, expected).await {
            Err(e) if e.is_conflict() && pre.is_none() && attempts < CONFLICT_ATTEMPTS => continue,
            Err(e) => return Err(e),
            Ok(()) => {
                let code = if created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                return Ok((code, Json(written(call, &name)?)).into_response());
            }
        }
    }
}

async fn read_body_as(call: &Call, body: Body, yaml: bool) -> KResult<Value> {
    let bytes = axum::body::to_bytes(body, call.app.cfg.body_limit_bytes)
        .await
        .map_err(|_| {
            Refusal::from(crate::ApiError::PayloadTooLarge {
                limit_bytes: call.app.cfg.body_limit_bytes,
            })
        })?;
    if bytes.is_empty() {
        return Err(Refusal::bad_request("the request body is empty"));
    }
    // kubectl's typed clients (create namespace, create configmap) send protobuf.
    let ct = call.header(header::CONTENT_TYPE).unwrap_or("");
    if ct.contains("protobuf") {
        if let Some(v) = super::protobuf::decode(&bytes) {
            return Ok(v);
        }
    }
    if ct.contains("protobuf") || ct.contains("cbor") {
        return Err(fedraft_kubeapi::ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml ({ct})"
        ))
        .into());
    }
    if yaml {
        serde_yaml::from_slice(&bytes)
            .map_err(|e| Refusal::bad_request(format!("error decoding YAML: {e}")))
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|e| Refusal::bad_request(format!("error decoding JSON: {e}")))
    }
}

pub async fn delete(call: &Call, body: Body) -> KResult<Response> {
    let t = &call.target;
    let name = t.name.clone().unwrap_or_default();
    authorize_write(call, &name)?;
    let bytes = axum::body::to_bytes(body, call.app.cfg.body_limit_bytes)
        .await
        .unwrap_or_default();
    let options: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let pre = options
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let cur = load_one(call, &name)
            .await?
            .ok_or_else(|| Refusal::not_found(t.subject(&name)))?;
        let rv = cur.resource_version();
        if pre.as_ref().is_some_and(|p| *p != rv.to_string()) {
            return Err(Refusal::stale(t.subject(&name), &t.plural()));
        }
        let key = match (&cur, t.store()) {
            (Loaded::User { .. } | Loaded::Token { .. }, _) => None,
            (Loaded::Namespace { tpl: None, .. }, _) => {
                return Err(Refusal::from(crate::ApiError::Conflict {
                    message: format!(
                        "namespace {name} exists because objects or a tenant use it; delete those first"
                    ),
                    expected: None,
                    found: None,
                }))
            }
            (_, Store::Namespace) => Some(render::namespace_key(&name)),
            (_, Store::Policy(tag)) => Some(ResourceKey {
                group: tag.group().to_string(),
                kind: render::policy_kind(tag).to_string(),
                namespace: t.ns_str().to_string(),
                name: name.clone(),
            }),
            _ => Some(ResourceKey {
                group: t.served.def.group.clone(),
                kind: t.served.def.kind.clone(),
                namespace: t.ns_str().to_string(),
                name: name.clone(),
            }),
        };
        let gone = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": t.served.def.group,
                "kind": t.served.def.plural,
                "uid": meta::meta_str(&cur.render(), "uid"),
            },
        });
        if call.params.dry_run() {
            return Ok(Json(gone).into_response());
        }
        let command = match key {
            Some(key) => Command::DeleteResource {
                key,
                expected_version: Some(rv),
            },
            None => super::users::delete_command(&cur)
                .ok_or_else(|| Refusal::method_not_allowed("DELETE"))?,
        };
        match propose(call, &name, command).await {
            Err(e) if e.is_conflict() && pre.is_none() && attempts < CONFLICT_ATTEMPTS => continue,
            Err(e) => return Err(e),
            Ok(()) => return Ok(Json(gone).into_response()),
        }
    }
}
