//! The replicated user database through the door, in fedraft's own group: `users.fedraft.io`
//! (kind `User`: `spec.kind` user or serviceAccount, `spec.role` in the token file's spelling)
//! and `usertokens.fedraft.io` (kind `UserToken`, named by the token's id: `spec.user`,
//! `spec.ttlSeconds`).
//!
//! Users take the generic write verbs (`write`: create, replace, patch, delete), which call
//! [`put_command`] and [`delete_command`] here for the one `PutUser` or `DeleteUser` proposal,
//! with the principal as actor. A token is issued by creating a UserToken ([`issue`]): the id
//! and secret are drawn here, only the SHA-256 is proposed, and the created object carries the
//! token text in `status.token` in that one answer (`Cache-Control: no-store`); reads show
//! metadata only. Deleting a UserToken revokes it: it is gone from the door at once, while the
//! native `/v1/users/NAME/tokens` keeps listing it, revoked, until the user's next issue prunes
//! it. Rotation is an issue followed by a revoke.
//!
//! Administrators write; operators and auditors read; tenant members are refused both (core
//! checks the actor again at apply). Must not: put a token's text or hash in a read, a log line
//! or an error; write except by proposing.

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use fedraft_core::command::Command;
use fedraft_core::state::State;
use fedraft_core::users::{
    validate_spec, TokenRecord, User, UserKind, UserRole, UserSpec, MAX_TOKEN_TTL_MS,
};
use fedraft_kubeapi::meta;
use serde_json::{json, Map, Value};

use super::catalog::{FEDRAFT_GROUP, FEDRAFT_VERSION};
use super::render::{rfc3339, Loaded};
use super::write::{check_identity, kind_subject, read_body};
use super::{Call, KResult, Refusal, Store};
use crate::auth::Role;
use crate::routes::common::{read, submit};
use crate::routes::objects::as_actor;

fn api_version() -> String {
    format!("{FEDRAFT_GROUP}/{FEDRAFT_VERSION}")
}

fn now_ms() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0)
}

/// Operators and auditors read the user database; tenant members do not.
pub fn authorize_read(call: &Call) -> KResult<()> {
    if let Role::Tenant(_) = call.principal.role {
        return Err(crate::ApiError::forbidden(format!(
            "{} may not read {}",
            call.principal.name,
            call.target.plural()
        ))
        .into());
    }
    Ok(())
}

/// Only administrators change users and tokens.
pub fn authorize_write(call: &Call) -> KResult<()> {
    if call.principal.role == Role::Admin {
        return Ok(());
    }
    Err(crate::ApiError::forbidden(format!(
        "{} may not write {}: only an administrator manages users and tokens",
        call.principal.name,
        call.target.plural()
    ))
    .into())
}

/// A user as a read shows it, with the count of its live tokens.
pub fn load_user(s: &State, name: &str) -> Option<Loaded> {
    let u = s.users().user(name)?;
    Some(user_loaded(s, u))
}

fn user_loaded(s: &State, u: &User) -> Loaded {
    let now = now_ms().max(s.log_time_ms());
    let live_tokens = s
        .users()
        .tokens_of(&u.spec.name)
        .filter(|t| t.is_live(now))
        .count();
    Loaded::User {
        user: Box::new(u.clone()),
        live_tokens,
    }
}

/// A token as a read shows it (its record: never the hash in the answer, see [`render_token`]).
/// A revoked token is gone from the door, as a deleted object is (kubectl's delete waits for
/// that); `/v1/users/NAME/tokens` still lists it with its revocation time.
pub fn load_token(s: &State, id: &str) -> Option<Loaded> {
    let t = s.users().token(id).filter(|t| t.revoked_ms.is_none())?;
    Some(token_loaded(s, t))
}

fn token_loaded(s: &State, t: &TokenRecord) -> Loaded {
    let live = t.is_live(now_ms().max(s.log_time_ms()));
    Loaded::Token {
        rec: Box::new(t.clone()),
        live,
    }
}

/// Users by name, after `after` when a list continues.
pub fn users_after<'s>(s: &'s State, after: Option<String>) -> impl Iterator<Item = Loaded> + 's {
    s.users()
        .users
        .values()
        .filter(move |u| after.as_ref().is_none_or(|a| u.spec.name > *a))
        .map(move |u| user_loaded(s, u))
}

/// Tokens by id, after `after` when a list continues.
pub fn tokens_after<'s>(s: &'s State, after: Option<String>) -> impl Iterator<Item = Loaded> + 's {
    s.users()
        .tokens
        .values()
        .filter(move |t| t.revoked_ms.is_none() && after.as_ref().is_none_or(|a| t.id > *a))
        .map(move |t| token_loaded(s, t))
}

pub fn render_user(u: &User, live_tokens: usize) -> Value {
    json!({
        "apiVersion": api_version(),
        "kind": "User",
        "metadata": {
            "name": u.spec.name,
            "resourceVersion": u.resource_version.to_string(),
            "creationTimestamp": rfc3339(u.created_ms),
        },
        "spec": { "kind": u.spec.kind.as_str(), "role": u.spec.role.to_string() },
        "status": { "tokens": live_tokens },
    })
}

