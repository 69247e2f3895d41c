//! Rollouts of door templates, from log version 11 (`door::DOOR_ROLLOUTS_SINCE`).
//!
//! A template bound to a propagation policy whose `fedraft.io/rollout-strategy` annotation
//! names a strategy rolls out under it, as a native object put with that strategy does: a new
//! template is a revision, moved over the clusters in waves behind health gates. A bound
//! template whose policy names none (or stops naming one) rolls out all at once.
//!
//! A Deployment's `spec.paused` is that rollout's pause (`kubectl rollout pause|resume`). It is
//! kept out of the stored template: there it would make a revision of its own and pause every
//! member's own rollout, which is not what a federation-wide pause means. The door shows it back
//! from the rollout's phase, so a patch that does not touch it keeps the pause, and a replace or
//! patch that clears it resumes. A pause with no rollout under way (nor started by the same
//! write) is refused, naming `spec.paused`.
//!
//! Must not: act on entries before version 11, or change anything before the checks of a write
//! have passed (the pause is checked before the put, applied after it).

use serde_json::Value;

use super::binding::policy_name;
use crate::door::{PolicyRef, ResourceKey};
use crate::karmada::PolicySpec;
use crate::model::ObjectKey;
use crate::rollout::{gate, Phase, RolloutRecord, RolloutStrategy, RolloutType};
use crate::state::{Ctx, RejectCode, Rejection, State};

/// Kinds whose `spec.paused` pauses their rollout (Kubernetes gives one only to Deployments).
pub(super) fn pausable(key: &ResourceKey) -> bool {
    key.group == "apps" && key.kind == "Deployment"
}

/// Takes `spec.paused` out of a manifest: whether it asked for a pause.
pub(super) fn take_paused(doc: &mut Value) -> bool {
    doc.get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|s| s.remove("paused"))
        .is_some_and(|v| v == Value::Bool(true))
}

impl State {
    /// The rollout strategy a propagation policy gives the templates it binds.
    pub(super) fn policy_rollout(&self, policy: &PolicyRef) -> Option<RolloutStrategy> {
        match self.door_ix.get(policy)? {
            PolicySpec::Propagation(p) => p.rollout.as_deref().cloned(),
            PolicySpec::Override(_) => None,
        }
    }

    /// The strategy a template's object is put under: its policy's, or all at once for an
    /// object that already has a rollout record; None leaves rollouts out of the put.
    pub(super) fn door_strategy(
        &self,
        object: &ObjectKey,
        bound_to: Option<&PolicyRef>,
    ) -> Option<RolloutStrategy> {
        let from_policy = bound_to.and_then(|p| self.policy_rollout(p));
        match from_policy {
            Some(s) => Some(s),
            None => self
                .rollouts
                .records
                .contains_key(object)
                .then(RolloutStrategy::default),
        }
    }

    /// Refuses `spec.paused: true` when, after a put of `template` under `strategy`, no rollout
    /// would be under way: called before the put, which must not happen if this refuses.
    pub(super) fn check_door_pause(
        &self,
        object: &ObjectKey,
        template: &str,
        strategy: &RolloutStrategy,
        version: u16,
    ) -> Result<(), Rejection> {
        let (latest, phase) = match self.rollouts.records.get(object) {
            Some(r) => (Some(r.latest().template.as_str()), r.phase),
            None => (
                self.object(&object.namespace, &object.name)
                    .map(|o| o.spec.template.as_str()),
                Phase::Complete,
            ),
        };
        let placed = self
            .object(&object.namespace, &object.name)
            .is_some_and(|o| !o.status.clusters.is_empty());
        let same = latest.is_some_and(|l| crate::door::same_revision(l, template, version));
        let under_way = if !same {
            // A new revision starts a rollout only under a progressive strategy, on clusters.
            latest.is_some() && strategy.type_ == RolloutType::Progressive && placed
        } else {
            matches!(phase, Phase::Progressing | Phase::Paused)
        };
        if under_way {
            return Ok(());
        }
        Err(Rejection::new(
            RejectCode::FailedPrecondition,
            Some("spec.paused"),
            format!(
                "no rollout is under way to pause (rollout {phase:?}): fedraft pauses a \
                 progressive rollout between its waves; set spec.paused with a template change \
                 under a Progressive strategy (annotation {} on the PropagationPolicy), or once \
                 one is under way",
                crate::door::ROLLOUT_STRATEGY_ANNOTATION
            ),
        ))
    }

    /// After a template's put: `spec.paused` pauses a rollout under way, its absence resumes a
    /// paused one.
    pub(super) fn door_pause_after_put(&mut self, object: &ObjectKey, paused: bool, ctx: &mut Ctx) {
        let actor = ctx.actor_id;
        let Some(rec) = self.rollouts.records.get_mut(object) else {
            return;
        };
        match (paused, rec.phase) {
            (true, Phase::Progressing) => gate::pause(
                rec,
                ctx.index,
                ctx.now_ms,
                &format!("paused by {actor} (spec.paused)"),
            ),
            (false, Phase::Paused) => {
                gate::resume(rec, actor, ctx.index, ctx.now_ms);
                self.rollout_step(object, ctx);
            }
            _ => return,
        }
        self.touch_object(object, ctx);
    }

    /// After a policy changed: every bound template's rollout record follows its policy's
    /// strategy (created, with the template it has as revision 1, or its strategy replaced).
    pub(super) fn door_strategies_follow_policies(&mut self, ctx: &mut Ctx) {
        let wanted: Vec<(ObjectKey, RolloutStrategy, String)> = self
            .door
            .templates
            .iter()
            .filter_map(|(key, rec)| {
                let policy = rec.bound_to.as_ref()?;
                let object = ObjectKey::new(key.object_namespace(), key.object_name());
                let strategy = self.door_strategy(&object, Some(policy))?;
                Some((object, strategy, policy_name(policy)))
            })
            .collect();
        for (object, strategy, policy) in wanted {
            let Some(template) = self
                .object(&object.namespace, &object.name)
                .map(|o| o.spec.template.clone())
            else {
                continue;
            };
            let line = format!("rollout strategy {:?} from {policy}", strategy.type_);
            match self.rollouts.records.get_mut(&object) {
                Some(r) if r.strategy == strategy => continue,
                Some(r) => {
                    r.strategy = strategy;
                    r.log(ctx.index, ctx.now_ms, line);
                }
                None => {
                    let mut r = RolloutRecord::new(strategy, &template, ctx.index);
                    r.log(
                        ctx.index,
                        ctx.now_ms,
                        format!("revision 1 recorded; {line}"),
                    );
                    self.rollouts.records.insert(object.clone(), r);
                }
            }
            self.touch_object(&object, ctx);
        }
    }
}
