//! Writes through the Kubernetes-compatible door: resource templates and Karmada-style policies.
//!
//! A template becomes the federated object `ResourceKey::object_name` in its namespace (a
//! cluster-scoped one in a reserved namespace: `door_identity`), with a spec derived here: the
//! manifest (server-populated metadata and status removed), the placement of the propagation
//! policy it is bound to, and the overrides of every override policy that selects it. Without a policy it is stored and served but placed nowhere, as in Karmada. The
//! object then goes through the same put as a native one (rights, admission, quota).
//!
//! Binding follows Karmada: among the selecting propagation policies the best by
//! `karmada::Precedence` wins, but a bound template stays with its policy while that policy
//! still selects it, unless a better one has `preemption: Always`. A policy write re-derives the
//! templates it may concern; every derived spec is checked before anything changes, so a policy
//! that would give one template an inadmissible spec is refused as a whole, naming it. Deleting
//! the policy a template is bound to keeps the template's last placement (nothing is removed
//! from members because a policy went away) until another policy selects it. Which policy binds
//! and what it derives is `binding.rs`; what a bound workload's pod template names follows it
//! (`propagateDeps`, `deps.rs`) after each of these writes, and so does what the bound policy's
//! suspension, preserveResourcesOnDeletion and schedulePriority keep (`lifecycle.rs`); where
//! its workload-affinity peers run restricts each decision (`workload_affinity.rs`).

use std::collections::BTreeSet;

use std::collections::BTreeMap;

use serde_json::Value;

use super::binding::nowhere;
use super::deps::Required;
use super::door_identity::labels_of;
pub(super) use super::door_identity::{read_manifest, Identity};
use super::door_rollout::{pausable, take_paused};
use super::taint_policy::is_taint_policy;
use super::workload_affinity::Subject;
use super::{members, validate};
use crate::admission::Actor;
use crate::command::LOG_ENTRY_VERSION;
use crate::door::{
    self, same_revision, undivided_for, undivided_without_replicas, DoorTables, PolicyKindTag,
    PolicyRecord, PolicyRef, ResourceKey, TemplateRecord, CLUSTER_TEMPLATES_SINCE,
    DOOR_ROLLOUTS_SINCE, MEMBERS_SINCE,
};
use crate::error::CodecError;
use crate::error::FieldError;
use crate::karmada::{
    self, PolicyKind, PolicySpec, TemplateIdentity, PEER_WIDENED_SINCE, WORKLOAD_AFFINITY_SINCE,
};
use crate::kubefed;
use crate::model::{ObjectKey, ObjectSpec};
use crate::state::{
    Change, ChangeKind, ChangeOp, Ctx, HandlerResult, RejectCode, Rejection, State,
};

/// The manifest without metadata and status: what a change of generation compares.
/// What a put of a policy document does to its stored record.
pub(super) enum PolicyWrite {
    /// The stored manifest is already this document: nothing changes, at this version.
    Unchanged(Option<u64>),
    /// The record to store, and the one it replaces (kept to restore on a refused re-derive).
    Store {
        record: PolicyRecord,
        previous: Option<PolicyRecord>,
    },
}

