//! What `fedraft bench fleet` asks of fedraft and reads back: the workload mix, the API calls
//! (timed) and the convergence check over fedraft's own status (`fleet_members` reads what the
//! simulated clusters hold).
//!
//! The mix, per object index (seeded, so a run is repeatable): 45 % Divided Deployments over 4
//! named clusters in 2 regions, 10 % spread Deployments (6 named clusters in 3 regions, spread
//! over exactly 2 regions), 30 % ConfigMaps and 15 % Services, each Duplicated to 2 clusters.
//! Objects are spread over 100 namespaces so convergence can be polled a namespace at a time.
//!
//! Must not: write to a member cluster (the members are only read), or count a failed call as
//! a latency sample.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// Namespaces objects are spread over.
pub const NAMESPACES: usize = 100;
pub const MANAGED: &str = "fedraft.io/managed-by=fedraft";

/// A call fedraft answered with an error status (what a retry decides on).
#[derive(Debug, thiserror::Error)]
#[error("{method} {path}: {status}: {body}")]
pub struct Refused {
    pub method: reqwest::Method,
    pub path: String,
    pub status: reqwest::StatusCode,
    pub body: String,
}

/// Whether a retried create was refused only because an earlier try, which timed out, had
/// committed (409 Conflict): done, though untimed.
pub fn created_earlier(e: &anyhow::Error, method: &reqwest::Method, attempt: u32) -> bool {
    attempt > 0
        && method == reqwest::Method::POST
        && e.downcast_ref::<Refused>()
            .is_some_and(|r| r.status == reqwest::StatusCode::CONFLICT)
}

/// fedraft's API with the bench's token; every call bounded.
#[derive(Clone)]
pub struct FedApi {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl FedApi {
    pub fn new(base: &str, token: &str) -> anyhow::Result<FedApi> {
        Ok(FedApi {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .pool_max_idle_per_host(64)
                .build()?,
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
        })
    }

    /// A mutating call; Ok(latency) on 2xx.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let r = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .with_context(|| format!("{method} {path}"))?;
        let took = started.elapsed();
        let status = r.status();
        if !status.is_success() {
            let text = r.text().await.unwrap_or_default();
            return Err(Refused {
                method,
                path: path.to_string(),
                status,
                body: text.chars().take(300).collect(),
            }
            .into());
        }
        Ok(took)
    }

    /// A read; (latency, body).
    pub async fn get(&self, path: &str) -> anyhow::Result<(Duration, Value)> {
        let started = Instant::now();
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = r.status();
        let body: Value = r.json().await.with_context(|| format!("GET {path}"))?;
        if !status.is_success() {
            bail!("GET {path}: {status}: {body}");
        }
        Ok((started.elapsed(), body))
    }
}

/// The simulated clusters: name -> (region, url), and names per region.
pub struct Members {
    pub clusters: BTreeMap<String, (String, String)>,
    pub regions: BTreeMap<String, Vec<String>>,
}

impl Members {
    pub fn from_fleet(list: &Value) -> anyhow::Result<Members> {
        let mut clusters = BTreeMap::new();
        let mut regions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in list.as_array().context("fleet cluster list")? {
            let name = c["name"].as_str().context("cluster name")?.to_string();
            let region = c["region"].as_str().context("cluster region")?.to_string();
            let url = c["url"].as_str().context("cluster url")?.to_string();
            regions
                .entry(region.clone())
                .or_default()
                .push(name.clone());
            clusters.insert(name, (region, url));
        }
        if regions.len() < 3 {
            bail!(
                "the mix needs at least 3 regions, the fleet has {}",
                regions.len()
            );
        }
        Ok(Members { clusters, regions })
    }

