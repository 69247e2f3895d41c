//! A fleet host: many simulated member clusters in one process, each a whole [`Simulator`] on
//! its own loopback port (so every cluster is still "a plain server URL", and going dark in
//! `refuse` mode still closes exactly that cluster's listener), plus faults for groups of them.
//!
//! Clusters are named `{prefix}{index:04}` and split into `regions` contiguous regions named
//! `region-{r:02}` (1,000 clusters in 10 regions: 100 per region), so "a region goes dark" is one
//! call. Group faults ([`FleetFault`]) are dark, slow (added latency), flapping (dark and back
//! on a period) and clear; a new fault on a cluster replaces its flapping.
//!
//! The fleet's own control surface is [`Fleet`] and, over HTTP on its admin listener:
//!
//! | endpoint | effect |
//! |---|---|
//! | `GET /_fleet/clusters` | `[{name, region, url, dark}]` |
//! | `POST /_fleet/faults` `{"select":{"names":[..],"regions":[..]},"fault":{"kind":..}}` | fault every selected cluster |
//! | `GET /_fleet/stats` | request and write counters summed over the fleet |
//! | `GET /_fleet/clusters/{name}/stats` | one cluster's counters |
//!
//! A selector with neither names nor regions selects every cluster. Cost per cluster is its
//! store (objects shared with the watch history, which is kept short: see
//! [`FleetConfig::default`]), its watch channel (sized to that history), its controller task
//! (idle when nothing changed) and its listener with the connections its clients hold.
//!
//! Must not: share state between clusters (each has its own store, watches and faults), or
//! contact the addresses it hands out.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{Admin, DarkMode, SimConfig, SimError, SimHandle, Simulator, StatsSnapshot};

/// What a fleet is made of.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub clusters: u32,
    /// Cluster names are this prefix and a four-digit index.
    pub prefix: String,
    /// Contiguous regions the clusters are split into (at least 1).
    pub regions: u32,
    /// Every cluster's settings; `name` is replaced, the listen port is always 0 (the IP kept).
    pub template: SimConfig,
    /// Where the fleet's `/_fleet` endpoints listen; None serves them nowhere.
    pub admin_listen: Option<SocketAddr>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            clusters: 100,
            prefix: "m".into(),
            regions: 10,
            template: SimConfig {
                // Retained events are only for watches resuming after a break (live watches
                // are fed from the channel), and a member that lost them relists its 100 or
                // so objects. Each retained event pins an old version of its object, so the
                // default 10,000 per cluster would dominate the memory of a thousand clusters.
                watch_history: 200,
                ..SimConfig::default()
            },
            admin_listen: None,
        }
    }
}

/// One cluster of the fleet.
pub struct Member {
    pub name: String,
    pub region: String,
    sim: SimHandle,
}

impl Member {
    pub fn url(&self) -> String {
        self.sim.url()
    }

    pub fn admin(&self) -> &Admin {
        self.sim.admin()
    }
}

/// Which clusters a fault applies to: the named ones and those of the named regions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FleetSelector {
    pub names: Vec<String>,
    pub regions: Vec<String>,
}

/// A fault for a group of clusters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum FleetFault {
    /// Unreachable until cleared.
    Dark { mode: DarkMode },
    /// Every API request waits this long first.
    #[serde(rename_all = "camelCase")]
    Slow { latency_ms: u64 },
    /// Dark for `dark_ms`, reachable for `light_ms`, over and over, until another fault.
    #[serde(rename_all = "camelCase")]
    Flapping {
        mode: DarkMode,
        dark_ms: u64,
        light_ms: u64,
    },
    /// Reachable, no added latency, no flapping.
    Clear,
}

#[derive(Deserialize)]
struct FaultRequest {
    #[serde(default)]
    select: FleetSelector,
    fault: FleetFault,
}

struct Inner {
    members: Vec<Member>,
    index: BTreeMap<String, usize>,
    flapping: Mutex<BTreeMap<String, JoinHandle<()>>>,
}

/// A running fleet. Dropping it stops every cluster (without waiting).
pub struct Fleet {
    inner: Arc<Inner>,
    admin_addr: Option<SocketAddr>,
    stop_admin: watch::Sender<bool>,
}

