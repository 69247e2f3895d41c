//! The HTTP surface: the router and the read verbs (get, list with paging, watch). What a
//! request names is parsed in `call`, write verbs live in `writes`, admin endpoints in `admin`.
//!
//! Every Kubernetes resource path (`/api/v1/...`, `/apis/{group}/{version}/...`) lands in one
//! handler that parses it into a [`Call`] and dispatches on the verb. Unknown paths (including
//! `/openapi/v2`) get a 404 Status. `/openapi/v3` serves only what kubectl's `apply` needs to see
//! that the server does field validation itself; without it kubectl refuses to apply. Reads
//! answer as a `Table` or partial metadata when `Accept` asks (`fedraft_kubeapi::negotiate`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::call::{parse_target, Call, Params, Reply};
use crate::discovery;
use crate::selector::{FieldSelector, LabelSelector};
use crate::stats::Verb;
use crate::status::{self, ApiError, Subject};
use crate::{admin, faults, meta, watch, writes, Shared};
use fedraft_kubeapi::discovery::AggregatedVersion;
use fedraft_kubeapi::negotiate::{self, DiscoveryForm, ObjectForm};
use fedraft_kubeapi::paging::{self, ContinueToken};
use fedraft_kubeapi::table;

/// kube-apiserver's own request body limit is 3 MiB.
const BODY_LIMIT_BYTES: usize = 3 * 1024 * 1024;
/// Longest watch a client may ask for; kube-rs asks for 290 s.
const MAX_WATCH_TIMEOUT_S: u64 = 1800;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/healthz", get(ok))
        .route("/livez", get(ok))
        .route("/readyz", get(ok))
        .route("/api", get(api_versions))
        .route("/apis", get(api_groups))
        .route("/api/v1", get(|| async { resource_list("", "v1") }))
        .route("/apis/{group}", get(api_group))
        .route(
            "/apis/{group}/{version}",
            get(|Path((g, v)): Path<(String, String)>| async move { resource_list(&g, &v) }),
        )
        .route(
            "/openapi/v3",
            get(|| async { Json(discovery::openapi_v3_root()) }),
        )
        .route(
            "/openapi/v3/api/v1",
            get(|| async { openapi_doc("", "v1") }),
        )
        .route(
            "/openapi/v3/apis/{group}/{version}",
            get(|Path((g, v)): Path<(String, String)>| async move { openapi_doc(&g, &v) }),
        )
        .route("/api/v1/{*rest}", any(core_resource))
        .route("/apis/{group}/{version}/{*rest}", any(group_resource))
        .nest("/_sim", admin::router())
        .fallback(not_found)
        .layer(from_fn_with_state(shared.clone(), faults::middleware))
        .layer(from_fn_with_state(shared.clone(), auth))
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .with_state(shared)
}

/// Bearer-token check. Health and version stay open, as kube-apiserver's
/// `system:public-info-viewer` role leaves them.
async fn auth(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    if let Some(token) = &shared.config.token {
        let public = matches!(
            req.uri().path(),
            "/healthz" | "/livez" | "/readyz" | "/version"
        );
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !public && given != Some(token.as_str()) {
            return status::respond(ApiError::Unauthorized);
        }
    }
    next.run(req).await
}

async fn ok() -> &'static str {
    "ok"
}

async fn version(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(discovery::version_doc(&format!(
        "v1.32.0-kubesim+{}",
        shared.config.name
    )))
}

/// `GET /api`: aggregated discovery of the core group when `Accept` asks (kubectl does), else
/// the legacy `APIVersions`.
async fn api_versions(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    discovery_reply(&headers, true, || {
        discovery::core_versions(&shared.addr_string())
    })
}

/// `GET /apis`: aggregated discovery of every other group, or the legacy `APIGroupList`.
async fn api_groups(headers: HeaderMap) -> Response {
    discovery_reply(&headers, false, discovery::group_list)
}

fn discovery_reply(headers: &HeaderMap, core: bool, legacy: impl FnOnce() -> Value) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok());
    let (form, body) = match negotiate::discovery_form(accept) {
        Some(DiscoveryForm::AggregatedV2) => (
            DiscoveryForm::AggregatedV2,
            discovery::aggregated(core, AggregatedVersion::V2),
        ),
        Some(DiscoveryForm::AggregatedV2Beta1) => (
            DiscoveryForm::AggregatedV2Beta1,
            discovery::aggregated(core, AggregatedVersion::V2Beta1),
        ),
        Some(DiscoveryForm::Legacy) | None => (DiscoveryForm::Legacy, legacy()),
    };
    let mut reply = Json(body).into_response();
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(form.content_type()),
    );
    reply
}

