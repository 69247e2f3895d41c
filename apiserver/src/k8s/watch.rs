//! `?watch=1`: a Kubernetes watch stream of templates, namespaces created through the door,
//! policies (Karmada's, KubeFed's documents and the member cluster documents), clusters or tenants,
//! fed by the API's watch ring (`crate::watch`), so it resumes from any resourceVersion the ring
//! still holds and answers a 410 `ERROR` event when it is too old.
//!
//! Without a resourceVersion (or with 0) the stream starts with an `ADDED` event for every current
//! object. With `allowWatchBookmarks` an idle stream sends a `BOOKMARK` with the last applied index
//! every bookmark interval. A watch-list request (`sendInitialEvents=true`, which client-go's
//! informers send, with `resourceVersionMatch=NotOlderThan` and bookmarks) gets the current
//! objects, read at least as fresh as its resourceVersion, then a `BOOKMARK` annotated
//! `k8s.io/initial-events-end`, then the changes after it. A template event's object is rendered
//! from the federated object the event carries and the template's record as this node holds it when
//! the event is sent; a policy event's from the document it carries. A `DELETED` shows the template
//! or document as it was before the delete (so label selectors match it, and an informer's delete
//! handler gets the whole object), at the delete's resourceVersion; a template deleted in a burst
//! larger than the state's tombstones hold (`TOMBSTONES_KEPT`, `TOMBSTONE_BYTES`) is only named. A
//! member cluster document's status is its cluster's health: a change of that cluster is a
//! `MODIFIED` of the document. Member Secrets are not watched (the ring holds nothing of them).
//! Must not: hold the state's lock while it renders or sends.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use fedraft_core::door::{PolicyKindTag, PolicyRef, ResourceKey};
use fedraft_kubeapi::negotiate::{self, ObjectForm};
use fedraft_kubeapi::selector::{FieldSelector, LabelSelector};
use fedraft_kubeapi::table::IncludeObject;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::read::{as_seen, authorize_read, candidates, selectors, table_of};
use super::render::{self, Loaded};
use super::{Call, KResult, Refusal, Store, Target};
use crate::auth::{Principal, Role};
use crate::routes::common::{read, tenant_namespaces};
use crate::watch::ring::{EventType, LiveMsg, Payload, WatchEvent, POLICY};
use crate::watch::stream::{follow, Lines};
use crate::App;

/// Lines buffered per stream before the pump waits for the client.
const STREAM_BUFFER_LINES: usize = 256;
/// Longest watch a client may ask for; kube-rs asks for 290 s, kubectl for none.
const MAX_WATCH_S: u64 = 1800;
/// The annotation of the bookmark that ends a watch-list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// What one stream sends.
struct Filter {
    target: Target,
    labels: LabelSelector,
    fields: FieldSelector,
    /// A tenant member's namespaces (or its tenant's name, for tenants).
    only: Option<Vec<String>>,
    /// `kind.group:` of the watched template kind, as federated objects are named.
    prefix: String,
    /// Events carry one-row Tables when the client asked for Tables (`kubectl get -w`).
    table: Option<(&'static str, IncludeObject)>,
    /// Who watches: a tenant is shown as this principal may see it (`read::as_seen`).
    viewer: Principal,
}

impl Filter {
    fn visible(&self, ns: &str, name: &str) -> bool {
        if self.target.ns.as_deref().is_some_and(|n| n != ns) {
            return false;
        }
        let key = if ns.is_empty() { name } else { ns };
        self.only
            .as_ref()
            .is_none_or(|owned| owned.iter().any(|o| o == key))
    }

