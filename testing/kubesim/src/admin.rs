//! The simulator's control surface: faults, drift, counters, history compaction and capacity,
//! as a Rust API ([`Admin`]) and as HTTP endpoints under `/_sim` that call the same methods.
//!
//! | endpoint | effect |
//! |---|---|
//! | `GET /_sim/stats`, `POST /_sim/stats/reset` | request / write / change counters ([`StatsSnapshot`]) |
//! | `GET /_sim/writes` | every client write that changed state, with time and owner token |
//! | `GET /_sim/faults`, `PUT /_sim/faults` | [`FaultSettings`] (`latencyMs`, `errorRate`, `errorCode`) |
//! | `POST /_sim/dark` `{"mode":"refuse"\|"hang","durationMs":N?}` | go dark (and come back after N ms) |
//! | `POST /_sim/light` | come back on the same address |
//! | `GET`, `PUT /_sim/cuts` `{"peers":["node2"]}` | link cuts: a listed peer's requests hang |
//! | `POST /_sim/drift` `{"apiVersion","resource","namespace","name","patch"}` | out-of-band merge patch |
//! | `POST /_sim/compact` | drop watch history: older watches and continue tokens get 410 |
//! | `GET /_sim/capacity` | node allocatable vs requested, per-workload scheduled pods |
//! | `POST /_sim/nodes/{name}/ready` `{"ready":bool}` | flip a node's Ready condition |
//!
//! While dark in `refuse` mode the main listener is closed, so these endpoints are reachable
//! only through `--admin-listen` (or the Rust API, or `durationMs`). This module must not
//! bypass the store's write path.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::controller::CapacityReport;
use crate::discovery::{self, ResourceDef};
use crate::faults::{DarkMode, FaultSettings};
use crate::stats::StatsSnapshot;
use crate::status::{self, ApiError, Subject};
use crate::store::Change;
use crate::{fields, meta, patch, Shared, SimError};

/// The manager name out-of-band edits are recorded under in managedFields.
pub const DRIFT_MANAGER: &str = "kubesim-drift";

/// Handle to the simulator's controls; cheap to clone.
#[derive(Clone)]
pub struct Admin {
    pub(crate) shared: Arc<Shared>,
}

impl Admin {
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot()
    }

    /// Every client write that changed stored state, with its time and owner token
    /// (`crate::writelog`).
    pub fn write_log(&self) -> crate::writelog::WriteLogSnapshot {
        self.shared.writes.snapshot()
    }

    pub fn reset_stats(&self) {
        self.shared.stats.reset();
    }

    pub fn faults(&self) -> FaultSettings {
        self.shared.faults.settings()
    }

    pub fn set_faults(&self, s: FaultSettings) -> Result<(), SimError> {
        s.validate().map_err(SimError::Config)?;
        self.shared.faults.set(s);
        Ok(())
    }

    pub fn set_latency(&self, latency: Duration) {
        let mut s = self.faults();
        s.latency_ms = latency.as_millis().try_into().unwrap_or(u64::MAX);
        self.shared.faults.set(s);
    }

    /// Fraction in [0, 1] of API requests answered with the configured 5xx code.
    pub fn set_error_rate(&self, rate: f64) -> Result<(), SimError> {
        let mut s = self.faults();
        s.error_rate = rate;
        self.set_faults(s)
    }

    pub fn dark(&self) -> Option<DarkMode> {
        self.shared.faults.dark()
    }

    pub fn go_dark(&self, mode: DarkMode) {
        self.shared.dark_epoch.fetch_add(1, Ordering::SeqCst);
        self.shared.faults.set_dark(Some(mode));
    }

    /// Goes dark and comes back by itself after `duration`, unless another dark/light call
    /// came in between.
    pub fn go_dark_for(&self, mode: DarkMode, duration: Duration) {
        self.go_dark(mode);
        let epoch = self.shared.dark_epoch.load(Ordering::SeqCst);
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            if me.shared.dark_epoch.load(Ordering::SeqCst) == epoch {
                me.come_back();
            }
        });
    }

    pub fn come_back(&self) {
        self.shared.dark_epoch.fetch_add(1, Ordering::SeqCst);
        self.shared.faults.set_dark(None);
    }

    /// Cuts the link from `peer` (a fedraft node's name, as its member clients send it in
    /// [`PEER_HEADER`](crate::faults::PEER_HEADER)): its requests hang until restored, while
    /// every other client is served.
    pub fn cut_peer(&self, peer: &str) {
        let mut peers = self.cut_peers();
        peers.insert(peer.to_string());
        self.shared.faults.set_cut_peers(peers);
    }

    /// Restores the link from `peer`; requests it has hanging are answered 503.
    pub fn restore_peer(&self, peer: &str) {
        let mut peers = self.cut_peers();
        peers.remove(peer);
        self.shared.faults.set_cut_peers(peers);
    }

    pub fn cut_peers(&self) -> BTreeSet<String> {
        self.shared.faults.cut_peers()
    }

    /// Edits an object behind the clients' back (a merge patch recorded under
    /// [`DRIFT_MANAGER`]), as `kubectl edit` by an operator would.
    pub fn drift(
        &self,
        api_version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Value, SimError> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let res: &'static ResourceDef =
            discovery::find(group, version, resource).ok_or_else(|| {
                SimError::Config(format!("unknown resource {resource} in {api_version}"))
            })?;
        let ns = if res.namespaced { namespace } else { "" };
        let out = self.shared.store.write(res, ns, name, false, |cur| {
            let Some(cur) = cur else {
                return Err(ApiError::not_found(Subject {
                    group: res.group.clone(),
                    kind: res.plural.clone(),
                    name: name.into(),
                }));
            };
            let mut next = patch::merge_patch(cur, patch);
            fields::record_update(
                Some(cur),
                &mut next,
                DRIFT_MANAGER,
                &res.api_version(),
                res.has_status(),
                &meta::now_rfc3339(),
            );
            Ok(Change::Replace(next))
        })?;
        Ok(out.object().clone())
    }

    /// Drops watch history; see [`Store::compact`](crate::store::Store::compact).
    pub fn compact_watch_history(&self) {
        self.shared.store.compact();
    }

    pub fn capacity(&self) -> CapacityReport {
        self.shared
            .capacity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn resource_version(&self) -> u64 {
        self.shared.store.current_rv()
    }

    /// Sets a node's Ready condition; a NotReady node holds no pods in the capacity packing.
    pub fn set_node_ready(&self, node: &str, ready: bool) -> Result<(), SimError> {
        let status = if ready { "True" } else { "False" };
        let patch = json!({ "status": { "conditions": [{
            "type": "Ready", "status": status,
            "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
            "message": "set by kubesim admin",
            "lastHeartbeatTime": meta::now_rfc3339(), "lastTransitionTime": meta::now_rfc3339(),
        }]}});
        self.drift("v1", "nodes", "", node, &patch).map(|_| ())
    }
}

