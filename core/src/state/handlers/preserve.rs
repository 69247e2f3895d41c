//! Karmada's `failover.{application,cluster}.statePreservation` (from log entry version
//! `karmada::STATE_PRESERVATION_SINCE`): a stateful workload that fails over carries what its
//! failed copy's status said (a Flink job id) to its new copy, as labels.
//!
//! How:
//! - Values: executors evaluate the paths of the bound policy's rules on each live copy's
//!   `status` and report what changed (`StatusValues`); this keeps the last values per object
//!   and cluster, for the paths the policy still has, while the object is placed there and
//!   its policy has rules. A report does not move the object's resource version: values only
//!   matter once a failover reads them.
//! - Failover: when a placement decision moves the object off a cluster by a failover (the
//!   application failover's eviction of that cluster, or the cluster failing: not Ready, or
//!   carrying a NoExecute taint), the rules of that kind map the values last reported there
//!   to labels (`aliasLabelName` -> value) and the clusters the object ran on before are
//!   recorded. As in Karmada, only a failover that purges at once (`Immediately`/`Directly`)
//!   carries labels; any failover of the object replaces what an earlier one carried, so the
//!   last failover's labels are the ones used.
//! - Rendering: while the object runs on exactly one cluster and that cluster is not one it ran
//!   on before the failover, its copy carries the labels (Karmada injects them only then, too).
//!
//! Where fedraft differs: a path that names nothing (or no value was reported yet) gives no
//! label for that rule, and the failover happens anyway; Karmada's controller errors and
//! retries the eviction until it can read every path. The labels stay while the object stays
//! where the failover put it (Karmada drops them with its eviction task, once the new copy is
//! healthy); a later failover replaces them, deleting the template drops them.
//!
//! Must not: act on entries before `STATE_PRESERVATION_SINCE`, keep values for a cluster the
//! object left or an object that is gone, or make a report change what members are asked for.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::validate;
use crate::command::StatusValuesReport;
use crate::error::FieldError;
use crate::karmada::jsonpath::{JsonPath, MAX_PATH_BYTES};
use crate::karmada::{PreserveRule, PurgeMode, MAX_PRESERVE_RULES, STATE_PRESERVATION_SINCE};
use crate::model::{FederatedObject, Health, ObjectKey};
use crate::policy::TaintEffect;
use crate::state::{check_batch_len, Ctx, HandlerResult, State};

/// What one failover carried: the labels, and the clusters the object ran on before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Carried {
    pub labels: BTreeMap<String, String>,
    pub before: BTreeSet<String>,
}

/// The statePreservation tables (replicated; encoded after the lifecycle tables, hashed only
/// when non-empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preservations {
    /// Per object and cluster, the label value each path (canonical text) last gave there.
    pub values: BTreeMap<ObjectKey, BTreeMap<String, BTreeMap<String, String>>>,
    /// Per object, what its last failover carried.
    pub carried: BTreeMap<ObjectKey, Carried>,
}

impl Preservations {
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.carried.is_empty()
    }
}

impl State {
    /// The paths executors evaluate for `key` (the canonical texts reports name them by); None
    /// when its policy has no statePreservation rules.
    pub fn preserved_paths(&self, key: &ObjectKey) -> Option<Vec<JsonPath>> {
        let spec = self.bound_spec(key)?;
        let paths = spec.lifecycle.failover.preserved_paths();
        (!paths.is_empty()).then(|| paths.into_iter().cloned().collect())
    }

    /// The values last reported for `key` on `cluster`.
    pub fn status_values(
        &self,
        key: &ObjectKey,
        cluster: &str,
    ) -> Option<&BTreeMap<String, String>> {
        self.pres.values.get(key)?.get(cluster)
    }

    /// What the last failover of `key` carried, if it carried labels.
    pub fn carried(&self, key: &ObjectKey) -> Option<&Carried> {
        self.pres.carried.get(key)
    }

