//! The console's asset serving on its own router: content types, security headers, caching,
//! and that no request path reaches anything but the embedded table.

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use tower::ServiceExt;

use super::{router, ASSETS, CONTENT_SECURITY_POLICY};

async fn get(path: &str, etag: Option<&str>) -> axum::response::Response {
    let app: Router = router();
    let mut req = Request::get(path);
    if let Some(t) = etag {
        req = req.header(header::IF_NONE_MATCH, t);
    }
    app.oneshot(req.body(Body::empty()).unwrap()).await.unwrap()
}

fn header(r: &axum::response::Response, name: header::HeaderName) -> &str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn body(r: axum::response::Response) -> Vec<u8> {
    axum::body::to_bytes(r.into_body(), 1 << 24)
        .await
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn every_asset_is_served_with_its_type_and_the_security_headers() {
    for a in ASSETS {
        let r = get(&format!("/ui/{}", a.path), None).await;
        assert_eq!(r.status(), StatusCode::OK, "{}", a.path);
        let ext = a.path.rsplit('.').next().unwrap();
        let want = match ext {
            "html" => "text/html; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "js" => "text/javascript; charset=utf-8",
            other => panic!("unexpected asset type {other}"),
        };
        assert_eq!(header(&r, header::CONTENT_TYPE), want, "{}", a.path);
        assert_eq!(
            header(&r, header::CONTENT_SECURITY_POLICY),
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(header(&r, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
        assert_eq!(header(&r, header::CACHE_CONTROL), "no-cache");
        assert!(header(&r, header::ETAG).starts_with('"'));
        assert_eq!(body(r).await, a.body, "{}", a.path);
    }
}

#[test]
fn the_policy_admits_no_inline_script_and_no_other_origin() {
    let csp = CONTENT_SECURITY_POLICY;
    assert!(csp.contains("default-src 'none'"));
    assert!(csp.contains("script-src 'self';"));
    assert!(csp.contains("connect-src 'self';"));
    assert!(csp.contains("frame-ancestors 'none'"));
    assert!(!csp.contains("unsafe"), "{csp}");
    assert!(!csp.contains("http"), "{csp}");
}

/// An `on...=` attribute (an inline event handler) anywhere in `html`.
fn inline_handler(html: &str) -> bool {
    html.match_indices(" on").any(|(i, _)| {
        let rest = &html[i + 3..];
        let name = rest.bytes().take_while(u8::is_ascii_lowercase).count();
        name > 0 && rest[name..].starts_with('=')
    })
}

#[test]
fn the_page_has_no_inline_script_style_or_remote_reference() {
    // The one absolute URL the console may contain is the SVG namespace (a name, never fetched).
    const SVG_NS: &str = "http://www.w3.org/2000/svg";
    for a in ASSETS {
        let text = std::str::from_utf8(a.body).unwrap().replace(SVG_NS, "");
        assert!(
            !text.contains("http://") && !text.contains("https://") && !text.contains("//cdn"),
            "{} names a remote URL",
            a.path
        );
        if a.path.ends_with(".html") {
            assert!(!text.contains("<script>"), "inline script in {}", a.path);
            assert!(!text.contains("<style"), "inline style in {}", a.path);
            assert!(!text.contains("style="), "inline style in {}", a.path);
            assert!(!inline_handler(&text), "inline handler in {}", a.path);
        }
        if a.path.ends_with(".js") {
            assert!(!text.contains("innerHTML"), "{} writes markup", a.path);
            assert!(!text.contains("eval("), "{} evaluates text", a.path);
        }
    }
    assert!(inline_handler("<a onclick=x>") && !inline_handler("see it on screen"));
}

#[tokio::test]
async fn the_index_is_the_page_and_ui_without_slash_redirects() {
    let r = get("/ui/", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(header(&r, header::CONTENT_TYPE), "text/html; charset=utf-8");
    let page = body(r).await;
    assert!(String::from_utf8_lossy(&page).contains("js/main.js"));
    let r = get("/ui", None).await;
    assert_eq!(r.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(header(&r, header::LOCATION), "/ui/");
}

#[tokio::test]
async fn a_current_copy_gets_304() {
    let r = get("/ui/app.css", None).await;
    let tag = header(&r, header::ETAG).to_string();
    let again = get("/ui/app.css", Some(&tag)).await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert!(body(again).await.is_empty());
    let stale = get("/ui/app.css", Some("\"0000\"")).await;
    assert_eq!(stale.status(), StatusCode::OK);
}

#[tokio::test]
async fn unknown_and_traversing_paths_are_404() {
    for path in [
        "/ui/nope.js",
        "/ui/js/",
        "/ui/../Cargo.toml",
        "/ui/%2e%2e/Cargo.toml",
        "/ui/js/..%2f..%2fsrc%2flib.rs",
        "/ui/..%2f..%2fCargo.toml",
        "/ui//etc/passwd",
        "/ui/%2fetc%2fpasswd",
        "/ui/js/main.js%00",
        "/ui/JS/MAIN.JS",
    ] {
        let r = get(path, None).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(header(&r, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
        assert_eq!(
            header(&r, header::CONTENT_TYPE),
            "text/plain; charset=utf-8"
        );
    }
}
