//! The replicated user database: users and service accounts, their role, and their API tokens.
//!
//! Owns the records ([`UserSpec`], [`User`], [`TokenRecord`]), their table ([`Users`]), the typed
//! validation of what a command asks ([`UserError`], each naming its field), the token format
//! (`fedraft_<ID>_<SECRET>`, see [`token_id`]) and its hash ([`token_hash_hex`]). A token's
//! secret never reaches the log: the API node draws it, the entry carries its SHA-256 only, so no
//! data directory, snapshot, backup or audit archive can give it back.
//!
//! Actors: a replicated user acts as `user:NAME` ([`user_actor`]) unless it is a tenant member,
//! which acts as `tenant:TENANT/NAME` like every tenant principal (`crate::admission::Actor`), so
//! the admission rules hold for it unchanged. Any other actor is a principal of a node's token
//! file, the break-glass and bootstrap path, whose role its node decided.
//!
//! Must not: do I/O, read clocks or draw random numbers (the secret and the token id come in the
//! command; expiry is log time); apply commands (`state/handlers/users.rs` does).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::FieldError;

/// Prefix of a replicated, non-tenant user's actor: `user:NAME`.
pub const USER_ACTOR_PREFIX: &str = "user:";
/// Prefix every replicated token starts with; what follows is `ID_SECRET`.
pub const TOKEN_PREFIX: &str = "fedraft_";
/// A token id: this many lowercase hex digits (64 bits, drawn by the API node).
pub const TOKEN_ID_HEX_LEN: usize = 16;
/// Most users and service accounts the database holds.
pub const MAX_USERS: usize = 10_000;
/// Most tokens one user holds that are neither revoked nor expired.
pub const MAX_LIVE_TOKENS_PER_USER: usize = 16;
/// Most namespaces one scoped role lists.
pub const MAX_ROLE_NAMESPACES: usize = 64;
/// How a read-only role scoped to namespaces is spelled: `tenant-reader:TENANT/NS1,NS2`.
pub const READER_ROLE_PREFIX: &str = "tenant-reader:";
/// The first log version whose `PutUser` may carry [`UserRole::TenantNamespaces`]; an older
/// entry could not, and one that claims to is refused as a binary of its version would have.
pub const SCOPED_ROLES_SINCE: u16 = 10;
/// Longest token lifetime: ten years, in milliseconds.
pub const MAX_TOKEN_TTL_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// A person or a program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum UserKind {
    #[default]
    User,
    ServiceAccount,
}

impl UserKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UserKind::User => "user",
            UserKind::ServiceAccount => "serviceAccount",
        }
    }

    /// `user` or `serviceAccount`.
    pub fn parse(s: &str) -> Option<UserKind> {
        match s {
            "user" => Some(UserKind::User),
            "serviceAccount" | "service-account" => Some(UserKind::ServiceAccount),
            _ => None,
        }
    }
}

/// What a user may do; the same roles a token file grants, plus the auditor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum UserRole {
    /// Everything, including managing users.
    Admin,
    /// Manages clusters, reads everything else.
    Operator,
    /// Reads and writes objects in the namespaces its tenant owns.
    Tenant { tenant: String },
    /// Reads everything (the audit log included), writes nothing.
    Auditor,
    /// A member of `tenant` in the listed namespaces of it only; `read_only`: reads them and
    /// writes nothing. New in log version 10 ([`SCOPED_ROLES_SINCE`]).
    TenantNamespaces {
        tenant: String,
        namespaces: Vec<String>,
        read_only: bool,
    },
}

