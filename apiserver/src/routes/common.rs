//! What every handler shares: path/query extractors with JSON errors, reads (linearizable or
//! stale), authorisation against tenant state, and the propose -> wait-applied -> answer path.

use std::time::Duration;

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use fedraft_core::command::Command;
use fedraft_core::state::{Applied, Outcome, State};
use fedraft_raft::Proposal;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use fedraft_core::users::UserRole;

use crate::auth::{authorize_scoped, Access, Principal, Role};
use crate::error::ApiError;
use crate::App;

/// Longest accepted Idempotency-Key.
const MAX_IDEMPOTENCY_KEY_BYTES: usize = 128;

/// `Path` with a JSON 400 on failure.
pub struct P<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for P<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| P(v))
            .map_err(|e| ApiError::Malformed {
                message: e.body_text(),
            })
    }
}

/// `Query` with a JSON 400 naming the parameter.
pub struct Q<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Q(v))
            .map_err(|e| ApiError::InvalidField {
                field: "query".into(),
                message: e.body_text(),
            })
    }
}

/// `?stale=true` on reads.
#[derive(Debug, Default, Deserialize)]
pub struct ReadParams {
    #[serde(default)]
    pub stale: bool,
}

/// Runs `f` on linearizable state, or on local state when `stale`.
pub async fn read<R: Send + 'static>(
    app: &App,
    stale: bool,
    f: impl FnOnce(&State) -> R + Send + 'static,
) -> Result<R, ApiError> {
    if stale {
        Ok(app.node.read_stale(f))
    } else {
        app.node.read(f).await.map_err(|e| ApiError::from_raft(&e))
    }
}

/// The namespaces the principal's tenant owns, if the principal is a member, narrowed to those
/// its role lists when its replicated user's role is scoped to namespaces. Read from local
/// state: authorisation may trail a membership change by the replication delay.
pub fn tenant_namespaces(app: &App, p: &Principal) -> Vec<String> {
    tenant_scope(app, p).0
}

/// [`tenant_namespaces`], and whether the principal may only read there. A tenant principal
/// named NAME is held to the replicated user NAME's scoped role, as the log holds its actor
/// `tenant:TENANT/NAME` at apply (`State::check_user_tenant`).
pub fn tenant_scope(app: &App, p: &Principal) -> (Vec<String>, bool) {
    let Role::Tenant(t) = &p.role else {
        return (Vec::new(), false);
    };
    let (t, name) = (t.clone(), p.name.clone());
    app.node.read_stale(move |s| {
        let mut owned = match s.tenant(&t) {
            Some(ten) if ten.spec.members.is_empty() || ten.spec.members.contains(&name) => {
                ten.spec.namespaces.clone()
            }
            _ => Vec::new(),
        };
        match s.users().user(&name).map(|u| &u.spec.role) {
            Some(UserRole::TenantNamespaces {
                tenant,
                namespaces,
                read_only,
            }) if *tenant == t => {
                owned.retain(|ns| namespaces.contains(ns));
                (owned, *read_only)
            }
            _ => (owned, false),
        }
    })
}

/// The namespaces a tenant member's replicated role is scoped to (`tenant:T/NS1,NS2` or
/// `tenant-reader:T/NS1,NS2`); None when it sees its whole tenant, or is no tenant member.
pub fn member_scope(s: &State, p: &Principal) -> Option<Vec<String>> {
    let Role::Tenant(t) = &p.role else {
        return None;
    };
    match s.users().user(&p.name).map(|u| &u.spec.role) {
        Some(UserRole::TenantNamespaces {
            tenant, namespaces, ..
        }) if tenant == t => Some(namespaces.clone()),
        _ => None,
    }
}

/// Tenant `t` as a member scoped to `namespaces` may see it: only those of its namespaces,
/// itself as the only member named, and as `status.used` what those namespaces' objects hold.
/// The quota, slices and per-cluster limits stay: they bound the member's own writes.
pub fn tenant_for_scope(
    s: &State,
    t: &fedraft_core::model::Tenant,
    namespaces: &[String],
    member: &str,
) -> fedraft_core::model::Tenant {
    let mut out = t.clone();
    out.spec.namespaces.retain(|n| namespaces.contains(n));
    out.spec.members.retain(|m| m == member);
    out.status.used = s.namespaces_used(&out.spec.namespaces);
    out
}

/// A decision as `role` may see it: whole for admins and operators; for a tenant member only
/// the clusters of its tenant's slices and those the decision places on or moves replicas from
/// ([`crate::wire::redact_decision`]).
pub fn decision_for(
    s: &State,
    role: &Role,
    d: fedraft_core::scheduler::Decision,
) -> fedraft_core::scheduler::Decision {
    let Role::Tenant(t) = role else {
        return d;
    };
    let slices = slice_clusters(s, t);
    crate::wire::redact_for_tenant(&slices, &d)
}

/// The clusters of tenant `t`'s slices: the ones its members may learn about.
pub fn slice_clusters(s: &State, t: &str) -> std::collections::BTreeSet<String> {
    s.tenant(t)
        .map(|ten| ten.status.slices.keys().cloned().collect())
        .unwrap_or_default()
}

