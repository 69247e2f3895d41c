//! The write verbs: create, update (PUT), patch (apply, merge, strategic merge, JSON patch),
//! delete and deletecollection, for the main resource and the `status` subresource.
//!
//! Each one checks the request (400), then computes the new object inside one
//! [`Store::write`](crate::store::Store::write) call so preconditions (resourceVersion, SSA
//! ownership) are judged against the state the write replaces. Main-resource writes keep the
//! stored status of kinds with a status subresource; status writes change only status.
//! managedFields are recorded here (`fields::record_update`) or by `apply`.

use axum::http::{header, StatusCode};
use serde_json::{json, Value};

use crate::call::{Call, Reply, Target};
use crate::status::ApiError;
use crate::store::{Change, Outcome};
use crate::{apply, controller, fields, meta, patch, validate};

fn content_type(call: &Call) -> &str {
    call.headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
}

fn parse_body(call: &Call) -> Result<Value, ApiError> {
    if call.body.is_empty() {
        return Err(ApiError::BadRequest("the request body is empty".into()));
    }
    let v: Value = if content_type(call).contains("yaml") {
        // Server-side apply bodies are YAML by type and JSON in practice (kube-rs and kubectl
        // send JSON, which YAML contains). The JSON parser reads them several times faster;
        // anything it refuses is read again as YAML, so only the error text could differ.
        match serde_json::from_slice(&call.body) {
            Ok(v) => v,
            Err(_) => serde_yaml::from_slice(&call.body)
                .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?,
        }
    } else {
        serde_json::from_slice(&call.body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding JSON: {e}")))?
    };
    Ok(v)
}

/// The field manager of a write (`fields::manager_name`).
fn manager(call: &Call) -> String {
    let ua = call
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    fields::manager_name(call.params.get("fieldManager"), ua)
}

/// The body must be an object of this resource's apiVersion and kind (when it names them),
/// in the path's namespace.
fn check_identity(t: &Target, obj: &Value, require_type: bool) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::BadRequest(
            "the body must be a JSON or YAML object".into(),
        ));
    }
    let want_av = t.res.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(av) if av != want_av => {
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )))
        }
        None if require_type => return Err(ApiError::BadRequest("apiVersion must be set".into())),
        _ => {}
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some(k) if k != t.res.kind => {
            return Err(ApiError::BadRequest(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                t.res.kind
            )))
        }
        None if require_type => return Err(ApiError::BadRequest("kind must be set".into())),
        _ => {}
    }
    if let Some(ns) = meta::meta_str(obj, "namespace").filter(|s| !s.is_empty()) {
        if t.res.namespaced && Some(ns) != t.ns.as_deref() {
            return Err(ApiError::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request"
                    .into(),
            ));
        }
    }
    if t.res.namespaced && t.ns.is_none() {
        return Err(ApiError::BadRequest(
            "a namespaced resource must be written under /namespaces/{namespace}/".into(),
        ));
    }
    Ok(())
}

/// For a named write, the body's name must be the URL's (an empty one takes the URL's).
fn check_name(t: &Target, obj: &mut Value) -> Result<String, ApiError> {
    let url_name = t.name.clone().unwrap_or_default();
    match meta::meta_str(obj, "name") {
        Some(n) if !n.is_empty() && n != url_name => Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({url_name})"
        ))),
        _ => {
            meta::metadata_mut(obj).insert("name".into(), json!(url_name));
            Ok(url_name)
        }
    }
}

fn stale(t: &Target, name: &str) -> ApiError {
    ApiError::Conflict {
        subject: t.subject(name),
        message: format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            if t.res.group.is_empty() { t.res.plural.to_string() } else { format!("{}.{}", t.res.plural, t.res.group) }
        ),
        causes: Box::default(),
    }
}

/// A resourceVersion in the body is a precondition on the stored one.
fn check_precondition(t: &Target, body: &Value, cur: &Value) -> Result<(), ApiError> {
    match meta::meta_str(body, "resourceVersion").filter(|s| !s.is_empty()) {
        Some(rv) if Some(rv) != meta::meta_str(cur, "resourceVersion") => {
            Err(stale(t, meta::name(cur)))
        }
        _ => Ok(()),
    }
}

