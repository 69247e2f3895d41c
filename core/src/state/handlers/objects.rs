//! Object intents: put, delete, revoke placement.
//!
//! Put = create or replace, with optional compare-and-swap on the resource version
//! (`Some(0)`: must not exist). Validation covers the actor's rights, names, the template (JSON
//! object with apiVersion, kind, metadata.name, at most 1 MiB), placement, overrides, admission
//! (`admission.rs`: kinds, rendered identity, render limits, tenant limits) and the owning
//! tenant's quota; only then does anything change. An unchanged spec is a no-op before
//! admission runs, so re-putting an object admitted under an older policy changes nothing. A put reschedules only when the placement
//! spec or the template's replicas/requests changed; a template-only edit keeps the placement
//! and just re-renders. Revoke forgets the placement and schedules from scratch.

use std::borrow::Cow;

use super::validate::{self, TemplateFacts};
use crate::command::{EXACT_REPORTS_SINCE, PODLESS_SINCE};
use crate::error::FieldError;
use crate::model::{FederatedObject, ObjectKey, ObjectSpec, ObjectStatus};
use crate::policy::{
    validate_label_key, Extended, ReplicaMode, Resources, CLUSTER_NAME_KEY, CLUSTER_NAME_KEY_SINCE,
    EXTENDED_SINCE, PER_CLUSTER_QUOTA_SINCE,
};
use crate::state::store::index;
use crate::state::{ChangeKind, ChangeOp, Ctx, HandlerResult, Rejection, State};

fn validate_names(namespace: &str, name: &str) -> Result<(), Rejection> {
    validate::dns_label(namespace, "metadata.namespace")?;
    validate::dns_subdomain(name, "metadata.name")?;
    Ok(())
}

/// Before [`CLUSTER_NAME_KEY_SINCE`] the key was refused as no valid label key; an older entry
/// that used it replays refused, with the error it got then.
fn refuse_cluster_name_key(spec: &ObjectSpec) -> Result<(), Rejection> {
    let field = spec
        .placement
        .cluster_name_key_field("spec.placement")
        .or_else(|| {
            spec.overrides
                .iter()
                .enumerate()
                .find_map(|(i, o)| o.cluster_name_key_field(&format!("spec.overrides[{i}]")))
        });
    match field {
        Some(field) => Err(validate_label_key(CLUSTER_NAME_KEY, &field)
            .err()
            .unwrap_or_else(|| FieldError::new(field, "invalid label key"))
            .into()),
        None => Ok(()),
    }
}

fn validate_spec(spec: &ObjectSpec) -> Result<TemplateFacts, Rejection> {
    let facts = validate::template(&spec.template, "spec.template")?;
    spec.placement.validate("spec.placement")?;
    for (i, o) in spec.overrides.iter().enumerate() {
        o.validate(&format!("spec.overrides[{i}]"))?;
    }
    Ok(facts)
}

/// The spec as it is stored: a `ByKind` replica mode decided by the template, so everything
/// after the put (scheduler, executors, a later compare) sees `Duplicated` or `Divided` only.
pub(crate) fn resolve_replica_mode(
    spec: &ObjectSpec,
    carries_replicas: bool,
) -> Cow<'_, ObjectSpec> {
    if spec.placement.replicas.mode != ReplicaMode::ByKind {
        return Cow::Borrowed(spec);
    }
    let mut resolved = spec.clone();
    resolved.placement.replicas = spec.placement.replicas.resolved(carries_replicas);
    Cow::Owned(resolved)
}

impl State {
    pub(crate) fn on_put_object(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate_names(namespace, name)?;
        self.put_object(namespace, name, spec, expected, ctx)
    }