impl State {
    /// The version check and the next record of a policy document `doc` stored under `key`,
    /// shared by every door document kept in the policy table. `spec_changed(old, new)` says
    /// whether the kind's spec changed, which bumps `generation` as Kubernetes does.
    pub(super) fn policy_write(
        &self,
        key: &PolicyRef,
        expected: Option<u64>,
        doc: &Value,
        spec_changed: impl Fn(&Value, &Value) -> bool,
        ctx: &Ctx,
    ) -> Result<PolicyWrite, Rejection> {
        let previous = self.door.policies.get(key).cloned();
        super::clusters::check_version(expected, previous.as_ref().map(|p| p.resource_version))?;
        let manifest = doc.to_string();
        if previous.as_ref().is_some_and(|p| p.manifest == manifest) {
            return Ok(PolicyWrite::Unchanged(previous.map(|p| p.resource_version)));
        }
        let generation = match &previous {
            Some(p) => {
                // Stored only after it parsed as JSON at apply; a snapshot that says otherwise is
                // refused when it is decoded (`parse_policies`).
                let old: Value = serde_json::from_str(&p.manifest).unwrap_or(Value::Null);
                p.generation + u64::from(spec_changed(&old, doc))
            }
            None => 1,
        };
        let record = PolicyRecord {
            manifest,
            generation,
            created_ms: previous.as_ref().map_or(ctx.now_ms, |p| p.created_ms),
            created_index: previous.as_ref().map_or(ctx.index, |p| p.created_index),
            resource_version: ctx.index,
        };
        Ok(PolicyWrite::Store { record, previous })
    }

    /// Tells watch streams that this entry wrote or removed the document `key`: called once it
    /// is certain to stay so, never before a check that may still refuse (and restore) it.
    /// `existed` is whether it was there before the entry.
    pub(super) fn policy_changed(&self, key: &PolicyRef, existed: bool, ctx: &mut Ctx) {
        let op = match (existed, self.door.policies.contains_key(key)) {
            (false, true) => ChangeOp::Added,
            (true, true) => ChangeOp::Modified,
            (true, false) => ChangeOp::Deleted,
            (false, false) => return,
        };
        ctx.change(ChangeKind::Policy(key.kind), Change::policy_key(key), op);
    }
}

pub(super) fn spec_part(doc: &Value) -> Value {
    let mut d = doc.clone();
    if let Some(o) = d.as_object_mut() {
        o.remove("metadata");
        o.remove("status");
    }
    d
}

impl State {
    pub(crate) fn on_put_resource(
        &mut self,
        manifest: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        let (doc, id) = read_manifest(manifest)?;
        if ctx.version >= MEMBERS_SINCE {
            members::refuse_member_manifest(&id)?;
        }
        if let Some(kind) = PolicyKind::of(&id.api_version, &id.kind) {
            return self.put_policy(kind, doc, id, expected, ctx);
        }
        if is_taint_policy(ctx.version, &id.group, &id.kind) {
            return self.put_taint_policy(doc, id, expected, ctx);
        }
        // Before KUBEFED_SINCE a KubeFed document was a resource template like any other.
        if ctx.version >= kubefed::KUBEFED_SINCE {
            if let Some(tag) = kubefed_tag(&id.api_version, &id.kind) {
                return self.put_kubefed(tag, doc, id, expected, ctx);
            }
        }
        self.put_template(doc, id, expected, ctx)
    }

    pub(crate) fn on_delete_resource(
        &mut self,
        key: &ResourceKey,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if let Some(tag) = self.member_to_delete(key, ctx.version) {
            return self.delete_member(tag, key, expected, ctx);
        }
        if is_taint_policy(ctx.version, &key.group, &key.kind) {
            return self.delete_taint_policy(&key.name, expected, ctx);
        }
        if key.group == karmada::GROUP {
            let kind = PolicyKind::of(
                &format!("{}/{}", karmada::GROUP, karmada::VERSION),
                &key.kind,
            )
            .ok_or_else(|| FieldError::new("kind", format!("no policy kind {:?}", key.kind)))?;
            return self.delete_policy(kind, &key.namespace, &key.name, expected, ctx);
        }
        if ctx.version >= kubefed::KUBEFED_SINCE {
            let api_version = match key.group.as_str() {
                kubefed::TYPES_GROUP => Some(format!("{}/{}", key.group, kubefed::TYPES_VERSION)),
                kubefed::SCHEDULING_GROUP => {
                    Some(format!("{}/{}", key.group, kubefed::SCHEDULING_VERSION))
                }
                _ => None,
            };
            if let Some(tag) = api_version.and_then(|av| kubefed_tag(&av, &key.kind)) {
                return self.delete_kubefed(tag, &key.namespace, &key.name, expected, ctx);
            }
        }
        if !self.door.templates.contains_key(key) {
            return Err(Rejection::not_found("metadata.name", key));
        }
        if ctx.version >= CLUSTER_TEMPLATES_SINCE {
            self.refuse_crd_in_use(key)?;
        }
        let required = self
            .door
            .templates
            .get(key)
            .and_then(|r| self.requires(key, r));
        let (ns, name) = (key.object_namespace(), key.object_name());
        let result = self.delete_object(ns, &name, expected, ctx)?;
        let removed = self.door.templates.remove(key);
        let bound_to = removed.as_ref().and_then(|r| r.bound_to.as_ref());
        self.lifecycle_template_deleted(&ObjectKey::new(ns, &name), bound_to, ctx);
        self.gone.attach_template(ctx.index, ns, &name, removed);
        if ctx.version >= karmada::PEER_WIDENED_SINCE && key.group == "scheduling.k8s.io" {
            self.priorities_follow_classes();
        }
        if let Some(deps) = required {
            self.follow_deps(&deps, ctx);
        }
        Ok(result)
    }

