//! The console with a fleet-sized state: a thousand member clusters and ten thousand objects,
//! seeded through the API (many writes in flight), then the Fleet and Workloads views opened,
//! filtered and paged in headless Chromium. Each step is timed in the page itself (from the
//! action to the DOM showing its result, observed by a `MutationObserver`) and must finish within
//! [`BOUND_MS`], a bound generous for a loaded CI machine; the figures are printed (`SCALE ...`).
//!
//! Size: 1,000 clusters and 2,000 objects by default, seeded in about 40 s on a two-core machine
//! running a debug build (10,000 objects take about 170 s there, at ~60 writes/s);
//! `FEDRAFT_CONSOLE_SCALE=1000,10000` runs the full fleet-sized state (any `CLUSTERS,OBJECTS`).
//! Last, each view is loaded cold from a link and its first page timed from navigation: the
//! page follows the watch from a list's resource version, so no view waits for the whole state.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

use super::webdriver::Browser;
use super::{call, layout, shots_dir, sign_in, ADMIN, LIMIT};
use fedraft_testkit::procs::Cluster;

/// Upper bound of every timed step, in milliseconds.
const BOUND_MS: f64 = 3_000.0;
/// Writes in flight while seeding.
const IN_FLIGHT: usize = 48;
const REGIONS: usize = 10;
const NAMESPACES: usize = 20;

fn scale() -> (usize, usize) {
    std::env::var("FEDRAFT_CONSOLE_SCALE")
        .ok()
        .and_then(|v| {
            let (c, o) = v.split_once(',')?;
            Some((c.trim().parse().ok()?, o.trim().parse().ok()?))
        })
        .unwrap_or((1_000, 2_000))
}

fn cluster_name(i: usize) -> String {
    format!("c{i:04}")
}