async fn api_group(Path(group): Path<String>) -> Response {
    match discovery::group(&group) {
        Some(doc) => Json(doc).into_response(),
        None => not_found_path(&format!("/apis/{group}")),
    }
}

fn resource_list(group: &str, version: &str) -> Response {
    match discovery::resource_list(group, version) {
        Some(doc) => Json(doc).into_response(),
        None => not_found_path(&format!("/apis/{group}/{version}")),
    }
}

fn openapi_doc(group: &str, version: &str) -> Response {
    match discovery::openapi_v3_group_version(group, version) {
        Some(doc) => Json(doc).into_response(),
        None => not_found_path(&format!("/openapi/v3/apis/{group}/{version}")),
    }
}

async fn not_found(uri: Uri) -> Response {
    not_found_path(uri.path())
}

fn not_found_path(path: &str) -> Response {
    status::respond(ApiError::NotFound {
        subject: Subject::default(),
        message: format!("the server could not find the requested resource ({path})"),
    })
}

async fn core_resource(
    State(shared): State<Arc<Shared>>,
    Path(rest): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    dispatch(shared, "", "v1", &rest, method, uri, headers, body).await
}

async fn group_resource(
    State(shared): State<Arc<Shared>>,
    Path((group, version, rest)): Path<(String, String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    dispatch(shared, &group, &version, &rest, method, uri, headers, body).await
}

#[allow(clippy::too_many_arguments)]
async fn dispatch(
    shared: Arc<Shared>,
    group: &str,
    version: &str,
    rest: &str,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let call = match (parse_target(group, version, rest), Params::from_uri(&uri)) {
        (Ok(target), Ok(params)) => Call {
            shared,
            target,
            params,
            headers,
            body,
        },
        (Err(e), _) | (_, Err(e)) => return status::respond(e),
    };
    let named = call.target.name.is_some();
    let verb = match (&method, named) {
        (&Method::GET, true) => Verb::Get,
        (&Method::GET, false) if call.params.flag("watch") => Verb::Watch,
        (&Method::GET, false) => Verb::List,
        (&Method::POST, false) => Verb::Create,
        (&Method::PUT, true) => Verb::Update,
        (&Method::PATCH, true) if is_apply(&call.headers) => Verb::Apply,
        (&Method::PATCH, true) => Verb::Patch,
        (&Method::DELETE, true) => Verb::Delete,
        (&Method::DELETE, false) => Verb::DeleteCollection,
        _ => {
            return status::respond(ApiError::MethodNotAllowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            )))
        }
    };
    call.shared.stats.request(verb);
    let result = match verb {
        Verb::Get => get_one(&call),
        Verb::List => list(&call),
        Verb::Watch => return watch(&call),
        Verb::Create => writes::create(&call),
        Verb::Update => writes::update(&call),
        Verb::Patch | Verb::Apply => writes::patch(&call),
        Verb::Delete => writes::delete(&call),
        Verb::DeleteCollection => writes::delete_collection(&call),
    };
    match result {
        Ok((code, outcome_changed, v)) => {
            if outcome_changed && !call.params.dry_run() {
                call.shared.stats.changed(verb);
                let t = &call.target;
                let object = format!(
                    "{}/{}/{}",
                    t.res.plural,
                    t.ns_str(),
                    t.name.as_deref().unwrap_or("")
                );
                call.shared.writes.record(verb.as_str(), object, &call.body);
            }
            match verb {
                Verb::Get => read_reply(&call, code, v, false),
                Verb::List => read_reply(&call, code, v, true),
                _ => (code, Json(v)).into_response(),
            }
        }
        Err(e) => status::respond(e),
    }
}

fn is_apply(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/apply-patch"))
}

/// A get or list answered in the form `Accept` asks for: the objects, a `Table` (what
/// `kubectl get` prints, with kube-apiserver's columns) or partial object metadata. An Accept
/// nothing matches still gets the objects, as before content negotiation was served.
fn read_reply(call: &Call, code: StatusCode, v: Value, list: bool) -> Response {
    let accept = call
        .headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok());
    let form = negotiate::object_form(accept).unwrap_or(ObjectForm::Object);
    let shaped = table::read_body(
        form,
        &v,
        list,
        call.params.get("includeObject"),
        |objects, include| table::table(call.target.res, objects, meta::now_unix(), include),
    );
    let body = match shaped {
        Ok(Some(body)) => body,
        Ok(None) => return (code, Json(v)).into_response(),
        Err(e) => return status::respond(e),
    };
    let mut reply = (code, Json(body)).into_response();
    if let Ok(ct) = header::HeaderValue::from_str(&form.content_type(list)) {
        reply.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    reply
}