    fn put_template(
        &mut self,
        mut doc: Value,
        id: Identity,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.check_template_scope(&id, ctx)?;
        validate::dns_subdomain(&id.name, "metadata.name")?;
        let key = ResourceKey {
            group: id.group,
            kind: id.kind,
            namespace: id.namespace,
            name: id.name,
        };
        if let Some(owner) = self.federated_owner(&key) {
            return Err(Rejection::new(
                RejectCode::FailedPrecondition,
                Some("metadata.name"),
                format!(
                    "{key} is federated by a {owner} of the same name; change that instead (two \
                     sources would place the same member object twice)"
                ),
            ));
        }
        let labels = labels_of(&doc);
        let previous = self.door.templates.get(&key).cloned();
        let ident = TemplateIdentity {
            api_version: &id.api_version,
            kind: &key.kind,
            namespace: &key.namespace,
            name: &key.name,
            labels: &labels,
        };
        let by_name = names_only(&key, &labels, ctx);
        let bound_to = self.binding_for(
            &ident,
            previous.as_ref().and_then(|r| r.bound_to.as_ref()),
            by_name,
        );
        let object_name = key.object_name();
        let existing_spec = self
            .object(key.object_namespace(), &object_name)
            .map(|o| o.spec.clone());
        let required_before = previous.as_ref().and_then(|r| self.requires(&key, r));
        let required = match bound_to {
            None => self.required_placement(&key).map(|(_, p)| p),
            Some(_) => None,
        };
        let placement = match (&bound_to, required, &existing_spec) {
            (Some(p), _, existing) if ctx.version >= PEER_WIDENED_SINCE => undivided_for(
                self.derived_placement(p, existing.as_ref().map(|s| &s.placement)),
                &doc,
                ctx.version,
            ),
            (Some(p), _, _) => self.policy_placement(p),
            // Unbound: where the workloads that name it are (`deps.rs`), else kept where it
            // was, or nowhere for a new template.
            (None, Some(p), _) => p,
            (None, None, Some(spec)) => spec.placement.clone(),
            (None, None, None) => nowhere(),
        };
        let object = ObjectKey::new(key.object_namespace(), &object_name);
        let strategy = (ctx.version >= DOOR_ROLLOUTS_SINCE)
            .then(|| self.door_strategy(&object, bound_to.as_ref()))
            .flatten();
        let paused = (strategy.is_some() && pausable(&key)).then(|| take_paused(&mut doc));
        let template = doc.to_string();
        let spec = ObjectSpec {
            overrides: self.overrides_for(&ident, &template),
            template,
            placement,
        };
        if let (Some(true), Some(s)) = (paused, &strategy) {
            self.check_door_pause(&object, &spec.template, s, ctx.version)?;
        }
        let template_changed = existing_spec
            .as_ref()
            .is_some_and(|old| !same_revision(&old.template, &spec.template, ctx.version));
        // Suspended clusters keep what they run before the template moves on (put back if the
        // put is refused).
        let life_before = self.lifecycle_part(&object);
        self.suspend_before_put(&object, bound_to.as_ref(), ctx);
        let generation = match (&previous, &existing_spec) {
            (Some(r), Some(old)) => {
                let old_doc: Value = serde_json::from_str(&old.template).unwrap_or(Value::Null);
                if spec_part(&old_doc) == spec_part(&doc) {
                    r.generation
                } else {
                    r.generation + 1
                }
            }
            _ => 1,
        };
        // Its placement is decided within the put, before the record below is stored.
        ctx.door_subject = Some(Subject::new(&key, labels.clone(), bound_to.clone()));
        let put = match &strategy {
            Some(s) => self.put_under_strategy(
                key.object_namespace(),
                &object_name,
                &spec,
                s,
                expected,
                ctx,
                State::put_object,
            ),
            None => self.put_object(key.object_namespace(), &object_name, &spec, expected, ctx),
        };
        ctx.door_subject = None;
        let version = match put {
            Ok(v) => v,
            Err(e) => {
                self.restore_lifecycle_part(&object, life_before);
                return Err(e);
            }
        };
        if let Some(p) = paused {
            self.door_pause_after_put(&object, p, ctx);
        }
        let policy = bound_to.clone();
        let regrouped = previous
            .as_ref()
            .is_some_and(|r| r.labels != labels || r.bound_to != bound_to);
        let record = TemplateRecord {
            api_version: id.api_version,
            labels,
            generation,
            created_ms: previous.as_ref().map_or(ctx.now_ms, |r| r.created_ms),
            created_index: previous.as_ref().map_or(ctx.index, |r| r.created_index),
            bound_to,
        };
        let required_now = self.requires(&key, &record);
        self.door.templates.insert(key.clone(), record);
        self.settle_affinity_group(&object, ctx);
        // New labels or a new policy may change its workload-affinity peers; the put re-placed
        // it only if its placement changed.
        if regrouped && ctx.version >= WORKLOAD_AFFINITY_SINCE {
            self.workload_affinity_recheck(&object, policy.as_ref(), ctx);
        }
        if ctx.version >= karmada::PEER_WIDENED_SINCE {
            if template_changed {
                self.app_failover_template_changed(&object, ctx);
            }
            self.lifecycle_after_put(&key, &object, policy.as_ref(), ctx);
        }
        let deps: BTreeSet<ResourceKey> = required_before
            .into_iter()
            .chain(required_now)
            .flatten()
            .collect();
        self.follow_deps(&deps, ctx);
        Ok(version)
    }

