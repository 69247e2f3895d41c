//! Watch streams: newline-delimited JSON `WatchEvent`s over one chunked HTTP response.
//!
//! A watch starts from a [`Subscription`] (retained events after the client's resourceVersion,
//! plus the live channel) and sends ADDED/MODIFIED/DELETED for its kind, namespace and
//! selectors, a BOOKMARK every `bookmark_interval` when asked, and ends after `timeoutSeconds`.
//! When history is compacted or the watcher falls too far behind, it sends an ERROR event with
//! a 410 Status and ends, which is what makes kube-rs's watcher relist. Known gap: an object
//! that stops matching a label selector is not turned into a DELETED for that watch.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::mpsc;
use futures::SinkExt;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::discovery::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Notice, Subscription};

/// Frames buffered between the watch task and the socket.
const FRAME_BUFFER: usize = 64;

pub struct WatchSpec {
    pub res: &'static ResourceDef,
    pub ns: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub bookmarks: bool,
    /// Send a BOOKMARK with the `k8s.io/initial-events-end` annotation after the initial events
    /// (streaming lists).
    pub initial_events_end: bool,
    pub timeout: Duration,
    pub bookmark_interval: Duration,
}

impl WatchSpec {
    fn wants(&self, res: &ResourceDef, ns: &str, obj: &Value) -> bool {
        res.key() == self.res.key()
            && self.ns.as_deref().is_none_or(|want| want == ns)
            && self.labels.matches(obj)
            && self.fields.matches(obj)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Value {
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        json!({
            "type": "BOOKMARK",
            "object": { "kind": self.res.kind, "apiVersion": self.res.api_version(), "metadata": metadata },
        })
    }
}

fn frame(v: &Value) -> Result<Bytes, Infallible> {
    let mut s = v.to_string();
    s.push('\n');
    Ok(Bytes::from(s))
}

/// A `WatchEvent` serialized straight from the stored object: building a `json!` wrapper
/// would deep-copy the object for every watcher and every event.
#[derive(serde::Serialize)]
struct EventFrame<'a> {
    #[serde(rename = "type")]
    etype: &'a str,
    object: &'a Value,
}

fn event_frame(etype: &str, object: &Value) -> Result<Bytes, Infallible> {
    // A Value always serializes; the fallback only keeps a panic out of the watch task.
    let mut v = serde_json::to_vec(&EventFrame { etype, object }).unwrap_or_default();
    v.push(b'\n');
    Ok(Bytes::from(v))
}

fn expired_frame(message: &str) -> Value {
    json!({ "type": "ERROR", "object": ApiError::Expired(message.to_string()).to_status() })
}

/// Spawns the task that feeds one watch response and returns its body stream.
pub fn start(spec: WatchSpec, sub: Subscription) -> mpsc::Receiver<Result<Bytes, Infallible>> {
    let (mut tx, rx) = mpsc::channel(FRAME_BUFFER);
    tokio::spawn(async move {
        let Subscription {
            backlog,
            mut rx,
            initial,
            rv,
        } = sub;
        let mut seen_rv = rv;
        for obj in initial
            .iter()
            .filter(|o| spec.labels.matches(o) && spec.fields.matches(o))
        {
            if tx.send(event_frame("ADDED", obj)).await.is_err() {
                return;
            }
        }
        if spec.initial_events_end && tx.send(frame(&spec.bookmark(seen_rv, true))).await.is_err() {
            return;
        }
        for n in backlog {
            if let Notice::Event(e) = &*n {
                seen_rv = seen_rv.max(e.rv);
                if spec.wants(e.res, &e.ns, &e.object)
                    && tx
                        .send(event_frame(e.etype.as_str(), &e.object))
                        .await
                        .is_err()
                {
                    return;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + spec.timeout;
        let mut ticker = tokio::time::interval(spec.bookmark_interval);
        ticker.tick().await;
        loop {
            let out = tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {
                    if spec.bookmarks {
                        let _ = tx.send(frame(&spec.bookmark(seen_rv, false))).await;
                    }
                    return;
                }
                _ = ticker.tick() => {
                    if !spec.bookmarks {
                        // Still probe the client so a gone watcher frees its task.
                        if tx.is_closed() { return; }
                        continue;
                    }
                    frame(&spec.bookmark(seen_rv, false))
                }
                msg = rx.recv() => match msg {
                    Ok(n) => match &*n {
                        Notice::Event(e) => {
                            seen_rv = seen_rv.max(e.rv);
                            if !spec.wants(e.res, &e.ns, &e.object) {
                                continue;
                            }
                            event_frame(e.etype.as_str(), &e.object)
                        }
                        Notice::Compacted => {
                            let _ = tx.send(frame(&expired_frame("watch history compacted"))).await;
                            return;
                        }
                    },
                    Err(RecvError::Lagged(n)) => {
                        let msg = format!("watcher fell {n} events behind");
                        let _ = tx.send(frame(&expired_frame(&msg))).await;
                        return;
                    }
                    Err(RecvError::Closed) => return,
                },
            };
            if tx.send(out).await.is_err() {
                return;
            }
        }
    });
    rx
}
