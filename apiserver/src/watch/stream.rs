//! `GET /v1/watch?resourceVersion=N[&kind=][&namespace=]`: newline-delimited JSON events.
//!
//! With `resourceVersion=N` the stream replays every retained event after N, then follows live;
//! N older than the retained history is 410 Gone (before the stream starts) and a watcher that
//! falls too far behind later gets a final `{"type":"ERROR","object":{"code":410}}` line. Without
//! it, the stream starts with an ADDED event per existing resource (read linearizably) and a
//! BOOKMARK at that state's resource version. Idle streams get a BOOKMARK every
//! `bookmark_interval_ms` when the log advanced. Tenant members see only objects in their
//! tenant's namespaces (as of the start of the watch) and their own tenant. The ring's events of
//! the door's policy documents are not sent here: the door's watch serves those.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use super::ring::{EventType, LiveMsg, Payload, WatchEvent, POLICY};
use crate::auth::{Access, Principal, Role};
use crate::error::ApiError;
use crate::metrics::{ApiMetrics, WatchDrop, WatchKind};
use crate::routes::common::{allow, read, tenant_namespaces, Q};
use crate::wire::valid_label;
use crate::App;

/// Lines buffered between the stream task and the socket.
const STREAM_BUFFER_LINES: usize = 256;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchParams {
    #[serde(default)]
    pub resource_version: Option<u64>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Which events a stream passes.
#[derive(Debug, Clone)]
struct Filter {
    kind: Option<&'static str>,
    namespace: Option<String>,
    /// For tenant members: (tenant name, owned namespaces).
    tenant: Option<(String, Vec<String>)>,
}

impl Filter {
    fn passes(&self, e: &WatchEvent) -> bool {
        // The door's policy documents are the door's to show (`k8s::watch`), in its shapes.
        if e.kind == Some(POLICY) {
            return false;
        }
        if self.kind.is_some() && e.kind != self.kind {
            return false;
        }
        if self.namespace.is_some() && e.namespace != self.namespace {
            return false;
        }
        match &self.tenant {
            None => true,
            Some((tenant, owned)) => match e.kind {
                Some("FederatedObject") => {
                    e.namespace.as_ref().is_some_and(|ns| owned.contains(ns))
                }
                Some("Tenant") => e.name.as_deref() == Some(tenant.as_str()),
                _ => false,
            },
        }
    }
}

fn line(e: &WatchEvent) -> Bytes {
    e.line()
}

pub async fn watch(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<WatchParams>,
) -> Result<Response, ApiError> {
    let kind = match q.kind.as_deref() {
        None | Some("") => None,
        Some("Cluster") => Some("Cluster"),
        Some("FederatedObject") => Some("FederatedObject"),
        Some("Tenant") => Some("Tenant"),
        Some(other) => {
            return Err(ApiError::UnknownKind {
                kind: other.to_string(),
                field: "kind".into(),
            })
        }
    };
    if let Some(ns) = &q.namespace {
        valid_label(ns, "namespace")?;
        allow(&app, &p, Access::ReadNamespace(ns))?;
    }
    if kind == Some("Cluster") {
        allow(&app, &p, Access::ReadClusters)?;
    }
    let tenant = match &p.role {
        Role::Tenant(t) => Some((t.clone(), tenant_namespaces(&app, &p))),
        _ => None,
    };
    let filter = Filter {
        kind,
        namespace: q.namespace.clone(),
        tenant,
    };

    let (initial, backlog, rx, from) = match q.resource_version {
        Some(rv) => {
            let (backlog, rx) = app.ring.resume(rv).map_err(|e| {
                app.metrics.watch_dropped(WatchDrop::Expired);
                ApiError::Gone {
                    message: format!(
                        "resourceVersion {} is older than the retained history (oldest resumable: {})",
                        e.requested, e.horizon
                    ),
                }
            })?;
            (Vec::new(), backlog, rx, rv)
        }
        None => {
            // Subscribe first, then read: every event after the read's index is in the backlog or
            // arrives live, and the ones before it are already in the initial state.
            let (backlog, rx) =
                app.ring
                    .resume(app.ring.last_index())
                    .map_err(|_| ApiError::Unavailable {
                        message: "watch history is resetting".into(),
                    })?;
            // Taken under the state lock (objects shared, the rest copied); rendering happens as
            // the stream sends them.
            let (at, initial) = read(&app, false, |s| {
                let at = s.applied_index();
                let added = |kind, ns: Option<String>, name: String, rv, object| {
                    WatchEvent::new(
                        EventType::Added,
                        Some(kind),
                        ns,
                        Some(name),
                        rv,
                        Some(object),
                    )
                };
                let mut v = Vec::new();
                for c in s.clusters() {
                    let object = Payload::Cluster(Box::new(c.clone()));
                    v.push(added(
                        "Cluster",
                        None,
                        c.spec.name.clone(),
                        c.resource_version,
                        object,
                    ));
                }
                for t in s.tenants() {
                    let object = Payload::Tenant(Box::new(t.clone()));
                    v.push(added(
                        "Tenant",
                        None,
                        t.spec.name.clone(),
                        t.resource_version,
                        object,
                    ));
                }
                // Shared, not copied: listing every object costs a reference count each.
                for o in s.objects_shared() {
                    let (ns, n, rv) = (
                        Some(o.namespace.clone()),
                        o.name.clone(),
                        o.resource_version,
                    );
                    let object = Payload::Object(o.clone());
                    v.push(added("FederatedObject", ns, n, rv, object));
                }
                (at, v)
            })
            .await?;
            (initial, backlog, rx, at)
        }
    };

    let (tx, out) = mpsc::channel::<Result<Bytes, Infallible>>(STREAM_BUFFER_LINES);
    let bookmark_every = Duration::from_millis(app.cfg.bookmark_interval_ms.max(10));
    let send_initial_bookmark = q.resource_version.is_none();
    tokio::spawn(pump(
        tx,
        filter,
        initial,
        backlog,
        rx,
        from,
        send_initial_bookmark,
        bookmark_every,
        app.metrics.clone(),
    ));
    let stream =
        futures::stream::unfold(
            out,
            |mut out| async move { out.recv().await.map(|x| (x, out)) },
        );
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Writes one watch stream until the client goes away or history is lost.
#[allow(clippy::too_many_arguments)]
async fn pump(
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    filter: Filter,
    initial: Vec<WatchEvent>,
    backlog: Vec<Arc<WatchEvent>>,
    rx: tokio::sync::broadcast::Receiver<LiveMsg>,
    from: u64,
    initial_bookmark: bool,
    bookmark_every: Duration,
    metrics: ApiMetrics,
) {
    let _live = metrics.watching(WatchKind::Resources);
    for e in initial.iter().filter(|e| filter.passes(e)) {
        if tx.send(Ok(line(e))).await.is_err() {
            return;
        }
    }
    if initial_bookmark
        && tx
            .send(Ok(line(&WatchEvent::bookmark(from))))
            .await
            .is_err()
    {
        return;
    }
    let lines = Lines {
        event: |e: &WatchEvent| filter.passes(e).then(|| line(e)),
        bookmark: |rv| Some(line(&WatchEvent::bookmark(rv))),
        gone: |rv, message: &str| line(&WatchEvent::gone(rv, message)),
    };
    follow(&tx, &lines, &backlog, rx, from, bookmark_every, |drop| {
        metrics.watch_dropped(drop)
    })
    .await;
}

/// How one kind of watch stream writes an event (None: the watcher may not see it), a bookmark
/// (None: bookmarks were not asked for) and the final 410 line.
pub(crate) struct Lines<E, B, G> {
    pub event: E,
    pub bookmark: B,
    pub gone: G,
}

/// The part every watch stream shares: the retained events after `from`, then the live ones,
/// with a bookmark every `every` when the log moved past what was last sent, until the client
/// leaves or the stream falls behind the ring (a final 410 line, and `dropped` says why).
pub(crate) async fn follow<E, B, G>(
    tx: &mpsc::Sender<Result<Bytes, Infallible>>,
    lines: &Lines<E, B, G>,
    backlog: &[Arc<WatchEvent>],
    mut rx: tokio::sync::broadcast::Receiver<LiveMsg>,
    from: u64,
    every: Duration,
    dropped: impl FnOnce(WatchDrop),
) where
    E: Fn(&WatchEvent) -> Option<Bytes>,
    B: Fn(u64) -> Option<Bytes>,
    G: Fn(u64, &str) -> Bytes,
{
    let mut sent_rv = from;
    let mut seen_rv = from;
    for e in backlog.iter().filter(|e| e.resource_version > from) {
        seen_rv = seen_rv.max(e.resource_version);
        if let Some(bytes) = (lines.event)(e) {
            sent_rv = e.resource_version;
            if tx.send(Ok(bytes)).await.is_err() {
                return;
            }
        }
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Ok(LiveMsg::Event(e)) => {
                    if e.resource_version <= from {
                        continue;
                    }
                    seen_rv = seen_rv.max(e.resource_version);
                    if let Some(bytes) = (lines.event)(&e) {
                        sent_rv = e.resource_version;
                        if tx.send(Ok(bytes)).await.is_err() {
                            return;
                        }
                    }
                }
                Ok(LiveMsg::Progress(i)) => seen_rv = seen_rv.max(i),
                Ok(LiveMsg::Reset) | Err(RecvError::Lagged(_)) => {
                    dropped(if matches!(msg, Ok(LiveMsg::Reset)) {
                        WatchDrop::Reset
                    } else {
                        WatchDrop::Lagged
                    });
                    let gone = (lines.gone)(seen_rv, "watch fell behind; restart from a fresh list");
                    let _ = tx.send(Ok(gone)).await;
                    return;
                }
                Err(RecvError::Closed) => return,
            },
            _ = tick.tick() => {
                if seen_rv > sent_rv {
                    if let Some(bytes) = (lines.bookmark)(seen_rv) {
                        sent_rv = seen_rv;
                        if tx.send(Ok(bytes)).await.is_err() {
                            return;
                        }
                    }
                }
            }
            _ = tx.closed() => return,
        }
    }
}
