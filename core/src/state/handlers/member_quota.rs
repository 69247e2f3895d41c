//! Tenant quotas pushed to member clusters as `ResourceQuota` objects, so that a member enforces
//! them too (a pod created on the member behind fedraft's back counts against them).
//!
//! Derived, not stored: a member cluster gets one `ResourceQuota` named [`TENANT_QUOTA_NAME`] in
//! each namespace of a tenant with a quota where at least one of the tenant's objects runs on it,
//! and loses it (the executors prune it like any managed object) once nothing of the tenant runs
//! in that namespace there. The hard limits are the tenant's quota for that cluster: its
//! per-cluster quota when it has one for the cluster, else its whole quota. A member cannot know
//! what the tenant uses elsewhere, so the whole quota is the tightest bound that never refuses
//! what fedraft admitted; a per-cluster quota is exact. Each namespace gets the same limits
//! (Kubernetes quotas are per namespace; fedraft's are per tenant).
//!
//! Units follow what fedraft counts: requests. cpu as `requests.cpu` in millis, memory as
//! `requests.memory` in bytes, `pods`, and each extended resource as `requests.NAME` (the only
//! form Kubernetes accepts for extended resources). A zero dimension is unlimited and left out.
//! Note that a member then refuses pods that give no request for a limited resource, as
//! Kubernetes does under any quota.
//!
//! Derived objects travel with the placed objects ([`State::desired_for_cluster`] and the
//! executors' cache) under the key [`TENANT_QUOTA_KEY`], a name no federated object can have;
//! executors do not report their status (nothing in the state would take it).
//!
//! Must not: change the state, or depend on anything but the tenants, their quotas and where
//! their objects run (every node and every executor derive the same objects).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::model::ObjectKey;
use crate::policy::{Extended, Resources};
use crate::state::{DesiredObject, State};

/// Name of the `ResourceQuota` written in each of a tenant's namespaces on a member.
pub const TENANT_QUOTA_NAME: &str = "fedraft-tenant-quota";

/// Object-key name of a derived quota: `~` is outside every Kubernetes name, so no federated
/// object shares it.
pub const TENANT_QUOTA_KEY: &str = "~tenant-quota";

/// Label naming the tenant on a derived quota.
pub const TENANT_LABEL: &str = "fedraft.io/tenant";

/// Whether `key` names a derived tenant quota rather than a federated object.
pub fn is_derived_key(key: &ObjectKey) -> bool {
    key.name == TENANT_QUOTA_KEY
}

/// `spec.hard` of a `ResourceQuota` for these limits (empty when nothing is limited).
pub fn quota_hard(base: &Resources, ext: &Extended) -> BTreeMap<String, String> {
    let mut hard = BTreeMap::new();
    if base.cpu_millis > 0 {
        hard.insert("requests.cpu".to_string(), format!("{}m", base.cpu_millis));
    }
    if base.memory_bytes > 0 {
        hard.insert("requests.memory".to_string(), base.memory_bytes.to_string());
    }
    if base.pods > 0 {
        hard.insert("pods".to_string(), base.pods.to_string());
    }
    for (name, n) in ext.0.iter().filter(|(_, n)| **n > 0) {
        hard.insert(format!("requests.{name}"), n.to_string());
    }
    hard
}

/// The manifest template of a derived quota (rendered like any template afterwards).
fn quota_template(tenant: &str, hard: &BTreeMap<String, String>) -> String {
    let hard: Map<String, Value> = hard
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": TENANT_QUOTA_NAME, "labels": {TENANT_LABEL: tenant}},
        "spec": {"hard": hard},
    })
    .to_string()
}

impl State {
    /// The quota a tenant has on `cluster`: its per-cluster quota there, else its whole quota
    /// (cpu, memory and pods; extended resources).
    pub fn tenant_quota_on(&self, tenant: &str, cluster: &str) -> (Resources, Extended) {
        if let Some(q) = self.per_cluster_quota(tenant, cluster) {
            return q;
        }
        let base = self
            .d
            .tenants
            .get(tenant)
            .map(|t| t.spec.quota)
            .unwrap_or(Resources::ZERO);
        let ext = self.ext.tenants.get(tenant).cloned().unwrap_or_default();
        (base, ext)
    }

    /// The derived `ResourceQuota` objects `cluster` should hold, in key order, each with the
    /// version it was derived at (its tenant's resource version: the limits change only with
    /// the tenant).
    pub fn derived_for_cluster(&self, cluster: &str) -> Vec<(u64, DesiredObject)> {
        let Some(c) = self.d.clusters.get(cluster) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for t in self.d.tenants.values() {
            let (base, ext) = self.tenant_quota_on(&t.spec.name, cluster);
            let hard = quota_hard(&base, &ext);
            if hard.is_empty() {
                continue;
            }
            let template = quota_template(&t.spec.name, &hard);
            for ns in &t.spec.namespaces {
                if !self.objects_in(ns).any(|o| self.runs_on(o, cluster)) {
                    continue;
                }
                let manifest = crate::render::render(
                    &template,
                    ns,
                    TENANT_QUOTA_KEY,
                    cluster,
                    &c.spec.labels,
                    &[],
                    None,
                );
                let admitted = crate::admission::Admitted::from_template_text(&template, ns).ok();
                out.push((
                    t.resource_version,
                    DesiredObject {
                        key: ObjectKey::new(ns.clone(), TENANT_QUOTA_KEY),
                        replicas: 0,
                        manifest,
                        admitted,
                    },
                ));
            }
        }
        out.sort_by(|a, b| a.1.key.cmp(&b.1.key));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_limits_in_kubernetes_terms_and_zero_is_unlimited() {
        let base = Resources {
            cpu_millis: 2500,
            memory_bytes: 1 << 30,
            pods: 0,
        };
        let ext = Extended::from_pairs([("nvidia.com/gpu", 4), ("amd.com/gpu", 0)]);
        let hard = quota_hard(&base, &ext);
        let want: BTreeMap<String, String> = [
            ("requests.cpu", "2500m"),
            ("requests.memory", "1073741824"),
            ("requests.nvidia.com/gpu", "4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(hard, want);
        assert!(quota_hard(&Resources::ZERO, &Extended::new()).is_empty());
    }
}
