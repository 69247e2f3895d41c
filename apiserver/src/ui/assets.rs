//! The console's files, embedded at build time, each with its content type. The table is the
//! whole set of servable paths: adding a file under `apiserver/ui/` serves nothing until it is
//! listed here. Must not: compute or read anything at run time.

/// One embedded file.
#[derive(Debug)]
pub struct Asset {
    /// Path below `/ui/`.
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

macro_rules! asset {
    ($path:literal, $ct:expr) => {
        Asset {
            path: $path,
            content_type: $ct,
            body: include_bytes!(concat!("../../ui/", $path)),
        }
    };
}

/// Every file the console consists of.
pub static ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("app.css", CSS),
    asset!("js/main.js", JS),
    asset!("js/api.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/fleet.js", JS),
    asset!("js/workloads.js", JS),
    asset!("js/policies.js", JS),
    asset!("js/timeline.js", JS),
    asset!("js/health.js", JS),
    asset!("js/charts.js", JS),
    asset!("js/door.js", JS),
];