impl IntoResponse for SimError {
    fn into_response(self) -> Response {
        match self {
            SimError::Api(e) => status::respond(*e),
            other => status::respond(ApiError::BadRequest(other.to_string())),
        }
    }
}

fn admin(shared: Arc<Shared>) -> Admin {
    Admin { shared }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DarkRequest {
    mode: DarkMode,
    duration_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DriftRequest {
    api_version: String,
    resource: String,
    #[serde(default)]
    namespace: String,
    name: String,
    patch: Value,
}

#[derive(Deserialize)]
struct CutsRequest {
    peers: BTreeSet<String>,
}

#[derive(Deserialize)]
struct ReadyRequest {
    ready: bool,
}

pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/stats",
            get(|State(s): State<Arc<Shared>>| async move { Json(admin(s).stats()) }),
        )
        .route(
            "/writes",
            get(|State(s): State<Arc<Shared>>| async move { Json(admin(s).write_log()) }),
        )
        .route(
            "/stats/reset",
            post(|State(s): State<Arc<Shared>>| async move {
                admin(s).reset_stats();
                Json(json!({}))
            }),
        )
        .route(
            "/faults",
            get(|State(s): State<Arc<Shared>>| async move { Json(admin(s).faults()) }).put(
                |State(s): State<Arc<Shared>>, Json(f): Json<FaultSettings>| async move {
                    admin(s.clone())
                        .set_faults(f)
                        .map(|_| Json(admin(s).faults()))
                },
            ),
        )
        .route(
            "/dark",
            post(
                |State(s): State<Arc<Shared>>, Json(r): Json<DarkRequest>| async move {
                    match r.duration_ms {
                        Some(ms) => admin(s).go_dark_for(r.mode, Duration::from_millis(ms)),
                        None => admin(s).go_dark(r.mode),
                    }
                    Json(json!({ "dark": r.mode }))
                },
            ),
        )
        .route(
            "/light",
            post(|State(s): State<Arc<Shared>>| async move {
                admin(s).come_back();
                Json(json!({ "dark": null }))
            }),
        )
        .route(
            "/cuts",
            get(|State(s): State<Arc<Shared>>| async move {
                Json(json!({ "peers": admin(s).cut_peers() }))
            })
            .put(
                |State(s): State<Arc<Shared>>, Json(r): Json<CutsRequest>| async move {
                    s.faults.set_cut_peers(r.peers);
                    Json(json!({ "peers": admin(s).cut_peers() }))
                },
            ),
        )
        .route(
            "/drift",
            post(
                |State(s): State<Arc<Shared>>, Json(r): Json<DriftRequest>| async move {
                    admin(s)
                        .drift(&r.api_version, &r.resource, &r.namespace, &r.name, &r.patch)
                        .map(Json)
                },
            ),
        )
        .route(
            "/compact",
            post(|State(s): State<Arc<Shared>>| async move {
                let a = admin(s);
                a.compact_watch_history();
                Json(json!({ "resourceVersion": a.resource_version().to_string() }))
            }),
        )
        .route(
            "/capacity",
            get(|State(s): State<Arc<Shared>>| async move { Json(admin(s).capacity()) }),
        )
        .route(
            "/nodes/{name}/ready",
            post(
                |State(s): State<Arc<Shared>>,
                 Path(name): Path<String>,
                 Json(r): Json<ReadyRequest>| async move {
                    admin(s)
                        .set_node_ready(&name, r.ready)
                        .map(|_| Json(json!({ "ready": r.ready })))
                },
            ),
        )
}
