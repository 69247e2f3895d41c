//! Cross-cutting request layers: metrics (outermost, so refusals are counted too) and
//! authentication. Each is a small function; their order is fixed in `routes::router`.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::metrics::{method_name, Route};
use crate::App;

/// Times the request and counts it by route template, method and status.
pub async fn metrics(State(app): State<App>, req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = match req.extensions().get::<MatchedPath>() {
        Some(p) => Route::Matched(p.clone()),
        None => Route::Unmatched,
    };
    let method = method_name(req.method());
    let resp = next.run(req).await;
    app.metrics
        .observe(route, method, resp.status().as_u16(), start.elapsed());
    resp
}

/// Maps the bearer token to a principal (401 otherwise) and hands it to the handler.
pub async fn authenticate(State(app): State<App>, mut req: Request, next: Next) -> Response {
    match app.tokens.authenticate(req.headers()) {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}
