//! The wait queue: objects with replicas the fleet cannot hold now, in the order they get freed
//! capacity, and what each waits for.
//!
//! An object waits while its last decision left a shortfall (`ObjectStatus::shortfall`);
//! nothing is dropped: it stays placed where it fits and keeps its place in the queue until
//! every replica has a cluster. Since log entry version `policy::EXTENDED_SINCE`:
//! - the log index at which an object started waiting is recorded (`ExtendedTables::waiting`);
//! - deleting an object or a new detailed capacity report queues the waiting objects that may
//!   use the freed clusters, in fair order, for the bounded re-placement of
//!   `handlers/placement.rs` (first queued, first placed, so first served).
//!
//! Fair order (dominant-resource fairness): tenants by their dominant share, the largest of
//! their booked cpu, memory and each extended resource over the fleet's allocatable of it,
//! in parts per million (integers, so every node computes the same order), smallest first;
//! objects of no tenant count as one tenant of their own per namespace. Within a tenant: the
//! template's `fedraft.io/priority` annotation (an integer, higher first, 0 when absent), then
//! the longest waiting, then the name.
//!
//! Must not: place anything itself or reorder the re-placement queue of older entries.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::{FederatedObject, ObjectKey};
use crate::policy::Extended;
use crate::state::State;

/// The template annotation giving an object's priority within its tenant.
pub const PRIORITY_ANNOTATION: &str = "fedraft.io/priority";

/// One waiting object as its tenant sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub namespace: String,
    pub name: String,
    /// The owning tenant, if any.
    pub tenant: Option<String>,
    /// 1-based place in the fair order over the whole fleet's queue.
    pub position: u32,
    /// Replicas without a cluster.
    pub replicas: u32,
    /// What it waits for: one replica's requests and the scheduler's reason.
    pub waiting_for: String,
    /// Log index at which it started waiting (0: before this was recorded).
    pub since_index: u64,
    pub priority: i64,
}

/// An object's priority annotation; 0 when absent or not an integer. A substring test first,
/// so templates without one are not parsed.
pub(crate) fn template_priority(template: &str) -> i64 {
    if !template.contains(PRIORITY_ANNOTATION) {
        return 0;
    }
    serde_json::from_str::<serde_json::Value>(template)
        .ok()
        .and_then(|v| {
            v.pointer("/metadata/annotations")
                .and_then(|a| a.get(PRIORITY_ANNOTATION))
                .and_then(|p| p.as_str().map(str::to_string))
        })
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(0)
}

fn ppm(used: u64, total: u64) -> u64 {
    if total == 0 {
        return if used == 0 { 0 } else { 1_000_000 };
    }
    let share = u128::from(used) * 1_000_000 / u128::from(total);
    u64::try_from(share).unwrap_or(u64::MAX)
}

impl State {
    /// The fair-share group of a namespace: its tenant, else the namespace itself.
    fn share_group(&self, namespace: &str) -> String {
        match self.ix.ns_owner.get(namespace) {
            Some(t) => format!("tenant:{t}"),
            None => format!("namespace:{namespace}"),
        }
    }

    /// The namespaces of a fair-share group.
    fn group_namespaces(&self, namespace: &str) -> Vec<String> {
        match self.tenant_of_namespace(namespace) {
            Some(t) => t.spec.namespaces.clone(),
            None => vec![namespace.to_string()],
        }
    }