    /// A put whose names are already checked: rights, spec, admission, quota, then the change.
    /// The door puts its templates through here under names of its own.
    pub(crate) fn put_object(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.check_rights(namespace, &ctx.actor)?;
        let facts = validate_spec(spec)?;
        if ctx.version < CLUSTER_NAME_KEY_SINCE {
            refuse_cluster_name_key(spec)?;
        }
        let mut info = facts.info;
        // A ConfigMap or a Service runs nothing: it took a pod slot of every cluster it went to,
        // and at a few hundred of them per cluster the workloads found no room.
        if ctx.version >= PODLESS_SINCE && !facts.runs_pods {
            info.per_replica = Resources::ZERO;
        }
        // Extended requests count from their version on; older templates asked for none.
        let per_ext = if ctx.version >= EXTENDED_SINCE {
            super::extended::template_extended(&spec.template)?
        } else {
            Extended::new()
        };
        let spec = &*resolve_replica_mode(spec, facts.carries_replicas);
        let existing = self.object(namespace, name);
        super::clusters::check_version(expected, existing.map(|o| o.resource_version))?;
        if existing.is_some_and(|o| o.spec == *spec) {
            return Ok(existing.map(|o| o.resource_version));
        }
        self.admit_object(namespace, spec, existing, (ctx.version, &ctx.actor))?;
        if !per_ext.is_empty() {
            let candidate = FederatedObject {
                namespace: namespace.to_string(),
                name: name.to_string(),
                spec: spec.clone(),
                template_info: info,
                status: existing.map(|o| o.status.clone()).unwrap_or_default(),
                resource_version: 0,
            };
            self.check_extended_quota(&candidate, &per_ext, ctx.at())?;
        }
        let old_need = existing.map(|o| {
            o.template_info
                .per_replica
                .saturating_mul(u64::from(o.template_info.replicas))
        });
        let new_need = info.per_replica.saturating_mul(u64::from(info.replicas));
        if ctx.version >= PER_CLUSTER_QUOTA_SINCE {
            // Duplicated copies count once per cluster they run in (`cluster_quota`).
            self.check_quota_counting_copies(namespace, name, spec, info, &per_ext, ctx.at())?;
        } else {
            self.check_quota(namespace, old_need.unwrap_or_default(), new_need)?;
        }

        // Validated: from here on the put happens.
        let key = ObjectKey::new(namespace, name);
        let ext_changed = self.ext.objects.get(&key).unwrap_or(&Extended::new()) != &per_ext;
        let reschedule = match existing {
            Some(o) if o.spec == *spec => return Ok(Some(o.resource_version)),
            Some(o) => o.spec.placement != spec.placement || o.template_info != info || ext_changed,
            None => true,
        };
        if ext_changed {
            self.set_object_extended(&key, per_ext);
        }
        if ctx.version >= EXTENDED_SINCE {
            match super::queue::template_priority(&spec.template) {
                0 => self.ext.priorities.remove(&key),
                p => self.ext.priorities.insert(key.clone(), p),
            };
        }
        if let Some(obj) = self.d.objects.get_mut(namespace, name) {
            // The indexes depend on placement, sizing and status only: a template-only edit
            // leaves them alone, and a resize touches only the bookings.
            let before = index::flags(obj);
            if reschedule {
                if obj.template_info.per_replica != info.per_replica {
                    let placed = obj
                        .status
                        .clusters
                        .iter()
                        .map(|p| (&*p.cluster, p.replicas));
                    self.ix.move_placement(
                        &key,
                        obj.spec.placement.named_clusters(),
                        obj.template_info.per_replica,
                        placed.clone(),
                        info.per_replica,
                        placed,
                    );
                }
                self.ix.move_cluster_list(
                    &key,
                    &obj.spec.placement.clusters,
                    &spec.placement.clusters,
                );
            }
            let old_len = obj.spec.template.len();
            // A new spec is on no member yet (`reports.rs`).
            if ctx.version >= EXACT_REPORTS_SINCE {
                for p in &mut obj.status.clusters {
                    p.applied = false;
                }
            }
            obj.spec = spec.clone();
            obj.template_info = info;
            self.ix
                .template_resized(namespace, old_len, spec.template.len());
            obj.resource_version = ctx.index;
            if reschedule {
                self.ix.refresh_flags(&key, before, obj);
            }
            ctx.change(ChangeKind::Object, key.path(), ChangeOp::Modified);
        } else {
            let obj = FederatedObject {
                namespace: namespace.to_string(),
                name: name.to_string(),
                spec: spec.clone(),
                template_info: info,
                status: ObjectStatus::default(),
                resource_version: ctx.index,
            };
            self.ix.add_object(&obj);
            self.d.objects.insert(obj);
            ctx.change(ChangeKind::Object, key.path(), ChangeOp::Added);
        }
        self.book_quota(namespace, old_need.unwrap_or_default(), new_need);
        if reschedule {
            self.reschedule(&key, false, ctx);
        }
        self.rollout_after_put(&key, ctx);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_delete_object(
        &mut self,
        namespace: &str,
        name: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate_names(namespace, name)?;
        self.delete_object(namespace, name, expected, ctx)
    }

    /// A delete whose names are already checked.
    pub(crate) fn delete_object(
        &mut self,
        namespace: &str,
        name: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.check_rights(namespace, &ctx.actor)?;
        let Some(existing) = self.object(namespace, name) else {
            return Err(Rejection::not_found(
                "metadata.name",
                format!("object {namespace}/{name}"),
            ));
        };
        super::clusters::check_version(expected, Some(existing.resource_version))?;
        let Some(obj) = self.d.objects.remove(namespace, name) else {
            return Ok(None);
        };
        self.gone.push(ctx.index, obj.clone());
        self.ix.remove_object(&obj);
        self.set_object_extended(&obj.key(), crate::policy::Extended::new());
        self.ext.priorities.remove(&obj.key());
        self.ext.waiting.remove(&obj.key());
        self.lifecycle_forget(&obj.key());
        self.preserve_forget(&obj.key());
        // What it held is free: the objects waiting for those clusters are queued, fairly.
        if ctx.version >= EXTENDED_SINCE {
            let freed: Vec<String> = obj
                .status
                .clusters
                .iter()
                .map(|p| String::from(&*p.cluster))
                .collect();
            self.enqueue_waiting_fairly(&freed);
        }
        let need = obj
            .template_info
            .per_replica
            .saturating_mul(u64::from(obj.template_info.replicas));
        self.book_quota(namespace, need, crate::policy::Resources::ZERO);
        // A queued reschedule or failover timer for it is skipped when it comes up.
        let key = obj.key();
        if self.ix.pending_set.remove(&key) {
            self.d.pending.retain(|k| *k != key);
        }
        self.rollouts_forget(&key);
        ctx.change(ChangeKind::Object, key.path(), ChangeOp::Deleted);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_revoke_placement(
        &mut self,
        namespace: &str,
        name: &str,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate_names(namespace, name)?;
        self.check_rights(namespace, &ctx.actor)?;
        let Some(obj) = self.object(namespace, name) else {
            return Err(Rejection::not_found(
                "metadata.name",
                format!("object {namespace}/{name}"),
            ));
        };
        let before = obj.resource_version;
        let key = obj.key();
        let changed = self.reschedule(&key, true, ctx);
        Ok(Some(if changed { ctx.index } else { before }))
    }
}