    /// `n` distinct clusters from each of `k` distinct regions.
    fn pick(&self, rng: &mut StdRng, k: usize, n: usize) -> Vec<String> {
        let names: Vec<&Vec<String>> = self.regions.values().collect();
        let mut chosen_regions = BTreeSet::new();
        while chosen_regions.len() < k {
            chosen_regions.insert(rng.random_range(0..names.len()));
        }
        let mut out = Vec::new();
        for r in chosen_regions {
            let members = names[r];
            let mut picked = BTreeSet::new();
            while picked.len() < n.min(members.len()) {
                picked.insert(rng.random_range(0..members.len()));
            }
            out.extend(picked.into_iter().map(|i| members[i].clone()));
        }
        out
    }
}

/// Registers a cluster with short health thresholds.
pub fn registration(name: &str, region: &str, url: &str, failure_s: u64) -> Value {
    json!({
        "name": name,
        "labels": { "region": region },
        "apiEndpoint": url,
        "failureThresholdSeconds": failure_s,
        "successThresholdSeconds": 1,
    })
}

fn deployment(name: &str, replicas: u64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": "nginx:1.27",
                    "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } } }] }
            }
        }
    })
}

/// The namespace and name of object `i`.
pub fn object_id(i: u64) -> (String, String) {
    (
        format!("fleet-{:02}", i % NAMESPACES as u64),
        format!("o{i:06}"),
    )
}

/// The body of object `i` (the same for the same seed and fleet).
pub fn object_body(members: &Members, seed: u64, i: u64, grace_s: u64) -> Value {
    let mut rng = StdRng::seed_from_u64(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let (_, name) = object_id(i);
    let failover = json!({ "enabled": true, "gracePeriodSeconds": grace_s });
    match rng.random_range(0..100u32) {
        0..45 => json!({
            "template": deployment(&name, 2),
            "placement": { "clusters": members.pick(&mut rng, 2, 2),
                "replicas": { "mode": "Divided" }, "failover": failover },
        }),
        45..55 => json!({
            "template": deployment(&name, 4),
            "placement": { "clusters": members.pick(&mut rng, 3, 2),
                "spreadConstraints": [{ "labelKey": "region", "minGroups": 2, "maxGroups": 2 }],
                "replicas": { "mode": "Divided" }, "failover": failover },
        }),
        55..85 => json!({
            "template": { "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name },
                "data": { "settings": format!("object {i} of the fleet bench") } },
            "placement": { "clusters": members.pick(&mut rng, 2, 1), "failover": failover },
        }),
        _ => json!({
            "template": { "apiVersion": "v1", "kind": "Service", "metadata": { "name": name },
                "spec": { "selector": { "app": name }, "ports": [{ "port": 80 }] } },
            "placement": { "clusters": members.pick(&mut rng, 2, 1), "failover": failover },
        }),
    }
}

/// One object as fedraft reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    pub kind: String,
    /// cluster -> replicas (workloads) or 0 (others); clusters with nothing placed omitted for
    /// workloads.
    pub placement: BTreeMap<String, u64>,
    pub desired: Option<u64>,
    /// Applied everywhere placed, and ready where replicas are placed.
    pub converged: bool,
    /// What fedraft placed is applied and ready, the rest reported as a shortfall.
    pub short: bool,
}

/// Reads one namespace's objects: "ns/name" -> Placed.
pub async fn read_namespace(
    api: &FedApi,
    ns: &str,
) -> anyhow::Result<(Duration, BTreeMap<String, Placed>)> {
    let (took, body) = api
        .get(&format!("/v1/namespaces/{ns}/objects?stale=true"))
        .await?;
    let items = body["items"].as_array().context("object list items")?;
    let out = items
        .iter()
        .map(|o| {
            // The API's object document: `name`, `template`, `placement`, `status` at the top.
            let name = o.get("name").and_then(Value::as_str).unwrap_or("");
            (format!("{ns}/{name}"), Placed::of(o))
        })
        .collect();
    Ok((took, out))
}

impl Placed {
    /// Converged, or as far as the fleet's capacity lets it (the rest reported).
    pub fn settled(&self) -> bool {
        self.converged || self.short
    }

