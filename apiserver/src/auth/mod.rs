//! Authentication (bearer token -> principal) and the authorisation rules by role.
//!
//! Two sources of principals, tried in this order:
//! - The token file (the bootstrap and break-glass path; the first admin comes from it): one
//!   principal per line, `TOKEN NAME ROLE`, where ROLE is `admin`, `operator`, `auditor` or
//!   `tenant:TENANT`; blank lines and lines starting with `#` are ignored.
//! - The replicated user database (`fedraft_core::users`), for tokens of the form
//!   `fedraft_ID_SECRET`: the id finds the record in the answering node's applied state, the
//!   token's SHA-256 is compared with the record's in constant time, and a revoked token, an
//!   expired one (by this node's clock or log time, whichever is later) or one of a deleted user
//!   is 401 as soon as the node has applied that ([`TokenStore::authenticate_with`]). Such a
//!   principal is named `user:NAME` (its actor in the log), or NAME for a tenant member, whose
//!   actor is `tenant:TENANT/NAME`.
//!
//! Token-file Tokens are
//! compared in constant time per candidate (with fedraft-raft's `constant_time_eq`, the one
//! comparison the peer network's secret check uses too) and are never logged.
//!
//! Roles: an admin may do everything; an operator manages clusters and may read everything else;
//! an auditor reads everything (the audit log included) and writes nothing; a tenant member reads and writes objects in the namespaces its tenant owns (per the replicated
//! state) and reads its own tenant, nothing else. The API never accepts the cluster secret as a
//! token: [`TokenStore::new`] refuses a token file containing it, and a request presenting it is 401.
//!
//! Loading a token file from disk ([`TokenStore::load`]) is stricter than parsing one, as ssh is
//! with its keys: the file must not be readable or writable by group or others (mode & 0o077 ==
//! 0; the error names the file and `chmod 600`), every token must be at least
//! [`MIN_TOKEN_BYTES`] long, and no token may appear twice (two principals sharing a token
//! would make the log's actor a guess). [`read_private_file`] is the same permission check for
//! the node's other secrets (cluster secret file, TLS keys).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use axum::http::{header, HeaderMap};
use fedraft_core::users::{token_hash_hex, token_id, UserRole};
use fedraft_raft::network::secret::constant_time_eq;

use crate::error::ApiError;

/// What a principal is allowed to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Admin,
    Operator,
    /// A member of the named tenant.
    Tenant(String),
    /// Reads everything, writes nothing.
    Auditor,
}

impl Role {
    /// The API role of a replicated user's role.
    pub fn of_user(role: &UserRole) -> Role {
        match role {
            UserRole::Admin => Role::Admin,
            UserRole::Operator => Role::Operator,
            UserRole::Auditor => Role::Auditor,
            UserRole::Tenant { tenant } | UserRole::TenantNamespaces { tenant, .. } => {
                Role::Tenant(tenant.clone())
            }
        }
    }
}

/// What the answering node's applied state says of a replicated token ([`TokenStore::authenticate_with`]).
#[derive(Debug, Clone)]
pub struct ReplicatedToken {
    /// The record's SHA-256 of the token text, lowercase hex.
    pub sha256_hex: String,
    /// Neither revoked nor expired, by the node's clock and log time.
    pub live: bool,
    pub user: String,
    pub role: UserRole,
}

/// The principal of replicated user `user`: named by its actor (`user:NAME`), except a tenant
/// member, named NAME, whose writes the routes name `tenant:TENANT/NAME`.
pub fn user_principal(user: &str, role: &UserRole) -> Principal {
    let name = match role {
        UserRole::Tenant { .. } | UserRole::TenantNamespaces { .. } => user.to_string(),
        _ => fedraft_core::users::user_actor(user, role),
    };
    Principal {
        name,
        role: Role::of_user(role),
    }
}

/// Looks a replicated token's id up in `node`'s applied state (no linearizable read: a revoke is
/// effective on a node as soon as that node applied it). `now_ms` is this node's clock.
pub fn replicated_token(
    node: &fedraft_raft::FedNode,
    id: &str,
    now_ms: u64,
) -> Option<ReplicatedToken> {
    node.read_stale(|s| {
        let users = s.users();
        let t = users.token(id)?;
        let u = users.user(&t.user)?;
        Some(ReplicatedToken {
            sha256_hex: t.sha256_hex.clone(),
            live: t.is_live(now_ms.max(s.log_time_ms())),
            user: u.spec.name.clone(),
            role: u.spec.role.clone(),
        })
    })
}

