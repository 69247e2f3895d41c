//! The web console at `/ui/`: static assets embedded in the binary and served on the API
//! listener, so every node serves the same console over the same TLS with no files to deploy.
//!
//! The console is plain HTML, CSS and JavaScript modules (`apiserver/ui/`); it talks to the
//! `/v1` API with the bearer token the user typed, exactly as any other client. Serving an asset
//! therefore needs no authentication and reveals nothing: the assets hold no data and no secret.
//!
//! Every answer carries a strict Content-Security-Policy (scripts and styles from this origin
//! only, no inline script, requests to this origin only, no framing), `nosniff`, and
//! `Cache-Control: no-cache` with an ETag, so a browser revalidates cheaply and never runs a
//! console older than the node it talks to.
//!
//! Must not: read files at run time (a path from a request never reaches the file system, only
//! an exact lookup in [`assets::ASSETS`]), serve anything that depends on state or principal, or
//! relax the CSP for convenience (no `unsafe-inline`, no `unsafe-eval`, no remote origins).

mod assets;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

pub use assets::{Asset, ASSETS};

/// What the console may load and where it may connect: this origin only, no inline script or
/// style, no plugins, not framed. `img-src data:` admits the empty favicon the page declares.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The console's routes; they need no state and no token.
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(redirect))
        .route("/ui/", get(index))
        .route("/ui/{*path}", get(asset))
}

/// `/ui` without the slash would resolve the page's relative asset URLs against `/`.
async fn redirect() -> Response {
    (
        StatusCode::PERMANENT_REDIRECT,
        [(header::LOCATION, HeaderValue::from_static("/ui/"))],
    )
        .into_response()
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

/// The asset at `path` (exact match in the table), 304 when the client's copy is current,
/// 404 otherwise. `..`, `%2e`, absolute paths and the like are simply names not in the table.
pub(crate) fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some((i, a)) = ASSETS.iter().enumerate().find(|(_, a)| a.path == path) else {
        let mut resp = (StatusCode::NOT_FOUND, "no such console asset\n").into_response();
        security_headers(resp.headers_mut());
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return resp;
    };
    let etag = &etags()[i];
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = a.body.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(a.content_type),
        );
        r
    };
    let h = resp.headers_mut();
    security_headers(h);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    resp
}

fn security_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

/// One strong ETag per asset (a prefix of its SHA-256), computed on first use: the assets are
/// fixed at build time, so it never changes while the process runs.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| format!("\"{}\"", &hex::encode(Sha256::digest(a.body))[..20]))
            .collect()
    })
}