fn region_of(i: u32, clusters: u32, regions: u32) -> String {
    let r = (u64::from(i) * u64::from(regions) / u64::from(clusters.max(1))) as u32;
    format!("region-{r:02}")
}

impl Fleet {
    /// Binds the admin listener, starts every cluster (each bound and serving before the next
    /// starts), then serves the admin listener.
    pub async fn start(config: FleetConfig) -> Result<Fleet, SimError> {
        if config.regions == 0 || config.regions > config.clusters.max(1) {
            return Err(SimError::Config(format!(
                "{} regions for {} clusters",
                config.regions, config.clusters
            )));
        }
        // Bound before the members: a caller that picked a free port for it would otherwise race
        // a thousand members binding port 0, and lose now and then.
        let admin = match config.admin_listen {
            Some(a) => {
                let l =
                    crate::server::bind(a).map_err(|source| SimError::Bind { addr: a, source })?;
                let bound = l
                    .local_addr()
                    .map_err(|source| SimError::Bind { addr: a, source })?;
                Some((l, bound))
            }
            None => None,
        };
        let mut members = Vec::with_capacity(config.clusters as usize);
        let mut index = BTreeMap::new();
        for i in 0..config.clusters {
            let name = format!("{}{i:04}", config.prefix);
            let mut c = config.template.clone();
            c.name = name.clone();
            c.listen.set_port(0);
            // Clusters of one fleet must not share load-balancer ranges by accident of the
            // name hash only; spread them deterministically instead.
            if c.lb_ip_prefix.is_none() {
                c.lb_ip_prefix = Some(format!("10.{}", 1 + i % 250));
            }
            let sim = Simulator::start(c).await?;
            index.insert(name.clone(), members.len());
            members.push(Member {
                name,
                region: region_of(i, config.clusters, config.regions),
                sim,
            });
        }
        let inner = Arc::new(Inner {
            members,
            index,
            flapping: Mutex::new(BTreeMap::new()),
        });
        let (stop_admin, mut stop_rx) = watch::channel(false);
        let mut admin_addr = None;
        if let Some((l, bound)) = admin {
            admin_addr = Some(bound);
            let app = router().with_state(inner.clone());
            tokio::spawn(async move {
                let stop = async move {
                    let _ = stop_rx.wait_for(|s| *s).await;
                };
                if let Err(e) = axum::serve(l, app).with_graceful_shutdown(stop).await {
                    tracing::error!(error = %e, "fleet admin listener failed");
                }
            });
        }
        tracing::info!(clusters = inner.members.len(), ?admin_addr, "fleet serving");
        Ok(Fleet {
            inner,
            admin_addr,
            stop_admin,
        })
    }

    pub fn members(&self) -> &[Member] {
        &self.inner.members
    }

    pub fn get(&self, name: &str) -> Option<&Member> {
        self.inner.index.get(name).map(|&i| &self.inner.members[i])
    }

    /// The address of the `/_fleet` endpoints, if an admin listener was configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// `http://{addr}` of the `/_fleet` endpoints, if an admin listener was configured.
    pub fn admin_url(&self) -> Option<String> {
        self.admin_addr.map(|a| format!("http://{a}"))
    }

    /// Applies `fault` to every selected cluster; returns their names.
    pub fn fault(&self, select: &FleetSelector, fault: &FleetFault) -> Vec<String> {
        self.inner.fault(select, fault)
    }

