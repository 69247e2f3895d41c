//! Karmada's `ClusterTaintPolicy` in the log (`crate::karmada::TAINT_POLICIES_SINCE`): the
//! documents (kept in the door's policy table), the conditions status writes give clusters
//! (`ClusterConditions`), and the taints the policies added, each with the policy and the
//! condition that added it, so that explanations can say why a cluster is tainted.
//!
//! Evaluation is Karmada's controller's, made deterministic: whenever a cluster's conditions
//! change (a status write, or fedraft's own `Ready` turning, or its registration), its labels
//! change (from `TAINT_POLICIES_ON_LABELS_SINCE`: a policy's target may select it now) or a
//! policy is written, every policy that targets the cluster is applied to it in creation order
//! (then by name): its taints are added when its `addOnConditions` hold, then removed when its
//! `removeOnConditions` hold. A taint stays between the two (hysteresis). Deleting a policy
//! leaves the taints it added, as Karmada does; another policy's removal of the same key and
//! effect, or deregistering the cluster, takes them off. Taints a policy added never replace the
//! cluster's own (`spec.taints`): both are in `Cluster::effective_taints`, which the scheduler
//! reads, so NoSchedule keeps new replicas away and NoExecute moves what does not tolerate it.
//!
//! Must not: evaluate in an entry older than [`TAINT_POLICIES_SINCE`] (a version-13 entry
//! applies as it did), or let a status write set `Ready` (fedraft derives it from probes).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::door::{Identity, PolicyWrite};
use super::validate;
use crate::admission::Actor;
use crate::door::{PolicyKindTag, PolicyRef};
use crate::error::FieldError;
use crate::karmada::{
    conditions_hold, parse_taint_policy, ClusterCondition, TaintPolicySpec, CONDITION_STATUSES,
    MAX_CONDITIONS, READY_CONDITION, TAINT_POLICIES_ON_LABELS_SINCE, TAINT_POLICIES_SINCE,
    TAINT_POLICY_KIND,
};
use crate::model::Health;
use crate::policy::{validate_label_key, Taint, TaintEffect};
use crate::state::{Ctx, HandlerResult, RejectCode, Rejection, State};

const MAX_REASON_BYTES: usize = 1024;
const MAX_MESSAGE_BYTES: usize = 32 * 1024;

/// A condition a status write gave a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionRecord {
    pub status: String,
    pub reason: String,
    pub message: String,
    /// Log time at which `status` took its value (the condition's lastTransitionTime).
    pub since_ms: u64,
}

/// A taint a policy added to a cluster: what explanations and the audit show of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddedTaint {
    pub value: String,
    /// The policy that added it (it may have been deleted since).
    pub policy: String,
    /// The conditions that held: `KubeComponentsHealthy NotIn [True]`.
    pub condition: String,
    pub added_ms: u64,
}

/// The replicated tables, encoded after the lifecycle tables (snapshot version 11).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaintTables {
    /// Cluster -> condition type -> condition, as the last status write gave them.
    pub conditions: BTreeMap<String, BTreeMap<String, ConditionRecord>>,
    /// Cluster -> (taint key, effect) -> the taint a policy added.
    pub added: BTreeMap<String, BTreeMap<(String, TaintEffect), AddedTaint>>,
}

/// The first key of the policy table's `ClusterTaintPolicy` range (its tag sorts last).
fn first_key() -> PolicyRef {
    PolicyRef {
        kind: PolicyKindTag::ClusterTaint,
        namespace: String::new(),
        name: String::new(),
    }
}

/// Whether a door write of `group` and `kind` in an entry of `version` is a taint policy's.
pub(super) fn is_taint_policy(version: u16, group: &str, kind: &str) -> bool {
    version >= TAINT_POLICIES_SINCE && group == crate::karmada::GROUP && kind == TAINT_POLICY_KIND
}