    fn put_policy(
        &mut self,
        kind: PolicyKind,
        doc: Value,
        id: Identity,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if kind.namespaced() {
            if id.namespace.is_empty() {
                return Err(FieldError::new("metadata.namespace", "required").into());
            }
            validate::dns_label(&id.namespace, "metadata.namespace")?;
        } else if !id.namespace.is_empty() {
            return Err(FieldError::new(
                "metadata.namespace",
                format!("a {} is cluster-wide; leave namespace out", kind.kind()),
            )
            .into());
        }
        self.check_policy_rights(kind, &id.namespace, &ctx.actor)?;
        validate::dns_subdomain(&id.name, "metadata.name")?;
        let spec = karmada::parse_spec(kind, &doc, ctx.version)?;
        if ctx.version >= karmada::PEER_WIDENED_SINCE {
            self.check_priority_class(&spec)?;
        }
        if ctx.version >= DOOR_ROLLOUTS_SINCE && kind.propagates() {
            door::rollout_annotation(&doc)?;
        }
        let key = PolicyRef {
            kind: PolicyKindTag::from(kind),
            namespace: id.namespace,
            name: id.name,
        };
        let changed = |old: &Value, new: &Value| spec_part(old) != spec_part(new);
        let record = match self.policy_write(&key, expected, &doc, changed, ctx)? {
            PolicyWrite::Unchanged(version) => return Ok(version),
            PolicyWrite::Store { record, .. } => record,
        };
        let required_before = self.all_required();
        let old_record = self.door.policies.insert(key.clone(), record);
        let old_spec = self.door_ix.insert(key.clone(), spec);
        self.rederive_or_restore(key, old_record, old_spec, required_before, ctx)
    }

