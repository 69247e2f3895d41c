//! The route table (the one place that lists every endpoint and the order of the layers) and the
//! handlers, one module per resource.

mod admin;
mod admission;
mod audit;
pub(crate) mod audit_pool;
mod clusters;
pub(crate) mod common;
mod endpoints;
mod health_policy;
mod kubeconfig;
mod members;
mod nodes;
pub(crate) mod objects;
pub(crate) mod paging;
mod placement;
mod quota;
mod rendered;
mod rollout;
mod rotate;
mod schedule;
pub(crate) mod system;
mod tenants;
pub(crate) mod users;

use axum::routing::{get, post, put};
use axum::{middleware, Router};

use crate::error::ApiError;
use crate::{layers, App};

pub(crate) fn router(app: App) -> Router {
    let api = Router::new()
        .route("/v1/clusters", get(clusters::list).post(clusters::create))
        .route(
            "/v1/clusters/{name}",
            get(clusters::get_one)
                .put(clusters::replace)
                .delete(clusters::delete),
        )
        .route("/v1/clusters/{name}/cordon", post(clusters::cordon))
        .route("/v1/clusters/{name}/uncordon", post(clusters::uncordon))
        .route("/v1/clusters/{name}/drain", post(clusters::drain))
        .route("/v1/objects", get(objects::list_all))
        .route("/v1/namespaces/{ns}/objects", get(objects::list_ns))
        .route(
            "/v1/namespaces/{ns}/objects/{name}",
            get(objects::get_one)
                .put(objects::put)
                .delete(objects::delete),
        )
        .route(
            "/v1/namespaces/{ns}/objects/{name}/rendered",
            get(rendered::get),
        )
        .route(
            "/v1/namespaces/{ns}/objects/{name}/reschedule",
            post(objects::reschedule),
        )
        .route(
            "/v1/namespaces/{ns}/objects/{name}/rollout",
            get(rollout::get),
        )
        .route(
            "/v1/namespaces/{ns}/objects/{name}/rollout/{action}",
            post(rollout::act),
        )
        .route(
            "/v1/namespaces/{ns}/services/{name}/endpoints",
            get(endpoints::get),
        )
        .route("/v1/policies", get(placement::policies))
        .route("/v1/placement/clusters", get(placement::by_cluster))
        .route("/v1/tenants", get(tenants::list))
        .route(
            "/v1/tenants/{name}",
            put(tenants::put)
                .get(tenants::get_one)
                .delete(tenants::delete),
        )
        .route("/v1/tenants/{name}/queue", get(quota::queue))
        .route("/v1/schedule/dry-run", post(schedule::dry_run))
        .route("/v1/watch", get(crate::watch::stream::watch))
        .route("/v1/audit", get(audit::list))
        .route("/v1/audit/state", get(audit::state))
        .route("/v1/audit/diff", get(audit::diff))
        .route("/v1/audit/explain/{ns}/{name}", get(audit::explain))
        .route("/v1/status", get(admin::status))
        .route("/v1/status/node", get(nodes::node))
        .route("/v1/status/nodes", get(nodes::nodes))
        .route("/v1/admin/backup", get(admin::backup))
        .route(
            "/v1/admin/admission",
            get(admission::get_policy).put(admission::put_policy),
        )
        .route(
            "/v1/admin/health-policy",
            get(health_policy::get_policy).put(health_policy::put_policy),
        )
        .route("/v1/admin/members", get(members::list).post(members::add))
        .route("/v1/admin/voters", put(members::set_voters))
        .route("/v1/admin/credentials/rotate", post(rotate::rotate))
        .route("/v1/users", get(users::list).post(users::create))
        .route(
            "/v1/users/{name}",
            get(users::get_one)
                .put(users::replace)
                .delete(users::delete),
        )
        .route(
            "/v1/users/{name}/tokens",
            get(users::list_tokens).post(users::issue_token),
        )
        .route(
            "/v1/users/{name}/tokens/{id}",
            axum::routing::delete(users::revoke_token),
        )
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            layers::authenticate,
        ));
    let public = Router::new()
        .route("/healthz", get(system::healthz))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .route("/v1/system/state", get(system::state))
        .route("/v1/openapi.json", get(system::openapi))
        .merge(crate::ui::router());
    api.merge(public)
        .merge(crate::k8s::router(app.clone()))
        .route_layer(middleware::from_fn_with_state(app.clone(), layers::metrics))
        .fallback(|| async {
            ApiError::NotFound {
                message: "no such route".into(),
            }
        })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        // Bodies are read by `crate::body` with the configured limit and a JSON 413; axum's
        // own default limit (2 MB, plain-text error) must not cut in first.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(middleware::from_fn(layers::close_after_refused_body))
        .with_state(app)
}