impl UserRole {
    /// Reads `admin`, `operator`, `auditor` or `tenant:TENANT` (the token file's spelling), or a
    /// role scoped to namespaces: `tenant:TENANT/NS1,NS2` (a member there) or
    /// `tenant-reader:TENANT/NS1,NS2` (reads there only). Names are checked by [`validate_spec`].
    pub fn parse(s: &str) -> Option<UserRole> {
        match s {
            "admin" => Some(UserRole::Admin),
            "operator" => Some(UserRole::Operator),
            "auditor" => Some(UserRole::Auditor),
            _ => {
                let (rest, read_only) = match s.strip_prefix(READER_ROLE_PREFIX) {
                    Some(rest) => (rest, true),
                    None => (s.strip_prefix("tenant:")?, false),
                };
                let (tenant, namespaces) = match rest.split_once('/') {
                    Some((t, ns)) => (t, Some(ns)),
                    None if read_only => return None,
                    None => (rest, None),
                };
                if tenant.is_empty() {
                    return None;
                }
                let tenant = tenant.to_string();
                Some(match namespaces {
                    None => UserRole::Tenant { tenant },
                    Some(ns) => UserRole::TenantNamespaces {
                        tenant,
                        namespaces: ns.split(',').map(str::to_string).collect(),
                        read_only,
                    },
                })
            }
        }
    }

    /// The tenant a member role belongs to.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            UserRole::Tenant { tenant } | UserRole::TenantNamespaces { tenant, .. } => Some(tenant),
            _ => None,
        }
    }

    /// Whether this role lets a member of `tenant` act in `namespace` (one its tenant owns):
    /// reads when `write` is false, writes too when it is true.
    pub fn allows_in(&self, tenant: &str, namespace: &str, write: bool) -> bool {
        match self {
            UserRole::Tenant { tenant: t } => t == tenant,
            UserRole::TenantNamespaces {
                tenant: t,
                namespaces,
                read_only,
            } => t == tenant && !(write && *read_only) && namespaces.iter().any(|n| n == namespace),
            _ => false,
        }
    }
}

impl fmt::Display for UserRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserRole::Admin => f.write_str("admin"),
            UserRole::Operator => f.write_str("operator"),
            UserRole::Auditor => f.write_str("auditor"),
            UserRole::Tenant { tenant } => write!(f, "tenant:{tenant}"),
            UserRole::TenantNamespaces {
                tenant,
                namespaces,
                read_only,
            } => {
                let prefix = if *read_only {
                    READER_ROLE_PREFIX
                } else {
                    "tenant:"
                };
                write!(f, "{prefix}{tenant}/{}", namespaces.join(","))
            }
        }
    }
}

/// What a `PutUser` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSpec {
    pub name: String,
    pub kind: UserKind,
    pub role: UserRole,
}

/// A user as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub spec: UserSpec,
    /// Log time of its creation.
    pub created_ms: u64,
    /// Index of the entry that last changed its spec.
    pub resource_version: u64,
}

/// One API token, as stored: its hash, never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub id: String,
    pub user: String,
    /// SHA-256 of the whole token text, lowercase hex.
    pub sha256_hex: String,
    /// Log time of its issue.
    pub created_ms: u64,
    /// Log time from which it no longer authenticates; `None`: never expires.
    pub expires_ms: Option<u64>,
    /// Log time of its revocation, if revoked.
    pub revoked_ms: Option<u64>,
    /// The actor that issued it.
    pub issued_by: String,
}

impl TokenRecord {
    /// Whether it authenticates at `now_ms` (the caller's clock; core never reads one).
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.revoked_ms.is_none() && self.expires_ms.is_none_or(|e| now_ms < e)
    }
}

/// What an `IssueToken` carries: the API node drew the id and the secret; only the hash travels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenIssue {
    pub user: String,
    pub id: String,
    pub sha256_hex: String,
    /// Lifetime from the entry's log time; `None`: never expires.
    pub ttl_ms: Option<u64>,
}

/// The replicated table: users by name, tokens by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Users {
    pub users: BTreeMap<String, User>,
    pub tokens: BTreeMap<String, TokenRecord>,
}

impl Users {
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.tokens.is_empty()
    }

    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    pub fn token(&self, id: &str) -> Option<&TokenRecord> {
        self.tokens.get(id)
    }

    /// The tokens of `user`, by id.
    pub fn tokens_of<'a>(&'a self, user: &'a str) -> impl Iterator<Item = &'a TokenRecord> {
        self.tokens.values().filter(move |t| t.user == user)
    }
}