/// A token's metadata: id, user, times, issuer. The hash stays in the state.
pub fn render_token(t: &TokenRecord, live: bool) -> Value {
    let mut spec = json!({ "user": t.user });
    let mut status = Map::new();
    status.insert("live".into(), json!(live));
    status.insert("issuedBy".into(), json!(t.issued_by));
    if let Some(e) = t.expires_ms {
        spec["ttlSeconds"] = json!(e.saturating_sub(t.created_ms) / 1000);
        status.insert("expiresAt".into(), json!(rfc3339(e)));
    }
    if let Some(r) = t.revoked_ms {
        status.insert("revokedAt".into(), json!(rfc3339(r)));
    }
    json!({
        "apiVersion": api_version(),
        "kind": "UserToken",
        "metadata": { "name": t.id, "creationTimestamp": rfc3339(t.created_ms) },
        "spec": spec,
        "status": status,
    })
}

/// Printer columns of the two kinds (`kubectl get users`, `kubectl get usertokens`).
pub fn columns(store: Store) -> Vec<Value> {
    let col =
        |name: &str, ty: &str, path: &str| json!({ "name": name, "type": ty, "jsonPath": path });
    match store {
        Store::User => vec![
            col("Kind", "string", ".spec.kind"),
            col("Role", "string", ".spec.role"),
            col("Tokens", "integer", ".status.tokens"),
            col("Age", "date", ".metadata.creationTimestamp"),
        ],
        _ => vec![
            col("User", "string", ".spec.user"),
            col("Live", "boolean", ".status.live"),
            col("Expires", "string", ".status.expiresAt"),
            col("Age", "date", ".metadata.creationTimestamp"),
        ],
    }
}

