//! Admission at apply: the rules of `crate::admission` run against the entry's actor and the
//! replicated state, for every object write; and the command that sets the admission policy.
//!
//! Run on every node at apply, so a lagging node that accepted a request on stale state cannot
//! let a revoked tenant through: the decision is the log's, not the receiving node's. Rendering
//! here is bounded by `render::LIMITS`, so a patch bomb is a refusal, never an allocation.
//! Must not: change anything (the object handler changes the state once admission passed).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::admission::{
    check_scope, check_tenant_rbac, Actor, AdmissionPolicy, Admitted, Refusal, MAX_OVERRIDES,
};
use crate::door::{is_own_namespace, NAMESPACES_SINCE};
use crate::model::{FederatedObject, ObjectSpec};
use crate::render::{self, RenderError};
use crate::state::{Ctx, HandlerResult, RejectCode, Rejection, State};

impl From<Refusal> for Rejection {
    fn from(r: Refusal) -> Self {
        let code = if r.forbidden {
            RejectCode::Forbidden
        } else {
            RejectCode::FailedPrecondition
        };
        Rejection::new(
            code,
            Some(r.field.as_str()),
            format!("{} (admission rule {})", r.message, r.rule),
        )
    }
}

fn render_refusal(e: &RenderError) -> Refusal {
    let rule = match e {
        RenderError::Identity { .. } => "rendered-identity",
        _ => "render-limits",
    };
    Refusal::invalid(rule, e.field(), e.to_string())
}

impl State {
    /// The replicated admission policy.
    pub fn admission_policy(&self) -> &AdmissionPolicy {
        &self.adm
    }

    /// Rule 1: a tenant actor acts only in its own tenant's namespaces, as a current member.
    pub(crate) fn check_rights(&self, namespace: &str, actor: &Actor) -> Result<(), Rejection> {
        let Actor::Tenant { tenant, name } = actor else {
            return Ok(());
        };
        let owner = self.ix.ns_owner.get(namespace);
        let member = self
            .d
            .tenants
            .get(tenant)
            .is_some_and(|t| t.spec.members.is_empty() || t.spec.members.contains(name));
        if owner == Some(tenant) && member {
            return self.check_user_tenant(tenant, name, namespace);
        }
        let why = if owner != Some(tenant) {
            format!("namespace {namespace:?} does not belong to tenant {tenant:?}")
        } else {
            format!("{name:?} is not a member of tenant {tenant:?}")
        };
        Err(Refusal::forbidden("tenant-namespace", "metadata.namespace", why).into())
    }

    /// Every admission rule for a put of `spec` into `namespace` by `ctx`'s actor (in an entry
    /// of `version`), replacing `existing`. Changes nothing.
    pub(crate) fn admit_object(
        &self,
        namespace: &str,
        spec: &ObjectSpec,
        existing: Option<&FederatedObject>,
        (version, actor): (u16, &Actor),
    ) -> Result<(), Rejection> {
        if *actor == Actor::Legacy {
            return Ok(());
        }
        self.check_rights(namespace, actor)?;
        check_override_counts(spec)?;
        let admitted = Admitted::from_template_text(&spec.template, namespace).map_err(|e| {
            Rejection::from(Refusal::invalid("rendered-identity", e.field, e.message))
        })?;
        // check_rights already said whether the actor may write in that namespace.
        let own_namespace = version >= NAMESPACES_SINCE && is_own_namespace(&admitted);
        if !own_namespace {
            check_scope(&self.adm, actor, &admitted)?;
        }
        let tenant = matches!(actor, Actor::Tenant { .. });
        if tenant && is_role_binding(&admitted) {
            let doc: Value = serde_json::from_str(&spec.template).map_err(|e| {
                Rejection::from(crate::error::FieldError::new(
                    "spec.template",
                    format!("not valid JSON: {e}"),
                ))
            })?;
            check_tenant_rbac(&self.adm, &admitted, &doc, "spec.template")?;
        }
        for subset in self.override_variants(spec) {
            let overrides = subset.iter().map(|&i| (i, &spec.overrides[i]));
            let rendered = match render::render_overrides(&spec.template, overrides) {
                Ok(r) => r,
                Err(e @ (RenderError::Limit { .. } | RenderError::Template(_))) => {
                    return Err(render_refusal(&e).into())
                }
                // A patch that does not apply to this combination (a failed `test`, a missing
                // path) is that cluster's status, as before: not a refusal.
                Err(_) => continue,
            };
            admitted
                .check(&rendered)
                .map_err(|e| Rejection::from(render_refusal(&e)))?;
            if tenant && is_role_binding(&admitted) {
                let at = format!("spec.overrides[{}]", subset.last().copied().unwrap_or(0));
                check_tenant_rbac(&self.adm, &admitted, &rendered, &at)?;
            }
        }
        self.check_tenant_limits(namespace, spec, existing)
    }

