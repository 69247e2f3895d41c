//! Per-cluster tenant quotas, and the cpu, memory and pods quota check that counts a Duplicated
//! object once per cluster it runs in.
//!
//! Commands (since log entry version `policy::PER_CLUSTER_QUOTA_SINCE`):
//! - `PutTenantWithQuotas`: `PutTenantWithExtended` plus a quota per named cluster. Propose and
//!   apply check each per-cluster limit against the tenant's whole quota (a limit above a limited
//!   dimension of it could never be used: refused naming `spec.perCluster.CLUSTER.RESOURCE`),
//!   then put the tenant as `PutTenantWithExtended` does, then store the per-cluster quotas and,
//!   when they changed, move the tenant's version and re-place its objects. A `PutTenant` or
//!   `PutTenantWithExtended` of this version replaces the tenant whole: it clears them.
//! - An object put counts, against its tenant's cpu, memory and pods quota, each object's
//!   requests times its copies: its replicas, times the clusters it runs in when Duplicated (a
//!   dry run of the scheduler tells for the object being put), as extended quotas already did.
//!
//! A per-cluster quota is a cap on placement, not a refusal: for an object of the tenant the
//! scheduler sees a cluster's free capacity as at most the per-cluster quota less what the
//! tenant's other objects hold there, so replicas beyond it go elsewhere or wait in the queue
//! like any shortfall. Its cost is one walk over the tenant's objects per decision, paid only by
//! tenants with per-cluster quotas.
//!
//! Must not: change the placement or the quota accounting of a tenant without per-cluster quotas
//! (beyond counting Duplicated copies from this version on).

use std::collections::BTreeMap;

use super::extended::copies;
use super::placement::At;
use super::tenants::{over, refuse_over};
use crate::model::{FederatedObject, ObjectSpec, TemplateInfo, TenantSpec};
use crate::policy::{validate_per_cluster, ClusterQuota, Extended, Resources};
use crate::scheduler::DropReason;
use crate::state::{ChangeKind, ChangeOp, Ctx, HandlerResult, Rejection, State};

/// Free capacity a per-cluster quota leaves for one object: unlimited dimensions are `u64::MAX`,
/// extended resources absent from the quota are not limited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuotaRoom {
    pub base: Resources,
    pub extended: Extended,
}

impl QuotaRoom {
    /// `available` capped by this room (an unreported cluster gets the room alone).
    pub fn cap_base(&self, available: Option<Resources>) -> Option<Resources> {
        let a = available.unwrap_or(Resources {
            cpu_millis: u64::MAX,
            memory_bytes: u64::MAX,
            pods: u64::MAX,
        });
        Some(Resources {
            cpu_millis: a.cpu_millis.min(self.base.cpu_millis),
            memory_bytes: a.memory_bytes.min(self.base.memory_bytes),
            pods: a.pods.min(self.base.pods),
        })
    }

    /// Extended sums `free` capped by this room.
    pub fn cap_extended(&self, free: Extended) -> Extended {
        let mut out = free;
        for (name, &room) in &self.extended.0 {
            let have = out.get(name);
            if have > room {
                out.0.insert(name.clone(), room);
            }
        }
        out
    }
}

/// The first log entry version whose object puts are refused when the tenant's per-cluster
/// quotas leave no room for them on every cluster they could use
/// ([`State::check_quota_counting_copies`]); an older entry's object waited, as it did.
pub const PER_CLUSTER_WRITE_SINCE: u16 = 10;

/// How many replicas of `per` (base) and `per_ext` (extended, per replica) `room` holds, and
/// the resource that limits it (`unlimited` when none does).
fn replicas_in(room: &QuotaRoom, per: &Resources, per_ext: &Extended) -> (u64, &'static str) {
    let mut best = (u64::MAX, "unlimited");
    let mut take = |room: u64, need: u64, name: &'static str| {
        if need > 0 && room != u64::MAX && room / need < best.0 {
            best = (room / need, name);
        }
    };
    take(room.base.cpu_millis, per.cpu_millis, "cpu millis");
    take(room.base.memory_bytes, per.memory_bytes, "memory bytes");
    take(room.base.pods, per.pods, "pods");
    for (name, &left) in &room.extended.0 {
        take(left, per_ext.get(name), "extended resources");
    }
    best
}