    pub(crate) fn on_status_values(
        &mut self,
        batch: &[StatusValuesReport],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if ctx.version < STATE_PRESERVATION_SINCE {
            return Err(FieldError::new(
                "reports",
                format!("status values need envelope version {STATE_PRESERVATION_SINCE}"),
            )
            .into());
        }
        check_batch_len(batch.len(), "reports")?;
        for (i, r) in batch.iter().enumerate() {
            let at = |what: &'static str| {
                move |e: FieldError| FieldError::new(format!("reports[{i}].{what}"), e.message)
            };
            validate::dns_label(&r.namespace, "").map_err(at("namespace"))?;
            validate::dns_label(&r.cluster, "").map_err(at("cluster"))?;
            if r.name.is_empty() || r.name.len() > 512 {
                return Err(FieldError::new(format!("reports[{i}].name"), "1 to 512 bytes").into());
            }
            if r.values.len() > 2 * MAX_PRESERVE_RULES {
                return Err(FieldError::new(
                    format!("reports[{i}].values"),
                    format!("more than {} values", 2 * MAX_PRESERVE_RULES),
                )
                .into());
            }
            for (path, value) in &r.values {
                if path.len() > MAX_PATH_BYTES + 16 {
                    return Err(FieldError::new(
                        format!("reports[{i}].values"),
                        "a path longer than any policy may give",
                    )
                    .into());
                }
                crate::policy::validate_label_value(value, &format!("reports[{i}].values"))?;
            }
        }
        for r in batch {
            // Facts about the past: from a node that no longer owns the cluster, about an
            // object gone, moved away or no longer preserving anything: skipped.
            if self.owners.in_force()
                && self
                    .owners
                    .owner(&r.cluster)
                    .is_none_or(|o| o.node != ctx.actor_id)
            {
                continue;
            }
            let key = ObjectKey::new(r.namespace.clone(), r.name.clone());
            let placed = self
                .object(&r.namespace, &r.name)
                .is_some_and(|o| o.replicas_on(&r.cluster) > 0);
            let Some(paths) = self.preserved_paths(&key).filter(|_| placed) else {
                continue;
            };
            let wanted: BTreeSet<String> = paths.iter().map(ToString::to_string).collect();
            let kept: BTreeMap<String, String> = r
                .values
                .iter()
                .filter(|(p, _)| wanted.contains(*p))
                .map(|(p, v)| (p.clone(), v.clone()))
                .collect();
            self.pres
                .values
                .entry(key)
                .or_default()
                .insert(r.cluster.clone(), kept);
        }
        Ok(None)
    }

    /// A placement decision moved `key` from `departed` (cluster, replicas before) to where it
    /// is now: a failover among the departures records what it carries; values of clusters it
    /// left are dropped.
    pub(super) fn preserve_placement_changed(
        &mut self,
        key: &ObjectKey,
        departed: &[(String, u32)],
        ctx: &Ctx,
    ) {
        if ctx.version < STATE_PRESERVATION_SINCE {
            return;
        }
        let Some(obj) = self.object(&key.namespace, &key.name) else {
            return;
        };
        let left: Vec<&str> = departed
            .iter()
            .map(|(c, _)| c.as_str())
            .filter(|c| obj.replicas_on(c) == 0)
            .collect();
        if left.is_empty() {
            return;
        }
        let failover = self
            .bound_spec(key)
            .map(|p| p.lifecycle.failover.clone())
            .unwrap_or_default();
        let app_evicted: Vec<&str> = left
            .iter()
            .copied()
            .filter(|c| self.app_evicted(key, c, ctx.now_ms))
            .collect();
        let failed: Vec<&str> = left
            .iter()
            .copied()
            .filter(|c| !app_evicted.contains(c) && self.cluster_failed(c))
            .collect();
        let mut carry: Option<BTreeMap<String, String>> = None;
        if !app_evicted.is_empty() {
            let purges = failover
                .application
                .is_some_and(|a| a.purge == PurgeMode::Immediately);
            let rules: &[PreserveRule] = if purges {
                &failover.application_preserve
            } else {
                &[]
            };
            carry = Some(self.labels_from(key, &app_evicted, rules));
        }
        if !failed.is_empty() {
            let purges = failover.cluster == Some(PurgeMode::Immediately);
            let rules: &[PreserveRule] = if purges {
                &failover.cluster_preserve
            } else {
                &[]
            };
            let labels = self.labels_from(key, &failed, rules);
            carry.get_or_insert_with(BTreeMap::new).extend(labels);
        }
        if let Some(labels) = carry {
            if labels.is_empty() {
                self.pres.carried.remove(key);
            } else {
                let before = departed.iter().map(|(c, _)| c.clone()).collect();
                self.pres
                    .carried
                    .insert(key.clone(), Carried { labels, before });
            }
        }
        if let Some(per) = self.pres.values.get_mut(key) {
            for c in &left {
                per.remove(*c);
            }
            if per.is_empty() {
                self.pres.values.remove(key);
            }
        }
    }

    /// A cluster failover's cause: the cluster is not Ready, or evicts with a NoExecute taint.
    fn cluster_failed(&self, cluster: &str) -> bool {
        self.d.clusters.get(cluster).is_none_or(|c| {
            c.status.health != Health::Ready
                || c.effective_taints
                    .iter()
                    .any(|t| t.effect == TaintEffect::NoExecute)
        })
    }

    /// The labels `rules` give from the values last reported on `from` (in name order, the
    /// first cluster that has a value wins).
    fn labels_from(
        &self,
        key: &ObjectKey,
        from: &[&str],
        rules: &[PreserveRule],
    ) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let Some(per) = self.pres.values.get(key) else {
            return out;
        };
        let mut from = from.to_vec();
        from.sort_unstable();
        for rule in rules {
            let path = rule.path.to_string();
            if let Some(v) = from.iter().find_map(|c| per.get(*c)?.get(&path)) {
                out.insert(rule.alias.clone(), v.clone());
            }
        }
        out
    }

    /// The object is gone: so is what was kept for it.
    pub(super) fn preserve_forget(&mut self, key: &ObjectKey) {
        self.pres.values.remove(key);
        self.pres.carried.remove(key);
    }

    /// Adds the carried labels to `manifest`, rendered for `cluster`, when they apply there.
    pub(super) fn stamp_preserved(
        &self,
        obj: &FederatedObject,
        cluster: &str,
        manifest: &mut Value,
    ) {
        if self.pres.carried.is_empty() {
            return;
        }
        let Some(carried) = self.pres.carried.get(&obj.key()) else {
            return;
        };
        let only_here =
            obj.status.clusters.len() == 1 && *obj.status.clusters[0].cluster == *cluster;
        if !only_here || carried.before.contains(cluster) {
            return;
        }
        let Some(meta) = manifest.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        let labels = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(labels) = labels.as_object_mut() {
            for (k, v) in &carried.labels {
                labels.insert(k.clone(), Value::from(v.as_str()));
            }
        }
    }
}