    /// Dominant share, in parts per million of the fleet, of the groups of `namespaces`: only
    /// the groups with waiting work are summed, not every object of the federation.
    fn dominant_shares<'a>(
        &self,
        namespaces: impl Iterator<Item = &'a str>,
    ) -> BTreeMap<String, u64> {
        let mut cpu = 0u64;
        let mut mem = 0u64;
        let mut ext_total = Extended::new();
        for c in self.d.clusters.values() {
            if let Some(cap) = c.status.capacity {
                cpu = cpu.saturating_add(cap.allocatable.cpu_millis);
                mem = mem.saturating_add(cap.allocatable.memory_bytes);
            }
        }
        for r in self.ext.clusters.values() {
            ext_total = ext_total.saturating_add(&r.allocatable);
        }
        let mut shares = BTreeMap::new();
        for ns in namespaces {
            let group = self.share_group(ns);
            if shares.contains_key(&group) {
                continue;
            }
            let (mut c, mut m, mut e) = (0u64, 0u64, Extended::new());
            for gns in self.group_namespaces(ns) {
                for obj in self.objects_in(&gns) {
                    let placed: u64 = obj
                        .status
                        .clusters
                        .iter()
                        .map(|p| u64::from(p.replicas))
                        .sum();
                    let per = obj.template_info.per_replica.saturating_mul(placed);
                    c = c.saturating_add(per.cpu_millis);
                    m = m.saturating_add(per.memory_bytes);
                    if let Some(x) = self.ext.objects.get(&obj.key()) {
                        e = e.saturating_add(&x.saturating_mul(placed));
                    }
                }
            }
            let ext =
                e.0.iter()
                    .map(|(name, n)| ppm(*n, ext_total.get(name)))
                    .max()
                    .unwrap_or(0);
            shares.insert(group, ppm(c, cpu).max(ppm(m, mem)).max(ext));
        }
        shares
    }

    /// Waiting objects among `keys`, in fair order.
    fn fair_order<'a>(
        &'a self,
        keys: impl Iterator<Item = &'a ObjectKey>,
    ) -> Vec<&'a FederatedObject> {
        let objects: Vec<&FederatedObject> = keys
            .filter_map(|k| self.object(&k.namespace, &k.name))
            .filter(|o| o.status.shortfall.is_some())
            .collect();
        let shares = self.dominant_shares(objects.iter().map(|o| o.namespace.as_str()));
        let mut waiting: Vec<(u64, String, i64, u64, &FederatedObject)> = objects
            .into_iter()
            .map(|o| {
                let group = self.share_group(&o.namespace);
                let share = shares.get(&group).copied().unwrap_or(0);
                let key = o.key();
                let priority = self.ext.priorities.get(&key).copied().unwrap_or(0);
                let since = self.ext.waiting.get(&key).copied().unwrap_or(0);
                (share, group, priority, since, o)
            })
            .collect();
        waiting.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| a.1.cmp(&b.1))
                .then_with(|| b.2.cmp(&a.2))
                .then_with(|| a.3.cmp(&b.3))
                .then_with(|| (&a.4.namespace, &a.4.name).cmp(&(&b.4.namespace, &b.4.name)))
        });
        waiting.into_iter().map(|w| w.4).collect()
    }

    /// Queues, in fair order, the waiting objects that may use any of `clusters`.
    pub(crate) fn enqueue_waiting_fairly(&mut self, clusters: &[String]) {
        let mut keys: Vec<ObjectKey> = Vec::new();
        for c in clusters {
            keys.extend(
                self.ix
                    .interested_in(&self.ix.short, c)
                    .into_iter()
                    .cloned(),
            );
        }
        if keys.is_empty() {
            return;
        }
        keys.sort();
        keys.dedup();
        let ordered: Vec<ObjectKey> = self
            .fair_order(keys.iter())
            .into_iter()
            .map(FederatedObject::key)
            .collect();
        for k in &ordered {
            self.enqueue(k);
        }
    }

    /// Keeps `ExtendedTables::waiting` in step with an object's shortfall after a decision.
    pub(crate) fn note_waiting(&mut self, key: &ObjectKey, short: bool, index: u64) {
        if short {
            self.ext.waiting.entry(key.clone()).or_insert(index);
        } else {
            self.ext.waiting.remove(key);
        }
    }

    /// Every waiting object in fair order, or those of one tenant (their positions are still
    /// their places in the whole queue).
    pub fn waiting(&self, tenant: Option<&str>) -> Vec<Waiting> {
        let ordered = self.fair_order(self.ix.short.iter().map(|k| &**k));
        ordered
            .into_iter()
            .enumerate()
            .map(|(i, o)| {
                let key = o.key();
                let owner = self.ix.ns_owner.get(&o.namespace).cloned();
                let per = o.template_info.per_replica;
                let mut what = format!(
                    "per replica cpu {}m, memory {} bytes",
                    per.cpu_millis, per.memory_bytes
                );
                if let Some(e) = self.ext.objects.get(&key) {
                    for (name, n) in &e.0 {
                        what.push_str(&format!(", {name} {n} on one node"));
                    }
                }
                let (replicas, reason) = o
                    .status
                    .shortfall
                    .as_ref()
                    .map(|s| (s.replicas, s.message.clone()))
                    .unwrap_or_default();
                Waiting {
                    namespace: o.namespace.clone(),
                    name: o.name.clone(),
                    tenant: owner,
                    position: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    replicas,
                    waiting_for: format!("{what}: {reason}"),
                    since_index: self.ext.waiting.get(&key).copied().unwrap_or(0),
                    priority: self.ext.priorities.get(&key).copied().unwrap_or(0),
                }
            })
            .filter(|w| tenant.is_none() || w.tenant.as_deref() == tenant)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_comes_from_the_annotation() {
        let t = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","annotations":{"fedraft.io/priority":"7"}}}"#;
        assert_eq!(template_priority(t), 7);
        assert_eq!(template_priority(r#"{"metadata":{"name":"p"}}"#), 0);
        let bad = r#"{"metadata":{"annotations":{"fedraft.io/priority":"high"}}}"#;
        assert_eq!(template_priority(bad), 0);
        assert_eq!(ppm(1, 4), 250_000);
        assert_eq!(ppm(0, 0), 0);
    }
}