    /// What the API's object document `o` says of its placement.
    fn of(o: &Value) -> Placed {
        let kind = o
            .pointer("/template/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        // Only Deployments carry replicas here; the others are Duplicated whole.
        let desired = (kind == "Deployment")
            .then(|| o.pointer("/status/desiredReplicas").and_then(Value::as_u64))
            .flatten();
        let clusters = o.pointer("/status/clusters").and_then(Value::as_object);
        let mut placement = BTreeMap::new();
        let mut converged = clusters.is_some_and(|c| !c.is_empty());
        let mut short = o.pointer("/status/shortfall").is_some_and(|s| !s.is_null());
        for (c, st) in clusters.into_iter().flatten() {
            let replicas = st["replicas"].as_u64().unwrap_or(0);
            let ready = st["readyReplicas"].as_u64().unwrap_or(0);
            let applied = st["applied"].as_bool().unwrap_or(false);
            if desired.is_some() && replicas == 0 {
                continue;
            }
            converged &= applied && (desired.is_none() || ready >= replicas);
            short &= applied && ready >= replicas;
            placement.insert(c.clone(), replicas);
        }
        if let Some(d) = desired {
            converged &= placement.values().sum::<u64>() == d;
        }
        Placed {
            kind: kind.to_string(),
            placement,
            desired,
            converged,
            short,
        }
    }
}

/// Polls `check` every 500 ms until it yields, or fails after `limit`.
pub async fn wait_until<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Puts `body` (`{"select": .., "fault": ..}`) on the fleet host's clusters.
pub async fn set_fault(http: &reqwest::Client, admin: &str, body: &Value) -> anyhow::Result<()> {
    http.post(format!("{admin}/_fleet/faults"))
        .json(body)
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

/// Clears every fault of the fleet.
pub async fn clear_faults(http: &reqwest::Client, admin: &str) -> anyhow::Result<()> {
    set_fault(
        http,
        admin,
        &json!({"select": {}, "fault": {"kind": "clear"}}),
    )
    .await
}

/// Namespaces read at once by [`read_all`]: one at a time, a poll of a hundred namespaces took
/// about two seconds at 20,000 objects, and that delay showed in every phase it timed.
const READ_CONCURRENCY: usize = 8;

/// Every object of the bench's namespaces.
pub async fn read_all(api: &FedApi) -> anyhow::Result<BTreeMap<String, Placed>> {
    use futures::{StreamExt, TryStreamExt};
    // The steady phase's objects too: the members hold them, so the final check must know them.
    let namespaces = (0..NAMESPACES)
        .map(|n| format!("fleet-{n:02}"))
        .chain(["fleet-lat".to_string()]);
    let pages: Vec<BTreeMap<String, Placed>> = futures::stream::iter(namespaces)
        .map(|ns| async move { read_namespace(api, &ns).await.map(|(_, objs)| objs) })
        .buffer_unordered(READ_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(pages.into_iter().flatten().collect())
}

/// Replicas that left a cluster outside `dark` between the two views.
pub fn moved_from_healthy(
    before: &BTreeMap<String, Placed>,
    after: &BTreeMap<String, Placed>,
    dark: &BTreeSet<String>,
) -> u64 {
    before
        .iter()
        .filter_map(|(id, b)| Some(left_healthy(b, after.get(id)?, dark)))
        .sum()
}

/// Replicas of one workload that left a cluster outside `dark` from `before` to `after` (0 for
/// objects without replicas).
pub fn left_healthy(before: &Placed, after: &Placed, dark: &BTreeSet<String>) -> u64 {
    if before.desired.is_none() {
        return 0;
    }
    before
        .placement
        .iter()
        .filter(|(c, _)| !dark.contains(*c))
        .map(|(c, r)| r.saturating_sub(after.placement.get(c).copied().unwrap_or(0)))
        .sum()
}

/// Cluster name -> health, from fedraft.
pub async fn cluster_health(api: &FedApi) -> anyhow::Result<BTreeMap<String, String>> {
    cluster_field(api, "/status/health", "").await
}

/// The node owning each cluster ("leader" where no ownership lease is in force).
pub async fn cluster_owners(api: &FedApi) -> anyhow::Result<BTreeMap<String, String>> {
    cluster_field(api, "/owner/node", "leader").await
}

/// Cluster name -> the string at `pointer` in its document (`absent` where it has none).
async fn cluster_field(
    api: &FedApi,
    pointer: &str,
    absent: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let (_, body) = api.get("/v1/clusters?stale=true").await?;
    let mut out = BTreeMap::new();
    for c in body["items"].as_array().context("cluster list items")? {
        let name = c.pointer("/metadata/name").or(c.get("name"));
        let name = name.and_then(Value::as_str).unwrap_or("").to_string();
        let field = c.pointer(pointer).and_then(Value::as_str);
        out.insert(name, field.unwrap_or(absent).to_string());
    }
    Ok(out)
}

/// Nearest-rank percentile in milliseconds of unsorted durations (NaN when empty).
pub fn percentile(samples: &[Duration], p: f64) -> f64 {
    let mut us: Vec<u32> = samples
        .iter()
        .map(|d| d.as_micros().min(u128::from(u32::MAX)) as u32)
        .collect();
    us.sort_unstable();
    super::report::percentile_ms(&us, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(n: usize, regions: usize) -> Members {
        let list: Vec<Value> = (0..n)
            .map(|i| json!({"name": format!("m{i:04}"), "region": format!("region-{:02}", i * regions / n), "url": "http://x"}))
            .collect();
        Members::from_fleet(&Value::Array(list)).unwrap()
    }

    /// An object fedraft could place only in part is settled once that part is applied and
    /// ready and the rest is reported short; a converged one needs every replica placed.
    #[test]
    fn a_short_object_is_settled_once_its_placed_part_is_ready() {
        let doc = |ready: u64, shortfall: Value| {
            json!({"name": "o", "template": {"kind": "Deployment"}, "status": {
                "desiredReplicas": 4, "shortfall": shortfall,
                "clusters": {"m1": {"replicas": 2, "readyReplicas": ready, "applied": true}}}})
        };
        let short = json!({"replicas": 2, "message": "full"});
        let p = Placed::of(&doc(2, short.clone()));
        assert!(!p.converged && p.short && p.settled(), "{p:?}");
        assert!(
            !Placed::of(&doc(1, short)).settled(),
            "a replica not ready yet"
        );
        assert!(
            !Placed::of(&doc(2, Value::Null)).settled(),
            "no shortfall reported"
        );
    }

    #[test]
    fn the_mix_is_repeatable_and_spans_regions() {
        let m = fleet(100, 10);
        let a = object_body(&m, 7, 42, 10);
        assert_eq!(a, object_body(&m, 7, 42, 10));
        let mut kinds = BTreeMap::new();
        for i in 0..2000 {
            let body = object_body(&m, 7, i, 10);
            let kind = body["template"]["kind"].as_str().unwrap().to_string();
            *kinds.entry(kind).or_insert(0) += 1;
            let clusters: Vec<String> =
                serde_json::from_value(body["placement"]["clusters"].clone()).unwrap();
            let regions: BTreeSet<&String> = clusters.iter().map(|c| &m.clusters[c].0).collect();
            assert!(regions.len() >= 2, "{body}");
        }
        // 55 % Deployments, 30 % ConfigMaps, 15 % Services, within sampling noise.
        assert!((1000..1200).contains(&kinds["Deployment"]), "{kinds:?}");
        assert!((520..680).contains(&kinds["ConfigMap"]), "{kinds:?}");
        assert!((230..370).contains(&kinds["Service"]), "{kinds:?}");
    }
}
