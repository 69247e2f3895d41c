//! What a bound PropagationPolicy's lifecycle fields keep per object (`crate::karmada`'s
//! `lifecycle`), from log entry version `PEER_WIDENED_SINCE` on:
//! - `suspension`: per object and suspended cluster, the template that cluster keeps running.
//!   Rendering reads it first (`State::template_for`), so executors keep writing what the
//!   member holds while the object's template moves on; status reports keep coming. It is taken
//!   before a put of the template and after every policy write, and dropped (the object
//!   touched, so executors render again) once the policy stops suspending the cluster, the
//!   object leaves it, or the template is deleted. A cluster first placed while suspended gets
//!   the template of the moment: it held nothing to keep.
//! - `preserveResourcesOnDeletion`: the objects deleted under it. Executors release their
//!   member copies (take fedraft's labels off) instead of deleting them; a template put again
//!   under the same name takes them back.
//! - `schedulePriority`: the value of the named PriorityClass is the object's priority in the
//!   wait queue (`queue.rs`), kept in step with the policy and the class templates.
//! - application failover's timers, evictions and the copies kept with `purgeMode: Never`
//!   (`app_failover.rs`).
//!
//! Must not: act on entries before `PEER_WIDENED_SINCE`, or keep anything for an object that is
//! gone (except the released marks, which are what outlives it).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::door::{PolicyRef, ResourceKey};
use crate::karmada::{PolicySpec, PropagationSpec, BUILT_IN_PRIORITY_CLASSES, PEER_WIDENED_SINCE};
use crate::model::ObjectKey;
use crate::state::{Ctx, RejectCode, Rejection, State};

/// The template a suspended cluster keeps running, and its rollout revision if it had one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub template: String,
    pub revision: Option<u32>,
}

/// The lifecycle tables (replicated; encoded after the descheduler's tables, hashed only when
/// non-empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycles {
    /// Per object, the suspended clusters and what they keep running.
    pub suspended: BTreeMap<ObjectKey, BTreeMap<String, Held>>,
    /// Objects deleted with `preserveResourcesOnDeletion`: their member copies are released.
    pub released: BTreeSet<ObjectKey>,
    /// (log time, object, cluster): when a workload unhealthy there may be moved away.
    pub unhealthy_due: BTreeSet<(u64, ObjectKey, String)>,
    /// Per object, the clusters application failover moved it away from, and the log time
    /// until which the scheduler spares them.
    pub evicted: BTreeMap<ObjectKey, BTreeMap<String, u64>>,
    /// Per object, the replicas kept where it was moved away from with `purgeMode: Never`.
    pub kept: BTreeMap<ObjectKey, BTreeMap<String, u32>>,
}

impl Lifecycles {
    pub fn is_empty(&self) -> bool {
        self.suspended.is_empty()
            && self.released.is_empty()
            && self.unhealthy_due.is_empty()
            && self.evicted.is_empty()
            && self.kept.is_empty()
    }
}

/// What the tables hold for one object that a put may change, to put back if it is refused.
pub(super) struct LifecyclePart {
    suspended: Option<BTreeMap<String, Held>>,
    released: bool,
}

/// The group and kind of Kubernetes' PriorityClass templates.
const PRIORITY_CLASS_GROUP: &str = "scheduling.k8s.io";
const PRIORITY_CLASS_KIND: &str = "PriorityClass";

impl State {
    /// Objects whose member copies are released rather than deleted (their keys as the
    /// `fedraft.io/object` annotation writes them).
    pub fn released(&self) -> &BTreeSet<ObjectKey> {
        &self.life.released
    }

    pub(super) fn lifecycle_part(&self, object: &ObjectKey) -> LifecyclePart {
        LifecyclePart {
            suspended: self.life.suspended.get(object).cloned(),
            released: self.life.released.contains(object),
        }
    }

    pub(super) fn restore_lifecycle_part(&mut self, object: &ObjectKey, part: LifecyclePart) {
        match part.suspended {
            Some(s) => self.life.suspended.insert(object.clone(), s),
            None => self.life.suspended.remove(object),
        };
        if part.released {
            self.life.released.insert(object.clone());
        }
    }

    /// The object's priority in the wait queue (0 when it has none).
    pub fn wait_priority(&self, key: &ObjectKey) -> i64 {
        self.ext.priorities.get(key).copied().unwrap_or(0)
    }

