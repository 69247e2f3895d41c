//! fedraft-apiserver: the HTTP JSON API. It validates, authenticates and authorises requests and
//! turns them into log proposals; it never changes state except through the log.
//!
//! Start at [`Api::new`] and [`Api::router`]. Request flow: the metrics layer times the request,
//! the auth layer maps the bearer token to a [`auth::Principal`], the handler (one module per
//! resource under `routes`) decodes and validates the body (`body`, `wire`), authorises, checks
//! what it can against linearizable state so doomed writes never reach the log, proposes through
//! [`fedraft_raft::FedNode::propose`] (which forwards to the leader) and answers from the state
//! after the entry is applied locally. Errors have one type and one mapping (`error`).
//!
//! Must not: write state except by proposing; echo, log or put in errors a cluster's
//! credentials; accept the cluster secret as a token.

pub mod audit_wire;
pub mod auth;
pub mod backup;
pub mod body;
pub mod error;
mod k8s;
mod layers;
pub mod metrics;
pub mod openapi;
mod routes;
pub mod sealing;
pub mod ui;
pub mod view;
pub mod watch;
pub mod wire;

use std::sync::Arc;

use axum::Router;
use fedraft_raft::FedNode;
use prometheus_client::registry::Registry;

pub use auth::{Principal, Role, TokenStore};
pub use error::ApiError;
pub use sealing::CredentialsAtRest;

/// Tunables of the API; every field has a documented default.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Largest accepted request body. Default 2 MiB ([`body::DEFAULT_BODY_LIMIT_BYTES`]).
    pub body_limit_bytes: usize,
    /// Watch events retained for resumption. Default 8192 ([`watch::ring::DEFAULT_HISTORY_EVENTS`]).
    pub watch_history_events: usize,
    /// How often an idle watch stream sends a BOOKMARK. Default 5000 ms.
    pub bookmark_interval_ms: u64,
    /// How long a write waits for its entry to be applied on this node after commit. Default 10 s.
    pub apply_wait_ms: u64,
    /// How member credentials are stored ([`sealing`]). Default: in the clear, as given.
    pub credentials: CredentialsAtRest,
    /// Commands a cluster kubeconfig's `exec` plugin may name (exact match). Default none:
    /// kubeconfigs that run commands or read files on the node are refused (400).
    pub kubeconfig_exec_allow: Vec<String>,
    /// Audit queries that may run at once (each on a thread of its own; 429 beyond). Default 2.
    pub audit_threads: usize,
    /// Archive records one `GET /v1/audit` request reads at most; a partial page with a
    /// `continue` token answers beyond it. Default 50,000.
    pub audit_scan_budget_records: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            body_limit_bytes: body::DEFAULT_BODY_LIMIT_BYTES,
            watch_history_events: watch::ring::DEFAULT_HISTORY_EVENTS,
            bookmark_interval_ms: 5_000,
            apply_wait_ms: 10_000,
            credentials: CredentialsAtRest::default(),
            kubeconfig_exec_allow: Vec::new(),
            audit_threads: routes::audit_pool::DEFAULT_AUDIT_THREADS,
            audit_scan_budget_records: 50_000,
        }
    }
}

/// Everything handlers share.
pub(crate) struct AppState {
    pub node: FedNode,
    pub tokens: TokenStore,
    pub cfg: ApiConfig,
    pub metrics: metrics::ApiMetrics,
    /// What `/metrics` encodes: the binary's registry plus this crate's series.
    pub registry: metrics::SharedRegistry,
    pub ring: Arc<watch::ring::Ring>,
    /// `GET /v1/system/state`'s hash, computed once per applied index.
    pub state_hash: routes::system::StateHashCache,
    /// The audit API's threads and concurrency bound.
    pub audit_pool: routes::audit_pool::AuditPool,
}

pub(crate) type App = Arc<AppState>;

/// One node's API: the shared state plus the background task feeding watch history.
#[derive(Clone)]
pub struct Api {
    app: App,
}

impl Api {
    /// Builds the API over `node` and starts the watch hub (a task that ends with the node).
    /// `/metrics` serves the node's own series (raft and store) and the API's.
    /// Must be called inside a tokio runtime.
    pub fn new(node: FedNode, tokens: TokenStore, cfg: ApiConfig) -> Self {
        let mut registry = Registry::default();
        node.register_metrics(&mut registry);
        Api::with_registry(node, tokens, cfg, registry)
    }

    /// [`Api::new`] serving `registry` on `/metrics`, to which the API adds its own series.
    /// The caller registers everything else it wants served (the node's
    /// [`FedNode::register_metrics`], executors, DNS) before handing it over.
    pub fn with_registry(
        node: FedNode,
        tokens: TokenStore,
        cfg: ApiConfig,
        mut registry: Registry,
    ) -> Self {
        let ring = watch::hub::start(&node, cfg.watch_history_events);
        let metrics = metrics::ApiMetrics::default();
        metrics.register(&node, &mut registry);
        let audit_pool = routes::audit_pool::AuditPool::start(cfg.audit_threads);
        let app = Arc::new(AppState {
            audit_pool,
            node,
            tokens,
            cfg,
            metrics,
            registry: Arc::new(registry),
            ring,
            state_hash: Default::default(),
        });
        Api { app }
    }

    /// The axum router for the client listener.
    pub fn router(&self) -> Router {
        routes::router(self.app.clone())
    }
}