    /// Counters summed over every cluster.
    pub fn stats(&self) -> StatsSnapshot {
        self.inner.stats()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop_admin.send_replace(true);
        for (_, t) in std::mem::take(&mut *lock(&self.inner.flapping)) {
            t.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn selected(&self, s: &FleetSelector) -> Vec<&Member> {
        let all = s.names.is_empty() && s.regions.is_empty();
        self.members
            .iter()
            .filter(|m| all || s.names.contains(&m.name) || s.regions.contains(&m.region))
            .collect()
    }

    fn fault(&self, select: &FleetSelector, fault: &FleetFault) -> Vec<String> {
        let chosen = self.selected(select);
        let mut flapping = lock(&self.flapping);
        for m in &chosen {
            if let Some(t) = flapping.remove(&m.name) {
                t.abort();
            }
            let admin = m.admin();
            match fault {
                FleetFault::Dark { mode } => admin.go_dark(*mode),
                FleetFault::Slow { latency_ms } => {
                    admin.set_latency(Duration::from_millis(*latency_ms))
                }
                FleetFault::Flapping {
                    mode,
                    dark_ms,
                    light_ms,
                } => {
                    let (admin, mode) = (admin.clone(), *mode);
                    let (dark, light) = (
                        Duration::from_millis((*dark_ms).max(1)),
                        Duration::from_millis((*light_ms).max(1)),
                    );
                    let task = tokio::spawn(async move {
                        loop {
                            admin.go_dark(mode);
                            tokio::time::sleep(dark).await;
                            admin.come_back();
                            tokio::time::sleep(light).await;
                        }
                    });
                    flapping.insert(m.name.clone(), task);
                }
                FleetFault::Clear => {
                    admin.come_back();
                    admin.set_latency(Duration::ZERO);
                }
            }
        }
        // A flapping cluster aborted mid-darkness stays dark unless told otherwise; a fault that
        // is not darkness itself brings it back.
        if matches!(fault, FleetFault::Slow { .. }) {
            for m in &chosen {
                if m.admin().dark().is_some() {
                    m.admin().come_back();
                }
            }
        }
        tracing::info!(clusters = chosen.len(), ?fault, "fleet fault");
        chosen.iter().map(|m| m.name.clone()).collect()
    }

    fn stats(&self) -> StatsSnapshot {
        let mut sum = StatsSnapshot::default();
        for m in &self.members {
            let s = m.admin().stats();
            for (k, v) in s.requests {
                *sum.requests.entry(k).or_default() += v;
            }
            for (k, v) in s.changes {
                *sum.changes.entry(k).or_default() += v;
            }
            sum.mutating_requests += s.mutating_requests;
            sum.total_changes += s.total_changes;
            sum.controller_writes += s.controller_writes;
            sum.injected_errors += s.injected_errors;
        }
        sum
    }
}

fn router() -> Router<Arc<Inner>> {
    Router::new()
        .route(
            "/_fleet/clusters",
            get(|State(f): State<Arc<Inner>>| async move {
                let list: Vec<Value> = f
                    .members
                    .iter()
                    .map(|m| {
                        json!({
                            "name": m.name,
                            "region": m.region,
                            "url": m.url(),
                            "dark": m.admin().dark(),
                        })
                    })
                    .collect();
                Json(Value::Array(list))
            }),
        )
        .route(
            "/_fleet/faults",
            post(
                |State(f): State<Arc<Inner>>, Json(r): Json<FaultRequest>| async move {
                    let names = f.fault(&r.select, &r.fault);
                    Json(json!({ "affected": names }))
                },
            ),
        )
        .route(
            "/_fleet/stats",
            get(|State(f): State<Arc<Inner>>| async move { Json(f.stats()) }),
        )
        .route(
            "/_fleet/clusters/{name}/stats",
            get(
                |State(f): State<Arc<Inner>>, Path(name): Path<String>| async move {
                    match f.index.get(&name) {
                        Some(&i) => Ok(Json(f.members[i].admin().stats())),
                        None => Err((StatusCode::NOT_FOUND, format!("no cluster {name}"))),
                    }
                },
            ),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_contiguous_and_even() {
        let names: Vec<String> = (0..1000).map(|i| region_of(i, 1000, 10)).collect();
        assert_eq!(names[0], "region-00");
        assert_eq!(names[99], "region-00");
        assert_eq!(names[100], "region-01");
        assert_eq!(names[999], "region-09");
        let r3 = names.iter().filter(|r| *r == "region-03").count();
        assert_eq!(r3, 100);
    }

    #[test]
    fn faults_read_as_documented() {
        let r: FaultRequest = serde_json::from_value(json!({
            "select": {"regions": ["region-01"]},
            "fault": {"kind": "flapping", "mode": "refuse", "darkMs": 500, "lightMs": 1500},
        }))
        .unwrap();
        assert_eq!(r.select.regions, vec!["region-01".to_string()]);
        assert_eq!(
            r.fault,
            FleetFault::Flapping {
                mode: DarkMode::Refuse,
                dark_ms: 500,
                light_ms: 1500
            }
        );
        let slow: FleetFault =
            serde_json::from_value(json!({"kind": "slow", "latencyMs": 200})).unwrap();
        assert_eq!(slow, FleetFault::Slow { latency_ms: 200 });
    }
}