/// The principal for a request's bearer token on this node: the token file, else the
/// replicated user database as `node` has applied it, by this node's clock. Both doors (the
/// native API and the Kubernetes-compatible one) authenticate through this.
pub fn authenticate_on(
    tokens: &TokenStore,
    node: &fedraft_raft::FedNode,
    headers: &HeaderMap,
) -> Result<Principal, ApiError> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    tokens.authenticate_with(headers, |id| replicated_token(node, id, now_ms))
}

/// An authenticated caller; its name is the actor on every log entry it causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
}

/// Shortest token a token file may hold: 32 bytes, e.g. `openssl rand -hex 16` (128 bits).
/// Shorter tokens are guessable at the rates one API node answers.
pub const MIN_TOKEN_BYTES: usize = 32;

/// Largest secret file read: a token file of ten thousand principals fits many times over,
/// and a wrong path (a device, a log) is refused instead of read whole.
pub const MAX_SECRET_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Errors loading a token file.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot read token file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("token file line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error("token file line {line}: the cluster secret must not be used as an API token")]
    ClusterSecret { line: usize },
    #[error(transparent)]
    NotPrivate(#[from] SecretFileError),
    #[error(
        "token file line {line}: the token of {name} is {len} bytes; tokens must be at least \
         {min} bytes (e.g. `openssl rand -hex 16`)",
        min = MIN_TOKEN_BYTES
    )]
    ShortToken {
        line: usize,
        name: String,
        len: usize,
    },
    #[error(
        "token file line {line}: the token of {name} is already the token of {first_name} \
         (line {first_line}); every principal needs its own token"
    )]
    DuplicateToken {
        line: usize,
        name: String,
        first_line: usize,
        first_name: String,
    },
}

/// Errors reading a file that holds a secret.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error("cannot read {what} {path}: {source}")]
    Io {
        what: String,
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{what} {path} is accessible by group or others (mode {mode:04o}); it holds a secret: \
         run `chmod 600 {path}` (and own it by the user fedraft runs as)"
    )]
    Permissions {
        what: String,
        path: String,
        mode: u32,
    },
    #[error("{what} {path} is larger than {max} bytes", max = MAX_SECRET_FILE_BYTES)]
    TooLarge { what: String, path: String },
}

