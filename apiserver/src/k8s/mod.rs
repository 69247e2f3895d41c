//! The Kubernetes-compatible door: `/api`, `/apis`, `/version` and `/openapi/v3`, so kubectl (and
//! any Kubernetes client) drives fedraft unchanged.
//!
//! Every Kubernetes resource path lands in [`dispatch`], which parses it into a [`Call`] (the
//! served type from `catalog`, namespace, name, subresource, query) and hands it to a verb:
//! `read` (get, list, Table), `write` (create, replace, patch, apply, delete), `scale` (the scale
//! subresource), `watch`.
//! Templates and policies are read from `State::door()` and the templates' federated objects
//! (`render` turns them into Kubernetes objects); every write is ONE `PutResource` or
//! `DeleteResource` proposal computed on a linearizable read, with the principal as actor
//! (users and tokens: one user-database command each, `users`).
//! Authentication is the native API's bearer tokens; authorisation the native checks.
//!
//! Must not: keep objects of its own (one model: the log's state), write except by proposing,
//! answer with anything but Kubernetes shapes (`errors::Refusal` for every refusal).

mod catalog;
mod cluster_status;
mod conditions;
mod crds;
mod discovery;
mod errors;
mod internal;
mod managed;
mod members;
mod protobuf;
mod read;
mod render;
mod scale;
mod users;
mod watch;
mod write;

use std::borrow::Cow;
use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};
use fedraft_kubeapi::status::Subject;

use crate::auth::Principal;
use crate::App;
pub use catalog::{Served, Store};
pub use errors::{KResult, Refusal};

/// The door's routes, authenticated with the native bearer tokens (`/version` stays open, as
/// kube-apiserver leaves it to `system:public-info-viewer`).
pub(crate) fn router(app: App) -> Router<App> {
    Router::new()
        .route("/api", get(discovery::api))
        .route("/apis", get(discovery::apis))
        .route("/api/v1", get(discovery::core_list))
        .route("/apis/{group}", get(discovery::group))
        .route("/apis/{group}/{version}", get(discovery::group_list))
        .route("/openapi/v3", get(discovery::openapi_root))
        .route("/openapi/v3/api/v1", get(discovery::openapi_core))
        .route(
            "/openapi/v3/apis/{group}/{version}",
            get(discovery::openapi_group),
        )
        .route("/api/v1/{*rest}", any(core_resource))
        .route("/apis/{group}/{version}/{*rest}", any(group_resource))
        .route_layer(middleware::from_fn_with_state(app, authenticate))
        .route("/version", get(discovery::version))
}

async fn authenticate(State(app): State<App>, mut req: Request, next: Next) -> Response {
    // The user database's tokens work here as on the native API.
    match crate::auth::authenticate_on(&app.tokens, &app.node, req.headers()) {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => Refusal::from(e).into_response(),
    }
}

/// What a resource path names.
#[derive(Debug, Clone)]
pub struct Target {
    /// A type of the static catalog, or one a stored CRD defines (`crds`).
    pub served: Cow<'static, Served>,
    /// From the path; None for cluster-scoped types and all-namespace lists.
    pub ns: Option<String>,
    pub name: Option<String>,
    /// Only "scale" (templates) and "status" (Karmada's `Cluster`) are served.
    pub sub: Option<String>,
}

impl Target {
    pub fn store(&self) -> Store {
        self.served.store
    }

    pub fn ns_str(&self) -> &str {
        self.ns.as_deref().unwrap_or("")
    }

    pub fn subject(&self, name: &str) -> Subject {
        Subject {
            group: self.served.def.group.clone(),
            kind: self.served.def.plural.clone(),
            name: name.to_string(),
        }
    }

    /// `plural.group`, as Status messages name a type.
    pub fn plural(&self) -> String {
        self.served.def.qualified_plural()
    }
}

/// The target of a resource path; `custom` holds the types stored CRDs define (empty when the
/// group is the static catalog's).
pub fn parse_target(group: &str, version: &str, rest: &str, custom: &[Served]) -> KResult<Target> {
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let unknown = || Refusal::no_route(&format!("{group}/{version}/{rest}"));
    let find = |plural: &str| -> Option<Cow<'static, Served>> {
        match catalog::find(group, version, plural) {
            Some(s) => Some(Cow::Borrowed(s)),
            None => custom
                .iter()
                .find(|s| {
                    s.def.group == group && s.def.version == version && s.def.plural == plural
                })
                .cloned()
                .map(Cow::Owned),
        }
    };
    let lookup = |plural: &str| find(plural).ok_or_else(unknown);
    let owned = |s: &&str| s.to_string();
    // namespaces/{ns}/{plural}... names a namespaced type; namespaces/{name} the namespace.
    let namespaced_path = segs.len() >= 3
        && segs[0] == "namespaces"
        && find(segs[2]).is_some_and(|r| r.def.namespaced);
    let (served, ns, name, sub) = if namespaced_path {
        (
            lookup(segs[2])?,
            segs.get(1).map(owned),
            segs.get(3).map(owned),
            segs.get(4).map(owned),
        )
    } else {
        if segs.len() > 3 {
            return Err(unknown());
        }
        let served = lookup(segs.first().copied().unwrap_or(""))?;
        if served.def.namespaced && segs.len() > 1 {
            return Err(unknown());
        }
        (served, None, segs.get(1).map(owned), segs.get(2).map(owned))
    };
    let served = match served {
        Cow::Borrowed(s) => Cow::Borrowed(members::retarget(s, ns.as_deref())),
        custom => custom,
    };
    let sub_ok = match sub.as_deref() {
        None => true,
        Some(s) => served.def.has_subresource(s),
    };
    if segs.len() > 5 || !sub_ok {
        return Err(unknown());
    }
    Ok(Target {
        served,
        ns,
        name,
        sub,
    })
}

