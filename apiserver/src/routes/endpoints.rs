//! `GET /v1/namespaces/{ns}/services/{name}/endpoints[?watch=true]`: the discovery view of a
//! federated Service, for clients that balance themselves. It is the same view the DNS server
//! answers from (`fedraft_core::discovery::endpoints_view`): answer mode, and per cluster its
//! health, eligibility (or why not), addresses, ports, ready endpoints and weight.
//!
//! Without `watch` the view is read linearizably (or from local state with `stale=true`); 404
//! when the object has no discovery section. With `watch=true` the reply is newline-delimited
//! JSON: the current view as `ADDED`, then a `MODIFIED` line each time an applied entry changes
//! it (weights, health, addresses), and `DELETED` if the section or object goes away. The watch
//! reads this node's applied state; it never proposes.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fedraft_core::discovery::{endpoints_view, EndpointsView};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use super::common::{allow, read, P, Q};
use crate::auth::{Access, Principal};
use crate::error::ApiError;
use crate::metrics::WatchKind;
use crate::wire::{valid_label, valid_object_ref};
use crate::App;

/// Lines buffered between the watch task and the socket.
const WATCH_BUFFER_LINES: usize = 64;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointsParams {
    #[serde(default)]
    pub stale: bool,
    #[serde(default)]
    pub watch: bool,
}

/// The wire form of a view.
pub fn view_json(v: &EndpointsView) -> Value {
    let clusters: Vec<Value> = v
        .clusters
        .iter()
        .map(|c| {
            json!({
                "cluster": c.cluster,
                "health": format!("{:?}", c.health),
                "placed": c.placed,
                "eligible": c.eligible,
                "reason": c.reason,
                "addresses": c.addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "ports": c.ports,
                "readyEndpoints": c.ready_endpoints,
                "weight": c.weight,
                "reportedIndex": c.reported_index,
            })
        })
        .collect();
    let answering: Vec<&str> = v.answering().map(|c| c.cluster.as_str()).collect();
    json!({
        "kind": "ServiceEndpoints",
        "namespace": v.namespace,
        "name": v.name,
        "discovery": v.spec,
        "mode": format!("{:?}", v.mode),
        "answering": answering,
        "ports": v.ports(),
        "clusters": clusters,
        "resourceVersion": v.applied_index,
    })
}

pub async fn get(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    Q(q): Q<EndpointsParams>,
) -> Result<Response, ApiError> {
    valid_label(&ns, "namespace")?;
    valid_object_ref(&name, "name")?;
    allow(&app, &p, Access::ReadNamespace(&ns))?;
    let (n, m) = (ns.clone(), name.clone());
    let view = read(&app, q.stale, move |s| endpoints_view(s, &n, &m)).await?;
    let Some(view) = view else {
        return Err(ApiError::not_found(
            "service endpoints",
            format!("{ns}/{name} (no object with a discovery section)"),
        ));
    };
    if !q.watch {
        return Ok(Json(view_json(&view)).into_response());
    }
    let (tx, out) = mpsc::channel::<Result<Bytes, Infallible>>(WATCH_BUFFER_LINES);
    tokio::spawn(pump(app, ns, name, view, tx));
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

fn line(kind: &str, object: Value) -> Bytes {
    let mut s = json!({"type": kind, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

/// Follows applied entries and writes a line whenever the view changes.
async fn pump(
    app: App,
    ns: String,
    name: String,
    first: EndpointsView,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
) {
    let _live = app.metrics.watching(WatchKind::Endpoints);
    let mut rx = app.node.subscribe();
    let mut last = first;
    if tx.send(Ok(line("ADDED", view_json(&last)))).await.is_err() {
        return;
    }
    loop {
        match rx.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
        let now = app.node.read_stale(|s| endpoints_view(s, &ns, &name));
        let Some(now) = now else {
            let _ = tx.send(Ok(line("DELETED", view_json(&last)))).await;
            return;
        };
        // The applied index alone moves on every entry: compare what a client acts on.
        let changed =
            now.mode != last.mode || now.clusters != last.clusters || now.spec != last.spec;
        if changed {
            if tx
                .send(Ok(line("MODIFIED", view_json(&now))))
                .await
                .is_err()
            {
                return;
            }
            last = now;
        } else if tx.is_closed() {
            return;
        }
    }
}