/// Combines a proposed object with the stored one: a main-resource write keeps the stored
/// status (for kinds with a status subresource); a status write keeps everything but status.
fn scope(t: &Target, cur: &Value, mut proposed: Value) -> Value {
    if t.sub.is_some() {
        let mut out = cur.clone();
        match proposed.get("status") {
            Some(s) => out["status"] = s.clone(),
            None => {
                meta::ensure_object(&mut out).remove("status");
            }
        }
        return out;
    }
    if t.res.has_status() {
        match cur.get("status") {
            Some(s) => proposed["status"] = s.clone(),
            None => {
                meta::ensure_object(&mut proposed).remove("status");
            }
        }
    }
    // Clients cannot rewrite managedFields through these verbs; the server recomputes them.
    let mf = meta::metadata(cur)
        .and_then(|m| m.get("managedFields"))
        .cloned();
    let m = meta::metadata_mut(&mut proposed);
    match mf {
        Some(v) => m.insert("managedFields".into(), v),
        None => m.remove("managedFields"),
    };
    proposed
}

fn reply(outcome: Outcome) -> Reply {
    let code = match outcome {
        Outcome::Created(_) => StatusCode::CREATED,
        _ => StatusCode::OK,
    };
    let changed = outcome.changed();
    Ok((code, changed, outcome.object().clone()))
}

pub fn create(call: &Call) -> Reply {
    let t = &call.target;
    let mut obj = parse_body(call)?;
    check_identity(t, &obj, false)?;
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
    validate::validate(t.res, &obj)?;
    if t.res.has_status() {
        meta::ensure_object(&mut obj).remove("status");
    }
    meta::metadata_mut(&mut obj).remove("managedFields");
    controller::defaults_on_create(&call.shared, t.res, &mut obj);
    fields::record_update(
        None,
        &mut obj,
        &manager(call),
        &t.res.api_version(),
        t.res.has_status(),
        &meta::now_rfc3339(),
    );
    let out = call
        .shared
        .store
        .write(t.res, t.ns_str(), &name, call.params.dry_run(), |_| {
            Ok(Change::Create(obj))
        })?;
    reply(out)
}

pub fn update(call: &Call) -> Reply {
    let t = &call.target;
    let mut body = parse_body(call)?;
    check_identity(t, &body, false)?;
    let name = check_name(t, &mut body)?;
    let mgr = manager(call);
    let out = call
        .shared
        .store
        .write(t.res, t.ns_str(), &name, call.params.dry_run(), |cur| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(t.subject(&name)));
            };
            check_precondition(t, &body, cur)?;
            let mut next = scope(t, cur, body);
            validate::validate(t.res, &next)?;
            if t.sub.is_none() {
                fields::record_update(
                    Some(cur),
                    &mut next,
                    &mgr,
                    &t.res.api_version(),
                    t.res.has_status(),
                    &meta::now_rfc3339(),
                );
            }
            Ok(Change::Replace(next))
        })?;
    reply(out)
}