/// Reads a file that holds a secret (`what` names it in errors), refusing it when group or
/// others may read or write it. The mode is taken from the opened file, so a file swapped
/// between the check and the read is still the one checked.
pub fn read_private_file(path: &Path, what: &str) -> Result<Vec<u8>, SecretFileError> {
    let io = |source| SecretFileError::Io {
        what: what.to_string(),
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(SecretFileError::Permissions {
                what: what.to_string(),
                path: path.display().to_string(),
                mode,
            });
        }
    }
    if meta.len() > MAX_SECRET_FILE_BYTES {
        return Err(SecretFileError::TooLarge {
            what: what.to_string(),
            path: path.display().to_string(),
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_SECRET_FILE_BYTES {
        return Err(SecretFileError::TooLarge {
            what: what.to_string(),
            path: path.display().to_string(),
        });
    }
    Ok(bytes)
}

/// Token -> principal lookup.
#[derive(Clone, Default)]
pub struct TokenStore {
    tokens: BTreeMap<String, Principal>,
    cluster_secret: Option<String>,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("principals", &self.tokens.len())
            .finish()
    }
}

impl TokenStore {
    /// Builds a store from `(token, principal)` pairs, refusing the cluster secret as a token
    /// and a token given twice (errors count pairs from 1 as lines).
    pub fn new(
        entries: impl IntoIterator<Item = (String, Principal)>,
        cluster_secret: Option<String>,
    ) -> Result<Self, TokenFileError> {
        let lines = entries.into_iter().enumerate().map(|(i, e)| (i + 1, e));
        Self::from_lines(lines, cluster_secret)
    }

    fn from_lines(
        entries: impl IntoIterator<Item = (usize, (String, Principal))>,
        cluster_secret: Option<String>,
    ) -> Result<Self, TokenFileError> {
        let mut tokens: BTreeMap<String, Principal> = BTreeMap::new();
        let mut first_line: BTreeMap<String, usize> = BTreeMap::new();
        for (line, (token, principal)) in entries {
            if cluster_secret.as_deref() == Some(token.as_str()) {
                return Err(TokenFileError::ClusterSecret { line });
            }
            if let Some(first) = tokens.get(&token) {
                return Err(TokenFileError::DuplicateToken {
                    line,
                    name: principal.name,
                    first_line: first_line.get(&token).copied().unwrap_or(0),
                    first_name: first.name.clone(),
                });
            }
            first_line.insert(token.clone(), line);
            tokens.insert(token, principal);
        }
        Ok(Self {
            tokens,
            cluster_secret,
        })
    }

    /// Parses the token file format described in the module doc.
    pub fn parse(text: &str, cluster_secret: Option<String>) -> Result<Self, TokenFileError> {
        Self::parse_with_min(text, cluster_secret, 0)
    }

    fn parse_with_min(
        text: &str,
        cluster_secret: Option<String>,
        min_token_bytes: usize,
    ) -> Result<Self, TokenFileError> {
        let mut entries = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let parts: Vec<&str> = line.split_whitespace().collect();
            let [token, name, role] = parts[..] else {
                return Err(TokenFileError::Syntax {
                    line: i + 1,
                    message: "expected `TOKEN NAME ROLE`".into(),
                });
            };
            let role = parse_role(role).ok_or_else(|| TokenFileError::Syntax {
                line: i + 1,
                message: format!("unknown role {role:?} (admin, operator, auditor or tenant:NAME)"),
            })?;
            if cluster_secret.as_deref() == Some(token) {
                return Err(TokenFileError::ClusterSecret { line: i + 1 });
            }
            // Those are the log's actor forms of replicated users and tenant members.
            if name.starts_with(fedraft_core::users::USER_ACTOR_PREFIX)
                || name.starts_with(fedraft_core::admission::TENANT_ACTOR_PREFIX)
            {
                return Err(TokenFileError::Syntax {
                    line: i + 1,
                    message: format!(
                        "names starting with `user:` or `tenant:` are reserved ({name:?})"
                    ),
                });
            }
            if token.len() < min_token_bytes {
                return Err(TokenFileError::ShortToken {
                    line: i + 1,
                    name: name.to_string(),
                    len: token.len(),
                });
            }
            entries.push((
                i + 1,
                (
                    token.to_string(),
                    Principal {
                        name: name.to_string(),
                        role,
                    },
                ),
            ));
        }
        Self::from_lines(entries, cluster_secret)
    }

    /// Loads a token file from disk, with the checks of the module doc: private to its owner,
    /// tokens of at least [`MIN_TOKEN_BYTES`], no token twice.
    pub fn load(path: &Path, cluster_secret: Option<String>) -> Result<Self, TokenFileError> {
        let bytes = read_private_file(path, "token file")?;
        let text = String::from_utf8(bytes).map_err(|e| TokenFileError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        Self::parse_with_min(&text, cluster_secret, MIN_TOKEN_BYTES)
    }

    /// Whether the token file names a principal `name`.
    pub fn has_principal(&self, name: &str) -> bool {
        self.tokens.values().any(|p| p.name == name)
    }

    /// The principal for the request's `Authorization: Bearer` header, from the token file only.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
        self.authenticate_with(headers, |_| None)
    }

    /// The principal for the request's bearer token: from the token file, else from the
    /// replicated user database through `replicated`, which gives what the node's applied
    /// state holds for a token id (module doc).
    pub fn authenticate_with(
        &self,
        headers: &HeaderMap,
        replicated: impl FnOnce(&str) -> Option<ReplicatedToken>,
    ) -> Result<Principal, ApiError> {
        let unauth = |m: &str| ApiError::Unauthenticated {
            message: m.to_string(),
        };
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauth("missing bearer token"))?
            .to_str()
            .map_err(|_| unauth("malformed Authorization header"))?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or_else(|| unauth("expected `Authorization: Bearer TOKEN`"))?;
        if self
            .cluster_secret
            .as_deref()
            .is_some_and(|s| constant_time_eq(s.as_bytes(), token.as_bytes()))
        {
            return Err(unauth("invalid token"));
        }
        let mut found = None;
        // Compare against every token so timing does not reveal which prefix matched.
        for (candidate, principal) in &self.tokens {
            if constant_time_eq(candidate.as_bytes(), token.as_bytes()) {
                found = Some(principal.clone());
            }
        }
        if let Some(p) = found {
            return Ok(p);
        }
        let record = token_id(token).and_then(replicated);
        let Some(record) = record else {
            return Err(unauth("invalid token"));
        };
        let hash = token_hash_hex(token);
        if !constant_time_eq(hash.as_bytes(), record.sha256_hex.as_bytes()) {
            return Err(unauth("invalid token"));
        }
        // Only the holder of the secret learns why its token no longer works.
        if !record.live {
            return Err(unauth("token revoked or expired"));
        }
        Ok(user_principal(&record.user, &record.role))
    }
}

