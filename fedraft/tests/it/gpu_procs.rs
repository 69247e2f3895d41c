//! End to end with real processes, GPUs included: three `fedraft server` processes and three
//! simulated members whose GPU nodes differ in size (dc1 four 1-GPU nodes, dc2 two 4-GPU nodes,
//! dc3 none). A 4-GPU replica lands only where a node holds it; the tenant's GPU quota refuses
//! an over-quota write naming the resource; the member gets the tenant's quota as a
//! `ResourceQuota`; and waiting work is placed in fair order when another tenant's workload is
//! deleted.

use std::time::Duration;

use fedraft_kubesim::extended::ExtendedNodes;
use fedraft_kubesim::{SimConfig, Simulator};
use serde_json::{json, Value};

use crate::support::*;

const GPU: &str = "nvidia.com/gpu";

async fn gpu_sim(name: &str, count: u32, amount: u64) -> fedraft_kubesim::SimHandle {
    let extended_nodes = if count == 0 {
        Vec::new()
    } else {
        vec![ExtendedNodes {
            count,
            amount,
            resource: GPU.into(),
        }]
    };
    Simulator::start(SimConfig {
        name: name.into(),
        nodes: 2,
        extended_nodes,
        status_delay: Duration::from_millis(100),
        bookmark_interval: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .await
    .expect("starting a simulated member cluster")
}

/// A Divided Deployment whose replicas each ask for `gpus` GPUs, through limits only.
fn gpu_job(name: &str, replicas: u64, gpus: u64) -> Value {
    json!({
        "template": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{
                        "name": "train",
                        "image": "registry.example/train:1",
                        "resources": {"requests": {"cpu": "100m"}, "limits": {GPU: gpus.to_string()}}
                    }]}
                }
            }
        },
        "placement": {"replicas": {"mode": "Divided"}}
    })
}

/// A write's status and body, from the first node that answers without a server error.
async fn try_put(fed: &Fed, path: &str, body: &Value) -> (u16, Value) {
    eventually(LIMIT, &format!("PUT {path}"), || async {
        for i in (0..fed.procs.nodes.len()).filter(|i| fed.procs.nodes[*i].running()) {
            let Ok(resp) = fed
                .procs
                .req(i, reqwest::Method::PUT, path)
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
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            return Some((status.as_u16(), v));
        }
        None
    })
    .await
}

/// The tenant quota a member holds in `ns`, if any.
async fn member_quota(fed: &Fed, cluster: &str, ns: &str) -> Option<Value> {
    let url = format!(
        "{}/api/v1/namespaces/{ns}/resourcequotas/fedraft-tenant-quota",
        fed.sim(cluster).url()
    );
    let resp = fed.procs.http.get(url).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_fit_quota_member_quota_and_fair_queue() {
    // The heavy slot is the federation's: `Fed` lays out its processes with `Cluster::layout`,
    // which takes it; a second take here would wait on itself.
    let sims = vec![
        gpu_sim("dc1", 4, 1).await,
        gpu_sim("dc2", 2, 4).await,
        gpu_sim("dc3", 0, 0).await,
    ];
    let fed = Fed::start_with_members(sims).await;
    fed.register_all(10, 1).await;
    // The detailed scans arrive with the executors' capacity loop (every second here).
    eventually(
        LIMIT,
        "dc2's 4-GPU nodes in the cluster document",
        || async {
            let v = fed.get("/v1/clusters/dc2").await;
            let largest = v.pointer("/status/extended/largestFreeOnNode/nvidia.com~1gpu");
            (largest.and_then(Value::as_u64) == Some(4)).then_some(())
        },
    )
    .await;

    for (tenant, ns, gpus) in [("a", "team-a", 12), ("b", "team-b", 8)] {
        let body = json!({"namespaces": [ns], "quota": {GPU: gpus}});
        fed.call(
            reqwest::Method::PUT,
            &format!("/v1/tenants/{tenant}"),
            Some(body),
        )
        .await;
    }

    // 4-GPU replicas: dc1 has four GPUs but no node with four; dc3 has none.
    for name in ["big", "big2"] {
        fed.put("team-a", name, gpu_job(name, 1, 4)).await;
        eventually(LIMIT, &format!("{name} placed on dc2 only"), || async {
            let p = fed.placement("team-a", name).await;
            (p.len() == 1 && p.get("dc2") == Some(&1)).then_some(())
        })
        .await;
    }
    fed.wait_deployment("dc2", "team-a", "big", 1, "registry.example/train:1")
        .await;

    // The member enforces the tenant's quota too.
    let quota = eventually(LIMIT, "dc2 holds team-a's ResourceQuota", || async {
        member_quota(&fed, "dc2", "team-a").await
    })
    .await;
    assert_eq!(
        quota.pointer("/spec/hard/requests.nvidia.com~1gpu"),
        Some(&json!("12")),
        "{quota}"
    );
    assert!(member_quota(&fed, "dc1", "team-a").await.is_none());

    // Over the GPU quota (8 held, 12 more asked, 12 allowed): refused, naming the resource.
    let (status, body) = try_put(
        &fed,
        "/v1/namespaces/team-a/objects/huge",
        &gpu_job("huge", 3, 4),
    )
    .await;
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(body.to_string().contains(GPU), "{body}");

    // dc2's nodes are full: a2 waits, then b1. When big goes, tenant a still holds big2 and
    // tenant b nothing, so b1 goes first although a2 waited longer.
    fed.put("team-a", "a2", gpu_job("a2", 1, 4)).await;
    fed.put("team-b", "b1", gpu_job("b1", 1, 4)).await;
    eventually(LIMIT, "two objects waiting", || async {
        let a = fed.get("/v1/tenants/a/queue").await;
        let b = fed.get("/v1/tenants/b/queue").await;
        let n = |v: &Value| v["items"].as_array().map_or(0, Vec::len);
        (n(&a) == 1 && n(&b) == 1).then_some(())
    })
    .await;
    fed.delete("team-a", "big").await;
    eventually(LIMIT, "b1 placed on dc2 in a's place", || async {
        let p = fed.placement("team-b", "b1").await;
        (p.get("dc2") == Some(&1)).then_some(())
    })
    .await;
    assert!(fed.placement("team-a", "a2").await.is_empty());

    // Once nothing of tenant a runs on dc2, its quota leaves with it.
    fed.delete("team-a", "big2").await;
    eventually(LIMIT, "a2 placed where big2 was", || async {
        let p = fed.placement("team-a", "a2").await;
        (p.get("dc2") == Some(&1)).then_some(())
    })
    .await;
    fed.delete("team-a", "a2").await;
    eventually(LIMIT, "team-a's quota gone from dc2", || async {
        member_quota(&fed, "dc2", "team-a")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    assert!(member_quota(&fed, "dc2", "team-b").await.is_some());
}
