//! `/v1/users[/{name}[/tokens[/{id}]]]`: the replicated user database (`fedraft_core::users`).
//!
//! Admins write (core checks the actor again at apply); operators and auditors read; tenant
//! members get 403. Issuing a token draws its id and secret from the operating system's CSPRNG
//! here, proposes only the SHA-256 of the token text, and answers the token once, with
//! `Cache-Control: no-store`. Must not: log, store, or put in an error the token text; list a
//! token's hash.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fedraft_core::command::Command;
use fedraft_core::users::{
    format_token, token_hash_hex, TokenIssue, TokenRecord, User, UserKind, UserRole, UserSpec,
    MAX_TOKEN_TTL_MS,
};
use rand::TryRngCore;
use serde::Deserialize;
use serde_json::{json, Value};

use super::common::{check_version, expected_version, read, resource_version, submit};
use super::common::{ReadParams, P, Q};
use crate::auth::{Principal, Role};
use crate::body::{decode_body, decode_bytes, is_yaml, read_limited};
use crate::error::ApiError;
use crate::wire::{self, valid_label};
use crate::App;

/// The body of `POST /v1/users` and `PUT /v1/users/{name}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserIn {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    /// `user` (default) or `serviceAccount`.
    #[serde(default)]
    pub user_kind: Option<String>,
    /// `admin`, `operator`, `auditor` or `tenant:TENANT`.
    pub role: String,
    #[serde(default)]
    pub resource_version: Option<u64>,
}

/// The body of `POST /v1/users/{name}/tokens`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenIn {
    /// Lifetime in seconds; absent: the token never expires.
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
}

fn user_json(u: &User) -> Value {
    json!({
        "kind": "User",
        "name": u.spec.name,
        "userKind": u.spec.kind.as_str(),
        "role": u.spec.role.to_string(),
        "createdMs": u.created_ms,
        "resourceVersion": u.resource_version,
    })
}

