//! Cross-cutting request layers: metrics (outermost, so refusals are counted too),
//! authentication, and closing the connection after a refused body. Each is a small function;
//! their order is fixed in `routes::router`.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Version};
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
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let found = app.tokens.authenticate_with(req.headers(), |id| {
        crate::auth::replicated_token(&app.node, id, now_ms)
    });
    match found {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// A refusal may leave the request's body unread (authorisation is decided before a body is
/// read), and an HTTP/1 connection cannot carry the next request until that body is gone: the
/// server then drops the connection, and a client that reused it sees it fail mid-request. So an
/// error answer to a request with a body says `Connection: close`, and clients open a new
/// connection instead. HTTP/2 streams are independent and have no such header.
pub async fn close_after_refused_body(req: Request, next: Next) -> Response {
    let headers = req.headers();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0");
    let http1 = req.version() <= Version::HTTP_11;
    let mut resp = next.run(req).await;
    let refused = resp.status().is_client_error() || resp.status().is_server_error();
    if has_body && http1 && refused {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}