fn parse_role(s: &str) -> Option<Role> {
    match s {
        "admin" => Some(Role::Admin),
        "operator" => Some(Role::Operator),
        "auditor" => Some(Role::Auditor),
        _ => {
            let tenant = s.strip_prefix("tenant:")?;
            (!tenant.is_empty()).then(|| Role::Tenant(tenant.to_string()))
        }
    }
}

/// What a request is about to touch, for [`authorize`].
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    ReadClusters,
    WriteClusters,
    /// Objects in one namespace; `owned` are the namespaces of the principal's tenant.
    ReadNamespace(&'a str),
    WriteNamespace(&'a str),
    /// At least one namespace, not yet known: the check made before reading a body that names it.
    ReadSomeNamespace,
    /// Objects in every namespace (listing filters for tenants instead of refusing).
    ReadAllObjects,
    ReadTenant(&'a str),
    WriteTenant,
}

/// Allows or refuses `access` for `p`; `tenant_namespaces` are the namespaces the principal's
/// tenant owns in the current state (empty for non-tenants).
pub fn authorize(
    p: &Principal,
    access: Access<'_>,
    tenant_namespaces: &[String],
) -> Result<(), ApiError> {
    authorize_scoped(p, access, tenant_namespaces, false)
}

/// [`authorize`] for a tenant member whose replicated user holds a role scoped to namespaces
/// (`UserRole::TenantNamespaces`): `tenant_namespaces` are then the namespaces of its tenant
/// that the role lists, and a `read_only` one may write none of them.
pub fn authorize_scoped(
    p: &Principal,
    access: Access<'_>,
    tenant_namespaces: &[String],
    read_only: bool,
) -> Result<(), ApiError> {
    let deny = |what: &str| Err(ApiError::forbidden(format!("{} may not {what}", p.name)));
    match (&p.role, access) {
        (Role::Tenant(_), Access::WriteNamespace(ns)) if read_only => {
            deny(&format!("write in namespace {ns}: its role only reads"))
        }
        (Role::Admin, _) => Ok(()),
        (
            Role::Auditor,
            Access::WriteClusters | Access::WriteNamespace(_) | Access::WriteTenant,
        ) => deny("write anything"),
        (Role::Auditor, _) => Ok(()),
        (Role::Operator, Access::WriteNamespace(_)) => deny("write objects"),
        (Role::Operator, Access::WriteTenant) => deny("write tenants"),
        (Role::Operator, _) => Ok(()),
        (Role::Tenant(_), Access::ReadClusters | Access::WriteClusters) => deny("access clusters"),
        (Role::Tenant(_), Access::WriteTenant) => deny("write tenants"),
        (Role::Tenant(_), Access::ReadAllObjects) => Ok(()),
        (Role::Tenant(_), Access::ReadSomeNamespace) if tenant_namespaces.is_empty() => {
            deny("access any namespace")
        }
        (Role::Tenant(_), Access::ReadSomeNamespace) => Ok(()),
        (Role::Tenant(t), Access::ReadTenant(name)) if t == name => Ok(()),
        (Role::Tenant(_), Access::ReadTenant(name)) => deny(&format!("read tenant {name}")),
        (Role::Tenant(_), Access::ReadNamespace(ns) | Access::WriteNamespace(ns)) => {
            if tenant_namespaces.iter().any(|n| n == ns) {
                Ok(())
            } else {
                deny(&format!("access namespace {ns}"))
            }
        }
    }
}

#[cfg(test)]
mod tests;