fn forbid_tenant(actor: &Actor, what: &str) -> Result<(), Rejection> {
    if matches!(actor, Actor::Tenant { .. }) {
        return Err(Rejection::new(
            RejectCode::Forbidden,
            Some("kind"),
            format!("a tenant member may not write {what}: it changes member clusters"),
        ));
    }
    Ok(())
}

impl State {
    /// The taints policies added to `cluster`, in key order.
    pub(crate) fn policy_taint_list(&self, cluster: &str) -> Vec<Taint> {
        self.taints
            .added
            .get(cluster)
            .map(|m| {
                m.iter()
                    .map(|((key, effect), a)| Taint {
                        key: key.clone(),
                        value: a.value.clone(),
                        effect: *effect,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The taints policies added to `cluster`, each with where it came from.
    pub fn policy_taints(&self, cluster: &str) -> Vec<(Taint, AddedTaint)> {
        let list = self.policy_taint_list(cluster);
        let added = self.taints.added.get(cluster);
        list.into_iter()
            .filter_map(|t| {
                let a = added?.get(&(t.key.clone(), t.effect))?.clone();
                Some((t, a))
            })
            .collect()
    }

    /// The conditions status writes gave `cluster` (without fedraft's own `Ready`).
    pub fn cluster_conditions(&self, cluster: &str) -> Option<&BTreeMap<String, ConditionRecord>> {
        self.taints.conditions.get(cluster)
    }

    /// Every condition a policy can match on `cluster`: those status writes gave it, and
    /// `Ready` from its health.
    fn condition_statuses(&self, cluster: &str, health: Health) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = self
            .taints
            .conditions
            .get(cluster)
            .map(|m| {
                m.iter()
                    .map(|(k, c)| (k.clone(), c.status.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let ready = match health {
            Health::Ready => "True",
            Health::NotReady => "False",
            Health::Unknown => "Unknown",
        };
        out.insert(READY_CONDITION.to_string(), ready.to_string());
        out
    }

    fn has_taint_policies(&self) -> bool {
        self.door.policies.range(first_key()..).next().is_some()
    }

    /// The stored taint policies, parsed, in the order Karmada applies them: creation, then
    /// name.
    fn taint_policies(&self) -> Vec<(String, TaintPolicySpec)> {
        let mut out: Vec<(u64, String, TaintPolicySpec)> = self
            .door
            .policies
            .range(first_key()..)
            .filter_map(|(key, rec)| {
                // Stored only once they parsed; a document that no longer does takes no part.
                let doc: Value = serde_json::from_str(&rec.manifest).ok()?;
                let spec = parse_taint_policy(&doc).ok()?;
                Some((rec.created_index, key.name.clone(), spec))
            })
            .collect();
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out.into_iter().map(|(_, n, s)| (n, s)).collect()
    }

    /// A cluster's conditions may have changed (its health turned, or it registered): the
    /// policies look at it again. Nothing in an older entry or without policies.
    pub(crate) fn taint_conditions_changed(&mut self, cluster: &str, ctx: &mut Ctx) {
        if ctx.version >= TAINT_POLICIES_SINCE && self.has_taint_policies() {
            self.review_cluster_taints(cluster, ctx);
        }
    }

    /// A cluster's labels changed: a policy's target may select it now. Nothing in an entry
    /// before [`TAINT_POLICIES_ON_LABELS_SINCE`] or without policies.
    pub(crate) fn taint_labels_changed(&mut self, cluster: &str, ctx: &mut Ctx) {
        if ctx.version >= TAINT_POLICIES_ON_LABELS_SINCE && self.has_taint_policies() {
            self.review_cluster_taints(cluster, ctx);
        }
    }

    /// Applies every taint policy to `cluster`, then re-places what its new taints concern.
    fn review_cluster_taints(&mut self, cluster: &str, ctx: &mut Ctx) {
        let Some(c) = self.d.clusters.get(cluster) else {
            return;
        };
        let labels = c.spec.labels.clone();
        let conditions = self.condition_statuses(cluster, c.status.health);
        let before = self.taints.added.get(cluster).cloned().unwrap_or_default();
        let mut added = before.clone();
        for (policy, spec) in self.taint_policies() {
            if spec
                .target
                .as_ref()
                .is_some_and(|t| !t.selects(cluster, &labels))
            {
                continue;
            }
            if let Some(condition) = conditions_hold(&spec.add_on, &conditions) {
                for t in &spec.taints {
                    added
                        .entry((t.key.clone(), t.effect))
                        .or_insert_with(|| AddedTaint {
                            value: t.value.clone(),
                            policy: policy.clone(),
                            condition: condition.clone(),
                            added_ms: ctx.now_ms,
                        });
                }
            }
            if conditions_hold(&spec.remove_on, &conditions).is_some() {
                for t in &spec.taints {
                    added.remove(&(t.key.clone(), t.effect));
                }
            }
        }
        if added == before {
            return;
        }
        let lifted = before.keys().any(|k| !added.contains_key(k));
        let imposed = added.keys().any(|k| !before.contains_key(k));
        if added.is_empty() {
            self.taints.added.remove(cluster);
        } else {
            self.taints.added.insert(cluster.to_string(), added);
        }
        self.retaint(cluster, ctx);
        if imposed {
            // NoExecute moves what does not tolerate it; NoSchedule keeps what runs there.
            self.cluster_evicts(cluster, ctx);
        }
        if lifted {
            self.cluster_gained(cluster, ctx);
        }
    }

    /// Recomputes the taints the scheduler sees on `cluster`.
    fn retaint(&mut self, cluster: &str, ctx: &mut Ctx) {
        let extra = self.policy_taint_list(cluster);
        self.update_cluster(cluster, ctx, |c| {
            c.effective_taints = super::clusters::effective_taints(&c.spec, c.drained, &extra);
        });
    }

    /// A deregistered cluster's conditions and policy taints go with it.
    pub(crate) fn forget_cluster_taints(&mut self, cluster: &str) {
        self.taints.conditions.remove(cluster);
        self.taints.added.remove(cluster);
    }

    pub(crate) fn put_taint_policy(
        &mut self,
        doc: Value,
        id: Identity,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        let spec = parse_taint_policy(&doc)?;
        if !id.namespace.is_empty() {
            return Err(FieldError::new(
                "metadata.namespace",
                "a ClusterTaintPolicy is cluster-scoped; leave namespace out",
            )
            .into());
        }
        validate::dns_subdomain(&id.name, "metadata.name")?;
        forbid_tenant(&ctx.actor, "a ClusterTaintPolicy")?;
        // One owner per taint, as Karmada's webhook has it: two policies adding and removing the
        // same taint on different conditions would undo each other.
        for (other, other_spec) in self.taint_policies() {
            if other == id.name {
                continue;
            }
            for (i, t) in spec.taints.iter().enumerate() {
                if other_spec
                    .taints
                    .iter()
                    .any(|o| o.key == t.key && o.effect == t.effect)
                {
                    return Err(Rejection::new(
                        RejectCode::FailedPrecondition,
                        Some(&format!("spec.taints[{i}]")),
                        format!(
                            "taint {}:{} is already managed by ClusterTaintPolicy {other:?}",
                            t.key,
                            t.effect.as_str()
                        ),
                    ));
                }
            }
        }
        let key = PolicyRef {
            kind: PolicyKindTag::ClusterTaint,
            namespace: String::new(),
            name: id.name,
        };
        let changed = |old: &Value, new: &Value| old.get("spec") != new.get("spec");
        let (record, previous) = match self.policy_write(&key, expected, &doc, changed, ctx)? {
            PolicyWrite::Unchanged(version) => return Ok(version),
            PolicyWrite::Store { record, previous } => (record, previous),
        };
        self.door.policies.insert(key.clone(), record);
        self.policy_changed(&key, previous.is_some(), ctx);
        let targeted: Vec<String> = self
            .d
            .clusters
            .iter()
            .filter(|(name, c)| {
                spec.target
                    .as_ref()
                    .is_none_or(|t| t.selects(name, &c.spec.labels))
            })
            .map(|(name, _)| name.to_string())
            .collect();
        for cluster in targeted {
            self.review_cluster_taints(&cluster, ctx);
        }
        Ok(Some(ctx.index))
    }

    /// Deletes the document; the taints it added stay, as in Karmada.
    pub(crate) fn delete_taint_policy(
        &mut self,
        name: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        forbid_tenant(&ctx.actor, "a ClusterTaintPolicy")?;
        let key = PolicyRef {
            kind: PolicyKindTag::ClusterTaint,
            namespace: String::new(),
            name: name.to_string(),
        };
        let Some(record) = self.door.policies.get(&key) else {
            return Err(Rejection::not_found(
                "metadata.name",
                format!("ClusterTaintPolicy {name}"),
            ));
        };
        super::clusters::check_version(expected, Some(record.resource_version))?;
        self.door.policies.remove(&key);
        self.policy_changed(&key, true, ctx);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_cluster_conditions(
        &mut self,
        cluster: &str,
        conditions: &[ClusterCondition],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if ctx.version < TAINT_POLICIES_SINCE {
            return Err(Rejection::new(
                RejectCode::Invalid,
                None,
                format!("ClusterConditions needs log entry version {TAINT_POLICIES_SINCE}"),
            ));
        }
        forbid_tenant(&ctx.actor, "a cluster's conditions")?;
        validate::dns_label(cluster, "metadata.name")?;
        let Some(c) = self.d.clusters.get(cluster) else {
            return Err(Rejection::not_found(
                "metadata.name",
                format!("cluster {cluster:?}"),
            ));
        };
        let version = c.resource_version;
        if conditions.len() > MAX_CONDITIONS {
            return Err(FieldError::new(
                "status.conditions",
                format!("{} conditions; at most {MAX_CONDITIONS}", conditions.len()),
            )
            .into());
        }
        let old = self.taints.conditions.get(cluster);
        let mut next = BTreeMap::new();
        for (i, cond) in conditions.iter().enumerate() {
            let f = format!("status.conditions[{i}]");
            validate_label_key(&cond.condition_type, &format!("{f}.type"))?;
            if cond.condition_type == READY_CONDITION {
                return Err(FieldError::new(
                    format!("{f}.type"),
                    "Ready is fedraft's own, derived from its health probes; it cannot be written",
                )
                .into());
            }
            if !CONDITION_STATUSES.contains(&cond.status.as_str()) {
                return Err(FieldError::new(
                    format!("{f}.status"),
                    format!("{:?}: must be True, False or Unknown", cond.status),
                )
                .into());
            }
            for (field, text, max) in [
                ("reason", &cond.reason, MAX_REASON_BYTES),
                ("message", &cond.message, MAX_MESSAGE_BYTES),
            ] {
                if text.len() > max {
                    return Err(FieldError::new(
                        format!("{f}.{field}"),
                        format!("over {max} bytes"),
                    )
                    .into());
                }
            }
            let since_ms = old
                .and_then(|o| o.get(&cond.condition_type))
                .filter(|o| o.status == cond.status)
                .map_or(ctx.now_ms, |o| o.since_ms);
            let record = ConditionRecord {
                status: cond.status.clone(),
                reason: cond.reason.clone(),
                message: cond.message.clone(),
                since_ms,
            };
            if next.insert(cond.condition_type.clone(), record).is_some() {
                return Err(FieldError::new(
                    format!("{f}.type"),
                    format!("{:?} is listed twice", cond.condition_type),
                )
                .into());
            }
        }
        if old.map_or(next.is_empty(), |o| *o == next) {
            return Ok(Some(version));
        }
        if next.is_empty() {
            self.taints.conditions.remove(cluster);
        } else {
            self.taints.conditions.insert(cluster.to_string(), next);
        }
        self.update_cluster(cluster, ctx, |_| {});
        self.review_cluster_taints(cluster, ctx);
        Ok(Some(ctx.index))
    }
}
