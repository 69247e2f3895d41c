//! The web console in a real browser (headless Chromium over WebDriver), against three
//! `fedraft server` processes and three simulated member clusters: sign in, see the fleet, watch a
//! cluster go dark and its replicas move without a reload, see a Deployment and its Karmada policy
//! written through the Kubernetes-compatible door among the workloads, drag the timeline back to the old
//! placement, open the explanation of the move, and sign in as a tenant who sees only its
//! namespaces. Every view is checked for controls without a label. A screenshot of each step
//! lands in `$CARGO_TARGET_DIR/console-screenshots/`.

mod alarm;
mod scale;
mod timeline;
mod webdriver;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use fedraft_testkit::eventually;
use fedraft_testkit::members::start_sims;
use fedraft_testkit::procs::{Cluster, Layout};
use serde_json::{json, Value};

use crate::support::{divided, BIN, CLUSTERS};
use webdriver::Browser;

const ADMIN: &str = "console-admin-token-0123456789abcdef";
const TENANT: &str = "console-tenant-token-0123456789abcdef";
const LIMIT: Duration = Duration::from_secs(40);
const FAILURE_S: u64 = 3;
const GRACE_S: u64 = 2;

fn layout() -> Layout {
    // FEDRAFT_CONSOLE_TEST_BIN: a copy of the binary under test, for machines where several
    // checkouts share one target directory and may replace `target/debug/fedraft` mid-run.
    let bin = std::env::var_os("FEDRAFT_CONSOLE_TEST_BIN")
        .map_or_else(|| PathBuf::from(BIN), PathBuf::from);
    let mut l = Layout::new(bin, ADMIN);
    l.cluster_id = "fedraft-console".into();
    l.tokens = vec![
        format!("{ADMIN} ops-admin admin"),
        format!("{TENANT} blue-dev tenant:blue"),
    ];
    l.raft = vec![
        "heartbeat_interval_ms = 200".into(),
        "election_timeout_min_ms = 1000".into(),
        "election_timeout_max_ms = 2000".into(),
        "tick_interval_ms = 500".into(),
        "propose_timeout_ms = 10000".into(),
    ];
    l.executors = vec![
        "probe_interval_ms = 300".into(),
        "probe_timeout_ms = 1000".into(),
        "capacity_interval_ms = 1000".into(),
        "resync_period_ms = 3000".into(),
        "status_flush_interval_ms = 200".into(),
        "backoff_max_ms = 1000".into(),
        "owner_lease_ms = 3000".into(),
    ];
    l.log_filter = "info,openraft=warn,fedraft_apiserver=warn,kube_client=warn".into();
    l.http_timeout = Duration::from_secs(5);
    l
}

/// An admin request to the first live node that answers other than 503.
async fn call(procs: &Cluster, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    eventually(LIMIT, &format!("{method} {path}"), || {
        let (method, body) = (method.clone(), body.clone());
        async move {
            for i in 0..procs.nodes.len() {
                let mut req = procs.req(i, method.clone(), path);
                if let Some(b) = &body {
                    req = req.json(b);
                }
                let Ok(resp) = req.send().await else { continue };
                let status = resp.status();
                let v: Value = resp.json().await.unwrap_or(Value::Null);
                if status.is_success() {
                    return Some(v);
                }
                assert!(status.is_server_error(), "{method} {path}: {status} {v}");
            }
            None
        }
    })
    .await
}

/// Controls without an accessible name in the current view (empty when all are labelled).
const UNLABELLED: &str = r#"
const named = (el) => (el.getAttribute('aria-label') || '').trim()
  || (el.getAttribute('aria-labelledby') && document.getElementById(el.getAttribute('aria-labelledby')))
  || (el.id && document.querySelector(`label[for="${CSS.escape(el.id)}"]`))
  || el.closest('label')
  || (el.tagName === 'BUTTON' && el.textContent.trim())
  || (el.tagName === 'A' && el.textContent.trim());
return [...document.querySelectorAll('input, button, select, textarea, a[href]')]
  .filter((el) => el.type !== 'hidden' && !named(el))
  .map((el) => el.outerHTML.slice(0, 120));
"#;

