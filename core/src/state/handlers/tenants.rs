//! Tenant intents (put, delete), quota accounting, and two-level slice placement.
//!
//! Quota: an object's need is template replicas x per-replica requests (a Duplicated object's
//! copies count once: its cluster count is only known after scheduling). A put that would take
//! a tenant over its quota is refused with FailedPrecondition on `spec`, naming the shortfall.
//! Lowering a quota below current use is allowed: existing objects stay, new growth is refused.
//! A zero dimension in the quota means "no limit" on that dimension.
//!
//! Slices (two-level scheduling): a tenant with `sliceSize` wants ceil(quota / sliceSize)
//! slices (over its most demanding dimension), placed by `scheduler::place_slices` on clusters
//! with room; its objects are then scheduled only among clusters holding a slice. Slices are
//! re-placed whenever the fleet changes and the tenant's objects re-queued when they move.
//! Slices restrict where a tenant runs; they do not reserve capacity against other tenants.

use std::collections::{BTreeMap, BTreeSet};

use super::placement::fleet_views;
use super::validate;
use crate::error::FieldError;
use crate::model::{ObjectKey, Tenant, TenantSpec, TenantStatus};
use crate::policy::Resources;
use crate::scheduler::place_slices;
use crate::state::{ChangeKind, ChangeOp, Ctx, HandlerResult, RejectCode, Rejection, State};

/// Most slices one tenant may ask for; bounds the slice placement's cost.
pub const MAX_SLICES: u64 = 10_000;
const MAX_MEMBER_BYTES: usize = 253;

/// Slices needed to cover `quota` in pieces of `slice`: the most over the dimensions the slice
/// sizes (a zero-sized dimension does not count).
fn slices_wanted(quota: &Resources, slice: &Resources) -> u64 {
    let dim = |q: u64, s: u64| if s == 0 { 0 } else { q.div_ceil(s) };
    dim(quota.cpu_millis, slice.cpu_millis)
        .max(dim(quota.memory_bytes, slice.memory_bytes))
        .max(dim(quota.pods, slice.pods))
}

/// Ok when `problems` (from [`over`]) is empty, else the refusal naming tenant and dimensions.
pub(super) fn refuse_over(tenant: &str, problems: Vec<String>) -> Result<(), Rejection> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(Rejection::new(
        RejectCode::FailedPrecondition,
        Some("spec"),
        format!(
            "exceeds the quota of tenant {tenant:?}: {}",
            problems.join("; ")
        ),
    ))
}

/// The dimensions in which `after` exceeds a limited `quota` and the change grows use (a
/// dimension already over quota that the change does not grow is not this change's fault).
pub(super) fn over(
    after: &Resources,
    quota: &Resources,
    old: &Resources,
    new: &Resources,
) -> Vec<String> {
    let mut out = Vec::new();
    for (what, u, q, grows) in [
        (
            "cpu millis",
            after.cpu_millis,
            quota.cpu_millis,
            new.cpu_millis > old.cpu_millis,
        ),
        (
            "memory bytes",
            after.memory_bytes,
            quota.memory_bytes,
            new.memory_bytes > old.memory_bytes,
        ),
        ("pods", after.pods, quota.pods, new.pods > old.pods),
    ] {
        if grows && q > 0 && u > q {
            out.push(format!("{what}: needs {u}, quota {q} (short by {})", u - q));
        }
    }
    out
}

impl State {
    /// Refuses a change of `namespace`'s use from `old_need` to `new_need` that would exceed
    /// its tenant's quota. Shrinking is always allowed.
    pub(crate) fn check_quota(
        &self,
        namespace: &str,
        old_need: Resources,
        new_need: Resources,
    ) -> Result<(), Rejection> {
        let Some(tenant) = self.tenant_of_namespace(namespace) else {
            return Ok(());
        };
        let after = tenant
            .status
            .used
            .saturating_sub(&old_need)
            .saturating_add(&new_need);
        refuse_over(
            &tenant.spec.name,
            over(&after, &tenant.spec.quota, &old_need, &new_need),
        )
    }

