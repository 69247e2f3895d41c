//! Cluster intents: register, update, deregister, cordon, uncordon, drain.
//!
//! Each handler validates its command fully (input, then against the state: existence and
//! expected resource version) before changing anything, then reports the resource version.
//! Effects on objects: a cluster that becomes usable feeds hungry objects (see `placement`), a
//! cluster that evicts (labels/taints changed, drain) re-places what runs there, deregistering
//! strips the cluster from every placement. Cordon alone moves nothing: existing replicas stay.

use super::validate;
use crate::model::{Cluster, ClusterSpec, ClusterStatus, Health, ObjectKey};
use crate::policy::{Resources, Taint, TaintEffect};
use crate::state::store::index::{health_deadline, SharedKey};
use crate::state::{ChangeKind, ChangeOp, Ctx, HandlerResult, RejectCode, Rejection, State};

/// The taint a drained cluster carries: NoExecute, so every replica leaves.
pub const DRAIN_TAINT_KEY: &str = "fedraft.io/drain";
/// Longest accepted failure/success threshold: one day.
const MAX_THRESHOLD_SECONDS: u64 = 24 * 3600;
const MAX_ENDPOINT_BYTES: usize = 2048;

pub(super) fn validate_spec(spec: &ClusterSpec) -> Result<(), Rejection> {
    validate::dns_label(&spec.name, "spec.name")?;
    validate::labels(&spec.labels, "spec.labels")?;
    validate::taints(&spec.taints, "spec.taints")?;
    let ep = &spec.api_endpoint;
    if !(ep.starts_with("http://") || ep.starts_with("https://")) || ep.len() > MAX_ENDPOINT_BYTES {
        return Err(Rejection::from(crate::error::FieldError::new(
            "spec.apiEndpoint",
            format!("{ep:?} is not an http(s) URL of at most {MAX_ENDPOINT_BYTES} bytes"),
        )));
    }
    for (field, v, min) in [
        (
            "spec.failureThresholdSeconds",
            spec.failure_threshold_seconds,
            1,
        ),
        (
            "spec.successThresholdSeconds",
            spec.success_threshold_seconds,
            0,
        ),
    ] {
        if v < min || v > MAX_THRESHOLD_SECONDS {
            return Err(Rejection::from(crate::error::FieldError::new(
                field,
                format!("{v} is outside {min}..={MAX_THRESHOLD_SECONDS}"),
            )));
        }
    }
    Ok(())
}

/// Refuses the write unless `expected` (if given) matches the current resource version.
pub(crate) fn check_version(expected: Option<u64>, found: Option<u64>) -> Result<(), Rejection> {
    match (expected, found) {
        (None, _) | (Some(0), None) => Ok(()),
        (Some(e), Some(f)) if e == f => Ok(()),
        (Some(e), f) => Err(Rejection::conflict(e, f)),
    }
}