    /// The propagation spec the door template whose object is `key` is bound to, if any.
    pub(super) fn bound_spec(&self, key: &ObjectKey) -> Option<&PropagationSpec> {
        let (_, record) = self.template_of(key)?;
        self.propagation_spec(record.bound_to.as_ref()?)
    }

    pub(super) fn propagation_spec(&self, policy: &PolicyRef) -> Option<&PropagationSpec> {
        match self.door_ix.get(policy)? {
            PolicySpec::Propagation(p) => Some(p),
            PolicySpec::Override(_) => None,
        }
    }

    /// The template `cluster` keeps running while its dispatching is suspended.
    pub(super) fn suspended_template(&self, key: &ObjectKey, cluster: &str) -> Option<&Held> {
        if self.life.suspended.is_empty() {
            return None;
        }
        self.life.suspended.get(key)?.get(cluster)
    }

    /// Before a put of the template whose object is `object`, bound to `policy`: the clusters
    /// the policy suspends keep what they run now.
    pub(super) fn suspend_before_put(
        &mut self,
        object: &ObjectKey,
        policy: Option<&PolicyRef>,
        ctx: &Ctx,
    ) {
        if ctx.version < PEER_WIDENED_SINCE {
            return;
        }
        // A put under the same name takes released copies back.
        self.life.released.remove(object);
        let Some(suspension) = policy
            .and_then(|p| self.propagation_spec(p))
            .map(|p| p.lifecycle.suspension.clone())
            .filter(|s| !s.is_none())
        else {
            return;
        };
        let Some(obj) = self.object(&object.namespace, &object.name) else {
            return;
        };
        let mut take = Vec::new();
        for p in &obj.status.clusters {
            if !suspension.holds(&p.cluster)
                || self.suspended_template(object, &p.cluster).is_some()
            {
                continue;
            }
            let (template, revision) = self.template_for(obj, &p.cluster);
            take.push((
                String::from(&*p.cluster),
                Held {
                    template: template.to_string(),
                    revision,
                },
            ));
        }
        if !take.is_empty() {
            self.life
                .suspended
                .entry(object.clone())
                .or_default()
                .extend(take);
        }
    }

    /// After a policy write: every template's suspended clusters follow its policy, and its
    /// wait-queue priority follows the policy's priority class.
    pub(super) fn lifecycles_follow_policies(&mut self, ctx: &mut Ctx) {
        if ctx.version < PEER_WIDENED_SINCE {
            return;
        }
        let bound: Vec<(ObjectKey, Option<PolicyRef>)> = self
            .door
            .templates
            .iter()
            .map(|(k, r)| {
                (
                    ObjectKey::new(k.object_namespace(), k.object_name()),
                    r.bound_to.clone(),
                )
            })
            .collect();
        for (object, policy) in bound {
            self.suspend_before_put(&object, policy.as_ref(), ctx);
            self.resume_released_clusters(&object, policy.as_ref(), ctx);
            self.priority_follows_policy(&object, policy.as_ref());
        }
    }

    /// Drops the holds of clusters the policy no longer suspends or the object left.
    fn resume_released_clusters(
        &mut self,
        object: &ObjectKey,
        policy: Option<&PolicyRef>,
        ctx: &mut Ctx,
    ) {
        let Some(held) = self.life.suspended.get(object) else {
            return;
        };
        let suspension = policy
            .and_then(|p| self.propagation_spec(p))
            .map(|p| p.lifecycle.suspension.clone())
            .unwrap_or_default();
        let obj = self.object(&object.namespace, &object.name);
        let resumed: Vec<String> = held
            .keys()
            .filter(|c| !suspension.holds(c) || obj.is_none_or(|o| o.replicas_on(c) == 0))
            .cloned()
            .collect();
        if resumed.is_empty() {
            return;
        }
        if let Some(per) = self.life.suspended.get_mut(object) {
            for c in &resumed {
                per.remove(c);
            }
            if per.is_empty() {
                self.life.suspended.remove(object);
            }
        }
        self.touch_object(object, ctx);
    }

    /// The template whose object is `object` was deleted: under `preserveResourcesOnDeletion`
    /// its member copies are to be released.
    pub(super) fn lifecycle_template_deleted(
        &mut self,
        object: &ObjectKey,
        policy: Option<&PolicyRef>,
        ctx: &Ctx,
    ) {
        if ctx.version < PEER_WIDENED_SINCE {
            return;
        }
        let preserve = policy
            .and_then(|p| self.propagation_spec(p))
            .is_some_and(|p| p.lifecycle.preserve_on_deletion);
        if preserve {
            self.life.released.insert(object.clone());
        }
    }

