//! The timeline's incident tools in the browser, on the federation the failover test built: from
//! an explanation to the state just before the move, the server-side filters (actor, object,
//! cluster), the page's narrowing to placement changes, a time resolving to an index, and a
//! shared link reopening the same index and filter. Called by `console_follows_a_failover_and_
//! replays_it` once dc2 has failed over, so the records hold a failover to look at.

use serde_json::{json, Value};

use super::webdriver::Browser;
use super::{assert_labelled, LIMIT};

/// The timeline's filters, its jumps (from an explanation to the state just before the move, to a
/// time) and a shared link that reopens the same view at the same index.
pub(super) async fn filters_and_jumps(b: &Browser, ui: &str, before: u64) {
    // From the explanation to the state just before the move: dc2 still held replicas.
    b.click("#tl-explain button[data-goto]").await;
    let prior = b
        .wait_for(
            "the state just before the failover",
            LIMIT,
            r#"
        const at = document.getElementById('tl-cursor').value;
        const row = document.querySelector(`#tl-state[data-at="${at}"] tr[data-object="shop/web"]`);
        return row && row.dataset.placement"#,
        )
        .await;
    assert!(prior.as_str().is_some_and(|p| p.contains("dc2")), "{prior}");
    let rows = "return [...document.querySelectorAll('#tl-records tr[data-index]')]\
                .map((r) => [...r.children].map((c) => c.textContent))";
    let all = b.js(rows, json!([])).await;
    let all_n = all.as_array().map_or(0, Vec::len);
    let filter = |field: &'static str, value: &'static str| async move {
        b.js(
            "for (const f of ['object', 'cluster', 'actor', 'since', 'until']) \
               document.getElementById('tl-' + f).value = ''; \
             document.getElementById('tl-' + arguments[0]).value = arguments[1]; \
             document.getElementById('tl-apply').click(); return null",
            json!([field, value]),
        )
        .await;
        b.wait_for(
            &format!("the timeline filtered by {field}"),
            LIMIT,
            &format!(
                "return document.getElementById('tl-records').dataset.loaded === \
                 new URLSearchParams({{{field}: '{value}'}}).toString()"
            ),
        )
        .await;
        b.js(rows, json!([])).await
    };
    // By actor: every record is that principal's.
    let by_actor = filter("actor", "ops-admin").await;
    let by_actor = by_actor.as_array().cloned().unwrap_or_default();
    assert!(
        !by_actor.is_empty() && by_actor.len() < all_n,
        "{by_actor:?}"
    );
    assert!(by_actor.iter().all(|r| r[2] == "ops-admin"), "{by_actor:?}");
    // By object: the write of ops/db is there, the write of shop/web is not.
    let by_object = filter("object", "ops/db").await;
    let by_object = by_object.as_array().cloned().unwrap_or_default();
    let command = |r: &Value| r[3].as_str().unwrap_or_default().to_string();
    assert!(
        by_object.iter().any(|r| command(r) == "PutObject ops/db"),
        "{by_object:?}"
    );
    assert!(
        !by_object.iter().any(|r| command(r).ends_with(" shop/web")),
        "{by_object:?}"
    );
    // By cluster: dc2's records include its failover, and fewer than everything.
    filter("cluster", "dc2").await;
    let failovers = b
        .js(
            "return document.querySelectorAll('#tl-records tr.cat-failover').length",
            json!([]),
        )
        .await;
    assert!(failovers.as_u64().is_some_and(|n| n > 0), "{failovers}");
    assert_labelled(b, "timeline filtered").await;
    b.screenshot("05b-timeline-dc2").await;
    // Only placement changes: every row shown names a decision.
    b.js(
        "const s = document.getElementById('tl-show'); s.value = 'placement'; \
         s.dispatchEvent(new Event('change', {bubbles: true})); return null",
        json!([]),
    )
    .await;
    let moves = b
        .js(
            "return [...document.querySelectorAll('#tl-records tr[data-index]')].map((r) => r.children[5].textContent)",
            json!([]),
        )
        .await;
    assert!(
        moves.as_array().is_some_and(
            |m| !m.is_empty() && m.iter().all(|t| t.as_str().is_some_and(|t| !t.is_empty()))
        ),
        "{moves}"
    );
    // A time goes to the last index at or before it.
    let (index, time) = {
        let v = b
            .js(
                "const r = document.querySelector('#tl-records tr[data-index]'); \
                 return [Number(r.dataset.index), new Date(Number(r.dataset.time)).toISOString()]",
                json!([]),
            )
            .await;
        (
            v[0].as_u64().unwrap_or(0),
            v[1].as_str().unwrap_or_default().to_string(),
        )
    };
    b.type_into("#tl-goto", &time).await;
    b.click("#tl-goto-submit").await;
    let at = b
        .wait_for(
            "the cursor at the time",
            LIMIT,
            "return document.getElementById('tl-msg').textContent.includes(' is index ') && \
             Number(document.getElementById('tl-cursor').value)",
        )
        .await;
    assert!(
        at.as_u64().is_some_and(|i| i >= index),
        "{at} for {time} (record {index})"
    );
    // A shared link reopens the view with its filter and the state at its index.
    // (Through another page, so that the link loads the console afresh; the token stays in
    // this tab's session storage.)
    b.goto("about:blank").await;
    b.goto(&format!("{ui}#/timeline?cluster=dc2&at={before}"))
        .await;
    let old = b
        .wait_for(
            "the shared link's state",
            LIMIT,
            &format!(
                "return document.getElementById('tl-cluster')?.value === 'dc2' && \
                 document.querySelector('#tl-state[data-at=\"{before}\"] tr[data-object=\"shop/web\"]')?.dataset.placement"
            ),
        )
        .await;
    assert_eq!(old, json!("dc1:2 dc2:2 dc3:2"));
    b.screenshot("05c-timeline-shared-link").await;
}
