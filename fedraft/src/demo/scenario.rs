//! The failover scenario of `fedraft demo`: its steps, what each one checks (the replicated
//! state and the simulated clusters must agree) and the placement table it prints.
//!
//! Must not change anything but through the demo's admin proposals and the simulators' fault
//! switches; deciding placement or health is the state machine's job.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use fedraft_core::command::Command;
use fedraft_core::model::{ClusterSpec, Health, ObjectSpec};
use fedraft_kubesim::{DarkMode, SimHandle};
use serde_json::{json, Value};

use super::{wait_for, Demo, CLUSTERS};
use crate::output::table;

const NAMESPACE: &str = "demo";
const WORKLOAD: &str = "web";
const REPLICAS: u64 = 6;
const IMAGE: &str = "nginx:1.27";
const DC3_TAG: &str = "1.27-alpine";
/// How long any one step may take before it counts as failed; generous for a loaded machine.
const STEP_LIMIT: Duration = Duration::from_secs(45);

impl Demo {
    fn health(&self, cluster: &str) -> Option<Health> {
        self.read(|s| s.cluster(cluster).map(|c| c.status.health))
    }

    /// The workload's Deployment as the member cluster holds it (None if absent or dark).
    async fn live(&self, cluster: &str) -> Option<Value> {
        let url = format!(
            "{}/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{WORKLOAD}",
            self.sim(cluster).url()
        );
        let resp = self.http.get(url).send().await.ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.json().await.ok()
    }

