//! `/v1/audit*`: the audit archive online, read from this node's store (no proposal, no write).
//!
//! - `GET /v1/audit?from=&to=&since=&until=&actor=&object=&cluster=&order=&limit=&continue=`:
//!   records, oldest first (or `order=newest`), at most `limit` (1..=1000, default 100) per page,
//!   `continue` resumes after the previous page; one request reads at most
//!   `ApiConfig::audit_scan_budget_records` records, so a page may be partial (even empty) and
//!   still carry `continue`;
//! - `GET /v1/audit/state?at=INDEX|RFC3339`: clusters, objects and placements as they were;
//! - `GET /v1/audit/diff?from=&to=`: what changed between two points;
//! - `GET /v1/audit/explain/{ns}/{name}?from=&to=`: every placement change with its cause; one
//!   request replays at most `audit_scan_budget_records` entries of the range (beyond a
//!   checkpoint), so a long range is answered in pages: `continue` is the `from` of the next.
//!
//! Authorisation as for objects: tenants see only records, objects and changes of their
//! namespaces (no clusters); explain needs read access to the namespace. Every malformed
//! parameter is a 400 naming it. Queries and replays run on the audit API's own threads
//! (`audit_pool`), a bounded number at once: beyond that the answer is 429 with Retry-After.

use axum::extract::State;
use axum::{Extension, Json};
use fedraft_core::audit::{Filter, StateView};
use fedraft_core::model::ObjectKey;
use fedraft_raft::audit::{AuditLog, ObjectHistory, Order, MAX_PAGE_RECORDS};
use fedraft_raft::RaftError;
use serde::Deserialize;
use serde_json::{json, Value};

use super::common::{allow, slice_clusters, tenant_namespaces, P, Q};
use crate::audit_wire::{parse_rfc3339, record_json, ChangeJson, DiffJson, StateJson};
use crate::auth::{Access, Principal, Role};
use crate::error::ApiError;
use crate::wire::{valid_label, valid_object_ref};
use crate::App;

/// Records per page when `limit` is absent.
const DEFAULT_PAGE_RECORDS: usize = 100;

#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    from: Option<String>,
    to: Option<String>,
    since: Option<String>,
    until: Option<String>,
    actor: Option<String>,
    object: Option<String>,
    cluster: Option<String>,
    order: Option<String>,
    limit: Option<String>,
    #[serde(rename = "continue")]
    cont: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct AtParams {
    at: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct RangeParams {
    from: Option<String>,
    to: Option<String>,
}

fn index(v: &Option<String>, field: &str) -> Result<Option<u64>, ApiError> {
    v.as_deref()
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| ApiError::invalid(field, format!("{s:?} is not an index")))
        })
        .transpose()
}

fn time(v: &Option<String>, field: &str) -> Result<Option<u64>, ApiError> {
    v.as_deref()
        .map(|s| {
            parse_rfc3339(s)
                .ok_or_else(|| ApiError::invalid(field, format!("{s:?} is not an RFC 3339 time")))
        })
        .transpose()
}

/// The namespaces a tenant member may see; None for admins and operators.
fn scope(app: &App, p: &Principal) -> Option<Vec<String>> {
    matches!(p.role, Role::Tenant(_)).then(|| tenant_namespaces(app, p))
}

fn internal(e: RaftError) -> ApiError {
    tracing::error!(error = %e, "audit read failed");
    ApiError::internal(e.to_string())
}

async fn blocking<T: Send + 'static>(
    app: &App,
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    app.audit_pool.run(f).await
}

/// Resolves INDEX or RFC 3339 to an index within the archive.
fn point(log: &AuditLog, text: &str, field: &str) -> Result<u64, ApiError> {
    let last = log.bounds().map_err(internal)?.map_or(0, |b| b.1);
    point_within(log, last, text, field)
}

/// [`point`] when the archive's last index is already known.
fn point_within(log: &AuditLog, last: u64, text: &str, field: &str) -> Result<u64, ApiError> {
    let i = match text.parse::<u64>() {
        Ok(i) => i,
        Err(_) => {
            let ms = parse_rfc3339(text).ok_or_else(|| {
                ApiError::invalid(
                    field,
                    format!("{text:?} is neither an index nor an RFC 3339 time"),
                )
            })?;
            log.index_at_time(ms).map_err(internal)?.ok_or_else(|| {
                ApiError::invalid(field, format!("the archive starts after {text}"))
            })?
        }
    };
    if i > last {
        return Err(ApiError::invalid(
            field,
            format!("{i} is beyond the archive's last index {last}"),
        ));
    }
    Ok(i)
}

/// Replay refusals (before the oldest replayable point, a hole) are the caller's range.
fn replay_err(field: &'static str) -> impl Fn(RaftError) -> ApiError {
    move |e| match e {
        RaftError::Invalid(m) => ApiError::invalid(field, m),
        other => internal(other),
    }
}