    fn selects(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// The event's object as a Kubernetes object, if this stream watches it.
    fn render(&self, app: &App, e: &WatchEvent) -> Option<(&'static str, Value)> {
        let def = &self.target.served.def;
        let (store_ns, object_name) = (e.namespace.as_deref().unwrap_or(""), e.name.as_deref()?);
        let (ns, name) = match (self.target.store(), e.kind?) {
            (Store::Template | Store::Namespace, "FederatedObject") => {
                let name = object_name.strip_prefix(&self.prefix)?;
                // A cluster-scoped template's object lives in the reserved namespace; the
                // template itself has none.
                let ns = if self.target.store() == Store::Namespace {
                    ""
                } else if !def.namespaced {
                    if store_ns != fedraft_core::door::CLUSTER_SCOPE_NAMESPACE {
                        return None;
                    }
                    ""
                } else {
                    store_ns
                };
                (ns, name)
            }
            (Store::Cluster, "Cluster") | (Store::Tenant, "Tenant") => ("", object_name),
            (Store::Policy(tag), POLICY) if e.policy == Some(tag) => (store_ns, object_name),
            (Store::Policy(tag), "Cluster") if render::is_cluster_document(tag) => {
                return self.cluster_document(app, tag, object_name);
            }
            _ => return None,
        };
        if !self.visible(ns, name) {
            return None;
        }
        let kind = match e.event_type {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            _ => return None,
        };
        let rendered = match (&e.object, self.target.store()) {
            (Some(Payload::Object(obj)), Store::Template) => {
                let key = ResourceKey {
                    group: def.group.clone(),
                    kind: def.kind.clone(),
                    namespace: ns.to_string(),
                    name: name.to_string(),
                };
                let found = app.node.read_stale(|s| {
                    let rec = s.door().templates.get(&key).cloned()?;
                    Some((rec, render::RolloutView::load(s, &key)))
                });
                found.map(|(rec, rollout)| {
                    Loaded::Template {
                        key,
                        rec,
                        obj: obj.clone(),
                        rollout,
                    }
                    .render()
                })
            }
            (Some(Payload::Object(obj)), Store::Namespace) => {
                let key = render::namespace_key(name);
                let rec = app
                    .node
                    .read_stale(|s| s.door().templates.get(&key).cloned());
                rec.map(|rec| {
                    Loaded::Namespace {
                        name: name.to_string(),
                        tpl: Some((rec, obj.clone())),
                    }
                    .render()
                })
            }
            (Some(Payload::Policy(rec)), Store::Policy(tag)) => {
                let key = PolicyRef {
                    kind: tag,
                    namespace: ns.to_string(),
                    name: name.to_string(),
                };
                let member = app.node.read_stale(|s| render::registered(s, &key));
                let rec = (**rec).clone();
                let mut obj = Loaded::Policy { key, rec, member }.render();
                if e.event_type == EventType::Deleted {
                    // As kube-apiserver: the last state, at the version of the delete.
                    let rv = json!(e.resource_version.to_string());
                    fedraft_kubeapi::meta::metadata_mut(&mut obj)
                        .insert("resourceVersion".into(), rv);
                }
                Some(obj)
            }
            (None, Store::Template | Store::Namespace) => self.deleted(e, ns, name),
            (Some(Payload::Cluster(c)), _) => Some(Loaded::Cluster(c.clone()).render()),
            (Some(Payload::Tenant(t)), _) => {
                let seen = app
                    .node
                    .read_stale(|s| as_seen(s, &self.viewer, Loaded::Tenant(t.clone())));
                Some(seen.render())
            }
            _ => None,
        };
        // An object gone before its event was rendered, without a tombstone, is only named.
        let obj = rendered.unwrap_or_else(|| {
            let mut m = json!({ "name": name, "resourceVersion": e.resource_version.to_string() });
            if !ns.is_empty() {
                m["namespace"] = json!(ns);
            }
            json!({ "apiVersion": def.api_version(), "kind": def.kind, "metadata": m })
        });
        self.selects(&obj).then_some((kind, obj))
    }

    /// A deleted template (or namespace made through the door) as it last was, at the version
    /// of the delete, as kube-apiserver sends it; None when the hub found no tombstone.
    fn deleted(&self, e: &WatchEvent, ns: &str, name: &str) -> Option<Value> {
        let gone = e.last_seen.as_ref()?;
        let rec = (**gone.template.as_ref()?).clone();
        let obj = gone.object.clone();
        let mut rendered = match self.target.store() {
            Store::Namespace => Loaded::Namespace {
                name: name.to_string(),
                tpl: Some((rec, obj)),
            },
            _ => Loaded::Template {
                key: ResourceKey {
                    group: self.target.served.def.group.clone(),
                    kind: self.target.served.def.kind.clone(),
                    namespace: ns.to_string(),
                    name: name.to_string(),
                },
                rec,
                obj,
                rollout: None,
            },
        }
        .render();
        let rv = json!(e.resource_version.to_string());
        fedraft_kubeapi::meta::metadata_mut(&mut rendered).insert("resourceVersion".into(), rv);
        Some(rendered)
    }

    /// A change of the cluster `name` as a `MODIFIED` of the document of kind `tag` that
    /// registered it, when this stream watches that document.
    fn cluster_document(
        &self,
        app: &App,
        tag: PolicyKindTag,
        name: &str,
    ) -> Option<(&'static str, Value)> {
        let first = PolicyRef {
            kind: tag,
            namespace: self.target.ns.clone().unwrap_or_default(),
            name: String::new(),
        };
        let ns = self.target.ns.as_deref();
        let loaded = app.node.read_stale(|s| {
            let key = s
                .door()
                .policies
                .range(&first..)
                .map(|(k, _)| k)
                .take_while(|k| k.kind == tag && ns.is_none_or(|n| k.namespace == n))
                .find(|k| k.name == name)?;
            render::load_policy(s, key)
        })?;
        let (ns, name) = loaded.sort_key();
        if !self.visible(ns, name) {
            return None;
        }
        let obj = loaded.render();
        self.selects(&obj).then_some(("MODIFIED", obj))
    }

    /// The event line: the object, or its one-row Table.
    fn event(&self, kind: &str, obj: Value) -> Value {
        let object = match self.table {
            None => obj,
            Some((version, include)) => {
                let mut t = table_of(&self.target, &[obj], include);
                t["apiVersion"] = json!(format!("meta.k8s.io/{version}"));
                t
            }
        };
        json!({ "type": kind, "object": object })
    }

    fn bookmark(&self, rv: u64) -> Value {
        let def = &self.target.served.def;
        json!({ "type": "BOOKMARK", "object": {
            "apiVersion": def.api_version(),
            "kind": def.kind,
            "metadata": { "resourceVersion": rv.to_string() },
        }})
    }

    /// The bookmark that tells a watch-list client its initial events are complete.
    fn initial_events_end(&self, rv: u64) -> Value {
        let mut b = self.bookmark(rv);
        b["object"]["metadata"]["annotations"] = json!({ INITIAL_EVENTS_END: "true" });
        b
    }
}

fn line(v: &Value) -> Bytes {
    let mut out = serde_json::to_vec(v).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

fn expired(message: String) -> Value {
    json!({ "type": "ERROR", "object": Refusal::from(fedraft_kubeapi::ApiError::Expired(message)).body })
}

pub async fn watch(call: &Call) -> KResult<Response> {
    let t = call.target.clone();
    let watched = match t.store() {
        Store::Template | Store::Namespace | Store::Cluster | Store::Tenant => true,
        Store::Policy(tag) => tag != PolicyKindTag::MemberSecret,
        Store::User | Store::UserToken | Store::Internal(_) => false,
    };
    if !watched {
        return Err(Refusal::method_not_allowed("watch"));
    }
    authorize_read(call, t.ns.as_deref())?;
    let (labels, fields) = selectors(call)?;
    let only = match &call.principal.role {
        Role::Tenant(name) if t.store() == Store::Tenant => Some(vec![name.clone()]),
        Role::Tenant(_) => Some(tenant_namespaces(&call.app, &call.principal)),
        _ => None,
    };
    let prefix = match t.store() {
        Store::Namespace => render::namespace_key("").object_name(),
        _ => ResourceKey {
            group: t.served.def.group.clone(),
            kind: t.served.def.kind.clone(),
            namespace: String::new(),
            name: String::new(),
        }
        .object_name(),
    };
    let table = match negotiate::object_form(call.header(header::ACCEPT)) {
        Some(ObjectForm::Table(version)) => Some((
            version,
            IncludeObject::from_query(call.params.get("includeObject"))?,
        )),
        _ => None,
    };
    let filter = Filter {
        target: t.clone(),
        labels,
        fields,
        only,
        prefix,
        table,
        viewer: call.principal.clone(),
    };
    let bookmarks = call.params.flag("allowWatchBookmarks");
    let watch_list = watch_list(call, bookmarks)?;
    let timeout = Duration::from_secs(
        call.params
            .u64("timeoutSeconds")?
            .unwrap_or(MAX_WATCH_S)
            .clamp(1, MAX_WATCH_S),
    );
    let ring = call.app.ring.clone();
    let requested = call.params.u64("resourceVersion")?;
    let initial_events = watch_list.unwrap_or(requested.unwrap_or(0) == 0);
    let (initial, backlog, rx, from) = match requested {
        Some(rv) if rv > 0 && !initial_events => match ring.resume(rv) {
            Ok((backlog, rx)) => (Vec::new(), backlog, rx, rv),
            Err(e) => {
                // As kube-apiserver: 200, and the 410 as the stream's one event.
                let frame = line(&expired(format!(
                    "too old resource version: {} ({})",
                    e.requested, e.horizon
                )));
                return Ok(stream_response(Body::from(frame)));
            }
        },
        _ if !initial_events => {
            // sendInitialEvents=false without a version: from now on, nothing before.
            let (backlog, rx) = resume_now(&ring)?;
            (Vec::new(), backlog, rx, ring.last_index())
        }
        _ => {
            // Subscribe first, then read: what happens after the read is in the backlog.
            let (backlog, rx) = resume_now(&ring)?;
            let tt = t.clone();
            let p = call.principal.clone();
            let (at, initial) = read(&call.app, false, move |s| {
                let all: Vec<Loaded> = candidates(s, &tt, tt.ns.as_deref(), None)
                    .map(|l| as_seen(s, &p, l))
                    .collect();
                (s.applied_index(), all)
            })
            .await?;
            // NotOlderThan: a version this node has not applied after a linearizable read is
            // one no member of the federation has committed.
            if let Some(rv) = requested.filter(|rv| *rv > at) {
                return Err(Refusal::from(fedraft_kubeapi::ApiError::Internal {
                    code: 504,
                    message: format!("Too large resource version: {rv}, current: {at}"),
                }));
            }
            (initial, backlog, rx, at)
        }
    };
    let end_marker = watch_list == Some(true);
    let (tx, out) = mpsc::channel::<Result<Bytes, Infallible>>(STREAM_BUFFER_LINES);
    let every = Duration::from_millis(call.app.cfg.bookmark_interval_ms.max(10));
    let app = call.app.clone();
    tokio::spawn(async move {
        let initial = Initial {
            objects: initial,
            end_marker,
        };
        let pump = pump(
            &app, &filter, initial, backlog, rx, from, bookmarks, every, &tx,
        );
        let _ = tokio::time::timeout(timeout, pump).await;
    });
    let stream =
        futures::stream::unfold(
            out,
            |mut out| async move { out.recv().await.map(|x| (x, out)) },
        );
    Ok(stream_response(Body::from_stream(stream)))
}

fn stream_response(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// A subscription to the ring from its last event on.
fn resume_now(
    ring: &crate::watch::ring::Ring,
) -> KResult<(
    Vec<Arc<WatchEvent>>,
    tokio::sync::broadcast::Receiver<LiveMsg>,
)> {
    ring.resume(ring.last_index()).map_err(|_| {
        Refusal::from(crate::ApiError::Unavailable {
            message: "watch history is resetting".into(),
        })
    })
}

/// `sendInitialEvents`: None when absent (the version decides), else its value. As in
/// kube-apiserver, it needs `resourceVersionMatch=NotOlderThan` and bookmarks, and
/// `resourceVersionMatch` means nothing to a watch without it.
fn watch_list(call: &Call, bookmarks: bool) -> KResult<Option<bool>> {
    let invalid = |message: &str| Refusal::bad_request(format!("invalid watch options: {message}"));
    let send = match call.params.get("sendInitialEvents") {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            return Err(invalid(&format!(
                "sendInitialEvents: must be true or false, not {other:?}"
            )))
        }
    };
    let matching = call.params.get("resourceVersionMatch");
    match (send, matching) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(invalid(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        )),
        (Some(_), Some("NotOlderThan")) if bookmarks => Ok(send),
        (Some(_), Some("NotOlderThan")) => Err(invalid(
            "allowWatchBookmarks: Forbidden: sendInitialEvents requires allowWatchBookmarks=true",
        )),
        (Some(_), _) => Err(invalid(
            "resourceVersionMatch: Unsupported value: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        )),
    }
}

/// What a stream sends before the changes: the current objects, and whether a watch-list
/// bookmark ends them.
struct Initial {
    objects: Vec<Loaded>,
    end_marker: bool,
}

#[allow(clippy::too_many_arguments)]
async fn pump(
    app: &App,
    filter: &Filter,
    initial: Initial,
    backlog: Vec<Arc<WatchEvent>>,
    rx: tokio::sync::broadcast::Receiver<LiveMsg>,
    from: u64,
    bookmarks: bool,
    every: Duration,
    tx: &mpsc::Sender<Result<Bytes, Infallible>>,
) {
    for l in &initial.objects {
        let (ns, name) = l.sort_key();
        let obj = l.render();
        if !(filter.visible(ns, name) && filter.selects(&obj)) {
            continue;
        }
        if tx
            .send(Ok(line(&filter.event("ADDED", obj))))
            .await
            .is_err()
        {
            return;
        }
    }
    if initial.end_marker
        && tx
            .send(Ok(line(&filter.initial_events_end(from))))
            .await
            .is_err()
    {
        return;
    }
    drop(initial);
    let lines = Lines {
        event: |e: &WatchEvent| {
            filter
                .render(app, e)
                .map(|(kind, obj)| line(&filter.event(kind, obj)))
        },
        bookmark: |rv| bookmarks.then(|| line(&filter.bookmark(rv))),
        gone: |_, message: &str| line(&expired(message.to_string())),
    };
    follow(tx, &lines, &backlog, rx, from, every, |_| {}).await;
}