/// A refused user or token command, naming the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("{field}: {what} not found")]
    NotFound { field: String, what: String },
    #[error("{field}: {what} already exists")]
    AlreadyExists { field: String, what: String },
    #[error("{field}: {message}")]
    Limit { field: String, message: String },
    #[error("{field}: {message}")]
    Forbidden { field: String, message: String },
}

impl UserError {
    pub fn field(&self) -> &str {
        match self {
            UserError::Invalid { field, .. }
            | UserError::NotFound { field, .. }
            | UserError::AlreadyExists { field, .. }
            | UserError::Limit { field, .. }
            | UserError::Forbidden { field, .. } => field,
        }
    }

    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> Self {
        UserError::Invalid {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

impl From<FieldError> for UserError {
    fn from(e: FieldError) -> Self {
        UserError::Invalid {
            field: e.field,
            message: e.message,
        }
    }
}

/// Checks a spec on its own (names are DNS labels, as namespaces and tenants are).
pub fn validate_spec(spec: &UserSpec) -> Result<(), UserError> {
    crate::policy::validate_dns_label(&spec.name, "name")?;
    match &spec.role {
        UserRole::Tenant { tenant } => crate::policy::validate_dns_label(tenant, "role")?,
        UserRole::TenantNamespaces {
            tenant, namespaces, ..
        } => {
            crate::policy::validate_dns_label(tenant, "role")?;
            if namespaces.is_empty() || namespaces.len() > MAX_ROLE_NAMESPACES {
                return Err(UserError::invalid(
                    "role",
                    format!("a scoped role lists 1 to {MAX_ROLE_NAMESPACES} namespaces"),
                ));
            }
            for (i, ns) in namespaces.iter().enumerate() {
                crate::policy::validate_dns_label(ns, "role")?;
                if namespaces[..i].contains(ns) {
                    return Err(UserError::invalid(
                        "role",
                        format!("namespace {ns:?} is listed twice"),
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Checks an issue on its own: the id's and the hash's shapes, and the lifetime.
pub fn validate_issue(issue: &TokenIssue) -> Result<(), UserError> {
    crate::policy::validate_dns_label(&issue.user, "user")?;
    if !is_lower_hex(&issue.id, TOKEN_ID_HEX_LEN) {
        return Err(UserError::invalid(
            "id",
            format!("a token id is {TOKEN_ID_HEX_LEN} lowercase hex digits"),
        ));
    }
    if !is_lower_hex(&issue.sha256_hex, 64) {
        return Err(UserError::invalid(
            "sha256",
            "a token hash is 64 lowercase hex digits (SHA-256)",
        ));
    }
    match issue.ttl_ms {
        Some(0) => Err(UserError::invalid("ttl", "a lifetime must be positive")),
        Some(t) if t > MAX_TOKEN_TTL_MS => Err(UserError::invalid(
            "ttl",
            format!("{t} ms is longer than the {MAX_TOKEN_TTL_MS} ms limit"),
        )),
        _ => Ok(()),
    }
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The actor of replicated user `name` holding `role`: `tenant:T/NAME` for tenant members (the
/// admission rules' form), `user:NAME` otherwise.
pub fn user_actor(name: &str, role: &UserRole) -> String {
    match role.tenant() {
        Some(tenant) => crate::admission::Actor::tenant_actor(tenant, name),
        None => format!("{USER_ACTOR_PREFIX}{name}"),
    }
}

/// The token text for id and secret (both drawn by the API node).
pub fn format_token(id: &str, secret_hex: &str) -> String {
    format!("{TOKEN_PREFIX}{id}_{secret_hex}")
}

/// The id a replicated token names, if `token` has the replicated form: the public half that
/// finds its record, so authentication compares one hash instead of scanning them all.
pub fn token_id(token: &str) -> Option<&str> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    (is_lower_hex(id, TOKEN_ID_HEX_LEN) && !secret.is_empty()).then_some(id)
}

/// SHA-256 of the whole token text, lowercase hex: what the log stores.
pub fn token_hash_hex(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_read_as_the_token_file_spells_them() {
        for s in ["admin", "operator", "auditor", "tenant:blue"] {
            assert_eq!(
                UserRole::parse(s).map(|r| r.to_string()).as_deref(),
                Some(s)
            );
        }
        assert_eq!(UserRole::parse("tenant:"), None);
        assert_eq!(UserRole::parse("root"), None);
    }

    #[test]
    fn scoped_roles_read_and_print_the_same_and_allow_only_their_namespaces() {
        for s in ["tenant:blue/web,db", "tenant-reader:blue/web"] {
            let r = UserRole::parse(s);
            assert_eq!(r.as_ref().map(|r| r.to_string()).as_deref(), Some(s));
        }
        assert_eq!(UserRole::parse("tenant-reader:blue"), None);
        assert_eq!(UserRole::parse("tenant:/web"), None);
        let member = UserRole::parse("tenant:blue/web").unwrap();
        assert!(member.allows_in("blue", "web", true));
        assert!(!member.allows_in("blue", "db", false));
        assert!(!member.allows_in("red", "web", false));
        let reader = UserRole::parse("tenant-reader:blue/web").unwrap();
        assert!(reader.allows_in("blue", "web", false));
        assert!(!reader.allows_in("blue", "web", true));
        let spec = |role: &str| UserSpec {
            name: "alice".into(),
            kind: UserKind::User,
            role: UserRole::parse(role).unwrap(),
        };
        assert_eq!(validate_spec(&spec("tenant:blue/web")), Ok(()));
        for bad in ["tenant:blue/", "tenant:blue/web,web", "tenant:blue/Web"] {
            assert_eq!(
                validate_spec(&spec(bad)).unwrap_err().field(),
                "role",
                "{bad}"
            );
        }
        assert_eq!(user_actor("alice", &reader), "tenant:blue/alice");
    }

    #[test]
    fn token_ids_are_read_only_from_the_replicated_form() {
        let t = format_token("0123456789abcdef", "ff00");
        assert_eq!(token_id(&t), Some("0123456789abcdef"));
        assert_eq!(token_id("fedraft_0123456789ABCDEF_ff"), None);
        assert_eq!(token_id("fedraft_0123456789abcdef_"), None);
        assert_eq!(token_id("a-token-file-token-of-32-bytes-xx"), None);
        assert_eq!(token_hash_hex(&t).len(), 64);
        assert_ne!(token_hash_hex(&t), token_hash_hex("other"));
    }

    #[test]
    fn issue_validation_names_the_field() {
        let ok = TokenIssue {
            user: "alice".into(),
            id: "0123456789abcdef".into(),
            sha256_hex: "a".repeat(64),
            ttl_ms: Some(1000),
        };
        assert_eq!(validate_issue(&ok), Ok(()));
        let field = |i: TokenIssue| validate_issue(&i).unwrap_err().field().to_string();
        let bad_id = TokenIssue {
            id: "xyz".into(),
            ..ok.clone()
        };
        assert_eq!(field(bad_id), "id");
        let bad_hash = TokenIssue {
            sha256_hex: "A".repeat(64),
            ..ok.clone()
        };
        assert_eq!(field(bad_hash), "sha256");
        let zero = TokenIssue {
            ttl_ms: Some(0),
            ..ok.clone()
        };
        assert_eq!(field(zero), "ttl");
        let bad_user = TokenIssue {
            user: "Not_A_Label".into(),
            ..ok
        };
        assert_eq!(field(bad_user), "user");
    }

    #[test]
    fn expiry_and_revocation_end_a_token() {
        let mut t = TokenRecord {
            id: "0123456789abcdef".into(),
            user: "alice".into(),
            sha256_hex: "a".repeat(64),
            created_ms: 10,
            expires_ms: Some(100),
            revoked_ms: None,
            issued_by: "root".into(),
        };
        assert!(t.is_live(99));
        assert!(!t.is_live(100));
        t.expires_ms = None;
        assert!(t.is_live(u64::MAX));
        t.revoked_ms = Some(50);
        assert!(!t.is_live(0));
    }
}
