//! Extended resources (GPUs and the like) in the state: members' detailed capacity reports,
//! objects' per-replica extended requests, tenants' extended quotas.
//!
//! Commands (all since log entry version `policy::EXTENDED_SINCE`):
//! - `CapacityDetails`: an executor's scan of extended resources and node shapes. Stored per
//!   registered cluster (others are ignored), silently like a heartbeat's capacity; when a
//!   cluster's report changes, the objects waiting for room are queued in fair order
//!   (`handlers/queue.rs`).
//! - `PutTenantWithExtended`: `PutTenant` plus extended quotas (per-cluster quotas: `cluster_quota`). A plain `PutTenant` of this
//!   version replaces the tenant whole, so it clears them.
//! - An object put reads its template's extended requests (requests, or limits where a
//!   container gives only limits, as Kubernetes defaults them) and refuses a put that takes its
//!   tenant over an extended quota with FailedPrecondition naming the resource. A Duplicated
//!   object counts once per cluster it would run in (a dry run of the scheduler tells).
//!
//! The tables are their own snapshot section, kept apart from `Data` so that a state without
//! extended resources encodes and hashes as before. Booked extended amounts per cluster are not
//! stored: they are summed on demand over the (few) objects that request any.
//!
//! Must not: change how objects without extended requests are placed or counted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::placement::At;
use crate::command::CapacityDetail;
use crate::error::FieldError;
use crate::model::{FederatedObject, ObjectKey, TenantSpec};
use crate::policy::{
    validate_extended_name, ClusterQuota, Extended, ExtendedCapacity, MAX_EXTENDED_NAMES,
    PER_CLUSTER_QUOTA_SINCE,
};
use crate::render::parse_quantity;
use crate::state::{ChangeKind, ChangeOp, Ctx, HandlerResult, RejectCode, Rejection, State};

/// The replicated extended-resource tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtendedTables {
    /// Last detailed scan per registered cluster.
    pub clusters: BTreeMap<String, ExtendedCapacity>,
    /// Per-replica extended requests of the objects that have any.
    pub objects: BTreeMap<ObjectKey, Extended>,
    /// Extended quotas per tenant (a tenant without any is absent).
    pub tenants: BTreeMap<String, Extended>,
    /// Log index at which each waiting object started waiting (`handlers/queue.rs`).
    pub waiting: BTreeMap<ObjectKey, u64>,
    /// Non-zero priorities of objects within their tenant (`handlers/queue.rs`).
    pub priorities: BTreeMap<ObjectKey, i64>,
    /// Per-cluster quotas per tenant (`handlers/cluster_quota.rs`; a tenant without any is
    /// absent). Since snapshot version 8.
    pub per_cluster: BTreeMap<String, BTreeMap<String, ClusterQuota>>,
}

impl ExtendedTables {
    pub fn is_empty(&self) -> bool {
        self.clusters.is_empty()
            && self.objects.is_empty()
            && self.tenants.is_empty()
            && self.waiting.is_empty()
            && self.priorities.is_empty()
            && self.per_cluster.is_empty()
    }
}

/// Whether the template may name an extended resource in a container's requests or limits:
/// a `/` inside the object after `"requests"` or `"limits"`. A plain byte scan, so the puts of
/// templates without one (nearly all) never build a JSON tree for this.
fn may_request_extended(text: &str) -> bool {
    for key in ["\"requests\"", "\"limits\""] {
        let mut rest = text;
        while let Some(at) = rest.find(key) {
            rest = &rest[at + key.len()..];
            let end = rest.find('}').unwrap_or(rest.len());
            if rest[..end].contains('/') {
                return true;
            }
        }
    }
    false
}

