//! Object intents (put, delete, revoke placement) and status reports from executors.
//!
//! Put = create or replace, with optional compare-and-swap on the resource version
//! (`Some(0)`: must not exist). Validation covers names, the template (JSON object with
//! apiVersion, kind, metadata.name, at most 1 MiB), placement, overrides, and the owning
//! tenant's quota; only then does anything change. A put reschedules only when the placement
//! spec or the template's replicas/requests changed; a template-only edit keeps the placement
//! and just re-renders. Revoke forgets the placement and schedules from scratch.
//! Status reports are facts: reports about objects or clusters that are gone are skipped.

use super::{index, validate, ChangeKind, ChangeOp, Ctx, HandlerResult, Rejection, State};
use crate::command::ObjectStatusReport;
use crate::error::FieldError;
use crate::model::{FederatedObject, ObjectKey, ObjectSpec, ObjectStatus, TemplateInfo};

/// Status messages longer than this are cut (at a character boundary): executors relay
/// Kubernetes messages, which can be long, and every byte is replicated.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

fn validate_names(namespace: &str, name: &str) -> Result<(), Rejection> {
    validate::dns_label(namespace, "metadata.namespace")?;
    validate::dns_subdomain(name, "metadata.name")?;
    Ok(())
}

fn validate_spec(spec: &ObjectSpec) -> Result<TemplateInfo, Rejection> {
    let info = validate::template(&spec.template, "spec.template")?;
    spec.placement.validate("spec.placement")?;
    for (i, o) in spec.overrides.iter().enumerate() {
        o.validate(&format!("spec.overrides[{i}]"))?;
    }
    Ok(info)
}

fn truncate(message: &str) -> String {
    if message.len() <= MAX_STATUS_MESSAGE_BYTES {
        return message.to_string();
    }
    let mut end = MAX_STATUS_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
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
        let info = validate_spec(spec)?;
        let existing = self.object(namespace, name);
        super::clusters::check_version(expected, existing.map(|o| o.resource_version))?;
        let old_need = existing.map(|o| {
            o.template_info
                .per_replica
                .saturating_mul(u64::from(o.template_info.replicas))
        });
        let new_need = info.per_replica.saturating_mul(u64::from(info.replicas));
        self.check_quota(namespace, old_need.unwrap_or_default(), new_need)?;

        // Validated: from here on the put happens.
        let key = ObjectKey::new(namespace, name);
        let reschedule = match existing {
            Some(o) if o.spec == *spec => return Ok(Some(o.resource_version)),
            Some(o) => o.spec.placement != spec.placement || o.template_info != info,
            None => true,
        };
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
                        .map(|p| (p.cluster.as_str(), p.replicas));
                    self.ix.move_placement(
                        &key,
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
            obj.spec = spec.clone();
            obj.template_info = info;
            obj.resource_version = ctx.index;
            if reschedule {
                self.ix.refresh_flags(&key, before, obj);
            }
            ctx.change(ChangeKind::Object, key.to_string(), ChangeOp::Modified);
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
            ctx.change(ChangeKind::Object, key.to_string(), ChangeOp::Added);
        }
        self.book_quota(namespace, old_need.unwrap_or_default(), new_need);
        if reschedule {
            self.reschedule(&key, false, ctx);
        }
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
        self.ix.remove_object(&obj);
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
        ctx.change(ChangeKind::Object, key.to_string(), ChangeOp::Deleted);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_revoke_placement(
        &mut self,
        namespace: &str,
        name: &str,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate_names(namespace, name)?;
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

    pub(crate) fn on_status_reports(
        &mut self,
        batch: &[ObjectStatusReport],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        super::check_batch_len(batch.len(), "reports")?;
        for (i, r) in batch.iter().enumerate() {
            // The field path is only formatted on error: this loop is on the hot path.
            let at = |what: &'static str| {
                move |e: FieldError| FieldError::new(format!("reports[{i}].{what}"), e.message)
            };
            validate::dns_label(&r.namespace, "").map_err(at("namespace"))?;
            validate::dns_subdomain(&r.name, "").map_err(at("name"))?;
            validate::dns_label(&r.cluster, "").map_err(at("cluster"))?;
        }
        // First a read-only pass that finds where each report lands. With many objects every
        // lookup is a chain of cache misses; the lookups of different reports do not depend on
        // each other, so in a tight loop the processor overlaps them, and the writing pass
        // below then finds everything in cache. Reports never change which clusters an object
        // is placed on, so the positions stay valid.
        let found: Vec<Option<usize>> = batch
            .iter()
            .map(|r| {
                let obj = self.d.objects.get(&r.namespace, &r.name)?;
                // Reports from clusters the object no longer runs on are stale: executors
                // report while they remove what fedraft moved away.
                obj.status
                    .clusters
                    .binary_search_by(|p| p.cluster.as_str().cmp(&r.cluster))
                    .ok()
            })
            .collect();
        for (r, at) in batch.iter().zip(found) {
            if let Some(i) = at {
                self.status_report(r, i, ctx);
            }
        }
        Ok(None)
    }

    /// Records one report about the object's `i`th placed cluster.
    fn status_report(&mut self, r: &ObjectStatusReport, i: usize, ctx: &mut Ctx) {
        let Some(obj) = self.d.objects.get_mut(&r.namespace, &r.name) else {
            return;
        };
        let message = r.message.as_deref().map(truncate);
        let pc = &mut obj.status.clusters[i];
        let same = pc.applied == r.applied
            && pc.ready_replicas == r.ready_replicas
            && pc.message == message;
        pc.reported_ms = Some(ctx.now_ms);
        if same {
            return;
        }
        pc.applied = r.applied;
        pc.ready_replicas = r.ready_replicas;
        pc.message = message;
        obj.status.ready_replicas = obj.status.clusters.iter().map(|p| p.ready_replicas).sum();
        if obj.resource_version != ctx.index {
            ctx.change(
                ChangeKind::Object,
                format!("{}/{}", r.namespace, r.name),
                ChangeOp::Modified,
            );
        }
        obj.resource_version = ctx.index;
    }
}
