//! Authentication (bearer token -> principal) and the authorisation rules by role.
//!
//! The token file has one principal per line: `TOKEN NAME ROLE`, where ROLE is `admin`,
//! `operator` or `tenant:TENANT`; blank lines and lines starting with `#` are ignored. Tokens are
//! compared in constant time per candidate (with fedraft-raft's `constant_time_eq`, the one
//! comparison the peer network's secret check uses too) and are never logged.
//!
//! Roles: an admin may do everything; an operator manages clusters and may read everything else;
//! a tenant member reads and writes objects in the namespaces its tenant owns (per the replicated
//! state) and reads its own tenant, nothing else. The API never accepts the cluster secret as a
//! token: [`TokenStore::new`] refuses a token file containing it, and a request presenting it is 401.

use std::collections::BTreeMap;
use std::path::Path;

use axum::http::{header, HeaderMap};
use fedraft_raft::network::secret::constant_time_eq;

use crate::error::ApiError;

/// What a principal is allowed to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Admin,
    Operator,
    /// A member of the named tenant.
    Tenant(String),
}

/// An authenticated caller; its name is the actor on every log entry it causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
}

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
    /// Builds a store from `(token, principal)` pairs, refusing the cluster secret as a token.
    pub fn new(
        entries: impl IntoIterator<Item = (String, Principal)>,
        cluster_secret: Option<String>,
    ) -> Result<Self, TokenFileError> {
        let mut tokens = BTreeMap::new();
        for (i, (token, principal)) in entries.into_iter().enumerate() {
            if cluster_secret.as_deref() == Some(token.as_str()) {
                return Err(TokenFileError::ClusterSecret { line: i + 1 });
            }
            tokens.insert(token, principal);
        }
        Ok(Self {
            tokens,
            cluster_secret,
        })
    }

    /// Parses the token file format described in the module doc.
    pub fn parse(text: &str, cluster_secret: Option<String>) -> Result<Self, TokenFileError> {
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
                message: format!("unknown role {role:?} (admin, operator or tenant:NAME)"),
            })?;
            if cluster_secret.as_deref() == Some(token) {
                return Err(TokenFileError::ClusterSecret { line: i + 1 });
            }
            entries.push((
                token.to_string(),
                Principal {
                    name: name.to_string(),
                    role,
                },
            ));
        }
        Self::new(entries, cluster_secret)
    }

    /// Loads a token file from disk.
    pub fn load(path: &Path, cluster_secret: Option<String>) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, cluster_secret)
    }

    /// The principal for the request's `Authorization: Bearer` header.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, ApiError> {
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
        found.ok_or_else(|| unauth("invalid token"))
    }
}

fn parse_role(s: &str) -> Option<Role> {
    match s {
        "admin" => Some(Role::Admin),
        "operator" => Some(Role::Operator),
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
    let deny = |what: &str| Err(ApiError::forbidden(format!("{} may not {what}", p.name)));
    match (&p.role, access) {
        (Role::Admin, _) => Ok(()),
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
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
        );
        h
    }

    #[test]
    fn parses_roles_and_refuses_the_cluster_secret() {
        let text = "# comment\nt1 alice admin\n\nt2 bob operator\nt3 carol tenant:blue\n";
        let store = TokenStore::parse(text, Some("s3cret".into())).unwrap();
        assert_eq!(
            store.authenticate(&bearer("t3")).unwrap().role,
            Role::Tenant("blue".into())
        );
        assert!(store.authenticate(&bearer("nope")).is_err());
        assert!(store.authenticate(&bearer("s3cret")).is_err());
        assert!(store.authenticate(&HeaderMap::new()).is_err());
        assert!(TokenStore::parse("s3cret x admin", Some("s3cret".into())).is_err());
        assert!(TokenStore::parse("a b wizard", None).is_err());
        assert!(TokenStore::parse("a b", None).is_err());
    }

    #[test]
    fn tenant_members_stay_in_their_namespaces() {
        let p = Principal {
            name: "carol".into(),
            role: Role::Tenant("blue".into()),
        };
        let owned = vec!["blue-prod".to_string()];
        assert!(authorize(&p, Access::WriteNamespace("blue-prod"), &owned).is_ok());
        assert!(authorize(&p, Access::WriteNamespace("red"), &owned).is_err());
        assert!(authorize(&p, Access::ReadClusters, &owned).is_err());
        assert!(authorize(&p, Access::ReadTenant("blue"), &owned).is_ok());
        assert!(authorize(&p, Access::ReadTenant("red"), &owned).is_err());
        assert!(authorize(&p, Access::ReadSomeNamespace, &owned).is_ok());
        assert!(authorize(&p, Access::ReadSomeNamespace, &[]).is_err());
        let op = Principal {
            name: "bob".into(),
            role: Role::Operator,
        };
        assert!(authorize(&op, Access::WriteClusters, &[]).is_ok());
        assert!(authorize(&op, Access::WriteNamespace("x"), &[]).is_err());
    }
}