    fn delete_policy(
        &mut self,
        kind: PolicyKind,
        namespace: &str,
        name: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.check_policy_rights(kind, namespace, &ctx.actor)?;
        let key = PolicyRef {
            kind: PolicyKindTag::from(kind),
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        let Some(record) = self.door.policies.get(&key) else {
            return Err(Rejection::not_found(
                "metadata.name",
                format!("{} {namespace}/{name}", kind.kind()),
            ));
        };
        super::clusters::check_version(expected, Some(record.resource_version))?;
        let required_before = self.all_required();
        let old_record = self.door.policies.remove(&key);
        let old_spec = self.door_ix.remove(&key);
        self.rederive_or_restore(key, old_record, old_spec, required_before, ctx)
    }

    /// Namespaced policies follow the namespace's rights; cluster-wide ones are not a tenant's.
    fn check_policy_rights(
        &self,
        kind: PolicyKind,
        namespace: &str,
        actor: &Actor,
    ) -> Result<(), Rejection> {
        if kind.namespaced() {
            return self.check_rights(namespace, actor);
        }
        if matches!(actor, Actor::Tenant { .. }) {
            return Err(Rejection::new(
                RejectCode::Forbidden,
                Some("kind"),
                format!("a tenant member may not write a {}", kind.kind()),
            ));
        }
        Ok(())
    }

    /// After the policy `key` changed: re-derives the templates, or, if one would become
    /// inadmissible, puts the policy back as it was (`old_*`) so the entry changes nothing.
    fn rederive_or_restore(
        &mut self,
        key: PolicyRef,
        old_record: Option<PolicyRecord>,
        old_spec: Option<PolicySpec>,
        required_before: Required,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        let Err(refusal) = self.rederive_templates(ctx) else {
            if ctx.version >= WORKLOAD_AFFINITY_SINCE {
                self.workload_affinity_policy_written(&key, old_spec.as_ref(), ctx);
            }
            self.policy_changed(&key, old_record.is_some(), ctx);
            self.deps_after_policy_write(required_before, ctx);
            return Ok(Some(ctx.index));
        };
        match old_record {
            Some(old) => self.door.policies.insert(key.clone(), old),
            None => self.door.policies.remove(&key),
        };
        match old_spec {
            Some(old) => self.door_ix.insert(key, old),
            None => self.door_ix.remove(&key),
        };
        Err(refusal)
    }

    /// Re-derives every template's binding and spec after a policy changed: first every new
    /// spec is computed and checked, then, only if all pass, they are put.
    fn rederive_templates(&mut self, ctx: &mut Ctx) -> Result<(), Rejection> {
        let mut changes = Vec::new();
        for (key, record) in &self.door.templates {
            let object_name = key.object_name();
            let Some(obj) = self.object(key.object_namespace(), &object_name) else {
                continue;
            };
            let ident = TemplateIdentity {
                api_version: &record.api_version,
                kind: &key.kind,
                namespace: &key.namespace,
                name: &key.name,
                labels: &record.labels,
            };
            let by_name = names_only(key, &record.labels, ctx);
            let bound_to = self.binding_for(&ident, record.bound_to.as_ref(), by_name);
            let lazy = ctx.version >= PEER_WIDENED_SINCE
                && self.lazily_kept(
                    bound_to.as_ref(),
                    record.bound_to.as_ref(),
                    &obj.spec.placement,
                );
            let placement = match &bound_to {
                Some(_) if lazy => obj.spec.placement.clone(),
                Some(p) if ctx.version >= PEER_WIDENED_SINCE => undivided_without_replicas(
                    self.derived_placement(p, Some(&obj.spec.placement)),
                    (&key.kind, &obj.spec.template),
                    ctx.version,
                ),
                Some(p) => self.policy_placement(p),
                None => obj.spec.placement.clone(),
            };
            let spec = ObjectSpec {
                template: obj.spec.template.clone(),
                placement,
                overrides: self.overrides_for(&ident, &obj.spec.template),
            };
            if spec == obj.spec && bound_to == record.bound_to {
                continue;
            }
            self.admit_object(
                key.object_namespace(),
                &spec,
                Some(obj),
                (ctx.version, &ctx.actor),
            )
            .map_err(|r| {
                Rejection::new(
                    r.code,
                    r.field.as_deref(),
                    format!("would make {key} inadmissible: {}", r.message),
                )
            })?;
            changes.push((key.clone(), object_name, spec, bound_to));
        }
        for (key, object_name, spec, bound_to) in changes {
            ctx.door_subject = (self.door.templates.get(&key))
                .map(|r| Subject::new(&key, r.labels.clone(), bound_to.clone()));
            let put = self.put_object(key.object_namespace(), &object_name, &spec, None, ctx);
            ctx.door_subject = None;
            put?;
            if let Some(r) = self.door.templates.get_mut(&key) {
                r.bound_to = bound_to;
            }
            let object = ObjectKey::new(key.object_namespace(), &object_name);
            self.settle_affinity_group(&object, ctx);
        }
        if ctx.version >= DOOR_ROLLOUTS_SINCE {
            self.door_strategies_follow_policies(ctx);
        }
        self.lifecycles_follow_policies(ctx);
        Ok(())
    }
}

/// The stored policies parsed, for a state restored from a snapshot. A stored policy was
/// accepted by this same parser when it was written, so one that no longer parses means the
/// snapshot is not one this binary wrote: refused like any undecodable snapshot.
pub(crate) fn parse_policies(
    door: &DoorTables,
) -> Result<std::collections::BTreeMap<PolicyRef, PolicySpec>, CodecError> {
    let mut out = std::collections::BTreeMap::new();
    for (key, record) in &door.policies {
        let doc: Value = serde_json::from_str(&record.manifest)
            .map_err(|e| CodecError::Decode(format!("policy {}: {e}", key.name)))?;
        // KubeFed's documents are read when an object is derived, not kept parsed.
        let Some(kind) = key.kind.karmada() else {
            continue;
        };
        let spec = karmada::parse_spec(kind, &doc, LOG_ENTRY_VERSION)
            .map_err(|e| CodecError::Decode(format!("policy {}: {e}", key.name)))?;
        out.insert(key.clone(), spec);
    }
    Ok(out)
}

/// The stored kind of a KubeFed document of `api_version` and `kind`, if fedraft reads it.
fn kubefed_tag(api_version: &str, kind: &str) -> Option<PolicyKindTag> {
    if let Some(k) = kubefed::FederatedKind::of(api_version, kind) {
        return Some(PolicyKindTag::Federated(k));
    }
    let rsp_version = format!(
        "{}/{}",
        kubefed::SCHEDULING_GROUP,
        kubefed::SCHEDULING_VERSION
    );
    (api_version == rsp_version && kind == kubefed::RSP_KIND)
        .then_some(PolicyKindTag::ReplicaSchedulingPreference)
}

/// Whether only a selector naming the template may bind it: a Helm release record's.
fn names_only(key: &ResourceKey, labels: &BTreeMap<String, String>, ctx: &Ctx) -> bool {
    ctx.version >= CLUSTER_TEMPLATES_SINCE && door::is_helm_release(&key.group, &key.kind, labels)
}