fn get_one(call: &Call) -> Reply {
    let t = &call.target;
    let name = t.name.as_deref().unwrap_or("");
    if t.res.namespaced && t.ns.is_none() {
        return Err(ApiError::not_found(t.subject(name)));
    }
    match call.shared.store.get(t.res, t.ns_str(), name) {
        Some(obj) => Ok((StatusCode::OK, false, obj)),
        None => Err(ApiError::not_found(t.subject(name))),
    }
}

fn selectors(params: &Params) -> Result<(LabelSelector, FieldSelector), ApiError> {
    Ok((
        LabelSelector::parse(params.get("labelSelector").unwrap_or(""))?,
        FieldSelector::parse(params.get("fieldSelector").unwrap_or(""))?,
    ))
}

fn list(call: &Call) -> Reply {
    let t = &call.target;
    let p = &call.params;
    let (labels, fields) = selectors(p)?;
    let store = &call.shared.store;
    let (items, current_rv) = store.list(t.res, t.ns.as_deref());
    let (list_rv, after) = match p.get("continue") {
        Some(tok) => {
            let tok = ContinueToken::parse(tok)?;
            let rv = tok.resource_version;
            // Pages are served from current state; a token from before the retained history
            // is refused exactly as kube-apiserver refuses a compacted one.
            if rv < store.floor_rv() {
                return Err(ApiError::Expired(
                    "The provided continue parameter is too old to display a consistent list \
                     result. You can start a new list without the continue parameter."
                        .into(),
                ));
            }
            (rv, Some(tok))
        }
        None => {
            let asked = p.u64("resourceVersion")?;
            if p.get("resourceVersionMatch") == Some("Exact")
                && asked.is_some_and(|rv| rv != current_rv)
            {
                return Err(ApiError::Expired(format!(
                    "too old resource version: {} ({current_rv})",
                    asked.unwrap_or(0)
                )));
            }
            (current_rv, None)
        }
    };
    let limit = p.u64("limit")?.filter(|l| *l > 0).map(|l| l as usize);
    let matching = items
        .into_iter()
        .filter(|o| labels.matches(o) && fields.matches(o));
    let (page, remaining) = paging::page(matching, after.as_ref(), limit);
    let page: Vec<Value> = page.into_iter().map(Arc::unwrap_or_clone).collect();
    let mut metadata = json!({ "resourceVersion": list_rv.to_string() });
    if remaining > 0 {
        if let Some(last) = page.last() {
            metadata["continue"] = json!(ContinueToken::after(list_rv, last).encode());
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    Ok((
        StatusCode::OK,
        false,
        json!({
            "kind": format!("{}List", t.res.kind),
            "apiVersion": t.res.api_version(),
            "metadata": metadata,
            "items": page,
        }),
    ))
}

fn watch(call: &Call) -> Response {
    match start_watch(call) {
        Ok(body) => Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Err(e @ ApiError::Expired(_)) => {
            // kube-apiserver answers 200 and sends the 410 as the first event; kube-rs's watcher
            // relists only on that form.
            let frame = format!("{}\n", json!({ "type": "ERROR", "object": e.to_status() }));
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(frame))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Err(e) => status::respond(e),
    }
}

fn start_watch(call: &Call) -> Result<Body, ApiError> {
    let p = &call.params;
    let (labels, fields) = selectors(p)?;
    let initial_events = p.flag("sendInitialEvents");
    let from_rv = match p.u64("resourceVersion")? {
        Some(0) | None => None,
        Some(_) if initial_events => None,
        Some(rv) => Some(rv),
    };
    let timeout_s = p.u64("timeoutSeconds")?.unwrap_or(MAX_WATCH_TIMEOUT_S);
    let spec = watch::WatchSpec {
        res: call.target.res,
        ns: call.target.ns.clone(),
        labels,
        fields,
        bookmarks: p.flag("allowWatchBookmarks"),
        initial_events_end: initial_events,
        timeout: Duration::from_secs(timeout_s.clamp(1, MAX_WATCH_TIMEOUT_S)),
        bookmark_interval: call.shared.config.bookmark_interval,
    };
    let sub = call
        .shared
        .store
        .subscribe(call.target.res, call.target.ns.as_deref(), from_rv)?;
    Ok(Body::from_stream(watch::start(spec, sub)))
}