    pub(crate) fn book_quota(&mut self, namespace: &str, old_need: Resources, new_need: Resources) {
        let Some(name) = self.ix.ns_owner.get(namespace) else {
            return;
        };
        if let Some(t) = self.d.tenants.get_mut(name) {
            t.status.used = t
                .status
                .used
                .saturating_sub(&old_need)
                .saturating_add(&new_need);
        }
    }

    fn validate_tenant(&self, spec: &TenantSpec, version: u16) -> Result<u32, Rejection> {
        validate::dns_label(&spec.name, "spec.name")?;
        let mut seen = BTreeSet::new();
        for (i, ns) in spec.namespaces.iter().enumerate() {
            let field = format!("spec.namespaces[{i}]");
            validate::dns_label(ns, &field)?;
            // The cluster-scoped templates live there: a tenant owning it would read and write
            // the fleet's ClusterRoles and CRDs. Older entries never stored any there.
            if ns == crate::door::CLUSTER_SCOPE_NAMESPACE
                && version >= crate::door::CLUSTER_TEMPLATES_SINCE
            {
                return Err(FieldError::new(
                    field,
                    format!("namespace {ns:?} is reserved for cluster-scoped templates"),
                )
                .into());
            }
            if !seen.insert(ns) {
                return Err(
                    FieldError::new(field, format!("namespace {ns:?} listed twice")).into(),
                );
            }
            if let Some(owner) = self.ix.ns_owner.get(ns).filter(|o| **o != spec.name) {
                return Err(Rejection::new(
                    RejectCode::AlreadyExists,
                    Some(field.as_str()),
                    format!("namespace {ns:?} belongs to tenant {owner:?}"),
                ));
            }
        }
        for (i, m) in spec.members.iter().enumerate() {
            if m.is_empty() || m.len() > MAX_MEMBER_BYTES {
                return Err(FieldError::new(
                    format!("spec.members[{i}]"),
                    format!("must be 1 to {MAX_MEMBER_BYTES} bytes"),
                )
                .into());
            }
        }
        let Some(slice) = &spec.slice_size else {
            return Ok(0);
        };
        if slice.is_zero() {
            return Err(
                FieldError::new("spec.sliceSize", "must size at least one dimension").into(),
            );
        }
        let wanted = slices_wanted(&spec.quota, slice);
        if wanted > MAX_SLICES {
            return Err(FieldError::new(
                "spec.sliceSize",
                format!("the quota makes {wanted} slices, more than the limit {MAX_SLICES}"),
            )
            .into());
        }
        Ok(u32::try_from(wanted).unwrap_or(u32::MAX))
    }