/// Sends every request of `bodies` (method, path, body) with [`IN_FLIGHT`] in flight, each to
/// the nodes in turn until one takes it.
async fn seed(procs: &Cluster, what: &str, writes: Vec<(reqwest::Method, String, Value)>) {
    let started = Instant::now();
    let n = writes.len();
    let failures: Vec<String> = futures::stream::iter(writes)
        .map(|(m, path, body)| async move {
            for attempt in 0..50 {
                let i = attempt % procs.nodes.len();
                let resp = procs.req(i, m.clone(), &path).json(&body).send().await;
                match resp {
                    Ok(r) if r.status().is_success() => return None,
                    // A retry of a write whose first answer was lost (a 5xx under load) finds
                    // it already done.
                    Ok(r) if r.status() == reqwest::StatusCode::CONFLICT && attempt > 0 => {
                        return None
                    }
                    Ok(r) if r.status().is_server_error() => {}
                    Ok(r) => {
                        let status = r.status();
                        return Some(format!(
                            "{path}: {status} {}",
                            r.text().await.unwrap_or_default()
                        ));
                    }
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(format!("{path}: no node took it"))
        })
        .buffer_unordered(IN_FLIGHT)
        .filter_map(|f| async move { f })
        .collect()
        .await;
    assert!(failures.is_empty(), "{what}: {failures:?}");
    let took = started.elapsed();
    eprintln!(
        "SCALE seeded {n} {what} in {took:?} ({:.0}/s)",
        n as f64 / took.as_secs_f64()
    );
}

/// Runs `action` in the page and returns the milliseconds until `done` (an expression) holds,
/// as the page measures them.
async fn timed(b: &Browser, what: &str, action: &str, done: &str) -> f64 {
    let script = format!(
        "window.__took = null; const t0 = performance.now(); \
         const check = () => {{ if (window.__took === null && ({done})) {{ window.__took = performance.now() - t0; obs.disconnect(); }} }}; \
         const obs = new MutationObserver(check); \
         obs.observe(document.body, {{subtree: true, childList: true, attributes: true, characterData: true}}); \
         {action}; check(); return null"
    );
    b.js(&script, json!([])).await;
    let ms = b
        .wait_for(what, LIMIT, "return window.__took")
        .await
        .as_f64()
        .unwrap_or(f64::MAX);
    eprintln!("SCALE {what}: {ms:.0} ms");
    assert!(
        ms < BOUND_MS,
        "{what} took {ms:.0} ms (bound {BOUND_MS} ms)"
    );
    ms
}

fn rows(table: &str, attr: &str) -> String {
    format!("document.querySelectorAll('#{table} tr[{attr}]').length")
}

fn total(table: &str) -> String {
    format!("document.querySelector('#{table} [data-total]')?.dataset.total")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_stays_responsive_with_a_fleet_sized_state() {
    let (clusters, objects) = scale();
    let started = Instant::now();
    let dir = fedraft_testkit::temp_dir("console-scale");
    let mut l = layout();
    l.cluster_id = "fedraft-console-scale".into();
    // Executors off: the test measures the console against a fleet-sized state, and a
    // thousand members that do not exist would only be probed in vain (in a debug build on a
    // small machine that probing, not raft, bounds the seeding rate).
    l.executors = Vec::new();
    let mut procs = Cluster::layout(dir.path(), "fed", &l);
    procs.start_all();
    procs.wait_agreed_leader(Duration::from_secs(60)).await;

    let writes = (0..clusters)
        .map(|i| {
            let body = json!({"name": cluster_name(i),
                "labels": {"region": format!("r{}", i % REGIONS), "zone": format!("r{}-z{}", i % REGIONS, i % 3)},
                "apiEndpoint": "https://127.0.0.1:9", "failureThresholdSeconds": 3600});
            // PUT (create or replace): a retry after a lost answer is harmless.
            (reqwest::Method::PUT, format!("/v1/clusters/{}", cluster_name(i)), body)
        })
        .collect();
    seed(&procs, "clusters", writes).await;
    let writes = (0..objects)
        .map(|i| {
            let name = format!("app{i:05}");
            let (a, b) = (cluster_name(i % clusters), cluster_name((i + 1) % clusters));
            let body = crate::support::divided(
                &name,
                2,
                "nginx:1",
                &[(a.as_str(), 1), (b.as_str(), 1)],
                60,
                None,
            );
            let path = format!("/v1/namespaces/ns{:02}/objects/{name}", i % NAMESPACES);
            (reqwest::Method::PUT, path, body)
        })
        .collect();
    seed(&procs, "objects", writes).await;
    let listed = call(
        &procs,
        reqwest::Method::GET,
        "/v1/objects?limit=1&stale=true",
        None,
    )
    .await;
    eprintln!(
        "SCALE state ready after {:?}: {} more objects listed",
        started.elapsed(),
        listed["metadata"]["remainingItemCount"]
    );

    let b = Browser::start(&shots_dir()).await;
    sign_in(&b, &procs.url(0, "/ui/"), ADMIN).await;
    // From sign-in to the fleet's first page (one page of clusters, the grid, the sums).
    let synced = Instant::now();
    b.wait_for(
        "the fleet's first page",
        Duration::from_secs(120),
        &format!(
            "return {} === 100 && {} === '{clusters}'",
            rows("fleet-table", "data-cluster"),
            total("fleet-table")
        ),
    )
    .await;
    eprintln!(
        "SCALE fleet's first page, after sign-in: {:?}",
        synced.elapsed()
    );
    b.screenshot("scale-01-fleet").await;

    let fleet_rows = rows("fleet-table", "data-cluster");
    timed(
        &b,
        "fleet next page",
        "document.querySelector('#fleet-table [aria-label=\"next page\"]').click()",
        "document.querySelector('#fleet-table [data-total]')?.textContent.startsWith('rows 101')",
    )
    .await;
    let wanted = cluster_name(clusters - 1);
    timed(&b, "fleet filtered to one cluster",
        &format!("const f = document.getElementById('fleet-filter'); f.value = '{wanted}'; f.dispatchEvent(new Event('input', {{bubbles: true}}))"),
        &format!("{fleet_rows} === 1 && document.querySelector('#fleet-table tr[data-cluster=\"{wanted}\"]') !== null && document.querySelectorAll('[data-tile]').length === 1"),
    ).await;
    timed(&b, "fleet filtered by label",
        "const f = document.getElementById('fleet-filter'); f.value = 'region=r3'; f.dispatchEvent(new Event('input', {bubbles: true}))",
        &format!("{} === '{}'", total("fleet-table"), clusters / REGIONS),
    ).await;

    timed(
        &b,
        "workloads opened (first page of all objects)",
        "location.hash = '#/workloads'",
        &format!(
            "{} === 100 && {} === '{objects}'",
            rows("wl-table", "data-object"),
            total("wl-table")
        ),
    )
    .await;
    b.screenshot("scale-02-workloads").await;
    // Paged before filtering: a namespace of the default size fits on one page.
    timed(
        &b,
        "workloads next page",
        "document.querySelector('#wl-table [aria-label=\"next page\"]').click()",
        "document.querySelector('#wl-table [data-total]')?.textContent.startsWith('rows 101')",
    )
    .await;
    let last = format!("ns{:02}/app{:05}", (objects - 1) % NAMESPACES, objects - 1);
    timed(&b, "workloads filtered to one object",
        &format!("const f = document.getElementById('wl-filter'); f.value = 'app{:05}'; f.dispatchEvent(new Event('input', {{bubbles: true}}))", objects - 1),
        &format!("{} === 1 && document.querySelector('#wl-table tr[data-object=\"{last}\"]') !== null", rows("wl-table", "data-object")),
    ).await;
    timed(&b, "workloads filtered to one namespace",
        "const f = document.getElementById('wl-filter'); f.value = 'ns07/'; f.dispatchEvent(new Event('input', {bubbles: true}))",
        &format!("{} === '{}'", total("wl-table"), objects / NAMESPACES),
    ).await;
    b.screenshot("scale-03-workloads-filtered").await;
    super::assert_labelled(&b, "workloads at scale").await;
    // A cold load of each view straight from a link: how long until its first page is on screen,
    // read in the page as the time since navigation (an upper bound: the test polls every
    // 200 ms). The console must not wait for the whole state before it paints.
    for (view, table, attr, want) in [
        ("fleet", "fleet-table", "data-cluster", clusters),
        ("workloads", "wl-table", "data-object", objects),
    ] {
        b.goto("about:blank").await;
        b.goto(&procs.url(0, &format!("/ui/#/{view}"))).await;
        let ms = b
            .wait_for(
                &format!("{view}'s first page on a cold load"),
                Duration::from_secs(120),
                &format!(
                    "return {} === 100 && {} === '{want}' && performance.now()",
                    rows(table, attr),
                    total(table)
                ),
            )
            .await
            .as_f64()
            .unwrap_or(f64::MAX);
        eprintln!("SCALE {view} first page on a cold load: {ms:.0} ms after navigation");
        assert!(
            ms < BOUND_MS,
            "{view}'s first paint took {ms:.0} ms (bound {BOUND_MS} ms)"
        );
    }
    drop(b);
    eprintln!("SCALE test took {:?}", started.elapsed());
}