pub fn patch(call: &Call) -> Reply {
    let t = &call.target;
    let ct = content_type(call).to_string();
    let name = t.name.clone().unwrap_or_default();
    let force = call.params.flag("force");
    let mgr = manager(call);
    let patch = parse_body(call)?;
    if ct.starts_with("application/apply-patch") {
        if call.params.get("fieldManager").is_none() {
            return Err(ApiError::BadRequest(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
                    .into(),
            ));
        }
        check_identity(t, &patch, true)?;
        let mut applied = patch.clone();
        check_name(t, &mut applied)?;
    } else if force {
        return Err(ApiError::BadRequest(
            "force may only be set for apply patch".into(),
        ));
    } else if !matches!(
        ct.split(';').next().unwrap_or(""),
        "application/merge-patch+json"
            | "application/strategic-merge-patch+json"
            | "application/json-patch+json"
    ) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml ({ct})"
        )));
    }
    let out = call
        .shared
        .store
        .write(t.res, t.ns_str(), &name, call.params.dry_run(), |cur| {
            if ct.starts_with("application/apply-patch") {
                let mut applied = patch.clone();
                meta::metadata_mut(&mut applied).insert("name".into(), json!(name));
                if let Some(cur) = cur {
                    check_precondition(t, &applied, cur)?;
                }
                if t.sub.is_some() {
                    let Some(cur) = cur else {
                        return Err(ApiError::not_found(t.subject(&name)));
                    };
                    // Status apply: merge the applied status in; status ownership is not tracked.
                    let mut next = cur.clone();
                    if let Some(s) = applied.get("status") {
                        next["status"] = patch::merge_patch(&next["status"], s);
                    }
                    return Ok(Change::Replace(next));
                }
                let mut next =
                    apply::apply(t.res, cur, &applied, &mgr, force, &meta::now_rfc3339())?;
                // Identity is stamped by the store; validation needs the name now.
                meta::metadata_mut(&mut next).insert("name".into(), json!(name));
                validate::validate(t.res, &next)?;
                return Ok(match cur {
                    Some(_) => Change::Replace(next),
                    None => {
                        controller::defaults_on_create(&call.shared, t.res, &mut next);
                        Change::Create(next)
                    }
                });
            }
            let Some(cur) = cur else {
                return Err(ApiError::not_found(t.subject(&name)));
            };
            let patched = if ct.starts_with("application/json-patch") {
                patch::json_patch(cur, &patch)
                    .map_err(|e| e.into_api_error(t.res, meta::name(cur)))?
            } else if ct.starts_with("application/strategic-merge-patch") {
                check_precondition(t, &patch, cur)?;
                // Lists merge by their patch keys, which kubectl's client-side apply relies on
                // (it deletes a container with a `$patch: delete` item); kinds without a patch
                // schema are merged as by a merge patch.
                patch::strategic_merge_patch(&t.res.group, &t.res.kind, cur, &patch)
                    .map_err(|e| e.into_api_error(t.res, meta::name(cur)))?
            } else {
                check_precondition(t, &patch, cur)?;
                patch::merge_patch(cur, &patch)
            };
            if meta::name(&patched) != name {
                return Err(ApiError::BadRequest(
                    "metadata.name cannot be changed by a patch".into(),
                ));
            }
            let mut next = scope(t, cur, patched);
            validate::validate(t.res, &next)?;
            if t.sub.is_none() {
                fields::record_update(
                    Some(cur),
                    &mut next,
                    &mgr,
                    &t.res.api_version(),
                    t.res.has_status(),
                    &meta::now_rfc3339(),
                );
            }
            Ok(Change::Replace(next))
        })?;
    reply(out)
}

pub fn delete(call: &Call) -> Reply {
    let t = &call.target;
    if t.sub.is_some() {
        return Err(ApiError::MethodNotAllowed(
            "status cannot be deleted".into(),
        ));
    }
    let name = t.name.clone().unwrap_or_default();
    if t.res.namespaced && t.ns.is_none() {
        return Err(ApiError::not_found(t.subject(&name)));
    }
    // DeleteOptions are optional; only preconditions matter here.
    let opts: Value = serde_json::from_slice(&call.body).unwrap_or(Value::Null);
    let out = call
        .shared
        .store
        .write(t.res, t.ns_str(), &name, call.params.dry_run(), |cur| {
            if let Some(cur) = cur {
                for (field, pointer) in [
                    ("uid", "/preconditions/uid"),
                    ("resourceVersion", "/preconditions/resourceVersion"),
                ] {
                    if let Some(want) = opts.pointer(pointer).and_then(Value::as_str) {
                        if Some(want) != meta::meta_str(cur, field) {
                            return Err(stale(t, &name));
                        }
                    }
                }
            }
            Ok(Change::Delete)
        })?;
    reply(out)
}

pub fn delete_collection(call: &Call) -> Reply {
    let t = &call.target;
    let labels =
        crate::selector::LabelSelector::parse(call.params.get("labelSelector").unwrap_or(""))?;
    let fields_sel =
        crate::selector::FieldSelector::parse(call.params.get("fieldSelector").unwrap_or(""))?;
    let (items, _) = call.shared.store.list(t.res, t.ns.as_deref());
    let mut deleted = Vec::new();
    for obj in items
        .iter()
        .filter(|o| labels.matches(o) && fields_sel.matches(o))
    {
        let ns = meta::meta_str(obj, "namespace").unwrap_or("");
        match call
            .shared
            .store
            .write(t.res, ns, meta::name(obj), call.params.dry_run(), |_| {
                Ok(Change::Delete)
            }) {
            Ok(o) => deleted.push(o.object().clone()),
            // Deleted concurrently: nothing left to do for it.
            Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let changed = !deleted.is_empty();
    let list = json!({
        "kind": format!("{}List", t.res.kind),
        "apiVersion": t.res.api_version(),
        "metadata": { "resourceVersion": call.shared.store.current_rv().to_string() },
        "items": deleted,
    });
    Ok((StatusCode::OK, changed, list))
}