/// Query parameters; a repeated key keeps its last value.
#[derive(Debug, Default)]
pub struct Params(HashMap<String, String>);

impl Params {
    pub fn from_uri(uri: &Uri) -> KResult<Self> {
        let q = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| Refusal::bad_request(format!("invalid query: {e}")))?;
        Ok(Params(q.0.into_iter().collect()))
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|v| !v.is_empty())
    }

    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }

    pub fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }

    pub fn u64(&self, k: &str) -> KResult<Option<u64>> {
        self.get(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| Refusal::bad_request(format!("invalid {k}: {v:?}")))
            })
            .transpose()
    }
}

/// One resource request as the verbs see it.
pub struct Call {
    pub app: App,
    pub principal: Principal,
    pub target: Target,
    pub params: Params,
    pub headers: HeaderMap,
}

impl Call {
    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn core_resource(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Path(rest): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    dispatch(app, p, ("", "v1", &rest), method, uri, headers, body).await
}

async fn group_resource(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Path((group, version, rest)): Path<(String, String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    dispatch(
        app,
        p,
        (&group, &version, &rest),
        method,
        uri,
        headers,
        body,
    )
    .await
}

async fn dispatch(
    app: App,
    principal: Principal,
    (group, version, rest): (&str, &str, &str),
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // Only a group the static catalog does not serve can be a CRD's: the common request reads
    // no CRD.
    let custom = if catalog::serves_group(group) {
        Vec::new()
    } else {
        app.node.read_stale(crds::served)
    };
    let call = match (
        parse_target(group, version, rest, &custom),
        Params::from_uri(&uri),
    ) {
        (Ok(target), Ok(params)) => Call {
            app,
            principal,
            target,
            params,
            headers,
        },
        (Err(e), _) | (_, Err(e)) => return e.into_response(),
    };
    let named = call.target.name.is_some();
    let verb = match (&method, named) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if call.params.flag("watch") => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        _ => "",
    };
    if !call.target.served.def.verbs.iter().any(|v| v == verb) {
        return Refusal::method_not_allowed(method.as_str()).into_response();
    }
    if let Store::Internal(why) = call.target.store() {
        if matches!(verb, "create" | "update" | "patch" | "delete") {
            return internal::refusal(&call.target.served.def, why).into_response();
        }
    }
    // The scale subresource has its own handlers; only these three verbs reach it.
    let scale = call.target.sub.as_deref() == Some("scale");
    let status = call.target.sub.as_deref() == Some("status");
    let result = match verb {
        "get" if status => cluster_status::get(&call).await,
        "update" if status => cluster_status::replace(&call, body).await,
        "patch" if status => cluster_status::patch(&call, body).await,
        "get" if scale => scale::get(&call).await,
        "update" if scale => scale::replace(&call, body).await,
        "patch" if scale => scale::patch(&call, body).await,
        "get" => read::get(&call).await,
        "list" => read::list(&call).await,
        "watch" => watch::watch(&call).await,
        "create" if call.target.store() == Store::UserToken => users::issue(&call, body).await,
        "create" => write::create(&call, body).await,
        "update" => write::replace(&call, body).await,
        "patch" => write::patch(&call, body).await,
        _ => write::delete(&call, body).await,
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = parse_target("", "v1", "namespaces", &[]).unwrap();
        assert_eq!(t.store(), Store::Namespace);
        assert!(t.name.is_none());
        let t = parse_target("", "v1", "namespaces/a", &[]).unwrap();
        assert_eq!(
            (t.store(), t.name.as_deref()),
            (Store::Namespace, Some("a"))
        );
        let t = parse_target("", "v1", "namespaces/a/configmaps/c", &[]).unwrap();
        assert_eq!(
            (t.ns.as_deref(), t.name.as_deref(), t.store()),
            (Some("a"), Some("c"), Store::Template)
        );
        let t = parse_target("apps", "v1", "namespaces/a/deployments/d/scale", &[]).unwrap();
        assert_eq!(t.sub.as_deref(), Some("scale"));
        assert!(parse_target("apps", "v1", "namespaces/a/deployments/d/status", &[]).is_err());
        assert!(parse_target("", "v1", "configmaps/c", &[]).is_err());
        assert!(parse_target("", "v1", "nodes", &[]).is_err());
        let t = parse_target("fedraft.io", "v1alpha1", "clusters/dc1", &[]).unwrap();
        assert_eq!(
            (t.store(), t.name.as_deref()),
            (Store::Cluster, Some("dc1"))
        );
        let t = parse_target(
            "policy.karmada.io",
            "v1alpha1",
            "clusterpropagationpolicies",
            &[],
        )
        .unwrap();
        assert!(t.ns.is_none());
        let t = parse_target("rbac.authorization.k8s.io", "v1", "clusterroles/view", &[]).unwrap();
        assert_eq!((t.store(), t.ns.as_deref()), (Store::Template, None));
        assert!(!t.served.def.namespaced);
    }

    #[test]
    fn custom_targets_come_from_crds() {
        let crd = serde_json::json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true}]}});
        let custom = crds::of_manifest(&crd);
        let t = parse_target("example.com", "v1", "namespaces/a/widgets/w", &custom).unwrap();
        assert_eq!(
            (t.store(), t.ns.as_deref(), t.name.as_deref()),
            (Store::Template, Some("a"), Some("w"))
        );
        assert_eq!(t.served.columns.as_deref().map(<[_]>::len), Some(0));
        assert!(parse_target("example.com", "v1", "namespaces/a/widgets/w", &[]).is_err());
        assert!(parse_target("example.com", "v2", "namespaces/a/widgets", &custom).is_err());
    }
}
