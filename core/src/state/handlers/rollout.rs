//! Rollouts and workload status: `PutObjectWithRollout`, `Rollout` (pause, resume, abort,
//! undo, promote), `WorkloadReports`, and the hooks the object and placement handlers call (a
//! new template starts a rollout, a placement change or a deleted object prunes, log time moves
//! the gates).
//!
//! Propose-side, the API checks the strategy's shape; at apply each command is checked again
//! against the record as it is now (a pause of a rollout that completed meanwhile is refused,
//! `FailedPrecondition`). Every move is a story line in the record and bumps the object's
//! resource version, so watchers and the executors (which render each cluster's revision) see
//! it. Must not: keep anything for objects without a strategy (their apply, snapshot and hash
//! stay as before rollouts existed), or decide a gate itself (`crate::rollout::gate` does).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::validate;
use crate::command::{RolloutAction, WorkloadReport, DESCHEDULE_SINCE};
use crate::door::DOOR_ROLLOUTS_SINCE;
use crate::error::FieldError;
use crate::model::{FederatedObject, ObjectKey, ObjectSpec};
use crate::rollout::shared_conditions::ConditionSets;
use crate::rollout::{
    gate, verdict, waves, Phase, RolloutRecord, RolloutStrategy, RolloutType, WorkloadCondition,
    WorkloadStatus, WorkloadStatuses, MAX_CONDITIONS, MAX_REASON_BYTES,
};
use crate::state::store::index::Index;
use crate::state::store::table::ObjectTable;
use crate::state::{
    check_batch_len, ChangeKind, ChangeOp, Ctx, HandlerResult, RejectCode, Rejection, State,
};

/// The replicated rollout tables; encoded after the user database, hashed only when non-empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollouts {
    /// Objects put with a rollout strategy.
    pub records: BTreeMap<ObjectKey, RolloutRecord>,
    /// Per object and placed cluster, the latest workload status reported. Keyed by the
    /// object's key as the placement index shares it (`Index::shared_key`), not a copy of
    /// its own: one map entry per workload otherwise held both names again.
    pub workloads: BTreeMap<Arc<ObjectKey>, WorkloadStatuses>,
    /// Replicas kept on clusters an object is leaving until its new placement is ready
    /// (make-before-break, `super::handover`).
    pub handovers: super::Handovers,
    /// The distinct condition lists `workloads` holds, each once; local, never encoded.
    #[serde(skip)]
    pub(crate) condition_sets: ConditionSets,
}

impl Rollouts {
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.workloads.is_empty() && self.handovers.is_empty()
    }

    /// Makes restored tables share what the tables reports fill share: the objects' keys
    /// with the placement index, and the condition lists among the statuses.
    pub(crate) fn share_restored(&mut self, ix: &Index, objects: &ObjectTable) {
        let workloads = std::mem::take(&mut self.workloads);
        self.workloads = workloads
            .into_iter()
            .map(|(key, mut per)| {
                for (_, s) in per.iter_mut() {
                    let list = std::mem::replace(&mut s.observed.conditions, Arc::new([]));
                    s.observed.conditions = self.condition_sets.share(list);
                }
                let shared = objects
                    .get(&key.namespace, &key.name)
                    .map(|o| index_key(ix, &key, o));
                (shared.unwrap_or(key), per)
            })
            .collect();
    }
}

/// The placement index's shared copy of `key`, the key of `obj`.
fn index_key(ix: &Index, key: &ObjectKey, obj: &FederatedObject) -> Arc<ObjectKey> {
    let named = obj.spec.placement.named_clusters();
    ix.shared_key(key, named, &obj.status.clusters)
}

/// A put of an object without a strategy: `State::on_put_object` or the door's `put_object`.
pub(crate) type PlainPut =
    fn(&mut State, &str, &str, &ObjectSpec, Option<u64>, &mut Ctx) -> HandlerResult;

impl State {
    pub(crate) fn on_put_object_with_rollout(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        strategy: &RolloutStrategy,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        strategy.validate("rollout")?;
        self.put_under_strategy(
            namespace,
            name,
            spec,
            strategy,
            expected,
            ctx,
            State::on_put_object,
        )
    }