/// What `q` leaves after `used`: zero dimensions stay unlimited.
fn room(q: &ClusterQuota, used_base: &Resources, used_ext: &Extended) -> QuotaRoom {
    let dim = |cap: u64, used: u64| {
        if cap == 0 {
            u64::MAX
        } else {
            cap.saturating_sub(used)
        }
    };
    let mut extended = Extended::new();
    for (name, &cap) in q.extended.0.iter().filter(|(_, n)| **n > 0) {
        extended
            .0
            .insert(name.clone(), cap.saturating_sub(used_ext.get(name)));
    }
    QuotaRoom {
        base: Resources {
            cpu_millis: dim(q.base.cpu_millis, used_base.cpu_millis),
            memory_bytes: dim(q.base.memory_bytes, used_base.memory_bytes),
            pods: dim(q.base.pods, used_base.pods),
        },
        extended,
    }
}

impl State {
    /// A tenant's per-cluster quotas (empty when it has none).
    pub fn tenant_per_cluster(&self, tenant: &str) -> &BTreeMap<String, ClusterQuota> {
        static NONE: BTreeMap<String, ClusterQuota> = BTreeMap::new();
        self.ext.per_cluster.get(tenant).unwrap_or(&NONE)
    }

    /// The tenant's quota on `cluster` when it has a per-cluster one there.
    pub(crate) fn per_cluster_quota(
        &self,
        tenant: &str,
        cluster: &str,
    ) -> Option<(Resources, Extended)> {
        let q = self.ext.per_cluster.get(tenant)?.get(cluster)?;
        Some((q.base, q.extended.clone()))
    }

    /// The room each per-cluster quota of `obj`'s tenant leaves for it: the quota less what the
    /// tenant's other objects hold on that cluster. None when the tenant has none.
    pub(crate) fn quota_rooms(&self, obj: &FederatedObject) -> Option<BTreeMap<&str, QuotaRoom>> {
        if self.ext.per_cluster.is_empty() {
            return None;
        }
        let tenant = self.tenant_of_namespace(&obj.namespace)?;
        let quotas = self.ext.per_cluster.get(&tenant.spec.name)?;
        let mut used: BTreeMap<&str, (Resources, Extended)> = BTreeMap::new();
        for o in self.objects_in_each(&tenant.spec.namespaces) {
            if o.namespace == obj.namespace && o.name == obj.name {
                continue;
            }
            let per_ext = self.ext.objects.get(&o.key());
            for p in o
                .status
                .clusters
                .iter()
                .filter(|p| quotas.contains_key(&*p.cluster))
            {
                let n = u64::from(p.replicas);
                let u = used.entry(&*p.cluster).or_default();
                u.0 =
                    u.0.saturating_add(&o.template_info.per_replica.saturating_mul(n));
                if let Some(e) = per_ext {
                    u.1 = u.1.saturating_add(&e.saturating_mul(n));
                }
            }
        }
        let none = (Resources::ZERO, Extended::new());
        Some(
            quotas
                .iter()
                .map(|(c, q)| {
                    let (b, e) = used.get(c.as_str()).unwrap_or(&none);
                    (c.as_str(), room(q, b, e))
                })
                .collect(),
        )
    }