/// Per-replica extended requests of a template: containers add up, init containers count by
/// their largest. A container's request is its `requests` entry, else its `limits` entry.
pub(crate) fn template_extended(text: &str) -> Result<Extended, FieldError> {
    if !may_request_extended(text) {
        return Ok(Extended::new());
    }
    let Ok(doc) = serde_json::from_str::<Value>(text) else {
        // Validation already refused a template that is not JSON; nothing to count.
        return Ok(Extended::new());
    };
    let Some(pod) = crate::render::pod_spec(&doc) else {
        return Ok(Extended::new());
    };
    let mut sum = Extended::new();
    let mut init_max = Extended::new();
    for (list, is_init) in [("containers", false), ("initContainers", true)] {
        let Some(Value::Array(containers)) = pod.get(list) else {
            continue;
        };
        for (i, c) in containers.iter().enumerate() {
            let field = format!("spec.template {list}[{i}].resources");
            let one = container_extended(c, &field)?;
            if is_init {
                init_max.max_with(&one);
            } else {
                sum = sum.saturating_add(&one);
            }
        }
    }
    sum.max_with(&init_max);
    if sum.0.len() > MAX_EXTENDED_NAMES {
        return Err(FieldError::new(
            "spec.template",
            format!("requests more than {MAX_EXTENDED_NAMES} extended resources"),
        ));
    }
    Ok(sum)
}