    /// The combinations of overrides to render at admission: the one of each registered
    /// cluster, each override alone, and all of them. Only overrides with JSON patches can
    /// change identity or grow a manifest without bound, so without any there is nothing to do.
    fn override_variants(&self, spec: &ObjectSpec) -> BTreeSet<Vec<usize>> {
        let mut out = BTreeSet::new();
        if spec.overrides.iter().all(|o| o.patches.is_empty()) {
            return out;
        }
        for c in self.d.clusters.values() {
            let subset: Vec<usize> = (0..spec.overrides.len())
                .filter(|&i| spec.overrides[i].targets(&c.spec.name, &c.spec.labels))
                .collect();
            out.insert(subset);
        }
        for i in 0..spec.overrides.len() {
            out.insert(vec![i]);
        }
        out.insert((0..spec.overrides.len()).collect());
        out.remove(&Vec::new());
        out
    }

    /// Rule 6: the owning tenant's object count and stored template bytes.
    fn check_tenant_limits(
        &self,
        namespace: &str,
        spec: &ObjectSpec,
        existing: Option<&FederatedObject>,
    ) -> Result<(), Rejection> {
        let Some(tenant) = self.tenant_of_namespace(namespace) else {
            return Ok(());
        };
        let (mut objects, mut bytes) = (0u64, 0u64);
        for ns in &tenant.spec.namespaces {
            let u = self.ix.ns_usage.get(ns).copied().unwrap_or_default();
            objects += u.objects;
            bytes += u.template_bytes;
        }
        let old_len = existing.map_or(0, |o| o.spec.template.len() as u64);
        let new_len = spec.template.len() as u64;
        let limits = &self.adm;
        let name = &tenant.spec.name;
        if existing.is_none()
            && limits.tenant_max_objects > 0
            && objects + 1 > limits.tenant_max_objects
        {
            return Err(Refusal::invalid(
                "tenant-limits",
                "metadata.name",
                format!(
                    "tenant {name:?} already has {objects} objects, the limit is {}",
                    limits.tenant_max_objects
                ),
            )
            .into());
        }
        let after = bytes.saturating_sub(old_len).saturating_add(new_len);
        if new_len > old_len
            && limits.tenant_max_template_bytes > 0
            && after > limits.tenant_max_template_bytes
        {
            return Err(Refusal::invalid(
                "tenant-limits",
                "spec.template",
                format!(
                    "tenant {name:?} would store {after} template bytes, the limit is {}",
                    limits.tenant_max_template_bytes
                ),
            )
            .into());
        }
        Ok(())
    }

    pub(crate) fn on_set_admission_policy(
        &mut self,
        policy: &AdmissionPolicy,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if ctx.actor != Actor::Admin {
            return Err(Refusal::forbidden(
                "admin-only",
                "spec",
                "only admins may set the admission policy".to_string(),
            )
            .into());
        }
        policy.validate("spec")?;
        self.adm = policy.clone();
        Ok(Some(ctx.index))
    }
}

fn is_role_binding(a: &Admitted) -> bool {
    a.group() == "rbac.authorization.k8s.io" && a.kind == "RoleBinding"
}

/// Bounds the overrides before anything is rendered: their number and their patch operations
/// over all of them (a cluster can get every override).
fn check_override_counts(spec: &ObjectSpec) -> Result<(), Rejection> {
    if spec.overrides.len() > MAX_OVERRIDES {
        return Err(Refusal::invalid(
            "render-limits",
            "spec.overrides",
            format!(
                "{} overrides exceed the limit of {MAX_OVERRIDES}",
                spec.overrides.len()
            ),
        )
        .into());
    }
    let ops: usize = spec.overrides.iter().map(|o| o.patches.len()).sum();
    if ops > render::LIMITS.max_patch_ops {
        return Err(Refusal::invalid(
            "render-limits",
            "spec.overrides",
            format!(
                "{ops} patch operations exceed the limit of {}",
                render::LIMITS.max_patch_ops
            ),
        )
        .into());
    }
    Ok(())
}
