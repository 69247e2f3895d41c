//! The user database's commands: put and delete a user, issue and revoke a token
//! (`crate::users` holds the records and their checks).
//!
//! Only admins manage users, and that is decided here at apply from the entry's actor and the
//! replicated table, not only by the node that took the request: a replicated user acts as an
//! admin only while the log says it is one, so a lagging node cannot act for a demoted or
//! deleted user. A token-file principal (any actor not of a replicated form) was checked by its
//! node against its own file, which the log does not hold. Must not: see a token's secret (the
//! command carries its hash) or change anything before every check passed.

use crate::admission::Actor;
use crate::state::{Ctx, HandlerResult, RejectCode, Rejection, State};
use crate::users::{
    validate_issue, validate_spec, TokenIssue, TokenRecord, User, UserError, UserRole, UserSpec,
    MAX_LIVE_TOKENS_PER_USER, MAX_USERS, SCOPED_ROLES_SINCE, USER_ACTOR_PREFIX,
};

impl From<UserError> for Rejection {
    fn from(e: UserError) -> Self {
        let code = match &e {
            UserError::Invalid { .. } => RejectCode::Invalid,
            UserError::NotFound { .. } => RejectCode::NotFound,
            UserError::AlreadyExists { .. } => RejectCode::AlreadyExists,
            UserError::Limit { .. } => RejectCode::FailedPrecondition,
            UserError::Forbidden { .. } => RejectCode::Forbidden,
        };
        let message = match &e {
            UserError::Invalid { message, .. }
            | UserError::Limit { message, .. }
            | UserError::Forbidden { message, .. } => message.clone(),
            UserError::NotFound { what, .. } => format!("{what} not found"),
            UserError::AlreadyExists { what, .. } => format!("{what} already exists"),
        };
        Rejection::new(code, Some(e.field()), message)
    }
}

impl State {
    /// The replicated user database.
    pub fn users(&self) -> &crate::users::Users {
        &self.users
    }

    /// Refuses an actor that is not an admin by the log's account (module doc).
    fn require_user_admin(&self, ctx: &Ctx) -> Result<(), UserError> {
        let forbidden = |message: String| UserError::Forbidden {
            field: "actor".into(),
            message,
        };
        if let Some(name) = ctx.actor_id.strip_prefix(USER_ACTOR_PREFIX) {
            return match self.users.user(name) {
                Some(u) if u.spec.role == UserRole::Admin => Ok(()),
                Some(u) => Err(forbidden(format!(
                    "user {name:?} is {} and only admins manage users",
                    u.spec.role
                ))),
                None => Err(forbidden(format!("user {name:?} no longer exists"))),
            };
        }
        match Actor::parse(ctx.actor_id) {
            Actor::Tenant { name, .. } => Err(forbidden(format!(
                "{name:?} is a tenant member and only admins manage users"
            ))),
            Actor::Admin | Actor::Legacy => Ok(()),
        }
    }

    /// A tenant-form actor that names a replicated user acts for its tenant only while the log
    /// still gives that user that tenant's role, and a role scoped to namespaces only in those
    /// and only if it may write (rule 1 of `crate::admission` adds this). A scoped role cannot
    /// be in an entry older than [`SCOPED_ROLES_SINCE`], so older entries check what they did.
    pub(crate) fn check_user_tenant(
        &self,
        tenant: &str,
        name: &str,
        namespace: &str,
    ) -> Result<(), Rejection> {
        let Some(u) = self.users.user(name) else {
            return Ok(());
        };
        if u.spec.role.allows_in(tenant, namespace, true) {
            return Ok(());
        }
        let message = match &u.spec.role {
            UserRole::TenantNamespaces {
                tenant: t,
                read_only: true,
                ..
            } if t == tenant => format!("user {name:?} may only read in tenant {tenant:?}"),
            UserRole::TenantNamespaces { tenant: t, .. } if t == tenant => {
                format!("user {name:?} may not write in namespace {namespace:?}")
            }
            _ => format!("user {name:?} is no longer a member of tenant {tenant:?}"),
        };
        Err(Rejection::from(UserError::Forbidden {
            field: "actor".into(),
            message,
        }))
    }