/// Authorises `access` for `p` (403 otherwise).
pub fn allow(app: &App, p: &Principal, access: Access<'_>) -> Result<(), ApiError> {
    let owned = match (&p.role, access) {
        (
            Role::Tenant(_),
            Access::ReadNamespace(_) | Access::WriteNamespace(_) | Access::ReadSomeNamespace,
        ) => tenant_scope(app, p),
        _ => (Vec::new(), false),
    };
    authorize_scoped(p, access, &owned.0, owned.1)
}

/// The request id of a write: the Idempotency-Key header, else a fresh random id.
pub fn request_id(headers: &HeaderMap) -> Result<String, ApiError> {
    match headers.get("idempotency-key") {
        Some(v) => {
            let key = v
                .to_str()
                .map_err(|_| ApiError::invalid("Idempotency-Key", "must be visible ASCII"))?;
            if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_BYTES {
                return Err(ApiError::invalid(
                    "Idempotency-Key",
                    format!("must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} bytes"),
                ));
            }
            Ok(format!("key:{key}"))
        }
        None => Ok(format!("gen:{:032x}", rand::random::<u128>())),
    }
}

/// The expected resource version from the body or an `If-Match: "N"` header; both must agree.
pub fn expected_version(headers: &HeaderMap, body: Option<u64>) -> Result<Option<u64>, ApiError> {
    let header = match headers.get(header::IF_MATCH) {
        None => None,
        Some(v) => {
            let text = v.to_str().unwrap_or("").trim();
            let text = text.strip_prefix("W/").unwrap_or(text).trim_matches('"');
            Some(text.parse::<u64>().map_err(|_| {
                ApiError::invalid("If-Match", "expected \"N\" (a resource version)")
            })?)
        }
    };
    match (body, header) {
        (Some(b), Some(h)) if b != h => Err(ApiError::invalid(
            "metadata.resourceVersion",
            format!("body says {b} but If-Match says {h}"),
        )),
        (b, h) => Ok(b.or(h)),
    }
}

/// The compare-and-swap pre-check: refuse before proposing when the current version (read
/// linearizably by the caller) already differs. Core checks again at apply time.
pub fn check_version(expected: Option<u64>, found: Option<u64>) -> Result<(), ApiError> {
    let Some(e) = expected else { return Ok(()) };
    let ok = match found {
        Some(f) => f == e,
        None => e == 0,
    };
    if ok {
        return Ok(());
    }
    let message = match found {
        Some(f) if e == 0 => format!("expected to create, but it exists at resource version {f}"),
        Some(f) => format!("expected resource version {e}, found {f}"),
        None => format!("expected resource version {e}, but it does not exist"),
    };
    Err(ApiError::Conflict {
        message,
        expected: Some(e),
        found,
    })
}

/// Proposes `command` as `p`, returns the applied result once the entry is applied on this
/// node too (so the answer can be read from local state), or the refusal as an error.
pub async fn submit(
    app: &App,
    p: &Principal,
    headers: &HeaderMap,
    command: Command,
) -> Result<Applied, ApiError> {
    let request_id = request_id(headers)?;
    let kind = command.kind();
    let proposal = Proposal {
        request_id: request_id.clone(),
        actor: p.name.clone(),
        command,
    };
    let applied = app.node.propose(proposal).await.map_err(|e| {
        tracing::warn!(actor = %p.name, request_id = %request_id, command = kind, error = %e, "proposal failed");
        ApiError::from_raft(&e)
    })?;
    // Debug, not info: at thousands of writes per second one line each was a measurable share
    // of a node's CPU, and the audit archive already keeps actor, request id and outcome of
    // every command.
    tracing::debug!(
        actor = %p.name, request_id = %request_id, command = kind, index = applied.index,
        duplicate_of = ?applied.duplicate_of, accepted = applied.outcome.is_accepted(), "proposal applied"
    );
    if let Outcome::Rejected(r) = &applied.outcome {
        return Err(ApiError::from_rejection(r));
    }
    wait_applied(app, applied.index).await?;
    Ok(applied)
}

/// The resource version an accepted write reports.
pub fn resource_version(applied: &Applied) -> u64 {
    match applied.outcome {
        Outcome::Accepted {
            resource_version: Some(v),
        } => v,
        _ => applied.duplicate_of.unwrap_or(applied.index),
    }
}

/// Waits until this node applied `index` (a forwarded write commits on the leader first).
async fn wait_applied(app: &App, index: u64) -> Result<(), ApiError> {
    use tokio::sync::broadcast::error::RecvError;
    // The common case (the leader applied before answering): no subscription needed.
    if app.node.read_stale(|s| s.applied_index()) >= index {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(app.cfg.apply_wait_ms);
    let mut rx = app.ring.subscribe();
    loop {
        if app.node.read_stale(|s| s.applied_index()) >= index {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::Unavailable {
                message: format!("entry {index} committed but not yet applied on this node"),
            });
        }
        // Short waits: the broadcast wakes us, the poll covers a message missed in between.
        if let Ok(Err(RecvError::Closed)) =
            tokio::time::timeout(Duration::from_millis(50), rx.recv()).await
        {
            return Err(ApiError::Unavailable {
                message: "node is shutting down".into(),
            });
        }
    }
}