/// The fields of `spec` other than `known`, refused by name so a typo is not silently dropped.
fn unknown_spec_field(
    call: &Call,
    name: &str,
    spec: &Map<String, Value>,
    known: &[&str],
) -> KResult<()> {
    match spec.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(Refusal::invalid(
            kind_subject(&call.target, name),
            &format!("spec.{k}"),
            &format!(
                "Unsupported value: unknown field (known: {})",
                known.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

fn spec_object<'a>(call: &Call, name: &str, obj: &'a Value) -> KResult<&'a Map<String, Value>> {
    obj.get("spec").and_then(Value::as_object).ok_or_else(|| {
        Refusal::invalid(
            kind_subject(&call.target, name),
            "spec",
            "Required value: an object",
        )
    })
}

/// The user spec a User object asks for, each refusal naming its field (`spec.role`...).
fn user_spec(call: &Call, obj: &Value) -> KResult<UserSpec> {
    let name = meta::name(obj).to_string();
    let invalid = |field: &str, detail: String| {
        Refusal::invalid(kind_subject(&call.target, &name), field, &detail)
    };
    let spec = spec_object(call, &name, obj)?;
    unknown_spec_field(call, &name, spec, &["kind", "role"])?;
    let kind = match spec.get("kind") {
        None | Some(Value::Null) => UserKind::User,
        Some(v) => v.as_str().and_then(UserKind::parse).ok_or_else(|| {
            invalid(
                "spec.kind",
                format!("Unsupported value: {v}: supported values: \"user\", \"serviceAccount\""),
            )
        })?,
    };
    let role_text = spec.get("role").and_then(Value::as_str).ok_or_else(|| {
        invalid(
            "spec.role",
            "Required value: admin, operator, auditor, tenant:TENANT, tenant:TENANT/NS1,NS2 or \
             tenant-reader:TENANT/NS1,NS2"
                .into(),
        )
    })?;
    let role = UserRole::parse(role_text).ok_or_else(|| {
        invalid(
            "spec.role",
            format!(
                "Invalid value: {role_text:?}: expected admin, operator, auditor, tenant:TENANT, \
                 tenant:TENANT/NS1,NS2 or tenant-reader:TENANT/NS1,NS2"
            ),
        )
    })?;
    let spec = UserSpec {
        name: name.clone(),
        kind,
        role,
    };
    validate_spec(&spec).map_err(|e| {
        let field = match e.field() {
            "name" => "metadata.name",
            "role" => "spec.role",
            other => other,
        };
        invalid(field, format!("Invalid value: {e}"))
    })?;
    Ok(spec)
}

/// The `PutUser` that writes the User `obj` at `expected` (0: create). The role's tenant and
/// namespaces are checked on a linearizable read so the refusal names `spec.role`; core checks
/// them again at apply.
pub async fn put_command(call: &Call, obj: &Value, expected: u64) -> KResult<Command> {
    let spec = user_spec(call, obj)?;
    // A token-file principal of the same name would share its actor's name in the audit log.
    if call.app.tokens.has_principal(&spec.name) {
        return Err(Refusal::already_exists(
            call.target.subject(&spec.name),
            &call.target.plural(),
        ));
    }
    let role = spec.role.clone();
    let problem = read(&call.app, false, move |s| {
        let tenant = role.tenant()?;
        if s.tenant(tenant).is_none() {
            return Some(format!("tenant {tenant:?} does not exist"));
        }
        if let UserRole::TenantNamespaces { namespaces, .. } = &role {
            let foreign = namespaces.iter().find(|ns| {
                s.tenant_of_namespace(ns)
                    .is_none_or(|t| t.spec.name != tenant)
            });
            if let Some(ns) = foreign {
                return Some(format!(
                    "namespace {ns:?} does not belong to tenant {tenant:?}"
                ));
            }
        }
        None
    })
    .await?;
    if let Some(detail) = problem {
        return Err(Refusal::invalid(
            kind_subject(&call.target, &spec.name),
            "spec.role",
            &format!("Invalid value: {:?}: {detail}", spec.role.to_string()),
        ));
    }
    Ok(Command::PutUser {
        spec,
        expected_version: Some(expected),
    })
}

/// What deleting `cur` proposes: a user's removal (with its tokens), or a token's revocation.
pub fn delete_command(cur: &Loaded) -> Option<Command> {
    match cur {
        Loaded::User { user, .. } => Some(Command::DeleteUser {
            name: user.spec.name.clone(),
            expected_version: Some(user.resource_version),
        }),
        Loaded::Token { rec, .. } => Some(Command::RevokeToken {
            user: rec.user.clone(),
            id: rec.id.clone(),
        }),
        _ => None,
    }
}

/// Creating a UserToken: issues a token and answers its text once, in `status.token`.
pub async fn issue(call: &Call, body: Body) -> KResult<Response> {
    authorize_write(call)?;
    let mut obj = read_body(call, body).await?;
    check_identity(&call.target, &mut obj)?;
    let given = meta::name(&obj).to_string();
    let invalid = |field: &str, detail: &str| {
        Refusal::invalid(kind_subject(&call.target, &given), field, detail)
    };
    if !given.is_empty() {
        return Err(invalid(
            "metadata.name",
            "Forbidden: a token's name is its id, drawn by the server: leave it out (or use \
             generateName)",
        ));
    }
    let spec = spec_object(call, "", &obj)?;
    unknown_spec_field(call, "", spec, &["user", "ttlSeconds"])?;
    let user = spec
        .get("user")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| invalid("spec.user", "Required value: the user the token is for"))?
        .to_string();
    let max_s = MAX_TOKEN_TTL_MS / 1000;
    let ttl_ms = match spec.get("ttlSeconds") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(s) if (1..=max_s).contains(&s) => Some(s * 1000),
            _ => {
                return Err(invalid(
                    "spec.ttlSeconds",
                    &format!("Invalid value: {v}: must be 1 to {max_s} seconds"),
                ))
            }
        },
    };
    let u = user.clone();
    if !read(&call.app, false, move |s| s.users().user(&u).is_some()).await? {
        return Err(invalid(
            "spec.user",
            &format!("Not found: {user:?}: no such user"),
        ));
    }
    if call.params.dry_run() {
        let mut preview = obj.clone();
        preview["status"] = json!({ "live": true });
        return Ok((StatusCode::CREATED, Json(preview)).into_response());
    }
    let (token, issue) = crate::routes::users::draw_token(&user, ttl_ms)?;
    let id = issue.id.clone();
    let actor = as_actor(&call.principal);
    submit(&call.app, &actor, &call.headers, Command::IssueToken(issue)).await?;
    let mut out = call
        .app
        .node
        .read_stale(|s| load_token(s, &id))
        .map(|l| l.render())
        .unwrap_or_else(|| {
            json!({"apiVersion": api_version(), "kind": "UserToken",
                   "metadata": {"name": id}, "spec": {"user": user}, "status": {}})
        });
    out["status"]["token"] = json!(token);
    Ok((
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        Json(out),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_renders_without_its_hash() {
        let t = TokenRecord {
            id: "0123456789abcdef".into(),
            user: "alice".into(),
            sha256_hex: "ab".repeat(32),
            created_ms: 1_000,
            expires_ms: Some(61_000),
            revoked_ms: None,
            issued_by: "root".into(),
        };
        let doc = render_token(&t, true);
        assert!(!doc.to_string().contains(&t.sha256_hex), "{doc}");
        assert_eq!(doc["metadata"]["name"], "0123456789abcdef");
        assert_eq!(doc["spec"]["ttlSeconds"], 60);
        assert_eq!(doc["status"]["live"], true);
        assert!(doc["status"].get("revokedAt").is_none());
    }

    #[test]
    fn a_user_renders_its_role_as_the_token_file_spells_it() {
        let u = User {
            spec: UserSpec {
                name: "rita".into(),
                kind: UserKind::ServiceAccount,
                role: UserRole::parse("tenant-reader:blue/web,db").unwrap(),
            },
            created_ms: 0,
            resource_version: 7,
        };
        let doc = render_user(&u, 2);
        assert_eq!(doc["spec"]["role"], "tenant-reader:blue/web,db");
        assert_eq!(doc["spec"]["kind"], "serviceAccount");
        assert_eq!(doc["metadata"]["resourceVersion"], "7");
        assert_eq!(doc["status"]["tokens"], 2);
    }
}