    /// The object is gone: so is what the tables kept of it (the released mark stays).
    pub(super) fn lifecycle_forget(&mut self, object: &ObjectKey) {
        if self.life.is_empty() {
            return;
        }
        self.life.suspended.remove(object);
        self.life.kept.remove(object);
        self.life.evicted.remove(object);
        self.life.unhealthy_due.retain(|(_, k, _)| k != object);
    }

    /// The value of the priority class `name`: a PriorityClass template's `value`, or a
    /// built-in class's.
    pub(super) fn priority_class_value(&self, name: &str) -> Option<i64> {
        let key = ResourceKey {
            group: PRIORITY_CLASS_GROUP.to_string(),
            kind: PRIORITY_CLASS_KIND.to_string(),
            namespace: String::new(),
            name: name.to_string(),
        };
        if self.door.templates.contains_key(&key) {
            let obj = self.object(key.object_namespace(), &key.object_name())?;
            let doc: Value = serde_json::from_str(&obj.spec.template).ok()?;
            return doc.get("value").and_then(Value::as_i64);
        }
        BUILT_IN_PRIORITY_CLASSES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// Refuses a propagation policy naming a priority class that neither a PriorityClass
    /// template nor Kubernetes' built-in ones define.
    pub(super) fn check_priority_class(&self, spec: &PolicySpec) -> Result<(), Rejection> {
        let PolicySpec::Propagation(p) = spec else {
            return Ok(());
        };
        let Some(name) = &p.lifecycle.priority_class else {
            return Ok(());
        };
        if self.priority_class_value(name).is_some() {
            return Ok(());
        }
        Err(Rejection::new(
            RejectCode::Invalid,
            Some("spec.schedulePriority.priorityClassName"),
            format!(
                "no PriorityClass {name:?}: apply a scheduling.k8s.io/v1 PriorityClass of that \
                 name first, or name system-cluster-critical or system-node-critical"
            ),
        ))
    }

    /// The object's wait-queue priority: its policy's priority class when it names one, else
    /// the template's own annotation (as the put set it).
    fn priority_follows_policy(&mut self, object: &ObjectKey, policy: Option<&PolicyRef>) {
        let class = policy
            .and_then(|p| self.propagation_spec(p))
            .and_then(|p| p.lifecycle.priority_class.clone());
        let Some(obj) = self.object(&object.namespace, &object.name) else {
            return;
        };
        let priority = match class {
            Some(name) => self.priority_class_value(&name).unwrap_or(0),
            None => super::queue::template_priority(&obj.spec.template),
        };
        match priority {
            0 => self.ext.priorities.remove(object),
            p => self.ext.priorities.insert(object.clone(), p),
        };
    }

    /// After a put of the template `key` (object `object`, bound to `policy`): its priority
    /// follows its policy; a PriorityClass template's change reaches every template whose
    /// policy names it.
    pub(super) fn lifecycle_after_put(
        &mut self,
        key: &ResourceKey,
        object: &ObjectKey,
        policy: Option<&PolicyRef>,
        ctx: &mut Ctx,
    ) {
        if ctx.version < PEER_WIDENED_SINCE {
            return;
        }
        self.priority_follows_policy(object, policy);
        self.resume_released_clusters(object, policy, ctx);
        if key.group == PRIORITY_CLASS_GROUP && key.kind == PRIORITY_CLASS_KIND {
            self.priorities_follow_classes();
        }
    }

    /// Every template whose policy names a priority class takes its current value.
    pub(super) fn priorities_follow_classes(&mut self) {
        if !self.door_ix.values().any(
            |s| matches!(s, PolicySpec::Propagation(p) if p.lifecycle.priority_class.is_some()),
        ) {
            return;
        }
        let bound: Vec<(ObjectKey, Option<PolicyRef>)> = self
            .door
            .templates
            .iter()
            .filter(|(_, r)| r.bound_to.is_some())
            .map(|(k, r)| {
                (
                    ObjectKey::new(k.object_namespace(), k.object_name()),
                    r.bound_to.clone(),
                )
            })
            .collect();
        for (object, policy) in bound {
            self.priority_follows_policy(&object, policy.as_ref());
        }
    }
}