    pub(crate) fn on_put_user(
        &mut self,
        spec: &UserSpec,
        expected_version: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.require_user_admin(ctx)?;
        validate_spec(spec)?;
        let existing = self.users.user(&spec.name);
        if let Some(e) = expected_version {
            if existing.map(|u| u.resource_version) != Some(e) && !(e == 0 && existing.is_none()) {
                return Err(Rejection::conflict(e, existing.map(|u| u.resource_version)));
            }
        }
        if existing.is_none() && self.users.users.len() >= MAX_USERS {
            return Err(UserError::Limit {
                field: "name".into(),
                message: format!("the user database holds its limit of {MAX_USERS} users"),
            }
            .into());
        }
        if let UserRole::TenantNamespaces { .. } = &spec.role {
            if ctx.version < SCOPED_ROLES_SINCE {
                return Err(UserError::invalid(
                    "role",
                    format!("roles scoped to namespaces need log version {SCOPED_ROLES_SINCE}"),
                )
                .into());
            }
        }
        if let Some(tenant) = spec.role.tenant() {
            if !self.d.tenants.contains_key(tenant) {
                return Err(UserError::NotFound {
                    field: "role".into(),
                    what: format!("tenant {tenant:?}"),
                }
                .into());
            }
        }
        if let UserRole::TenantNamespaces { namespaces, .. } = &spec.role {
            let tenant = spec.role.tenant().unwrap_or_default();
            if let Some(ns) = namespaces
                .iter()
                .find(|ns| self.ix.ns_owner.get(ns.as_str()).map(String::as_str) != Some(tenant))
            {
                return Err(UserError::Invalid {
                    field: "role".into(),
                    message: format!("namespace {ns:?} does not belong to tenant {tenant:?}"),
                }
                .into());
            }
        }
        let created_ms = existing.map_or(ctx.now_ms, |u| u.created_ms);
        self.users.users.insert(
            spec.name.clone(),
            User {
                spec: spec.clone(),
                created_ms,
                resource_version: ctx.index,
            },
        );
        Ok(Some(ctx.index))
    }

    /// Removes a user and every token it held.
    pub(crate) fn on_delete_user(
        &mut self,
        name: &str,
        expected_version: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.require_user_admin(ctx)?;
        let Some(user) = self.users.user(name) else {
            return Err(UserError::NotFound {
                field: "name".into(),
                what: format!("user {name:?}"),
            }
            .into());
        };
        if let Some(e) = expected_version {
            if user.resource_version != e {
                return Err(Rejection::conflict(e, Some(user.resource_version)));
            }
        }
        self.users.users.remove(name);
        self.users.tokens.retain(|_, t| t.user != name);
        Ok(Some(ctx.index))
    }

    /// Records a token's hash. Tokens of the user that can never authenticate again (revoked,
    /// or expired by log time) are dropped first, so the live ones are what the limit counts.
    pub(crate) fn on_issue_token(&mut self, issue: &TokenIssue, ctx: &mut Ctx) -> HandlerResult {
        self.require_user_admin(ctx)?;
        validate_issue(issue)?;
        if self.users.user(&issue.user).is_none() {
            return Err(UserError::NotFound {
                field: "user".into(),
                what: format!("user {:?}", issue.user),
            }
            .into());
        }
        if self.users.tokens.contains_key(&issue.id) {
            return Err(UserError::AlreadyExists {
                field: "id".into(),
                what: format!("token {:?}", issue.id),
            }
            .into());
        }
        if self
            .users
            .tokens
            .values()
            .any(|t| t.sha256_hex == issue.sha256_hex)
        {
            return Err(UserError::AlreadyExists {
                field: "sha256".into(),
                what: "a token with this hash".into(),
            }
            .into());
        }
        let now = ctx.now_ms;
        let live = self
            .users
            .tokens_of(&issue.user)
            .filter(|t| t.is_live(now))
            .count();
        if live >= MAX_LIVE_TOKENS_PER_USER {
            return Err(UserError::Limit {
                field: "user".into(),
                message: format!(
                    "user {:?} holds {live} live tokens, the limit is \
                     {MAX_LIVE_TOKENS_PER_USER}: revoke one first",
                    issue.user
                ),
            }
            .into());
        }
        self.users
            .tokens
            .retain(|_, t| t.user != issue.user || t.is_live(now));
        self.users.tokens.insert(
            issue.id.clone(),
            TokenRecord {
                id: issue.id.clone(),
                user: issue.user.clone(),
                sha256_hex: issue.sha256_hex.clone(),
                created_ms: now,
                expires_ms: issue.ttl_ms.map(|t| now.saturating_add(t)),
                revoked_ms: None,
                issued_by: ctx.actor_id.to_string(),
            },
        );
        Ok(Some(ctx.index))
    }

    /// Revokes a token; revoking a revoked token keeps its first revocation time.
    pub(crate) fn on_revoke_token(&mut self, user: &str, id: &str, ctx: &mut Ctx) -> HandlerResult {
        self.require_user_admin(ctx)?;
        let Some(token) = self.users.tokens.get_mut(id).filter(|t| t.user == user) else {
            return Err(UserError::NotFound {
                field: "id".into(),
                what: format!("token {id:?} of user {user:?}"),
            }
            .into());
        };
        token.revoked_ms.get_or_insert(ctx.now_ms);
        Ok(Some(ctx.index))
    }
}
