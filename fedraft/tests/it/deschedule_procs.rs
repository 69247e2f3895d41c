//! End to end with real processes, the descheduler: three `fedraft server` processes and three
//! simulated members, dc2 with three 1-CPU nodes. A Divided Deployment of six 600m replicas over
//! dc1 and dc2 gets 3/3, one replica per dc2 node; then one dc2 node turns NotReady, which the
//! placement cannot foresee, and one replica stays Pending unschedulable there. Without a
//! policy it is only reported (with its since) and nothing moves; with `descheduling:
//! {pendingSeconds: 3}` it moves to dc1 after the wait, make-before-break, and all six replicas
//! end up ready. A bad policy is a 4xx naming the field.

use std::time::Duration;

use fedraft_kubesim::{SimConfig, Simulator};
use serde_json::{json, Value};

use crate::support::*;

const NS: &str = "shop";
const NAME: &str = "web";
const IMAGE: &str = "registry.example/web:1";
/// The dc2 node that stops being Ready once the replicas are placed.
const NODE_LOST: u32 = 2;

async fn sim(name: &str, nodes: u32, cpu: &str) -> fedraft_kubesim::SimHandle {
    Simulator::start(SimConfig {
        name: name.into(),
        nodes,
        node_cpu: cpu.into(),
        status_delay: Duration::from_millis(100),
        bookmark_interval: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .await
    .expect("starting a simulated member cluster")
}

fn web(descheduling: Option<Value>) -> Value {
    let mut doc = json!({
        "template": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": NAME},
            "spec": {
                "replicas": 6,
                "selector": {"matchLabels": {"app": NAME}},
                "template": {
                    "metadata": {"labels": {"app": NAME}},
                    "spec": {"containers": [{
                        "name": "web", "image": IMAGE,
                        "resources": {"requests": {"cpu": "600m"}}
                    }]}
                }
            }
        },
        "placement": {"clusters": ["dc1", "dc2"], "replicas": {"mode": "Divided"}}
    });
    if let Some(d) = descheduling {
        doc["descheduling"] = d;
    }
    doc
}

async fn rollout_doc(fed: &Fed) -> Value {
    fed.get(&format!("/v1/namespaces/{NS}/objects/{NAME}/rollout"))
        .await
}

/// dc2's entry under `descheduling.pending`, once reported.
async fn pending_on_dc2(fed: &Fed) -> Option<Value> {
    let doc = rollout_doc(fed).await;
    doc.pointer("/descheduling/pending")?
        .as_array()?
        .iter()
        .find(|p| p["cluster"] == "dc2")
        .cloned()
}

/// A write's status and body from the first node that answers without a server error.
async fn try_put(fed: &Fed, body: &Value) -> (u16, Value) {
    let path = format!("/v1/namespaces/{NS}/objects/{NAME}");
    eventually(LIMIT, "PUT with a bad policy", || async {
        for i in (0..fed.procs.nodes.len()).filter(|i| fed.procs.nodes[*i].running()) {
            let Ok(resp) = fed
                .procs
                .req(i, reqwest::Method::PUT, &path)
                .json(body)
                .send()
                .await
            else {
                continue;
            };
            let status = resp.status();
            if status.is_server_error() {
                continue;
            }
            return Some((status.as_u16(), resp.json().await.unwrap_or(Value::Null)));
        }
        None
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_pending_replicas_move_only_with_the_policy() {
    // The heavy slot is the federation's (`Fed` takes it when it lays out its processes).
    let sims = vec![
        sim("dc1", 3, "8").await,
        sim("dc2", 3, "1").await,
        sim("dc3", 1, "8").await,
    ];
    let fed = Fed::start_with_members(sims).await;
    fed.register_all(10, 1).await;
    eventually(LIMIT, "dc2's capacity reported", || async {
        let v = fed.get("/v1/clusters/dc2").await;
        (v.pointer("/status/capacity/available/cpuMillis")
            .and_then(Value::as_u64)
            == Some(3000))
        .then_some(())
    })
    .await;

    // Bad input: 4xx naming the field, nothing stored.
    let (status, body) = try_put(&fed, &web(Some(json!({"pendingSeconds": 10_000_000})))).await;
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(
        body.to_string().contains("descheduling.pendingSeconds"),
        "{body}"
    );

    // Policy off: the stuck replica is reported, with since, and stays where it is.
    fed.put(NS, NAME, web(None)).await;
    eventually(LIMIT, "placed 3/3", || async {
        let p = fed.placement(NS, NAME).await;
        (p.get("dc1") == Some(&3) && p.get("dc2") == Some(&3)).then_some(())
    })
    .await;
    fed.wait_deployment("dc2", NS, NAME, 3, IMAGE).await;
    let node = format!("dc2-node-{}", NODE_LOST);
    fed.sim("dc2")
        .admin()
        .set_node_ready(&node, false)
        .expect("a dc2 node turns NotReady");
    let pending = eventually(LIMIT, "dc2's Pending replica reported", || async {
        pending_on_dc2(&fed)
            .await
            .filter(|p| p["replicas"] == 1 && p["sinceMs"].is_u64())
    })
    .await;
    assert!(
        pending["dueAtMs"].is_null(),
        "no policy, no due time: {pending}"
    );
    let since = pending["sinceMs"].as_u64().unwrap_or(0);
    // Log time passes well beyond what the policy will wait (ticks every 500 ms).
    eventually(LIMIT, "log time 5 s past the report", || async {
        let v = fed.get("/v1/system/state").await;
        let now = v["logTimeMs"].as_u64()?;
        (now > since + 5_000).then_some(())
    })
    .await;
    assert_eq!(
        fed.placement(NS, NAME).await.get("dc2"),
        Some(&3),
        "nothing moves without the policy"
    );

    // Policy on: after 3 s of log time the stuck replica moves to dc1.
    fed.put(NS, NAME, web(Some(json!({"pendingSeconds": 3}))))
        .await;
    eventually(
        LIMIT,
        "dc2 shrunk to what it runs, dc1 took the rest",
        || async {
            let p = fed.placement(NS, NAME).await;
            (p.get("dc1") == Some(&4) && p.get("dc2") == Some(&2)).then_some(())
        },
    )
    .await;
    let doc = rollout_doc(&fed).await;
    let held = &doc["descheduling"]["held"];
    assert_eq!(held[0]["cluster"], "dc2", "{doc}");
    assert_eq!(held[0]["replicas"], 2, "{doc}");
    assert_eq!(
        doc["descheduling"]["last"]["clusters"][0]["from"], 3,
        "{doc}"
    );
    fed.wait_deployment("dc1", NS, NAME, 4, IMAGE).await;
    fed.wait_deployment("dc2", NS, NAME, 2, IMAGE).await;
    eventually(LIMIT, "six replicas ready", || async {
        let v = fed
            .get(&format!("/v1/namespaces/{NS}/objects/{NAME}"))
            .await;
        (v.pointer("/status/readyReplicas").and_then(Value::as_u64) == Some(6)).then_some(())
    })
    .await;
    // Nothing is stuck any more, and nothing went back.
    eventually(LIMIT, "no Pending replicas left", || async {
        pending_on_dc2(&fed).await.is_none().then_some(())
    })
    .await;
    assert_eq!(fed.placement(NS, NAME).await.get("dc2"), Some(&2));
}