/// What the scheduler sees: the spec's taints, those taint policies added (`extra`, which
/// never duplicates a key and effect the spec has) and the drain taint.
pub(super) fn effective_taints(spec: &ClusterSpec, drained: bool, extra: &[Taint]) -> Vec<Taint> {
    let mut taints = spec.taints.clone();
    for t in extra {
        if !taints
            .iter()
            .any(|s| s.key == t.key && s.effect == t.effect)
        {
            taints.push(t.clone());
        }
    }
    let has_drain = taints
        .iter()
        .any(|t| t.key == DRAIN_TAINT_KEY && t.effect == TaintEffect::NoExecute);
    if drained && !has_drain {
        taints.push(Taint {
            key: DRAIN_TAINT_KEY.to_string(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
        });
    }
    taints
}

impl State {
    fn cluster_or_not_found(&self, name: &str, field: &str) -> Result<&Cluster, Rejection> {
        self.d
            .clusters
            .get(name)
            .ok_or_else(|| Rejection::not_found(field, format!("cluster {name:?}")))
    }

    pub(crate) fn on_register_cluster(
        &mut self,
        spec: &ClusterSpec,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate_spec(spec)?;
        if let Some(c) = self.d.clusters.get(&spec.name) {
            return Err(Rejection::new(
                RejectCode::AlreadyExists,
                Some("spec.name"),
                format!(
                    "cluster {:?} already exists at resource version {}",
                    spec.name, c.resource_version
                ),
            ));
        }
        let cluster = Cluster {
            spec: spec.clone(),
            cordoned: false,
            drained: false,
            effective_taints: effective_taints(spec, false, &[]),
            status: ClusterStatus {
                health: Health::Unknown,
                health_since_ms: ctx.now_ms,
                last_heartbeat_ms: None,
                recovering_since_ms: None,
                last_unreachable_ms: None,
                capacity: None,
                capacity_reported_ms: None,
            },
            resource_version: ctx.index,
        };
        self.d.clusters.insert(&spec.name, cluster);
        self.ix.booked.insert(&spec.name, Resources::ZERO);
        ctx.change(ChangeKind::Cluster, spec.name.clone(), ChangeOp::Added);
        self.owners_cluster_added(&spec.name, ctx);
        // One more cluster in its scopes: the brake's shares change.
        self.review_brake(ctx);
        // Its conditions exist now (Ready: Unknown), so taint policies look at it.
        self.taint_conditions_changed(&spec.name, ctx);
        // Unknown until its first heartbeat: nothing can be placed on it yet.
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_update_cluster(
        &mut self,
        spec: &ClusterSpec,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate_spec(spec)?;
        let c = self.cluster_or_not_found(&spec.name, "spec.name")?;
        check_version(expected, Some(c.resource_version))?;
        if c.spec == *spec {
            return Ok(Some(c.resource_version));
        }
        let labels_changed = c.spec.labels != spec.labels;
        let placement_inputs_changed = labels_changed || c.spec.taints != spec.taints;
        let extra = self.policy_taint_list(&spec.name);
        self.update_cluster(&spec.name, ctx, |c| {
            c.spec = spec.clone();
            c.effective_taints = effective_taints(&c.spec, c.drained, &extra);
        });
        if placement_inputs_changed {
            if labels_changed {
                self.taint_labels_changed(&spec.name, ctx);
            }
            self.cluster_evicts(&spec.name, ctx);
            self.cluster_gained(&spec.name, ctx);
            // Its region may have changed.
            self.review_brake(ctx);
        }
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_deregister_cluster(
        &mut self,
        name: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate::dns_label(name, "name")?;
        let c = self.cluster_or_not_found(name, "name")?;
        check_version(expected, Some(c.resource_version))?;
        self.ix.rearm(name, None);
        self.d.clusters.remove(name);
        let placed: Vec<SharedKey> = self
            .ix
            .placed_on
            .get(name)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for key in &placed {
            self.strip_cluster(key, name, ctx);
            self.enqueue(key);
        }
        self.ix.booked.remove(name);
        self.forget_cluster_extended(name);
        self.forget_cluster_taints(name);
        self.ix.placed_on.remove(name);
        for t in self.d.tenants.values_mut() {
            if t.status.slices.remove(name).is_some() {
                t.resource_version = ctx.index;
                ctx.change(ChangeKind::Tenant, t.spec.name.clone(), ChangeOp::Modified);
            }
        }
        ctx.change(ChangeKind::Cluster, name, ChangeOp::Deleted);
        self.handovers_cluster_down(name, ctx);
        self.forget_views(name);
        self.owners_cluster_removed(name);
        self.review_brake(ctx);
        self.replace_all_slices(ctx);
        Ok(Some(ctx.index))
    }

    /// Removes a deregistered cluster from an object's placement, releasing its booking.
    fn strip_cluster(&mut self, key: &ObjectKey, cluster: &str, ctx: &mut Ctx) {
        let Some(obj) = self.d.objects.get_mut(&key.namespace, &key.name) else {
            return;
        };
        self.ix.remove_object(obj);
        let mut kept = std::mem::take(&mut obj.status.clusters).into_vec();
        kept.retain(|p| &*p.cluster != cluster);
        obj.status.clusters = kept.into_boxed_slice();
        obj.status.ready_replicas = obj.status.clusters.iter().map(|p| p.ready_replicas).sum();
        if obj.resource_version != ctx.index {
            ctx.change(ChangeKind::Object, key.path(), ChangeOp::Modified);
        }
        obj.resource_version = ctx.index;
        self.ix.add_object(obj);
    }

    pub(crate) fn on_cordon(&mut self, name: &str, ctx: &mut Ctx) -> HandlerResult {
        validate::dns_label(name, "name")?;
        let c = self.cluster_or_not_found(name, "name")?;
        if c.cordoned {
            return Ok(Some(c.resource_version));
        }
        self.update_cluster(name, ctx, |c| c.cordoned = true);
        self.replace_all_slices(ctx);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_uncordon(&mut self, name: &str, ctx: &mut Ctx) -> HandlerResult {
        validate::dns_label(name, "name")?;
        let c = self.cluster_or_not_found(name, "name")?;
        if !c.cordoned && !c.drained {
            return Ok(Some(c.resource_version));
        }
        let extra = self.policy_taint_list(name);
        self.update_cluster(name, ctx, |c| {
            c.cordoned = false;
            c.drained = false;
            c.effective_taints = effective_taints(&c.spec, false, &extra);
        });
        self.cluster_gained(name, ctx);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_drain(&mut self, name: &str, ctx: &mut Ctx) -> HandlerResult {
        validate::dns_label(name, "name")?;
        let c = self.cluster_or_not_found(name, "name")?;
        if c.drained {
            return Ok(Some(c.resource_version));
        }
        let extra = self.policy_taint_list(name);
        self.update_cluster(name, ctx, |c| {
            c.cordoned = true;
            c.drained = true;
            c.effective_taints = effective_taints(&c.spec, true, &extra);
        });
        self.cluster_evicts(name, ctx);
        Ok(Some(ctx.index))
    }

    /// Changes one existing cluster, keeping its health deadline indexed and its version and
    /// change record current.
    pub(crate) fn update_cluster(
        &mut self,
        name: &str,
        ctx: &mut Ctx,
        f: impl FnOnce(&mut Cluster),
    ) {
        let from = self.health.judged_from_ms();
        let Some(c) = self.d.clusters.get_mut(name) else {
            return;
        };
        let before = health_deadline(c, from);
        f(c);
        let after = health_deadline(c, from);
        if before != after {
            self.ix.rearm(name, after);
        }
        if c.resource_version != ctx.index {
            ctx.change(ChangeKind::Cluster, name, ChangeOp::Modified);
        }
        c.resource_version = ctx.index;
    }
}
