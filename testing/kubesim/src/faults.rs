//! Injected faults: added latency, a 5xx error rate, going dark, and workload rollouts that
//! take time or never finish (read by the controller: `rolloutStepMs`, `neverReadyImages`).
//!
//! Latency and errors are a middleware over the Kubernetes API routes (never over `/_sim`).
//! Going dark is carried out by `server`: in `Refuse` mode the listener is closed and open
//! connections are cut, so clients get "connection refused"; in `Hang` mode connections are
//! accepted and never answered, and requests already in flight on open connections wait. Coming
//! back rebinds the same address. This module holds the settings; it must not touch sockets.
//!
//! A link cut refuses one peer only: requests naming a cut peer in [`PEER_HEADER`] (fedraft's
//! member clients name their node there) hang until the cut ends, as across a dead route, while
//! every other client is served. Requests already past the layer (an open watch) go on: a cut
//! that also ends streams needs the dark switch.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::status::{self, ApiError};
use crate::Shared;

/// The request header naming the client's vantage (a fedraft node: `node2`), matched against
/// the cut peers.
pub const PEER_HEADER: &str = "x-fedraft-node";

/// How the simulator is unreachable while dark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DarkMode {
    /// The listener is closed: connects are refused, open connections are reset.
    Refuse,
    /// Connections are accepted and requests never answered.
    Hang,
}

/// Latency and error injection; all zero means no faults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultSettings {
    /// Added before every API request is handled.
    pub latency_ms: u64,
    /// Fraction in [0, 1] of API requests answered with `error_code` instead.
    pub error_rate: f64,
    /// 500 (InternalError) or 503 (ServiceUnavailable; kube-rs's default retry retries it).
    pub error_code: u16,
    /// Time each replica of a workload's new generation takes to be updated and ready (0: all
    /// at once, as a real cluster with instant pods).
    pub rollout_step_ms: u64,
    /// Container images whose pods never turn ready on this cluster (a bad release): a
    /// Deployment keeps its old pods and exceeds its progress deadline.
    pub never_ready_images: Vec<String>,
}

impl Default for FaultSettings {
    fn default() -> Self {
        FaultSettings {
            latency_ms: 0,
            error_rate: 0.0,
            error_code: 500,
            rollout_step_ms: 0,
            never_ready_images: Vec::new(),
        }
    }
}

impl FaultSettings {
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(format!(
                "errorRate {} is not within [0, 1]",
                self.error_rate
            ));
        }
        if !(500..=599).contains(&self.error_code) {
            return Err(format!("errorCode {} is not a 5xx code", self.error_code));
        }
        Ok(())
    }
}

pub struct Faults {
    settings: Mutex<FaultSettings>,
    rng: Mutex<StdRng>,
    dark: watch::Sender<Option<DarkMode>>,
    cut: watch::Sender<BTreeSet<String>>,
}

impl Faults {
    pub fn new(settings: FaultSettings, seed: u64) -> Self {
        let (dark, _) = watch::channel(None);
        let (cut, _) = watch::channel(BTreeSet::new());
        Faults {
            settings: Mutex::new(settings),
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            dark,
            cut,
        }
    }

    pub fn settings(&self) -> FaultSettings {
        self.settings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set(&self, s: FaultSettings) {
        *self.settings.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }

    pub fn dark(&self) -> Option<DarkMode> {
        *self.dark.borrow()
    }

    pub fn set_dark(&self, mode: Option<DarkMode>) {
        self.dark.send_replace(mode);
    }

    pub fn subscribe_dark(&self) -> watch::Receiver<Option<DarkMode>> {
        self.dark.subscribe()
    }

    /// The peers whose requests hang (a link cut each).
    pub fn cut_peers(&self) -> BTreeSet<String> {
        self.cut.borrow().clone()
    }

    pub fn set_cut_peers(&self, peers: BTreeSet<String>) {
        self.cut.send_replace(peers);
    }

    fn roll(&self, rate: f64) -> bool {
        rate > 0.0
            && self
                .rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .random::<f64>()
                < rate
    }
}

/// The fault layer over the Kubernetes API routes.
pub(crate) async fn middleware(
    State(shared): State<Arc<Shared>>,
    req: Request,
    next: Next,
) -> Response {
    if req.uri().path().starts_with("/_sim") {
        return next.run(req).await;
    }
    let mut dark = shared.faults.subscribe_dark();
    if *dark.borrow_and_update() == Some(DarkMode::Hang) {
        // Hold the request until the simulator comes back, then fail it: its client has long
        // given up, and answering late would look like a healthy reply.
        while *dark.borrow_and_update() == Some(DarkMode::Hang) {
            if dark.changed().await.is_err() {
                break;
            }
        }
        return status::respond(ApiError::Internal {
            code: 503,
            message: "simulated outage ended".into(),
        });
    }
    let peer = req
        .headers()
        .get(PEER_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(peer) = peer {
        let mut cut = shared.faults.cut.subscribe();
        if cut.borrow_and_update().contains(&peer) {
            while cut.borrow_and_update().contains(&peer) {
                if cut.changed().await.is_err() {
                    break;
                }
            }
            return status::respond(ApiError::Internal {
                code: 503,
                message: format!("simulated link cut from {peer} ended"),
            });
        }
    }
    let s = shared.faults.settings();
    if s.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(s.latency_ms)).await;
    }
    if shared.faults.roll(s.error_rate) {
        shared.stats.injected_error();
        return status::respond(ApiError::Internal {
            code: s.error_code,
            message: "injected fault: simulated server error".into(),
        });
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_rate_is_seeded_and_bounded() {
        let f = Faults::new(FaultSettings::default(), 7);
        let hits = (0..1000).filter(|_| f.roll(0.3)).count();
        assert!((200..400).contains(&hits), "{hits}");
        assert!(!(0..100).any(|_| f.roll(0.0)));
        assert!(FaultSettings {
            error_rate: 2.0,
            ..Default::default()
        }
        .validate()
        .is_err());
    }
}