fn container_extended(c: &Value, field: &str) -> Result<Extended, FieldError> {
    let read = |part: &str| -> Result<BTreeMap<String, u64>, FieldError> {
        let mut out = BTreeMap::new();
        let Some(Value::Object(map)) = c.pointer(&format!("/resources/{part}")) else {
            return Ok(out);
        };
        for (name, q) in map.iter().filter(|(name, _)| name.contains('/')) {
            let f = format!("{field}.{part}.{name}");
            validate_extended_name(name, &f)?;
            let text = match q {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let n = parse_quantity(&text, 1).map_err(|e| FieldError::new(f.clone(), e))?;
            out.insert(name.clone(), n);
        }
        Ok(out)
    };
    let requests = read("requests")?;
    let limits = read("limits")?;
    let mut out = Extended::new();
    for (name, &limit) in &limits {
        match requests.get(name) {
            // Kubernetes refuses extended requests that differ from their limits.
            Some(&req) if req != limit => {
                return Err(FieldError::new(
                    format!("{field}.requests.{name}"),
                    format!("{req} differs from its limit {limit}: extended resources cannot be overcommitted"),
                ))
            }
            _ => out.add(name, limit),
        }
    }
    for (name, &req) in &requests {
        if !limits.contains_key(name) {
            out.add(name, req);
        }
    }
    Ok(out)
}

/// Copies of an object counted against quotas: its replicas, times the clusters it runs in
/// when every cluster runs them all (Duplicated).
pub(super) fn copies(obj: &FederatedObject, clusters: usize) -> u64 {
    let replicas = u64::from(obj.template_info.replicas);
    if obj.spec.placement.replicas.mode.divides() {
        replicas
    } else {
        replicas.saturating_mul(clusters.max(1) as u64)
    }
}

impl State {
    /// The last detailed scan of a cluster.
    pub fn cluster_extended(&self, cluster: &str) -> Option<&ExtendedCapacity> {
        self.ext.clusters.get(cluster)
    }

    /// An object's per-replica extended requests (empty when it asks for none).
    pub fn object_extended(&self, namespace: &str, name: &str) -> Extended {
        self.ext
            .objects
            .get(&ObjectKey::new(namespace, name))
            .cloned()
            .unwrap_or_default()
    }

    /// A tenant's extended quota and what its objects use of it.
    pub fn tenant_extended(&self, tenant: &str) -> (Extended, Extended) {
        let quota = self.ext.tenants.get(tenant).cloned().unwrap_or_default();
        let used = self
            .d
            .tenants
            .get(tenant)
            .map(|t| self.extended_used(&t.spec.namespaces, None))
            .unwrap_or_default();
        (quota, used)
    }

    /// Extended use of the objects in `namespaces`, `except` one.
    fn extended_used(&self, namespaces: &[String], except: Option<&ObjectKey>) -> Extended {
        let mut used = Extended::new();
        for (key, per) in &self.ext.objects {
            if Some(key) == except || !namespaces.contains(&key.namespace) {
                continue;
            }
            if let Some(obj) = self.object(&key.namespace, &key.name) {
                used = used
                    .saturating_add(&per.saturating_mul(copies(obj, obj.status.clusters.len())));
            }
        }
        used
    }

    /// What every object but `except` booked of extended resources, per cluster.
    pub(crate) fn extended_booked(&self, except: &ObjectKey) -> BTreeMap<&str, Extended> {
        let mut booked: BTreeMap<&str, Extended> = BTreeMap::new();
        for (key, per) in &self.ext.objects {
            if key == except {
                continue;
            }
            let Some(obj) = self.object(&key.namespace, &key.name) else {
                continue;
            };
            for p in &obj.status.clusters {
                let b = booked.entry(&*p.cluster).or_default();
                *b = b.saturating_add(&per.saturating_mul(u64::from(p.replicas)));
            }
        }
        booked
    }

    /// Refuses an object put whose extended requests take its tenant over an extended quota.
    /// `candidate` is the object as it would be stored (its current status kept).
    pub(crate) fn check_extended_quota(
        &self,
        candidate: &FederatedObject,
        per: &Extended,
        at: At,
    ) -> Result<(), Rejection> {
        let Some(tenant) = self.tenant_of_namespace(&candidate.namespace) else {
            return Ok(());
        };
        let Some(quota) = self.ext.tenants.get(&tenant.spec.name) else {
            return Ok(());
        };
        if per.is_empty() {
            return Ok(());
        }
        let clusters = if candidate.spec.placement.replicas.mode.divides() {
            1
        } else {
            let decision = self.decide_with(candidate, per, false, at, None);
            decision.placement.values().filter(|n| **n > 0).count()
        };
        let key = candidate.key();
        let others = self.extended_used(&tenant.spec.namespaces, Some(&key));
        let mine = per.saturating_mul(copies(candidate, clusters));
        let before = self
            .ext
            .objects
            .get(&key)
            .zip(self.object(&key.namespace, &key.name))
            .map(|(p, o)| p.saturating_mul(copies(o, o.status.clusters.len())))
            .unwrap_or_default();
        let after = others.saturating_add(&mine);
        let problems: Vec<String> = after
            .over(quota)
            // Already over and not growing: not this put's fault (as for cpu and memory).
            .filter(|(name, _, _)| mine.get(name) > before.get(name))
            .map(|(name, have, cap)| {
                format!(
                    "{name}: needs {have}, quota {cap} (short by {})",
                    have - cap
                )
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        let first = problems[0]
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        Err(Rejection::new(
            RejectCode::FailedPrecondition,
            Some(&format!("spec.template resources {first}")),
            format!(
                "exceeds the quota of tenant {:?}: {}",
                tenant.spec.name,
                problems.join("; ")
            ),
        ))
    }

    /// Records (or forgets) an object's extended requests once its put happened.
    pub(crate) fn set_object_extended(&mut self, key: &ObjectKey, per: Extended) {
        if per.is_empty() {
            self.ext.objects.remove(key);
        } else {
            self.ext.objects.insert(key.clone(), per);
        }
    }

    pub(crate) fn on_capacity_details(
        &mut self,
        batch: &[CapacityDetail],
        _ctx: &mut Ctx,
    ) -> HandlerResult {
        for (i, d) in batch.iter().enumerate() {
            d.capacity.validate(&format!("details[{i}].capacity"))?;
        }
        for d in batch {
            if self.d.clusters.get(&d.cluster).is_none() {
                continue;
            }
            let grew = match self.ext.clusters.get(&d.cluster) {
                Some(old) => old != &d.capacity,
                None => true,
            };
            self.ext
                .clusters
                .insert(d.cluster.clone(), d.capacity.clone());
            if grew {
                self.enqueue_waiting_fairly(std::slice::from_ref(&d.cluster));
            }
        }
        Ok(None)
    }

    /// A cluster left the federation: its report goes with it.
    pub(crate) fn forget_cluster_extended(&mut self, cluster: &str) {
        self.ext.clusters.remove(cluster);
    }

    /// `PutTenant` with extended quotas (an empty `quota` clears them). From
    /// `PER_CLUSTER_QUOTA_SINCE` on it clears the tenant's per-cluster quotas too.
    pub(crate) fn on_put_tenant_extended(
        &mut self,
        spec: &TenantSpec,
        quota: &Extended,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if ctx.version >= PER_CLUSTER_QUOTA_SINCE {
            return self.on_put_tenant_quotas(spec, quota, &BTreeMap::new(), ctx);
        }
        self.put_tenant_extended(spec, quota, ctx)
    }

    /// The tenant and its extended quotas, per-cluster quotas left alone.
    pub(super) fn put_tenant_extended(
        &mut self,
        spec: &TenantSpec,
        quota: &Extended,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        quota.validate("spec.quota")?;
        let same_spec = self
            .d
            .tenants
            .get(&spec.name)
            .is_some_and(|t| t.spec == *spec);
        let same_quota = self.ext.tenants.get(&spec.name).unwrap_or(&Extended::new()) == quota;
        if same_spec && same_quota {
            return self.on_put_tenant(spec, ctx);
        }
        let version = if same_spec {
            // Only the extended quota changes: the tenant's version still moves.
            let Some(t) = self.d.tenants.get_mut(&spec.name) else {
                return Ok(None);
            };
            t.resource_version = ctx.index;
            ctx.change(ChangeKind::Tenant, spec.name.clone(), ChangeOp::Modified);
            Some(ctx.index)
        } else {
            self.on_put_tenant(spec, ctx)?
        };
        if quota.is_empty() {
            self.ext.tenants.remove(&spec.name);
        } else {
            self.ext.tenants.insert(spec.name.clone(), quota.clone());
        }
        Ok(version)
    }

    /// A tenant was deleted: its extended quota goes with it.
    pub(crate) fn forget_tenant_extended(&mut self, tenant: &str) {
        self.ext.tenants.remove(tenant);
        self.ext.per_cluster.remove(tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(resources: &str) -> String {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"t"}},"spec":{{"replicas":2,"template":{{"spec":{{"containers":[{{"name":"a","image":"registry.example/x:1","resources":{resources}}}]}}}}}}}}"#
        )
    }

    #[test]
    fn requests_or_limits_as_kubernetes_defaults_them() {
        let only_limits = deployment(r#"{"limits":{"nvidia.com/gpu":"4","cpu":"1"}}"#);
        assert_eq!(
            template_extended(&only_limits).unwrap(),
            Extended::from_pairs([("nvidia.com/gpu", 4)])
        );
        let both = deployment(r#"{"requests":{"amd.com/gpu":2},"limits":{"amd.com/gpu":2}}"#);
        assert_eq!(
            template_extended(&both).unwrap(),
            Extended::from_pairs([("amd.com/gpu", 2)])
        );
        let none = deployment(r#"{"requests":{"cpu":"100m"}}"#);
        assert!(!may_request_extended(&none));
        assert_eq!(template_extended(&none).unwrap(), Extended::new());
    }

    #[test]
    fn bad_names_and_overcommit_are_refused_naming_the_field() {
        let reserved = deployment(r#"{"limits":{"kubernetes.io/gpu":"1"}}"#);
        let e = template_extended(&reserved).unwrap_err();
        assert_eq!(
            e.field,
            "spec.template containers[0].resources.limits.kubernetes.io/gpu"
        );
        let over =
            deployment(r#"{"requests":{"nvidia.com/gpu":"1"},"limits":{"nvidia.com/gpu":"2"}}"#);
        let e = template_extended(&over).unwrap_err();
        assert!(e.message.contains("overcommitted"), "{}", e.message);
    }
}