/// Visible text whose colour does not stand out from the background behind it by WCAG AA's
/// ratio (4.5, or 3 for large or bold text of 18.66 px and up): what a screen's reader sees
/// badly. The background is the first non-transparent one up the tree; pictures behind text
/// (SVG marks) are out of scope.
const LOW_CONTRAST: &str = r#"
const rgb = (s) => (s.match(/[\d.]+/g) || []).map(Number);
const lum = ([r, g, b]) => {
  const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
};
const behind = (el) => {
  for (let e = el; e; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c.slice(0, 3);
  }
  return [255, 255, 255];
};
const bad = [];
for (const el of document.querySelectorAll('body *')) {
  const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  const st = getComputedStyle(el);
  if (!own || st.visibility === 'hidden' || st.display === 'none' || !el.getClientRects().length) continue;
  if (el.closest('svg, button:disabled')) continue; // pictures, and disabled controls (exempt in WCAG)
  const [a, b] = [lum(rgb(st.color).slice(0, 3)), lum(behind(el))];
  const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  const large = parseFloat(st.fontSize) >= 18.66 || (parseFloat(st.fontSize) >= 14 && Number(st.fontWeight) >= 700);
  if (ratio < (large ? 3 : 4.5)) bad.push(`${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
}
return bad;
"#;

/// Every control of `view` is named, and its text is readable against its background.
async fn assert_labelled(b: &Browser, view: &str) {
    let bad = b.js(UNLABELLED, json!([])).await;
    assert_eq!(bad, json!([]), "unlabelled controls in {view}");
    let low = b.js(LOW_CONTRAST, json!([])).await;
    assert_eq!(low, json!([]), "text under WCAG AA contrast in {view}");
}

/// The views are reachable from the keyboard alone: Tab from the skip link moves focus into
/// the navigation, and Enter on a link there opens its view.
async fn assert_keyboard_navigation(b: &Browser) {
    b.js("document.activeElement && document.activeElement.blur(); document.body.focus(); return null", json!([])).await;
    let mut seen = Vec::new();
    for _ in 0..8 {
        b.press_keys("\u{E004}").await; // Tab
        let id = b
            .js(
                "return document.activeElement ? document.activeElement.id : ''",
                json!([]),
            )
            .await;
        let id = id.as_str().unwrap_or_default().to_string();
        if id == "nav-timeline" {
            b.press_keys("\u{E007}").await; // Enter
            b.wait_for(
                "the timeline opened from the keyboard",
                LIMIT,
                "return location.hash.startsWith('#/timeline')",
            )
            .await;
            return;
        }
        seen.push(id);
    }
    panic!("Tab never reached the timeline's link; focus went through {seen:?}");
}

fn shots_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::manifest_dir().join("../target"));
    target.join("console-screenshots")
}

async fn sign_in(b: &Browser, url: &str, token: &str) {
    b.goto(url).await;
    b.type_into("#login-token", token).await;
    b.click("#login-submit").await;
    b.wait_for(
        "signed in",
        LIMIT,
        "return document.getElementById('role')?.textContent",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_follows_a_failover_and_replays_it() {
    // `Cluster::layout` takes the heavy slot (one federation at a time) for as long as it lives.
    let started = Instant::now();
    let sims = start_sims(&CLUSTERS).await;
    let dir = fedraft_testkit::temp_dir("console");
    let mut procs = Cluster::layout(dir.path(), "fed", &layout());
    procs.start_all();
    procs.wait_agreed_leader(Duration::from_secs(60)).await;
    eprintln!("CONSOLE leader after {:?}", started.elapsed());
    for (c, sim) in CLUSTERS.iter().zip(&sims) {
        let body = json!({"name": c, "labels": {"region": c, "zone": format!("{c}-a")},
            "apiEndpoint": sim.url(), "failureThresholdSeconds": FAILURE_S, "successThresholdSeconds": 1});
        call(&procs, reqwest::Method::POST, "/v1/clusters", Some(body)).await;
    }
    call(
        &procs,
        reqwest::Method::PUT,
        "/v1/tenants/blue",
        Some(json!({"namespaces": ["shop"]})),
    )
    .await;
    let weights = [("dc1", 1), ("dc2", 1), ("dc3", 1)];
    let web = divided("web", 6, "nginx:1", &weights, GRACE_S, None);
    call(
        &procs,
        reqwest::Method::PUT,
        "/v1/namespaces/shop/objects/web",
        Some(web),
    )
    .await;
    let db = divided("db", 1, "postgres:16", &[("dc1", 1)], GRACE_S, None);
    call(
        &procs,
        reqwest::Method::PUT,
        "/v1/namespaces/ops/objects/db",
        Some(db),
    )
    .await;
    // Through the Kubernetes-compatible door: a Karmada policy and the Deployment it places.
    let policy = json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "api", "namespace": "ops"},
        "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["dc1", "dc3"]}}}});
    call(
        &procs,
        reqwest::Method::POST,
        "/apis/policy.karmada.io/v1alpha1/namespaces/ops/propagationpolicies",
        Some(policy),
    )
    .await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "ops", "labels": {"app": "api"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}},
                              "spec": {"containers": [{"name": "api", "image": "nginx:1"}]}}}});
    call(
        &procs,
        reqwest::Method::POST,
        "/apis/apps/v1/namespaces/ops/deployments",
        Some(deployment),
    )
    .await;
    eventually(LIMIT, "shop/web placed 2/2/2", || async {
        let v = call(
            &procs,
            reqwest::Method::GET,
            "/v1/namespaces/shop/objects/web",
            None,
        )
        .await;
        (v.pointer("/status/placement") == Some(&json!({"dc1": 2, "dc2": 2, "dc3": 2})))
            .then_some(())
    })
    .await;
    let ui = procs.url(0, "/ui/");
    // The console's files need no token; every API call it makes does.
    let anon = reqwest::Client::new();
    for (path, want) in [
        ("/ui/", 200),
        ("/ui/js/main.js", 200),
        ("/v1/clusters", 401),
        ("/v1/watch", 401),
        ("/v1/audit", 401),
    ] {
        let r = anon.get(procs.url(0, path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), want, "{path} without a token");
    }
    eprintln!("CONSOLE cluster up after {:?}", started.elapsed());

    let b = Browser::start(&shots_dir()).await;
    let load = Instant::now();
    sign_in(&b, &ui, ADMIN).await;
    b.wait_for(
        "fleet shows three Ready clusters",
        LIMIT,
        "return document.querySelectorAll('#fleet-table [data-health=\"Ready\"]').length === 3",
    )
    .await;
    // In-page figures: the login page's load (navigation timing), and an upper bound of the time
    // from navigation to a rendered fleet (it includes typing the token and the polling).
    let page = b
        .js(
            "const n = performance.getEntriesByType('navigation')[0]; \
             return [Math.round(n.loadEventEnd), Math.round(performance.now())]",
            json!([]),
        )
        .await;
    eprintln!(
        "CONSOLE login page loaded in {} ms; fleet rendered {} ms after navigation; \
         test-side sign-in to fleet {:?}",
        page[0],
        page[1],
        load.elapsed()
    );
    assert_eq!(
        b.js(
            "return document.getElementById('role').textContent",
            json!([])
        )
        .await,
        "admin"
    );
    assert_labelled(&b, "fleet").await;
    b.screenshot("01-fleet").await;
    // A marker on the page: had anything reloaded it, the marker would be gone.
    b.js("window.__noReload = 1; return 1", json!([])).await;
    let before = call(&procs, reqwest::Method::GET, "/v1/status", None).await["appliedIndex"]
        .as_u64()
        .unwrap();

    sims[1].admin().go_dark(fedraft_kubesim::DarkMode::Refuse);
    b.wait_for("dc2 NotReady in the live fleet", LIMIT,
        "return document.querySelector('#fleet-table tr[data-cluster=\"dc2\"] [data-health=\"NotReady\"]') !== null").await;
    b.wait_for(
        "the dark tile",
        LIMIT,
        "return document.querySelector('[data-tile=\"dc2\"].dark') !== null",
    )
    .await;
    // Why it is NotReady, with log times as times, not raw milliseconds.
    let why = b
        .wait_for(
            "why dc2 is NotReady",
            LIMIT,
            "return document.querySelector('[data-why=\"dc2\"]')?.textContent",
        )
        .await;
    let why = why.as_str().unwrap_or_default();
    assert!(
        why.starts_with("NotReady since 20") && !why.contains(" ms"),
        "{why}"
    );
    b.screenshot("02-dc2-dark").await;

    b.click("#nav-workloads").await;
    b.wait_for(
        "shop/web moved off dc2 in the live view",
        LIMIT,
        r#"
        const el = document.querySelector('tr[data-object="shop/web"] [data-placement]');
        return el && !el.dataset.placement.includes('dc2') && el.dataset.placement"#,
    )
    .await;
    assert_eq!(
        b.js("return window.__noReload", json!([])).await,
        json!(1),
        "the page reloaded"
    );
    // The door's Deployment is a resource template, placed per cluster like a native object;
    // its Karmada policy is listed with what it declares.
    let door_placed = b
        .wait_for(
            "the door's Deployment placed as a template",
            LIMIT,
            r#"
        const row = document.querySelector('tr[data-object="ops/deployment.apps:api"]');
        const p = row && row.querySelector('[data-placement]');
        return row && row.querySelector('[data-door-template="api"]') && p && p.dataset.placement !== 'none' && p.dataset.placement"#,
        )
        .await;
    assert!(
        door_placed
            .as_str()
            .is_some_and(|p| p.contains("dc1") && !p.contains("dc2")),
        "{door_placed}"
    );
    b.click("#wl-door summary").await;
    let declared = b
        .wait_for(
            "the Karmada policy in the door's documents",
            LIMIT,
            "return document.querySelector('#door-docs tr[data-door=\"PropagationPolicy/ops/api\"]')?.textContent",
        )
        .await;
    assert!(
        declared
            .as_str()
            .is_some_and(|t| t.contains("clusters dc1, dc3")),
        "{declared}"
    );
    b.click("[aria-label=\"details of shop/web\"]").await;
    b.find("#chart-ready", LIMIT).await;
    b.wait_for(
        "the placement history chart",
        LIMIT,
        "return document.querySelector('#chart-history') !== null",
    )
    .await;
    // Ready vs desired over time, from the archive: it ends where the object stands now.
    let readiness = b
        .wait_for(
            "the ready vs desired chart",
            LIMIT,
            "return document.querySelector('svg#chart-readiness')?.getAttribute('aria-label')",
        )
        .await;
    let readiness = readiness.as_str().unwrap_or_default().to_string();
    let desired: u32 = readiness
        .split("now desired ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(desired > 0 && readiness.contains("ready "), "{readiness}");
    b.wait_for(
        "the rendered manifests, none for dc2",
        LIMIT,
        r#"
        const pres = [...document.querySelectorAll('#wl-rendered pre[data-cluster]')];
        return pres.length > 0 && pres.every((p) => p.dataset.cluster !== 'dc2')"#,
    )
    .await;
    assert_labelled(&b, "workloads").await;
    b.screenshot("03-replicas-moved").await;

    // The Policies view: the Karmada policy with the object it actually placed, and where.
    b.click("#nav-policies").await;
    let bound = b
        .wait_for(
            "the policy's bound object and its placement",
            LIMIT,
            r#"
        const row = document.querySelector('#pol-table tr[data-policy="PropagationPolicy/ops/api"]');
        const li = row && row.querySelector('li[data-bound="ops/deployment.apps:api"]');
        return li && li.dataset.placement !== 'none' && [li.dataset.placement, row.textContent]"#,
        )
        .await;
    let placed = bound[0].as_str().unwrap_or_default();
    assert!(placed.contains("dc1") && !placed.contains("dc2"), "{bound}");
    let row = bound[1].as_str().unwrap_or_default();
    assert!(
        row.contains("clusters dc1, dc3") && row.contains("places"),
        "{row}"
    );
    assert_eq!(
        b.js(
            "return document.querySelectorAll('#pol-table tr[data-policy]').length",
            json!([])
        )
        .await,
        json!(1),
        "one door policy, one row"
    );
    assert_labelled(&b, "policies").await;
    b.screenshot("03b-policies").await;
    assert_keyboard_navigation(&b).await;

    // The timeline, cursor dragged back to before the failure: the old placement.
    b.click("#nav-timeline").await;
    b.find("#tl-cursor", LIMIT).await;
    b.wait_for(
        "audit records",
        LIMIT,
        "return document.querySelectorAll('#tl-records tr[data-index]').length > 0",
    )
    .await;
    b.js(
        "const c = document.getElementById('tl-cursor'); c.value = String(arguments[0]); \
         c.dispatchEvent(new Event('input', {bubbles: true})); return c.value",
        json!([before]),
    )
    .await;
    let old = b.wait_for("the placement before the failure", LIMIT,
        &format!("return document.querySelector('#tl-state[data-at=\"{before}\"] tr[data-object=\"shop/web\"]')?.dataset.placement")).await;
    assert_eq!(old, json!("dc1:2 dc2:2 dc3:2"));
    assert!(b
        .js("return location.hash", json!([]))
        .await
        .as_str()
        .unwrap_or("")
        .contains(&format!("at={before}")));
    assert_labelled(&b, "timeline").await;
    b.screenshot("04-timeline-before-failure").await;

    // The failover's explanation: the newest placement change of shop/web.
    b.click("#tl-records tr.cat-failover button[data-explain=\"shop/web\"]")
        .await;
    let why = b
        .wait_for(
            "the explanation",
            LIMIT,
            "return document.querySelector('#tl-explain .explanation')?.textContent",
        )
        .await;
    assert!(why.as_str().is_some_and(|t| t.contains("dc2")), "{why}");
    b.screenshot("05-explanation").await;
    timeline::filters_and_jumps(&b, &ui, before).await;

    b.click("#nav-health").await;
    b.wait_for(
        "fedraft health",
        LIMIT,
        "return document.querySelectorAll('#health-nodes tr[data-node][data-reachable=\"true\"]').length === 3",
    )
    .await;
    // Each member answered for itself over the peer transport; their hashes agree at one index.
    let agreed = b
        .wait_for(
            "the members' state hashes compared",
            LIMIT,
            "return document.querySelector('#health-compare[data-agree=\"true\"]')?.dataset.index",
        )
        .await;
    assert!(
        agreed.as_str().is_some_and(|i| i.parse::<u64>().is_ok()),
        "{agreed}"
    );
    // The write rate and apply lag charts fill from the page's own samples.
    let lag = b
        .wait_for(
            "the apply lag chart of the three members",
            LIMIT,
            r#"
            const l = document.querySelector('svg#chart-apply-lag')?.getAttribute('aria-label') || '';
            const r = document.querySelector('svg#chart-write-rate');
            return r && ['node 1', 'node 2', 'node 3'].every((n) => l.includes(n)) ? l : null"#,
        )
        .await;
    assert!(
        lag.as_str().is_some_and(|l| l.contains("per member")),
        "{lag}"
    );
    assert_labelled(&b, "health").await;
    b.screenshot("06-health").await;

    // A tenant sees its namespace only and is offered no fleet or cluster actions. It signs in
    // with a link that carries its token in the fragment, which leaves the address bar at once.
    b.click("#logout").await;
    b.goto(&format!("{ui}#token={TENANT}")).await;
    b.wait_for(
        "signed in from a link",
        LIMIT,
        "return document.getElementById('role')?.textContent",
    )
    .await;
    let address = b.js("return location.href", json!([])).await;
    assert!(
        !address.as_str().unwrap_or("").contains(TENANT),
        "the token stayed in the address: {address}"
    );
    assert_eq!(
        b.js(
            "return document.getElementById('role').textContent",
            json!([])
        )
        .await,
        "tenant"
    );
    b.wait_for(
        "the tenant's objects",
        LIMIT,
        "return document.querySelector('tr[data-object=\"shop/web\"]') !== null",
    )
    .await;
    let seen = b
        .js(
            "return [...document.querySelectorAll('tr[data-object]')].map((r) => r.dataset.object)",
            json!([]),
        )
        .await;
    assert_eq!(seen, json!(["shop/web"]));
    let nav = b
        .js(
            "return [...document.querySelectorAll('#nav a')].map((a) => a.id)",
            json!([]),
        )
        .await;
    assert_eq!(nav, json!(["nav-workloads", "nav-timeline"]));
    assert_labelled(&b, "tenant workloads").await;
    b.screenshot("07-tenant").await;
    b.click("#nav-timeline").await;
    b.wait_for(
        "the tenant's timeline",
        LIMIT,
        "return document.querySelectorAll('#tl-records tr[data-index]').length > 0",
    )
    .await;
    let targets = b.js("return [...document.querySelectorAll('#tl-records td:nth-child(4)')].map((t) => t.textContent).join('|')", json!([])).await;
    assert!(
        !targets.as_str().unwrap_or("").contains("ops/db"),
        "{targets}"
    );
    b.screenshot("08-tenant-timeline").await;
    drop(b);
    eprintln!("CONSOLE test took {:?}", started.elapsed());
}
