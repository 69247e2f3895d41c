//! Unauthenticated endpoints: liveness, readiness, metrics, the replicated-state fingerprint and
//! the OpenAPI document. None of them reveals a resource.
//!
//! Anyone may call them, so none may cost in proportion to the state on every call: the state
//! hash (which encodes the whole state under its read lock, holding up applies) is computed at
//! most once per applied index, by one caller at a time, and served from [`StateHashCache`]
//! until the next apply.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::App;

pub async fn healthz() -> Response {
    (StatusCode::OK, Json(json!({"status": "ok"}))).into_response()
}

/// Ready = this node is in a cluster that has a leader.
pub async fn readyz(State(app): State<App>) -> Response {
    let st = app.node.status();
    let body = json!({"ready": st.leader_id.is_some(), "nodeId": st.id, "leaderId": st.leader_id, "term": st.term});
    let code = if st.leader_id.is_some() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body)).into_response()
}

/// Everything the registry holds, in the Prometheus text format.
pub async fn metrics(State(app): State<App>) -> Response {
    let text = crate::metrics::render(&app.registry);
    let content_type = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

/// One consistent reading of the replicated state: an applied index, the state's hash at that
/// index and the log time, all taken under one read of the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub index: u64,
    pub hash: String,
    pub log_time_ms: u64,
}

/// The fingerprint of the last applied index anyone asked for. Every change of the state goes
/// through `State::apply`, which advances the applied index, so the same index means the same
/// hash. At most one caller computes at a time; callers arriving meanwhile get the previous
/// fingerprint (consistent, one apply older) instead of queueing behind the computation or
/// starting their own: a flood of calls costs at most one hash per applied index, on one
/// thread, however many callers there are.
#[derive(Debug, Default)]
pub(crate) struct StateHashCache {
    /// Held only to copy or replace the `Arc`, never during a computation.
    last: Mutex<Option<Arc<Fingerprint>>>,
    computing: AtomicBool,
}

/// Clears the `computing` claim however the computation ends (a panic included).
struct Claim<'a>(&'a AtomicBool);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl StateHashCache {
    fn cached(&self) -> Option<Arc<Fingerprint>> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The fingerprint at `index_now` (the applied index, cheap to read), with `compute` run
    /// only if that index was not hashed yet and no other caller is hashing.
    pub(crate) fn get(
        &self,
        index_now: u64,
        compute: impl FnOnce() -> Fingerprint,
    ) -> Arc<Fingerprint> {
        let cached = self.cached();
        if let Some(c) = &cached {
            if c.index == index_now {
                return c.clone();
            }
        }
        let claimed = self
            .computing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if !claimed {
            if let Some(c) = cached {
                return c;
            }
            // Nothing hashed yet on this node: compute without the claim (only the first
            // callers after start can get here).
        }
        let _claim = claimed.then(|| Claim(&self.computing));
        let fresh = Arc::new(compute());
        if claimed {
            *self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fresh.clone());
        }
        fresh
    }
}

/// This node's local (stale) view of the replicated state: the last applied command index, the
/// state hash and the log time, all from one consistent snapshot. Two nodes at the same
/// `stateIndex` must report the same `stateHash`; fault-injection runs compare them. The hash
/// is computed at most once per applied index ([`StateHashCache`]); the index is read first,
/// under the state's read lock for an instant only.
pub async fn state(State(app): State<App>) -> Response {
    let index_now = app.node.read_stale(|s| s.applied_index());
    let fp = app.state_hash.get(index_now, || {
        app.node.read_stale(|s| Fingerprint {
            index: s.applied_index(),
            hash: s.state_hash_hex(),
            log_time_ms: s.log_time_ms(),
        })
    });
    let st = app.node.status();
    let body = json!({
        "nodeId": st.id,
        "raftAppliedIndex": st.applied_index,
        "stateIndex": fp.index,
        "stateHash": fp.hash,
        "logTimeMs": fp.log_time_ms,
    });
    (StatusCode::OK, Json(body)).into_response()
}

pub async fn openapi() -> Response {
    Json(crate::openapi::document()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(index: u64) -> Fingerprint {
        Fingerprint {
            index,
            hash: format!("hash-{index}"),
            log_time_ms: index * 10,
        }
    }

    #[test]
    fn the_hash_is_computed_once_per_applied_index() {
        let cache = StateHashCache::default();
        let mut computed = 0;
        let mut ask = |index: u64| {
            cache
                .get(index, || {
                    computed += 1;
                    at(index)
                })
                .hash
                .clone()
        };
        for _ in 0..1000 {
            assert_eq!(ask(7), "hash-7");
        }
        assert_eq!(ask(8), "hash-8");
        assert_eq!(ask(8), "hash-8");
        assert_eq!(computed, 2);
    }

    #[test]
    fn callers_during_a_computation_get_the_previous_fingerprint_without_computing() {
        let cache = Arc::new(StateHashCache::default());
        assert_eq!(*cache.get(7, || at(7)), at(7));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let slow = {
            let cache = cache.clone();
            std::thread::spawn(move || {
                cache.get(8, || {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    at(8)
                })
            })
        };
        started_rx.recv().unwrap();
        for _ in 0..100 {
            let fp = cache.get(8, || panic!("a second computation while one runs"));
            assert_eq!(*fp, at(7), "the previous consistent reading");
        }
        release_tx.send(()).unwrap();
        assert_eq!(*slow.join().unwrap(), at(8));
        assert_eq!(*cache.get(8, || panic!("index 8 is cached")), at(8));
    }

    #[test]
    fn a_panicking_computation_releases_its_claim() {
        let cache = StateHashCache::default();
        assert_eq!(*cache.get(1, || at(1)), at(1));
        let hit = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cache.get(2, || panic!("hashing failed"))
        }));
        assert!(hit.is_err());
        assert_eq!(*cache.get(2, || at(2)), at(2));
    }
}
