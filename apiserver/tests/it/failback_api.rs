//! Fail-back through the API of a real three-node group: an object put with
//! `failBack: {afterRecoveryHeld: N}` fails over from a cluster that goes dark, its rollout
//! document names that cluster as pending (no due time while it is dark, Ready-since plus N
//! once it is back), and the placement returns to it only once N seconds of log time have
//! passed since it turned Ready. Log time moves with the heartbeat entries this test proposes
//! (there are no executors here). A choice outside its bounds is a 400 naming the field.

use std::sync::Mutex;
use std::time::Duration;

use crate::common::{send, TestCluster, ADMIN};
use fedraft_apiserver::ApiConfig;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_core::model::ObjectKey;
use fedraft_raft::Proposal;
use reqwest::Method;
use serde_json::{json, Value};

const HELD_S: u64 = 2;
const PATH: &str = "/v1/namespaces/default/objects/web";

/// One heartbeat entry from `names`: the only thing that moves log time in this test.
async fn beat(c: &TestCluster, names: &[&str], n: &mut u32) {
    *n += 1;
    let p = Proposal {
        request_id: format!("fb-hb-{n}"),
        actor: "executor".into(),
        command: Command::Heartbeats(
            names
                .iter()
                .map(|c| Heartbeat {
                    cluster: c.to_string(),
                    capacity: None,
                })
                .collect(),
        ),
    };
    let applied = c.leader().node.propose(p).await.expect("proposed");
    assert!(applied.outcome.is_accepted(), "{:?}", applied.outcome);
}

/// Log time and the object's replicas on `cluster`, read together from the leader's state.
fn on(c: &TestCluster, cluster: &str) -> (u64, u32) {
    let cluster = cluster.to_string();
    c.leader().node.read_stale(move |s| {
        let n = s
            .object("default", "web")
            .map_or(0, |o| o.replicas_on(&cluster));
        (s.log_time_ms(), n)
    })
}

async fn rollout_doc(c: &TestCluster, seen: &Mutex<Vec<String>>) -> Value {
    let r = send(
        c.req(
            c.leader(),
            Method::GET,
            &format!("{PATH}/rollout"),
            Some(ADMIN),
        ),
        seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_over_object_returns_after_the_recovery_hold() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    // dc2 turns NotReady after 2 s without heartbeats and Ready again at its first one.
    for body in [
        json!({"name": "dc1", "apiEndpoint": "https://dc1:6443"}),
        json!({"name": "dc2", "apiEndpoint": "https://dc2:6443",
               "failureThresholdSeconds": 2, "successThresholdSeconds": 0}),
    ] {
        let r = send(
            c.req(leader, Method::POST, "/v1/clusters", Some(ADMIN))
                .json(&body),
            &seen,
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let mut n = 0;
    beat(&c, &["dc1", "dc2"], &mut n).await;

    let web = json!({
        "template": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                     "spec": {"replicas": 4, "template": {"spec": {"containers": [
                         {"name": "web", "image": "nginx:1.25"}]}}}},
        "placement": {"replicas": {"mode": "Divided"},
                      "failover": {"gracePeriodSeconds": 1}},
        "failBack": {"afterRecoveryHeld": HELD_S},
    });
    let r = send(
        c.req(leader, Method::PUT, PATH, Some(ADMIN)).json(&web),
        &seen,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["status"]["placement"], json!({"dc1": 2, "dc2": 2}));
    let doc = rollout_doc(&c, &seen).await;
    assert_eq!(
        doc["failBack"]["policy"],
        json!({"afterRecoveryHeld": HELD_S})
    );
    assert_eq!(doc["failBack"]["pending"], json!([]), "{doc}");

    // dc2 goes dark: only dc1 beats until failover has moved dc2's replicas.
    let mut waited = 0;
    while on(&c, "dc2").1 > 0 {
        if waited >= 200 {
            let why = c.leader().node.read_stale(|s| {
                format!(
                    "{:?} {:?}",
                    s.cluster("dc2").map(|c| &c.status),
                    s.object("default", "web").map(|o| &o.status)
                )
            });
            panic!("no failover from dc2: {why}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        beat(&c, &["dc1"], &mut n).await;
        waited += 1;
    }
    assert_eq!(on(&c, "dc1").1, 4);
    let doc = rollout_doc(&c, &seen).await;
    let pending = &doc["failBack"]["pending"];
    assert_eq!(
        pending,
        &json!([{"cluster": "dc2", "readySinceMs": null, "dueAtMs": null}]),
        "{doc}"
    );

    // dc2 is back: Ready at once, and due to fail back HELD_S seconds of log time later.
    beat(&c, &["dc1", "dc2"], &mut n).await;
    let since = leader.node.read_stale(|s| {
        s.cluster("dc2")
            .map(|c| (c.status.health, c.status.health_since_ms))
    });
    let Some((fedraft_core::model::Health::Ready, since)) = since else {
        panic!("dc2 not Ready: {since:?}");
    };
    let due = since + HELD_S * 1000;
    let doc = rollout_doc(&c, &seen).await;
    assert_eq!(
        doc["failBack"]["pending"],
        json!([{"cluster": "dc2", "readySinceMs": since, "dueAtMs": due}]),
        "{doc}"
    );

    // Heartbeats move log time on; no replica returns before the hold is over.
    let mut waited = 0;
    loop {
        let (now, back) = on(&c, "dc2");
        if back > 0 {
            assert!(now >= due, "failed back at {now}, due {due}");
            assert_eq!(back, 2);
            break;
        }
        assert!(waited < 200, "no fail-back by {now} (due {due})");
        tokio::time::sleep(Duration::from_millis(100)).await;
        beat(&c, &["dc1", "dc2"], &mut n).await;
        waited += 1;
    }
    let doc = rollout_doc(&c, &seen).await;
    let fb = &doc["failBack"];
    assert_eq!(fb["pending"], json!([]), "{doc}");
    assert_eq!(
        fb["last"]["clusters"],
        json!([{"cluster": "dc2", "readySinceMs": since}])
    );
    assert_eq!(fb["last"]["heldSeconds"], HELD_S);
    // Make-before-break: dc1 keeps its 4 until dc2's replicas report ready.
    let held = leader
        .node
        .read_stale(|s| s.held_on(&ObjectKey::new("default", "web"), "dc1"));
    assert_eq!(held, Some(4));

    // A hold past one week is refused before it reaches the log, naming the field.
    let before = on(&c, "dc2");
    let mut bad = web.clone();
    bad["failBack"] = json!({"afterRecoveryHeld": 8 * 24 * 3600});
    let r = send(
        c.req(leader, Method::PUT, PATH, Some(ADMIN)).json(&bad),
        &seen,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(
        r.json["error"]["field"], "failBack.afterRecoveryHeld",
        "{}",
        r.text
    );
    // So is a choice that is neither `never` nor `afterRecoveryHeld`.
    bad["failBack"] = json!("sometimes");
    let r = send(
        c.req(leader, Method::PUT, PATH, Some(ADMIN)).json(&bad),
        &seen,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("failBack"), "{}", r.text);
    assert_eq!(on(&c, "dc2"), before);
    let doc = rollout_doc(&c, &seen).await;
    assert_eq!(
        doc["failBack"]["policy"],
        json!({"afterRecoveryHeld": HELD_S})
    );
}