fn token_json(t: &TokenRecord, now_ms: u64) -> Value {
    json!({
        "kind": "Token",
        "id": t.id,
        "user": t.user,
        "createdMs": t.created_ms,
        "expiresMs": t.expires_ms,
        "revokedMs": t.revoked_ms,
        "issuedBy": t.issued_by,
        "live": t.is_live(now_ms),
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn admin_only(p: &Principal, what: &str) -> Result<(), ApiError> {
    if p.role == Role::Admin {
        return Ok(());
    }
    Err(ApiError::forbidden(format!("{} may not {what}", p.name)))
}

fn may_read(p: &Principal) -> Result<(), ApiError> {
    if let Role::Tenant(_) = p.role {
        return Err(ApiError::forbidden(format!(
            "{} may not read users",
            p.name
        )));
    }
    Ok(())
}

pub async fn list(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    may_read(&p)?;
    let doc = read(&app, q.stale, |s| {
        let items = s.users().users.values().map(user_json).collect();
        wire::list_json("User", s.applied_index(), items)
    })
    .await?;
    Ok(Json(doc))
}

pub async fn get_one(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    may_read(&p)?;
    valid_label(&name, "name")?;
    let n = name.clone();
    read(&app, q.stale, move |s| s.users().user(&n).map(user_json))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("user", &name))
}

/// Reads and checks a user body for `name` (the path's, or the body's on create).
fn spec_of(doc: UserIn, name: &str) -> Result<UserSpec, ApiError> {
    if let Some(k) = doc.kind.as_deref().filter(|k| *k != "User") {
        return Err(ApiError::invalid(
            "kind",
            format!("expected User, got {k:?}"),
        ));
    }
    if doc.name.as_deref().is_some_and(|n| n != name) {
        return Err(ApiError::invalid("name", "does not match the path"));
    }
    let kind = match doc.user_kind.as_deref() {
        None => UserKind::User,
        Some(k) => UserKind::parse(k).ok_or_else(|| {
            ApiError::invalid(
                "userKind",
                format!("{k:?}: expected user or serviceAccount"),
            )
        })?,
    };
    let role = UserRole::parse(&doc.role).ok_or_else(|| {
        ApiError::invalid(
            "role",
            format!(
                "{:?}: expected admin, operator, auditor, tenant:TENANT, tenant:TENANT/NS1,NS2 \
                 or tenant-reader:TENANT/NS1,NS2",
                doc.role
            ),
        )
    })?;
    let spec = UserSpec {
        name: name.to_string(),
        kind,
        role,
    };
    fedraft_core::users::validate_spec(&spec)
        .map_err(|e| ApiError::invalid(e.field(), e.to_string()))?;
    Ok(spec)
}

async fn write_user(
    app: &App,
    p: &Principal,
    headers: &HeaderMap,
    spec: UserSpec,
    expected: Option<u64>,
) -> Result<Value, ApiError> {
    // A token-file principal of the same name would share its actor's name in the audit log.
    if app.tokens.has_principal(&spec.name) {
        return Err(ApiError::Conflict {
            message: format!("{:?} is a principal of this node's token file", spec.name),
            expected,
            found: None,
        });
    }
    let name = spec.name.clone();
    let command = Command::PutUser {
        spec,
        expected_version: expected,
    };
    let applied = submit(app, p, headers, command).await?;
    let rv = resource_version(&applied);
    let n = name.clone();
    Ok(app
        .node
        .read_stale(move |s| s.users().user(&n).map(user_json))
        .unwrap_or_else(|| json!({"kind": "User", "name": name, "resourceVersion": rv})))
}

pub async fn create(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    admin_only(&p, "manage users")?;
    let doc = decode_body::<UserIn>(&headers, body, app.cfg.body_limit_bytes).await?;
    let name = doc.name.clone().ok_or_else(|| ApiError::MissingField {
        field: "name".into(),
    })?;
    valid_label(&name, "name")?;
    let spec = spec_of(doc, &name)?;
    let out = write_user(&app, &p, &headers, spec, Some(0)).await?;
    Ok((StatusCode::CREATED, Json(out)).into_response())
}

/// Sets a user's role (and kind); creates it if absent unless a version is expected.
pub async fn replace(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    admin_only(&p, "manage users")?;
    valid_label(&name, "name")?;
    let doc = decode_body::<UserIn>(&headers, body, app.cfg.body_limit_bytes).await?;
    let expected = expected_version(&headers, doc.resource_version)?;
    let spec = spec_of(doc, &name)?;
    Ok(Json(write_user(&app, &p, &headers, spec, expected).await?))
}

pub async fn delete(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    admin_only(&p, "manage users")?;
    valid_label(&name, "name")?;
    let expected = expected_version(&headers, None)?;
    let n = name.clone();
    let found = read(&app, false, move |s| {
        s.users().user(&n).map(|u| u.resource_version)
    })
    .await?;
    if found.is_none() {
        return Err(ApiError::not_found("user", &name));
    }
    check_version(expected, found)?;
    let command = Command::DeleteUser {
        name: name.clone(),
        expected_version: expected,
    };
    let applied = submit(&app, &p, &headers, command).await?;
    Ok(Json(
        json!({"kind": "Status", "status": "Success", "name": name, "resourceVersion": applied.index}),
    ))
}

/// A new token for `user`: its text (for the one answer that carries it) and the issue to
/// propose, which holds only its hash. Id and secret come from the operating system's CSPRNG.
pub(crate) fn draw_token(
    user: &str,
    ttl_ms: Option<u64>,
) -> Result<(String, TokenIssue), ApiError> {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    let mut os = rand::rngs::OsRng;
    os.try_fill_bytes(&mut id)
        .and_then(|()| os.try_fill_bytes(&mut secret))
        .map_err(|e| ApiError::Unavailable {
            message: format!("the operating system's random source failed: {e}"),
        })?;
    let id = hex::encode(id);
    let token = format_token(&id, &hex::encode(secret));
    let issue = TokenIssue {
        user: user.to_string(),
        id,
        sha256_hex: token_hash_hex(&token),
        ttl_ms,
    };
    Ok((token, issue))
}

/// Issues a token: the only answer that ever holds its text.
pub async fn issue_token(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    admin_only(&p, "issue tokens")?;
    valid_label(&name, "name")?;
    // The body is optional: no body, no lifetime limit.
    let bytes = read_limited(&headers, body, app.cfg.body_limit_bytes).await?;
    let doc = if bytes.iter().all(u8::is_ascii_whitespace) {
        TokenIn::default()
    } else {
        decode_bytes::<TokenIn>(&bytes, is_yaml(&headers), app.cfg.body_limit_bytes)?
    };
    let ttl_ms = match doc.ttl_seconds {
        None => None,
        Some(s) if s == 0 || s.saturating_mul(1000) > MAX_TOKEN_TTL_MS => {
            return Err(ApiError::invalid(
                "ttlSeconds",
                format!("must be 1 to {} seconds", MAX_TOKEN_TTL_MS / 1000),
            ))
        }
        Some(s) => Some(s * 1000),
    };
    let (token, issue) = draw_token(&name, ttl_ms)?;
    let id = issue.id.clone();
    let applied = submit(&app, &p, &headers, Command::IssueToken(issue)).await?;
    let record = app.node.read_stale(|s| s.users().token(&id).cloned());
    let mut out = match &record {
        Some(t) => token_json(t, now_ms()),
        None => json!({"kind": "Token", "id": id, "user": name}),
    };
    out["token"] = json!(token);
    out["resourceVersion"] = json!(resource_version(&applied));
    Ok((
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        Json(out),
    )
        .into_response())
}

pub async fn list_tokens(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P(name): P<String>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    may_read(&p)?;
    valid_label(&name, "name")?;
    let now = now_ms();
    let n = name.clone();
    let doc = read(&app, q.stale, move |s| {
        s.users().user(&n)?;
        let now = now.max(s.log_time_ms());
        let items = s
            .users()
            .tokens_of(&n)
            .map(|t| token_json(t, now))
            .collect();
        Some(wire::list_json("Token", s.applied_index(), items))
    })
    .await?;
    doc.map(Json)
        .ok_or_else(|| ApiError::not_found("user", &name))
}

pub async fn revoke_token(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((name, id)): P<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    admin_only(&p, "revoke tokens")?;
    valid_label(&name, "name")?;
    let command = Command::RevokeToken {
        user: name.clone(),
        id: id.clone(),
    };
    let applied = submit(&app, &p, &headers, command).await?;
    Ok(Json(json!({
        "kind": "Status", "status": "Success", "user": name, "id": id,
        "resourceVersion": resource_version(&applied),
    })))
}