pub async fn list(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ListParams>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadAllObjects)?;
    let order = match q.order.as_deref() {
        None | Some("oldest") => Order::OldestFirst,
        Some("newest") => Order::NewestFirst,
        Some(o) => {
            return Err(ApiError::invalid(
                "order",
                format!("{o:?}: expected oldest or newest"),
            ))
        }
    };
    let limit = match index(&q.limit, "limit")? {
        None => DEFAULT_PAGE_RECORDS,
        Some(l) if (1..=MAX_PAGE_RECORDS as u64).contains(&l) => l as usize,
        Some(l) => {
            return Err(ApiError::invalid(
                "limit",
                format!("{l} is outside 1..={MAX_PAGE_RECORDS}"),
            ))
        }
    };
    if let Some(o) = &q.object {
        let (ns, name) = o
            .split_once('/')
            .ok_or_else(|| ApiError::invalid("object", "expected NAMESPACE/NAME"))?;
        valid_label(ns, "object")?;
        valid_object_ref(name, "object")?;
    }
    let namespaces = scope(&app, &p);
    let filter = Filter {
        from: index(&q.from, "from")?,
        to: index(&q.to, "to")?,
        since_ms: time(&q.since, "since")?,
        until_ms: time(&q.until, "until")?,
        actor: q.actor.clone(),
        object: q.object.clone(),
        cluster: q.cluster.clone(),
        namespaces: namespaces.clone(),
    };
    if namespaces.is_some() && filter.cluster.is_some() {
        return Err(ApiError::forbidden(format!(
            "{} may not access clusters",
            p.name
        )));
    }
    let after = index(&q.cont, "continue")?;
    let budget = app.cfg.audit_scan_budget_records;
    let log = app.node.audit().await;
    let page = blocking(&app, move || {
        log.query_within(&filter, order, limit, after, budget)
            .map_err(internal)
    })
    .await?;
    let slices = match &p.role {
        Role::Tenant(t) => {
            let t = t.clone();
            Some(app.node.read_stale(move |s| slice_clusters(s, &t)))
        }
        _ => None,
    };
    let items: Vec<Value> = page
        .records
        .iter()
        .map(|r| record_json(r, namespaces.as_deref(), slices.as_ref()))
        .collect();
    Ok(Json(json!({
        "kind": "AuditRecordList",
        "items": items,
        "continue": page.next.map(|n| n.to_string()),
    })))
}

pub async fn state(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<AtParams>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadAllObjects)?;
    let at =
        q.at.ok_or_else(|| ApiError::MissingField { field: "at".into() })?;
    let namespaces = scope(&app, &p);
    let log = app.node.audit().await;
    let view = blocking(&app, move || {
        let i = point(&log, &at, "at")?;
        let s = log.state_at(i).map_err(replay_err("at"))?;
        Ok(StateView::of(&s, namespaces.as_deref()))
    })
    .await?;
    Ok(Json(
        serde_json::to_value(StateJson::of(&view))
            .map_err(|e| ApiError::internal(e.to_string()))?,
    ))
}

pub async fn diff(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<RangeParams>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadAllObjects)?;
    let from = q.from.ok_or_else(|| ApiError::MissingField {
        field: "from".into(),
    })?;
    let to =
        q.to.ok_or_else(|| ApiError::MissingField { field: "to".into() })?;
    let namespaces = scope(&app, &p);
    let log = app.node.audit().await;
    let d = blocking(&app, move || {
        let (a, b) = (point(&log, &from, "from")?, point(&log, &to, "to")?);
        if a > b {
            return Err(ApiError::invalid("from", format!("{a} is after to ({b})")));
        }
        log.diff(a, b, namespaces.as_deref())
            .map_err(replay_err("from"))
    })
    .await?;
    Ok(Json(
        serde_json::to_value(DiffJson::of(&d)).map_err(|e| ApiError::internal(e.to_string()))?,
    ))
}

pub async fn explain(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    Q(q): Q<RangeParams>,
) -> Result<Json<Value>, ApiError> {
    valid_label(&ns, "namespace")?;
    valid_object_ref(&name, "name")?;
    allow(&app, &p, Access::ReadNamespace(&ns))?;
    let log = app.node.audit().await;
    let key = ObjectKey::new(ns, name);
    let k = key.clone();
    let budget = app.cfg.audit_scan_budget_records.max(1) as u64;
    let (history, next) = blocking(&app, move || {
        let Some((first, last)) = log.bounds().map_err(internal)? else {
            return Ok((ObjectHistory::default(), None));
        };
        let from = q
            .from
            .as_deref()
            .map(|f| point_within(&log, last, f, "from"))
            .transpose()?
            .unwrap_or(first)
            .max(first);
        let to =
            q.to.as_deref()
                .map(|t| point(&log, t, "to"))
                .transpose()?
                .unwrap_or(last);
        if from > to {
            return Err(ApiError::invalid(
                "from",
                format!("{from} is after to ({to})"),
            ));
        }
        // A whole archive is not replayed for one request: the range is cut at the budget
        // (replay starts from the checkpoint below `from`, so the cost stays bounded), and the
        // caller continues from where this page stopped.
        let page_to = to.min(from.saturating_add(budget - 1));
        let next = (page_to < to).then_some(page_to + 1);
        let history = log
            .history(&k, Some(from), Some(page_to), &mut |_| {})
            .map_err(replay_err("from"))?;
        Ok((history, next))
    })
    .await?;
    let readiness: Vec<Value> = history
        .readiness
        .iter()
        .map(|r| json!({"index": r.index, "timeMs": r.time_ms, "desired": r.desired, "ready": r.ready}))
        .collect();
    let mut body = json!({
        "kind": "PlacementHistory",
        "object": key.to_string(),
        "changes": history.changes.iter().map(ChangeJson::of).collect::<Vec<_>>(),
        "readiness": readiness,
    });
    if let (Some(next), Some(m)) = (next, body.as_object_mut()) {
        m.insert("continue".into(), json!(next.to_string()));
    }
    Ok(Json(body))
}