    /// Desired replicas per cluster from the replicated placement.
    fn placement(&self) -> BTreeMap<String, u64> {
        self.read(|s| {
            s.object(NAMESPACE, WORKLOAD)
                .map(|o| {
                    o.status
                        .clusters
                        .iter()
                        .map(|c| (String::from(&*c.cluster), u64::from(c.replicas)))
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// Checks that every cluster holds exactly what placement wants (absent where it wants 0)
    /// with the right image and all replicas ready, that the status reported through the log
    /// agrees, and that `check` accepts the placement.
    async fn converged(&self, check: impl Fn(&BTreeMap<String, u64>) -> bool) -> bool {
        let want = self.placement();
        if want.values().sum::<u64>() != REPLICAS || !check(&want) {
            return false;
        }
        // What the executors reported back through the log must agree with the clusters.
        let reported = self.read(|s| {
            s.object(NAMESPACE, WORKLOAD).is_some_and(|o| {
                u64::from(o.status.ready_replicas) == REPLICAS
                    && o.status
                        .clusters
                        .iter()
                        .all(|c| c.replicas == 0 || c.applied)
            })
        });
        if !reported {
            return false;
        }
        for c in CLUSTERS {
            let n = want.get(c).copied().unwrap_or(0);
            if self.health(c) != Some(Health::Ready) {
                // A dark cluster cannot be inspected; placement must keep nothing there.
                if n != 0 {
                    return false;
                }
                continue;
            }
            let live = self.live(c).await;
            match (n, live) {
                (0, None) => {}
                (0, Some(d)) => {
                    if replicas(&d) != 0 {
                        return false;
                    }
                }
                (n, Some(d)) => {
                    let ready = d
                        .pointer("/status/readyReplicas")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    if replicas(&d) != n || ready != n || image(&d) != expected_image(c) {
                        return false;
                    }
                }
                (_, None) => return false,
            }
        }
        true
    }

    async fn print_table(&self) {
        let mut rows = Vec::new();
        let want = self.placement();
        let (objects, ready) = self.read(|s| {
            let o = s.object(NAMESPACE, WORKLOAD);
            let per: BTreeMap<String, (bool, u32)> = o
                .map(|o| {
                    o.status
                        .clusters
                        .iter()
                        .map(|c| (String::from(&*c.cluster), (c.applied, c.ready_replicas)))
                        .collect()
                })
                .unwrap_or_default();
            (per, o.map(|o| o.status.ready_replicas).unwrap_or(0))
        });
        for c in CLUSTERS {
            let health = self
                .health(c)
                .map(|h| format!("{h:?}"))
                .unwrap_or_else(|| "-".into());
            let (applied, rep_ready) = objects.get(c).copied().unwrap_or((false, 0));
            let (live_n, live_img) = match self.live(c).await {
                Some(d) => (replicas(&d).to_string(), image(&d)),
                None => ("-".into(), "-".into()),
            };
            rows.push(vec![
                c.to_string(),
                health,
                want.get(c).copied().unwrap_or(0).to_string(),
                if applied { "yes" } else { "no" }.to_string(),
                rep_ready.to_string(),
                live_n,
                live_img,
            ]);
        }
        let headers = [
            "CLUSTER",
            "HEALTH",
            "DESIRED",
            "APPLIED",
            "READY",
            "IN-CLUSTER",
            "IMAGE",
        ];
        for line in table(&headers, &rows).lines() {
            println!("    {line}");
        }
        println!("    aggregated ready replicas: {ready}/{REPLICAS}");
    }
}

fn replicas(d: &Value) -> u64 {
    d.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn image(d: &Value) -> String {
    d.pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn expected_image(cluster: &str) -> String {
    if cluster == "dc3" {
        format!("nginx:{DC3_TAG}")
    } else {
        IMAGE.to_string()
    }
}

fn cluster_spec(name: &str, sim: &SimHandle) -> ClusterSpec {
    let mut spec = ClusterSpec::new(name, sim.url());
    spec.labels.insert("region".into(), name.into());
    spec.failure_threshold_seconds = 3;
    spec.success_threshold_seconds = 3;
    spec
}

fn workload() -> anyhow::Result<ObjectSpec> {
    let template = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": WORKLOAD, "labels": { "app": WORKLOAD } },
        "spec": {
            "replicas": REPLICAS,
            "selector": { "matchLabels": { "app": WORKLOAD } },
            "template": {
                "metadata": { "labels": { "app": WORKLOAD } },
                "spec": { "containers": [{
                    "name": "web", "image": IMAGE,
                    "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                }]},
            },
        },
    });
    let weights: serde_json::Map<String, Value> = CLUSTERS
        .iter()
        .map(|c| (c.to_string(), json!({ "weight": 1 })))
        .collect();
    serde_json::from_value(json!({
        "template": template.to_string(),
        "placement": {
            "replicas": { "mode": "Divided", "division": { "staticWeights": { "weights": weights } } },
            "failover": { "enabled": true, "gracePeriodSeconds": 3 },
        },
        "overrides": [{ "clusterName": "dc3", "image": { "tag": DC3_TAG } }],
    }))
    .context("building the sample workload")
}
/// Runs the scenario, narrating; returns each step with whether it held. Stops at the first
/// failure because every later step builds on the earlier ones.
pub(super) async fn run(demo: &Demo) -> Vec<(String, bool)> {
    let mut results = Vec::new();
    macro_rules! step {
        ($name:expr, $ok:expr) => {{
            let ok: bool = $ok;
            let name: String = $name.into();
            println!("  {} {name}", if ok { "PASS" } else { "FAIL" });
            results.push((name, ok));
            if !ok {
                return results;
            }
        }};
    }

    println!("1. registering dc1, dc2, dc3 (failure threshold 3 s, success threshold 3 s)");
    let mut registered = true;
    for name in CLUSTERS {
        if let Err(e) = demo
            .propose(Command::RegisterCluster(cluster_spec(name, demo.sim(name))))
            .await
        {
            println!("    registering {name}: {e:#}");
            registered = false;
        }
    }
    let ready = registered
        && wait_for(STEP_LIMIT, || {
            CLUSTERS
                .iter()
                .all(|c| demo.health(c) == Some(Health::Ready))
                .then_some(())
        })
        .await
        .is_some();
    step!("all three clusters registered and Ready", ready);

    println!("2. applying {NAMESPACE}/{WORKLOAD}: Deployment, {REPLICAS} replicas Divided 1:1:1, image tag {DC3_TAG} on dc3, failover grace 3 s");
    let put = match workload() {
        Ok(spec) => demo
            .propose(Command::PutObject {
                namespace: NAMESPACE.into(),
                name: WORKLOAD.into(),
                spec,
                expected_version: None,
            })
            .await
            .map_err(|e| println!("    {e:#}"))
            .is_ok(),
        Err(e) => {
            println!("    {e:#}");
            false
        }
    };
    let started = Instant::now();
    let converged = put
        && poll_async(STEP_LIMIT, || {
            demo.converged(|w| CLUSTERS.iter().all(|c| w.get(*c) == Some(&2)))
        })
        .await;
    demo.print_table().await;
    step!(
        format!(
            "workload converged: 2 replicas ready in each cluster, override on dc3 ({:.1} s)",
            started.elapsed().as_secs_f64()
        ),
        converged
    );

    println!("3. dc2 goes dark (connections refused)");
    demo.sim("dc2").admin().go_dark(DarkMode::Refuse);
    let dark_at = Instant::now();
    let not_ready = wait_for(STEP_LIMIT, || {
        (demo.health("dc2") == Some(Health::NotReady)).then_some(())
    })
    .await
    .is_some();
    step!(
        format!(
            "dc2 NotReady after {:.1} s",
            dark_at.elapsed().as_secs_f64()
        ),
        not_ready
    );

    println!("4. waiting for the failover grace period (3 s) to move dc2's replicas");
    let moved = poll_async(STEP_LIMIT, || {
        demo.converged(|w| {
            w.get("dc2").copied().unwrap_or(0) == 0
                && w.get("dc1").copied().unwrap_or(0) > 0
                && w.get("dc3").copied().unwrap_or(0) > 0
        })
    })
    .await;
    demo.print_table().await;
    step!(
        format!(
            "replicas moved off dc2 to dc1 and dc3, all {REPLICAS} ready ({:.1} s after dark)",
            dark_at.elapsed().as_secs_f64()
        ),
        moved
    );

    println!("5. dc2 comes back");
    demo.sim("dc2").admin().come_back();
    let back_at = Instant::now();
    let ready_again = wait_for(STEP_LIMIT, || {
        (demo.health("dc2") == Some(Health::Ready)).then_some(())
    })
    .await
    .is_some();
    let still_ok = ready_again && poll_async(STEP_LIMIT, || demo.converged(|_| true)).await;
    demo.print_table().await;
    step!(
        format!(
            "dc2 Ready again after {:.1} s, workload still fully ready",
            back_at.elapsed().as_secs_f64()
        ),
        still_ok
    );

    println!("6. kubectl reads the same federation through the Kubernetes-compatible door");
    match demo.kubectl.clusters_seen_by_kubectl().await {
        None => println!("    (kubectl is not installed; skipped)"),
        Some(seen) => {
            let seen = seen.unwrap_or_else(|e| {
                println!("    {e:#}");
                Vec::new()
            });
            println!("    kubectl get clusters: {}", seen.join(", "));
            step!(
                "kubectl, with the demo's kubeconfig, lists dc1, dc2 and dc3",
                seen == CLUSTERS
            );
        }
    }
    results
}

/// Polls an async condition every 200 ms until it holds or `limit` passes.
async fn poll_async<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
