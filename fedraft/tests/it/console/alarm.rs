//! The console's state-hash alarm in a real browser: three `fedraft server` processes, the third
//! started with the `raft::health_hash` failpoint (tests only, `store/src/failpoints.rs`), so
//! that it reports a state hash the other two do not share at the same index. Everything else is
//! the real path: the console asks its node for `GET /v1/status/nodes`, that node gathers every
//! member's health over the peer transport and compares the hashes at one index, and the health
//! view must raise the alarm, name the members' hashes, and stay labelled and readable.
//!
//! The failpoint changes only what the node reports; its state, log and archive are those of
//! the others, so nothing else in the federation notices.

use std::time::Duration;

use serde_json::json;

use super::webdriver::Browser;
use super::{assert_labelled, call, layout, shots_dir, sign_in, ADMIN, LIMIT};
use fedraft_testkit::procs::Cluster;

/// What the third node claims its state hashes to: plainly not a SHA-256 of anything.
const ODD_HASH: &str = "0badc0de0badc0de0badc0de0badc0de0badc0de0badc0de0badc0de0badc0de";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_raises_the_alarm_when_members_disagree_on_the_state_hash() {
    let dir = fedraft_testkit::temp_dir("console-alarm");
    let mut l = layout();
    l.cluster_id = "fedraft-console-alarm".into();
    l.executors = Vec::new();
    let mut procs = Cluster::layout(dir.path(), "fed", &l);
    procs.start(0);
    procs.start(1);
    let failpoint = format!("raft::health_hash=return({ODD_HASH})");
    procs.start_with_env(2, &[("FAILPOINTS", failpoint.as_str())]);
    procs.wait_agreed_leader(Duration::from_secs(60)).await;
    // Something in the log, so the index compared is past the first entries.
    call(
        &procs,
        reqwest::Method::PUT,
        "/v1/tenants/blue",
        Some(json!({"namespaces": ["shop"]})),
    )
    .await;

    let b = Browser::start(&shots_dir()).await;
    sign_in(&b, &procs.url(0, "/ui/"), ADMIN).await;
    b.click("#nav-health").await;
    b.wait_for(
        "three members answering",
        LIMIT,
        "return document.querySelectorAll('#health-nodes tr[data-node][data-reachable=\"true\"]').length === 3",
    )
    .await;
    let alarm = b
        .wait_for(
            "the state-hash alarm",
            LIMIT,
            "const a = document.querySelector('#health-compare[data-agree=\"false\"][role=\"alert\"]'); \
             return a && a.textContent",
        )
        .await;
    let text = alarm.as_str().unwrap_or_default();
    assert!(
        text.contains("ALARM: state hashes differ at index"),
        "{text}"
    );
    let node3 = procs.nodes[2].id;
    assert!(
        text.contains(&format!("node {node3}: {ODD_HASH}")),
        "the odd member and its hash are named: {text}"
    );
    let others = b
        .js(
            "return [...document.querySelectorAll('#health-compare li.hash')].map((l) => l.textContent)",
            json!([]),
        )
        .await;
    assert_eq!(
        others.as_array().map(Vec::len),
        Some(3),
        "every member's hash is listed: {others}"
    );
    assert_labelled(&b, "health with the alarm").await;
    b.screenshot("alarm-01-hashes-differ").await;
}