    /// A put that records (or changes) the object's rollout strategy: `put` is the plain put
    /// (the native one checks names; the door's templates have names of their own).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put_under_strategy(
        &mut self,
        namespace: &str,
        name: &str,
        spec: &ObjectSpec,
        strategy: &RolloutStrategy,
        expected: Option<u64>,
        ctx: &mut Ctx,
        put: PlainPut,
    ) -> HandlerResult {
        let key = ObjectKey::new(namespace, name);
        // The template the clusters run now, if the object exists without a record: it becomes
        // revision 1, so the put's template rolls out as revision 2.
        let running = match self.rollouts.records.get(&key) {
            Some(_) => None,
            None => self
                .object(namespace, name)
                .map(|o| o.spec.template.clone()),
        };
        // The put's own hook must see the new strategy; on a refusal it is put back.
        let old = self
            .rollouts
            .records
            .get_mut(&key)
            .map(|r| std::mem::replace(&mut r.strategy, strategy.clone()));
        let rv = match put(self, namespace, name, spec, expected, ctx) {
            Ok(rv) => rv,
            Err(e) => {
                if let (Some(old), Some(r)) = (old, self.rollouts.records.get_mut(&key)) {
                    r.strategy = old;
                }
                return Err(e);
            }
        };
        let strategy_changed = old.as_ref().is_some_and(|o| o != strategy);
        if !self.rollouts.records.contains_key(&key) {
            let template = running.as_deref().unwrap_or(&spec.template);
            let mut rec = RolloutRecord::new(strategy.clone(), template, ctx.index);
            rec.log(
                ctx.index,
                ctx.now_ms,
                format!("revision 1 recorded; rollout strategy {:?}", strategy.type_),
            );
            self.rollouts.records.insert(key.clone(), rec);
            self.rollout_after_put(&key, ctx);
        } else if strategy_changed {
            if let Some(r) = self.rollouts.records.get_mut(&key) {
                r.log(
                    ctx.index,
                    ctx.now_ms,
                    format!("rollout strategy set to {:?}", strategy.type_),
                );
            }
        } else {
            return Ok(rv);
        }
        self.touch_object(&key, ctx);
        Ok(Some(ctx.index))
    }

    /// Called after every accepted put: a template that differs from the newest revision
    /// becomes a revision and starts a rollout (or goes everywhere at once with `All`).
    pub(crate) fn rollout_after_put(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
            return;
        };
        let Some(rec) = self.rollouts.records.get_mut(key) else {
            return;
        };
        if crate::door::same_revision(&rec.latest().template, &obj.spec.template, ctx.version) {
            return;
        }
        let in_flight = matches!(rec.phase, Phase::Progressing | Phase::Paused);
        let superseded = rec.target;
        let n = rec.push_revision(&obj.spec.template, ctx.index);
        if in_flight {
            rec.log(
                ctx.index,
                ctx.now_ms,
                format!(
                    "revision {superseded} superseded by revision {n}; its clusters go back to \
                     revision {} until their wave",
                    rec.stable
                ),
            );
        }
        let placed: Vec<(&str, &BTreeMap<String, String>)> = obj
            .status
            .clusters
            .iter()
            .filter_map(|p| {
                let c = self.d.clusters.get(&p.cluster)?;
                Some((&*p.cluster, &c.spec.labels))
            })
            .collect();
        if rec.strategy.type_ == RolloutType::All || placed.is_empty() {
            rec.target = n;
            rec.stable = n;
            rec.assigned.clear();
            rec.waves.clear();
            rec.wave = 0;
            rec.phase = Phase::Complete;
            rec.reason.clear();
            rec.log(
                ctx.index,
                ctx.now_ms,
                format!("revision {n} rolled out to every cluster at once"),
            );
            return;
        }
        let plan = waves::plan(&rec.strategy, &placed);
        gate::start(rec, n, plan, ctx.index, ctx.now_ms);
        self.rollout_step(key, ctx);
    }

    /// Evaluates one object's gate; bumps the object when the rollout moved.
    pub(super) fn rollout_step(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
            return;
        };
        let Some(rec) = self.rollouts.records.get_mut(key) else {
            return;
        };
        if !rec.is_active() {
            return;
        }
        let placed: Vec<&str> = obj.status.clusters.iter().map(|p| &*p.cluster).collect();
        let obs = gate::Observed {
            placed: &placed,
            status: self.rollouts.workloads.get(key),
        };
        if gate::step(rec, &obs, ctx.index, ctx.now_ms) {
            self.touch_object(key, ctx);
        }
    }

    /// Log time passed: the gates of rollouts under way may pass or fail.
    pub(crate) fn rollouts_advance(&mut self, ctx: &mut Ctx) {
        if self.rollouts.records.is_empty() {
            return;
        }
        let active: Vec<ObjectKey> = self
            .rollouts
            .records
            .iter()
            .filter(|(_, r)| r.is_active())
            .map(|(k, _)| k.clone())
            .collect();
        for k in active {
            self.rollout_step(&k, ctx);
        }
    }

    /// The object's placement changed: statuses of clusters it left are dropped.
    pub(crate) fn rollouts_placement_changed(&mut self, key: &ObjectKey) {
        let Some(per) = self.rollouts.workloads.get_mut(key) else {
            return;
        };
        let Some(obj) = self.d.objects.get(&key.namespace, &key.name) else {
            return;
        };
        per.retain(|c, _| {
            obj.status
                .clusters
                .binary_search_by(|p| p.cluster.as_ref().cmp(c))
                .is_ok()
        });
        if per.is_empty() {
            self.rollouts.workloads.remove(key);
        }
    }

    /// The object is gone: so are its revisions and statuses.
    pub(crate) fn rollouts_forget(&mut self, key: &ObjectKey) {
        self.rollouts.records.remove(key);
        self.rollouts.workloads.remove(key);
        self.handover_forget(key);
        self.failback_forget(key);
        self.deschedule_forget(key);
    }

    pub(super) fn touch_object(&mut self, key: &ObjectKey, ctx: &mut Ctx) {
        if let Some(obj) = self.d.objects.get_mut(&key.namespace, &key.name) {
            if obj.resource_version != ctx.index {
                obj.resource_version = ctx.index;
                ctx.change(ChangeKind::Object, key.path(), ChangeOp::Modified);
            }
        }
    }

    pub(crate) fn on_rollout(
        &mut self,
        namespace: &str,
        name: &str,
        action: RolloutAction,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        validate::dns_label(namespace, "metadata.namespace")?;
        let key = ObjectKey::new(namespace, name);
        // A door template's object has a name of its own (`deployment.apps:web`).
        let door_template = ctx.version >= DOOR_ROLLOUTS_SINCE && self.template_of(&key).is_some();
        if !door_template {
            validate::dns_subdomain(name, "metadata.name")?;
        }
        self.check_rights(namespace, &ctx.actor)?;
        if self.object(namespace, name).is_none() {
            return Err(Rejection::not_found(
                "metadata.name",
                format!("object {namespace}/{name}"),
            ));
        }
        let Some(rec) = self.rollouts.records.get_mut(&key) else {
            return Err(Rejection::not_found(
                "rollout",
                format!("a rollout record of {namespace}/{name} (put it with a rollout strategy)"),
            ));
        };
        let refuse = |phase: Phase| {
            Err(Rejection::new(
                RejectCode::FailedPrecondition,
                Some("action"),
                format!("cannot {} a rollout that is {phase:?}", action.as_str()),
            ))
        };
        let actor = ctx.actor_id;
        match action {
            RolloutAction::Pause => {
                if rec.phase != Phase::Progressing {
                    return refuse(rec.phase);
                }
                gate::pause(rec, ctx.index, ctx.now_ms, &format!("paused by {actor}"));
            }
            RolloutAction::Resume => {
                if rec.phase != Phase::Paused {
                    return refuse(rec.phase);
                }
                gate::resume(rec, actor, ctx.index, ctx.now_ms);
            }
            RolloutAction::Abort => {
                if !matches!(rec.phase, Phase::Progressing | Phase::Paused) {
                    return refuse(rec.phase);
                }
                gate::abort(rec, actor, ctx.index, ctx.now_ms);
            }
            RolloutAction::Promote => {
                if !matches!(rec.phase, Phase::Progressing | Phase::Paused) {
                    return refuse(rec.phase);
                }
                gate::promote(rec, actor, ctx.index, ctx.now_ms);
            }
            RolloutAction::Undo => {
                if gate::undo_target(rec).is_none() {
                    return Err(Rejection::new(
                        RejectCode::FailedPrecondition,
                        Some("action"),
                        "no earlier revision is kept to go back to",
                    ));
                }
                gate::rollback(rec, ctx.index, ctx.now_ms, &format!("undo by {actor}"));
            }
        }
        if action == RolloutAction::Resume {
            self.rollout_step(&key, ctx);
        }
        self.touch_object(&key, ctx);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_workload_reports(
        &mut self,
        batch: &[WorkloadReport],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        check_batch_len(batch.len(), "reports")?;
        for (i, r) in batch.iter().enumerate() {
            let at = |what: &'static str| {
                move |e: FieldError| FieldError::new(format!("reports[{i}].{what}"), e.message)
            };
            validate::dns_label(&r.namespace, "").map_err(at("namespace"))?;
            // A door template's object is named `kind.group:name` (from version 11 its
            // rollout is gated on these reports too).
            let door_template = ctx.version >= DOOR_ROLLOUTS_SINCE
                && self
                    .template_of(&ObjectKey::new(&r.namespace, &r.name))
                    .is_some();
            if !door_template {
                validate::dns_subdomain(&r.name, "").map_err(at("name"))?;
            }
            validate::dns_label(&r.cluster, "").map_err(at("cluster"))?;
            if r.observed.conditions.len() > MAX_CONDITIONS {
                return Err(FieldError::new(
                    format!("reports[{i}].observed.conditions"),
                    format!("more than {MAX_CONDITIONS}"),
                )
                .into());
            }
        }
        let mut moved: Vec<ObjectKey> = Vec::new();
        for r in batch {
            // Facts about the past: an object gone or moved away is skipped, not refused.
            let Some(obj) = self.d.objects.get(&r.namespace, &r.name) else {
                continue;
            };
            if obj
                .status
                .clusters
                .binary_search_by(|p| p.cluster.as_ref().cmp(&r.cluster))
                .is_err()
            {
                continue;
            }
            let mut observed = r.observed.clone();
            observed.kind = crate::rollout::cut_reason(&observed.kind);
            let long = |c: &WorkloadCondition| c.type_.len().max(c.reason.len()) > MAX_REASON_BYTES;
            if observed.conditions.iter().any(long) {
                let cut = |c: &WorkloadCondition| WorkloadCondition {
                    type_: crate::rollout::cut_reason(&c.type_),
                    status: c.status,
                    reason: crate::rollout::cut_reason(&c.reason),
                };
                observed.conditions = observed.conditions.iter().map(cut).collect();
            }
            observed.conditions = self.rollouts.condition_sets.share(observed.conditions);
            let key = ObjectKey::new(r.namespace.clone(), r.name.clone());
            let stuck = crate::rollout::deschedule::unschedulable(&observed);
            if !self.rollouts.workloads.contains_key(&key) {
                let shared = index_key(&self.ix, &key, obj);
                self.rollouts.workloads.insert(shared, Default::default());
            }
            let Some(per) = self.rollouts.workloads.get_mut(&key) else {
                continue;
            };
            let v = verdict(&observed);
            match per.get_mut(&r.cluster) {
                Some(s) if s.observed == observed => continue,
                Some(s) => {
                    if s.verdict != v {
                        s.verdict = v;
                        s.verdict_since_ms = ctx.now_ms;
                    }
                    s.observed = observed;
                }
                None => {
                    let status = WorkloadStatus {
                        observed,
                        verdict: v,
                        verdict_since_ms: ctx.now_ms,
                    };
                    crate::rollout::insert_status(per, r.cluster.clone(), status);
                }
            }
            if ctx.version >= DESCHEDULE_SINCE {
                self.deschedule_observed(&key, &r.cluster, stuck, ctx);
            }
            if ctx.version >= crate::karmada::PEER_WIDENED_SINCE {
                self.app_failover_observed(&key, &r.cluster, ctx);
            }
            if moved.last() != Some(&key) {
                moved.push(key);
            }
        }
        moved.sort();
        moved.dedup();
        for key in moved {
            // Only an object with a rollout changes with its workload status (its rollout
            // document, and maybe its wave); for the rest the status is kept for reading, and
            // a new resource version would only make executors re-check what did not change.
            if self.rollouts.records.contains_key(&key) {
                self.touch_object(&key, ctx);
                self.rollout_step(&key, ctx);
            }
        }
        Ok(None)
    }

    /// The health rules of objects whose strategy has one (`crate::rollout::HealthRule`): what
    /// executors evaluate on kinds whose status fedraft does not read. Usually few.
    pub fn health_rules(&self) -> BTreeMap<ObjectKey, crate::rollout::HealthRule> {
        self.rollouts
            .records
            .iter()
            .filter_map(|(k, r)| Some((k.clone(), r.strategy.health_rule.clone()?)))
            .collect()
    }

    /// The rollout record of an object put with a strategy.
    pub fn rollout(&self, namespace: &str, name: &str) -> Option<&RolloutRecord> {
        self.rollouts.records.get(&ObjectKey::new(namespace, name))
    }

    /// The latest workload status per placed cluster of an object.
    pub fn workload_status(&self, namespace: &str, name: &str) -> Option<&WorkloadStatuses> {
        self.rollouts
            .workloads
            .get(&ObjectKey::new(namespace, name))
    }

    /// The template `cluster` should run of this object, and its revision when the object has
    /// a rollout record (else the object's template).
    pub fn template_for<'a>(
        &'a self,
        obj: &'a crate::model::FederatedObject,
        cluster: &str,
    ) -> (&'a str, Option<u32>) {
        // A cluster whose dispatching is suspended keeps what it ran (`lifecycle.rs`).
        if !self.life.suspended.is_empty() {
            if let Some(h) = self.suspended_template(&obj.key(), cluster) {
                return (&h.template, h.revision);
            }
        }
        if self.rollouts.records.is_empty() {
            return (&obj.spec.template, None);
        }
        let Some(rec) = self.rollouts.records.get(&obj.key()) else {
            return (&obj.spec.template, None);
        };
        let n = rec.revision_for(cluster);
        match rec.revision(n) {
            Some(r) => (&r.template, Some(n)),
            // Unreachable by construction (stable and target are never pruned); the object's
            // own template is the safe answer.
            None => (&obj.spec.template, None),
        }
    }
}
