//! Measures what a fleet host costs per simulated cluster: fills every cluster of a running
//! `fedraft-kubesim --fleet N` with fedraft-like objects (server-side applied Deployments,
//! ConfigMaps and Services carrying fedraft's ownership label, as its executors write them),
//! holds the watches an executor holds on each cluster (nodes, pods and one label-selected
//! watch per written kind), lets the simulated controllers settle, and prints the host's RSS
//! from `/proc` before and after, per cluster.
//!
//! ```text
//! fedraft-kubesim --fleet 1000 --admin-listen 127.0.0.1:0 &   # prints "fleet http://..."
//! cargo run --release -p fedraft-kubesim --example fleet_memory -- \
//!     --fleet http://127.0.0.1:PORT --pid $! --objects 100
//! ```
//!
//! A measuring tool only: it must not be used as a test (it asserts nothing) and must not run
//! inside the host it measures (its own clients would be counted).

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use futures::{stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{json, Value};

const LABEL: &str = "fedraft.io/managed-by";

struct Args {
    fleet: String,
    pid: u32,
    objects: u32,
    parallel: usize,
    settle: Duration,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        fleet: String::new(),
        pid: 0,
        objects: 100,
        parallel: 32,
        settle: Duration::from_secs(5),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--fleet" => a.fleet = v,
            "--pid" => a.pid = v.parse()?,
            "--objects" => a.objects = v.parse()?,
            "--parallel" => a.parallel = v.parse()?,
            "--settle-secs" => a.settle = Duration::from_secs(v.parse()?),
            other => return Err(anyhow!("unknown flag {other}")),
        }
    }
    if a.fleet.is_empty() || a.pid == 0 {
        return Err(anyhow!("--fleet URL and --pid PID are required"));
    }
    Ok(a)
}

fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("no VmRSS for {pid}"))?;
    Ok(kib / 1024.0)
}

/// Object `i` of a cluster: 55 % Deployments, 30 % ConfigMaps, 15 % Services (the bench's mix).
fn object(i: u32) -> (ApiResource, Value) {
    let name = format!("o{i:06}");
    let labels = json!({ LABEL: "fedraft", "app": name });
    match i % 20 {
        0..11 => (
            ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", "Deployment")),
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": name, "labels": labels },
                "spec": {
                    "replicas": 1 + i % 3,
                    "selector": { "matchLabels": { "app": name } },
                    "template": {
                        "metadata": { "labels": { "app": name } },
                        "spec": { "containers": [{ "name": "app", "image": "nginx:1.27",
                            "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } } }] }
                    }
                }
            }),
        ),
        11..17 => (
            ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap")),
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": name, "labels": labels },
                "data": { "settings": format!("object {i} of the fleet bench") }
            }),
        ),
        _ => (
            ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Service")),
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": { "name": name, "labels": labels },
                "spec": { "selector": { "app": name }, "ports": [{ "port": 80 }] }
            }),
        ),
    }
}

fn client(url: &str) -> anyhow::Result<kube::Client> {
    let config = kube::Config::new(url.parse().context("cluster url")?);
    Ok(kube::Client::try_from(config)?)
}

/// Keeps one watch open and drains it until the process ends.
fn hold<K>(api: Api<K>, config: watcher::Config)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, config).boxed();
        while s.next().await.is_some() {}
    });
}

async fn fill(url: String, objects: u32) -> anyhow::Result<()> {
    let c = client(&url)?;
    let params = PatchParams::apply("fedraft").force();
    for i in 0..objects {
        let (ar, body) = object(i);
        let api: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
        api.patch(&format!("o{i:06}"), &params, &Patch::Apply(&body))
            .await
            .with_context(|| format!("{url}: object {i}"))?;
    }
    let selected = watcher::Config::default().labels(&format!("{LABEL}=fedraft"));
    hold(Api::<Node>::all(c.clone()), watcher::Config::default());
    hold(Api::<Pod>::all(c.clone()), watcher::Config::default());
    hold(Api::<Deployment>::all(c.clone()), selected.clone());
    hold(Api::<ConfigMap>::all(c.clone()), selected.clone());
    hold(Api::<Service>::all(c), selected);
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let list: Value = fleet_get(&format!("{}/_fleet/clusters", a.fleet)).await?;
    let urls: Vec<String> = list
        .as_array()
        .ok_or_else(|| anyhow!("fleet list is not an array"))?
        .iter()
        .filter_map(|m| m["url"].as_str().map(str::to_string))
        .collect();
    let n = urls.len().max(1) as f64;
    let idle = rss_mib(a.pid)?;
    println!(
        "clusters {} idle RSS {idle:.0} MiB ({:.0} KiB per cluster)",
        urls.len(),
        idle * 1024.0 / n
    );
    let started = Instant::now();
    let results: Vec<anyhow::Result<()>> = stream::iter(urls)
        .map(|u| fill(u, a.objects))
        .buffer_unordered(a.parallel)
        .collect()
        .await;
    for r in results {
        r?;
    }
    println!(
        "applied {} objects per cluster in {:.1} s",
        a.objects,
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(a.settle).await;
    let full = rss_mib(a.pid)?;
    println!(
        "loaded RSS {full:.0} MiB ({:.0} KiB per cluster, {:.2} MiB per cluster)",
        full * 1024.0 / n,
        full / n
    );
    Ok(())
}

/// `GET url` as JSON: the fleet's admin endpoint is not a Kubernetes API, but a raw request on
/// a kube client for its base URL reaches it without another HTTP client.
async fn fleet_get(url: &str) -> anyhow::Result<Value> {
    let (base, path) = url
        .split_once("/_fleet")
        .ok_or_else(|| anyhow!("{url} is not a fleet URL"))?;
    let c = client(base)?;
    let req = http::Request::get(format!("/_fleet{path}")).body(Vec::new())?;
    Ok(serde_json::from_str(&c.request_text(req).await?)?)
}