    pub(crate) fn on_put_tenant_quotas(
        &mut self,
        spec: &TenantSpec,
        quota: &Extended,
        per_cluster: &BTreeMap<String, ClusterQuota>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        quota.validate("spec.quota")?;
        validate_per_cluster(per_cluster, &spec.quota, quota, "spec.perCluster")?;
        // Empty per-cluster entries limit nothing: they are not stored.
        let per_cluster: BTreeMap<String, ClusterQuota> = per_cluster
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(c, q)| (c.clone(), q.clone()))
            .collect();
        let same = match self.ext.per_cluster.get(&spec.name) {
            Some(old) => *old == per_cluster,
            None => per_cluster.is_empty(),
        };
        let version = self.put_tenant_extended(spec, quota, ctx)?;
        if same {
            return Ok(version);
        }
        if per_cluster.is_empty() {
            self.ext.per_cluster.remove(&spec.name);
        } else {
            self.ext.per_cluster.insert(spec.name.clone(), per_cluster);
        }
        if let Some(t) = self.d.tenants.get_mut(&spec.name) {
            if t.resource_version != ctx.index {
                t.resource_version = ctx.index;
                ctx.change(ChangeKind::Tenant, spec.name.clone(), ChangeOp::Modified);
            }
        }
        // The caps changed: the tenant's objects are re-placed under the new ones.
        self.enqueue_objects_in(&spec.namespaces);
        Ok(Some(ctx.index))
    }

    /// What `tenant`'s objects hold of cpu, memory and pods, counted as the quota check counts
    /// it: each object's requests times its copies (Duplicated: once per cluster it runs in, an
    /// object not yet placed once). The API shows this as the tenant's `status.used`; the stored
    /// `TenantStatus::used` counts each object once, as the check of entries older than
    /// `policy::PER_CLUSTER_QUOTA_SINCE` did, and stays so for their replay. None: no such tenant.
    pub fn tenant_used(&self, tenant: &str) -> Option<Resources> {
        let t = self.d.tenants.get(tenant)?;
        Some(self.namespaces_used(&t.spec.namespaces))
    }

    /// What the objects of `namespaces` hold, counted as [`State::tenant_used`] counts: the
    /// share of a tenant's use that a member scoped to those namespaces may see.
    pub fn namespaces_used(&self, namespaces: &[String]) -> Resources {
        self.objects_in_each(namespaces)
            .fold(Resources::ZERO, |acc, o| acc.saturating_add(&held(o)))
    }

    /// Refuses a put that would take its tenant over its cpu, memory or pods quota, counting
    /// every object's copies (Duplicated: once per cluster it runs in); and from `version`
    /// [`PER_CLUSTER_WRITE_SINCE`] one that its tenant's per-cluster quotas leave no room for
    /// ([`State::check_per_cluster_room`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_quota_counting_copies(
        &self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        info: TemplateInfo,
        per_ext: &Extended,
        at: At,
    ) -> Result<(), Rejection> {
        let Some(tenant) = self.tenant_of_namespace(namespace) else {
            return Ok(());
        };
        self.check_whole_quota(namespace, name, spec, info, per_ext, at)?;
        if at.version < PER_CLUSTER_WRITE_SINCE
            || !self.ext.per_cluster.contains_key(&tenant.spec.name)
        {
            return Ok(());
        }
        let existing = self.object(namespace, name);
        // As with the whole quota, a put that asks no more than the object already did, where
        // it did, is not refused for a quota that shrank or filled since.
        if let Some(o) = existing {
            let old = o.template_info;
            let old_ext = self.ext.objects.get(&o.key());
            let no_more = info.replicas <= old.replicas
                && info.per_replica.cpu_millis <= old.per_replica.cpu_millis
                && info.per_replica.memory_bytes <= old.per_replica.memory_bytes
                && info.per_replica.pods <= old.per_replica.pods
                && per_ext
                    .0
                    .iter()
                    .all(|(n, v)| *v <= old_ext.map_or(0, |e| e.get(n)));
            if no_more && o.spec.placement == spec.placement {
                return Ok(());
            }
        }
        let candidate = FederatedObject {
            namespace: namespace.to_string(),
            name: name.to_string(),
            spec: spec.clone(),
            template_info: info,
            status: existing.map(|o| o.status.clone()).unwrap_or_default(),
            resource_version: 0,
        };
        self.check_per_cluster_room(&tenant.spec.name, &candidate, per_ext, at)
    }

    /// Refuses an object of `tenant` when every cluster its placement could use (by the
    /// scheduler's filters other than capacity: cluster list, selector, slices, taints, cordon,
    /// health) has a per-cluster quota of the tenant, and those quotas, less what the tenant's
    /// other objects hold there, have room for fewer of its replicas than it asks (Divided: all
    /// of them summed over those clusters; Duplicated: one whole copy on one of them). A usable
    /// cluster without a per-cluster quota, or no usable cluster at all, refuses nothing: the
    /// object waits for capacity or health as any shortfall does.
    fn check_per_cluster_room(
        &self,
        tenant: &str,
        candidate: &FederatedObject,
        per_ext: &Extended,
        at: At,
    ) -> Result<(), Rejection> {
        let Some(rooms) = self.quota_rooms(candidate) else {
            return Ok(());
        };
        let replicas = u64::from(candidate.template_info.replicas);
        if replicas == 0 {
            return Ok(());
        }
        let decision = self.decide_with(candidate, per_ext, false, at, None);
        // Dropped for capacity only (a quota's cap shows as capacity too): still usable.
        let by_capacity = decision.dropped.iter().filter(|d| {
            matches!(
                d.reason,
                DropReason::NoCapacity
                    | DropReason::CapacityNotReported
                    | DropReason::SpreadConstraint { .. }
            )
        });
        let usable: Vec<&str> = decision
            .candidates
            .iter_str()
            .chain(by_capacity.map(|d| d.cluster.as_str()))
            .collect();
        if usable.is_empty() {
            return Ok(());
        }
        let per = candidate.template_info.per_replica;
        let (mut sum, mut most) = (0u64, 0u64);
        let mut short: Vec<&str> = Vec::new();
        for c in &usable {
            let Some(room) = rooms.get(c) else {
                return Ok(());
            };
            let (fit, limit) = replicas_in(room, &per, per_ext);
            sum = sum.saturating_add(fit);
            most = most.max(fit);
            if fit < replicas && !short.contains(&limit) {
                short.push(limit);
            }
        }
        let (room_for, what) = if candidate.spec.placement.replicas.mode.divides() {
            (sum, "replicas")
        } else {
            (most, "replicas in one copy")
        };
        if room_for >= replicas {
            return Ok(());
        }
        let mut clusters = usable.clone();
        clusters.sort_unstable();
        refuse_over(
            tenant,
            vec![format!(
                "its per-cluster quotas on {} leave room for {room_for} of {replicas} {what} \
                 ({})",
                clusters.join(", "),
                short.join(", ")
            )],
        )
    }

    /// The whole-tenant part of [`State::check_quota_counting_copies`].
    fn check_whole_quota(
        &self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        info: TemplateInfo,
        per_ext: &Extended,
        at: At,
    ) -> Result<(), Rejection> {
        let Some(tenant) = self.tenant_of_namespace(namespace) else {
            return Ok(());
        };
        let quota = tenant.spec.quota;
        if quota.is_zero() {
            return Ok(());
        }
        let need = |o: &FederatedObject, clusters: usize| {
            o.template_info
                .per_replica
                .saturating_mul(copies(o, clusters))
        };
        let others = self
            .objects_in_each(&tenant.spec.namespaces)
            .filter(|o| o.namespace != namespace || o.name != name)
            .fold(Resources::ZERO, |acc, o| acc.saturating_add(&held(o)));
        let existing = self.object(namespace, name);
        let candidate = FederatedObject {
            namespace: namespace.to_string(),
            name: name.to_string(),
            spec: spec.clone(),
            template_info: info,
            status: existing.map(|o| o.status.clone()).unwrap_or_default(),
            resource_version: 0,
        };
        let clusters = if spec.placement.replicas.mode.divides() {
            1
        } else {
            let decision = self.decide_with(&candidate, per_ext, false, at, None);
            decision.placement.values().filter(|n| **n > 0).count()
        };
        let mine = need(&candidate, clusters);
        let before = existing.map(held).unwrap_or_default();
        refuse_over(
            &tenant.spec.name,
            over(&others.saturating_add(&mine), &quota, &before, &mine),
        )
    }
}

/// What an object holds of cpu, memory and pods as the quota checks count it: its requests
/// times its copies where it is placed now (Duplicated: once per cluster, unplaced: once).
fn held(o: &FederatedObject) -> Resources {
    o.template_info
        .per_replica
        .saturating_mul(copies(o, o.status.clusters.len()))
}