    pub(crate) fn on_put_tenant(&mut self, spec: &TenantSpec, ctx: &mut Ctx) -> HandlerResult {
        let wanted = self.validate_tenant(spec, ctx.version)?;
        let old = self.d.tenants.get(&spec.name);
        if let Some(t) = old.filter(|t| t.spec == *spec) {
            return Ok(Some(t.resource_version));
        }
        let op = if old.is_some() {
            ChangeOp::Modified
        } else {
            ChangeOp::Added
        };
        let mut affected: BTreeSet<String> = spec.namespaces.iter().cloned().collect();
        let slices = match old {
            Some(t) => {
                affected.extend(t.spec.namespaces.iter().cloned());
                for ns in &t.spec.namespaces {
                    self.ix.ns_owner.remove(ns);
                }
                t.status.slices.clone()
            }
            None => BTreeMap::new(),
        };
        for ns in &spec.namespaces {
            self.ix.ns_owner.insert(ns.clone(), spec.name.clone());
        }
        let used = spec
            .namespaces
            .iter()
            .flat_map(|ns| self.objects_in(ns))
            .fold(Resources::ZERO, |acc, o| {
                acc.saturating_add(
                    &o.template_info
                        .per_replica
                        .saturating_mul(u64::from(o.template_info.replicas)),
                )
            });
        let status = TenantStatus {
            used,
            slices_wanted: wanted,
            slices,
        };
        self.d.tenants.insert(
            spec.name.clone(),
            Tenant {
                spec: spec.clone(),
                status,
                resource_version: ctx.index,
            },
        );
        ctx.change(ChangeKind::Tenant, spec.name.clone(), op);
        self.replace_slices(&spec.name, ctx);
        // Ownership, quota or slices may have changed for these namespaces: re-place them.
        self.enqueue_objects_in(&affected);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_delete_tenant(
        &mut self,
        name: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate::dns_label(name, "name")?;
        let Some(t) = self.d.tenants.get(name) else {
            return Err(Rejection::not_found("name", format!("tenant {name:?}")));
        };
        super::clusters::check_version(expected, Some(t.resource_version))?;
        if let Some(ns) = t
            .spec
            .namespaces
            .iter()
            .find(|ns| self.objects_in(ns).next().is_some())
        {
            return Err(Rejection::new(
                RejectCode::FailedPrecondition,
                Some("name"),
                format!("tenant {name:?} still has objects in namespace {ns:?}"),
            ));
        }
        for ns in &t.spec.namespaces {
            self.ix.ns_owner.remove(ns);
        }
        self.d.tenants.remove(name);
        self.forget_tenant_extended(name);
        ctx.change(ChangeKind::Tenant, name, ChangeOp::Deleted);
        Ok(Some(ctx.index))
    }

    /// Re-places every two-level tenant's slices after a fleet change.
    pub(crate) fn replace_all_slices(&mut self, ctx: &mut Ctx) {
        let names: Vec<String> = self
            .d
            .tenants
            .values()
            .filter(|t| t.spec.slice_size.is_some())
            .map(|t| t.spec.name.clone())
            .collect();
        for n in names {
            self.replace_slices(&n, ctx);
        }
    }

    /// Re-places one tenant's slices; if they moved, its objects are queued for rescheduling.
    fn replace_slices(&mut self, tenant: &str, ctx: &mut Ctx) {
        let Some(t) = self.d.tenants.get(tenant) else {
            return;
        };
        let Some(slice) = t.spec.slice_size else {
            return;
        };
        // The tenant's own placements live inside its slices: count them as free for it.
        let mut booked = self.ix.booked.clone();
        for obj in t.spec.namespaces.iter().flat_map(|ns| self.objects_in(ns)) {
            for p in &obj.status.clusters {
                if let Some(b) = booked.get_mut(&p.cluster) {
                    *b = b.saturating_sub(
                        &obj.template_info
                            .per_replica
                            .saturating_mul(u64::from(p.replicas)),
                    );
                }
            }
        }
        let views = fleet_views(&self.d.clusters, &booked);
        let placed = place_slices(t.status.slices_wanted, &slice, &views, &t.status.slices);
        if placed == t.status.slices {
            return;
        }
        let namespaces = t.spec.namespaces.clone();
        if let Some(t) = self.d.tenants.get_mut(tenant) {
            t.status.slices = placed;
            if t.resource_version != ctx.index {
                ctx.change(ChangeKind::Tenant, tenant, ChangeOp::Modified);
            }
            t.resource_version = ctx.index;
        }
        self.enqueue_objects_in(&namespaces);
    }

    /// Queues every object of these namespaces for a reschedule (their tenant's caps changed).
    pub(crate) fn enqueue_objects_in<'a>(
        &mut self,
        namespaces: impl IntoIterator<Item = &'a String>,
    ) {
        let keys: Vec<ObjectKey> = namespaces
            .into_iter()
            .flat_map(|ns| self.objects_in(ns))
            .map(|o| o.key())
            .collect();
        for k in &keys {
            self.enqueue(k);
        }
    }
}
