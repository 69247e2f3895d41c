//! Writes of KubeFed's documents through the Kubernetes-compatible door: FederatedX,
//! FederatedNamespace and ReplicaSchedulingPreference (`crate::kubefed` reads them).
//!
//! Each document is kept as written in the door's policy table, and what it federates is the
//! federated object the door would make of a plain template of the target (`ResourceKey::
//! object_name` of the target: `deployment.apps:web`), with a spec derived here from the
//! FederatedX, the RSP of the same name (when it targets that kind) and the FederatedNamespace
//! of the namespace (whose placement bounds every FederatedX in it, as KubeFed intersects a
//! namespaced resource's placement with its namespace's). A plain template of the same target
//! and a FederatedX would fight over one member object, so the second to come is refused.
//!
//! FederatedClusterRole and FederatedClusterRoleBinding federate a cluster-scoped kind: their
//! object is the door's cluster-scoped template of the target (in `door::CLUSTER_SCOPE_NAMESPACE`),
//! admitted under the same rules (an administrator's, for the kinds the admission policy's
//! `clusterScopedKinds` lists), and no FederatedNamespace or RSP shapes it.
//!
//! A write re-derives the objects it concerns and checks every derived spec before anything
//! changes; a document that would make one of them inadmissible is refused as a whole. Deleting
//! a FederatedX deletes its object (KubeFed removes it from the members); deleting an RSP or a
//! FederatedNamespace re-derives what they shaped.

use serde_json::Value;

use super::door::{Identity, PolicyWrite};
use super::validate;
use crate::admission::Actor;
use crate::command::LOG_ENTRY_VERSION;
use crate::door::{PolicyKindTag, PolicyRecord, PolicyRef, ResourceKey};
use crate::error::FieldError;
use crate::karmada::PEER_WIDENED_SINCE;
use crate::kubefed::{self, FederatedKind};
use crate::model::ObjectSpec;
use crate::policy::{LabelSelectorRequirement, Placement, SelectorOperator};
use crate::state::{Ctx, HandlerResult, RejectCode, Rejection, State};

/// The resource template key of what `kind`/`name` in `namespace` federates.
fn target_key(kind: FederatedKind, namespace: &str, name: &str) -> ResourceKey {
    let (api_version, target) = kind.target();
    ResourceKey {
        group: api_version
            .split_once('/')
            .map_or(String::new(), |(g, _)| g.to_string()),
        kind: target.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

/// `a` narrowed to the clusters `b` also selects: names intersected, selectors ANDed.
fn intersect(a: &mut Placement, b: &Placement) {
    a.clusters = match (a.clusters.take(), &b.clusters) {
        (Some(x), Some(y)) => Some(x.into_iter().filter(|c| y.contains(c)).collect()),
        (Some(x), None) => Some(x),
        (None, y) => y.clone(),
    };
    a.cluster_selector = match (a.cluster_selector.take(), &b.cluster_selector) {
        (Some(mut x), Some(y)) => {
            for (k, v) in &y.match_labels {
                match x.match_labels.get(k) {
                    // Two values for one key: both must hold, which no cluster can satisfy;
                    // kept as two requirements so the decision says why.
                    Some(old) if old != v => x.match_expressions.push(LabelSelectorRequirement {
                        key: k.clone(),
                        operator: SelectorOperator::In,
                        values: vec![v.clone()],
                    }),
                    _ => {
                        x.match_labels.insert(k.clone(), v.clone());
                    }
                }
            }
            x.match_expressions
                .extend(y.match_expressions.iter().cloned());
            Some(x)
        }
        (Some(x), None) => Some(x),
        (None, y) => y.clone(),
    };
}

fn parse_stored(rec: &PolicyRecord) -> Value {
    // Stored only after it parsed as JSON at apply; a snapshot that says otherwise is refused
    // when it is decoded (`door::parse_policies`).
    serde_json::from_str(&rec.manifest).unwrap_or(Value::Null)
}

impl State {
    pub(crate) fn put_kubefed(
        &mut self,
        tag: PolicyKindTag,
        doc: Value,
        id: Identity,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        // The document is read first: a kind fedraft refuses is refused as such, whatever its
        // metadata says.
        match tag {
            PolicyKindTag::Federated(kind) => {
                kubefed::parse_federated(kind, &doc, &id.namespace, &id.name, ctx.version)?;
            }
            _ => {
                kubefed::parse_rsp(&doc, ctx.version)?;
            }
        }
        if tag.namespaced() {
            if id.namespace.is_empty() {
                return Err(FieldError::new("metadata.namespace", "required").into());
            }
            validate::dns_label(&id.namespace, "metadata.namespace")?;
        } else if !id.namespace.is_empty() {
            let (_, kind) = tag.api_version_kind();
            return Err(FieldError::new(
                "metadata.namespace",
                format!("a {kind} is cluster-scoped; leave namespace out"),
            )
            .into());
        }
        validate::dns_subdomain(&id.name, "metadata.name")?;
        self.check_kubefed_rights(tag, &id.namespace, ctx)?;
        if let PolicyKindTag::Federated(kind) = tag {
            let target = target_key(kind, &id.namespace, &id.name);
            if kind != FederatedKind::Namespace && self.door.templates.contains_key(&target) {
                return Err(Rejection::new(
                    RejectCode::FailedPrecondition,
                    Some("metadata.name"),
                    format!(
                        "{target} is a resource template already; a {} of it would place the \
                         same member object twice (delete one of them)",
                        kind.kind()
                    ),
                ));
            }
        }
        let key = PolicyRef {
            kind: tag,
            namespace: id.namespace,
            name: id.name,
        };
        let changed = |old: &Value, new: &Value| old.get("spec") != new.get("spec");
        let (record, previous) = match self.policy_write(&key, expected, &doc, changed, ctx)? {
            PolicyWrite::Unchanged(version) => return Ok(version),
            PolicyWrite::Store { record, previous } => (record, previous),
        };
        self.door.policies.insert(key.clone(), record);
        if let Err(refusal) = self.rederive_kubefed(&key, ctx) {
            match previous {
                Some(old) => self.door.policies.insert(key, old),
                None => self.door.policies.remove(&key),
            };
            return Err(refusal);
        }
        self.policy_changed(&key, previous.is_some(), ctx);
        Ok(Some(ctx.index))
    }

    pub(crate) fn delete_kubefed(
        &mut self,
        tag: PolicyKindTag,
        namespace: &str,
        name: &str,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        self.check_kubefed_rights(tag, namespace, ctx)?;
        let key = PolicyRef {
            kind: tag,
            namespace: namespace.to_string(),
            name: name.to_string(),
        };
        let (_, kind_name) = tag.api_version_kind();
        let Some(record) = self.door.policies.get(&key) else {
            return Err(Rejection::not_found(
                "metadata.name",
                format!("{kind_name} {namespace}/{name}"),
            ));
        };
        super::clusters::check_version(expected, Some(record.resource_version))?;
        if let PolicyKindTag::Federated(kind) = tag {
            if kind != FederatedKind::Namespace {
                let target = target_key(kind, namespace, name);
                let (ns, object) = (target.object_namespace(), target.object_name());
                // The object goes first: a refused delete (which refuses before changing
                // anything) then leaves the document too.
                if self.object(ns, &object).is_some() {
                    self.delete_object(ns, &object, None, ctx)?;
                }
                self.door.policies.remove(&key);
                self.policy_changed(&key, true, ctx);
                return Ok(Some(ctx.index));
            }
        }
        let old = self.door.policies.remove(&key);
        if let Err(refusal) = self.rederive_kubefed(&key, ctx) {
            if let Some(old) = old {
                self.door.policies.insert(key, old);
            }
            return Err(refusal);
        }
        self.policy_changed(&key, true, ctx);
        Ok(Some(ctx.index))
    }

    /// The spec of the object the FederatedX `kind` `namespace`/`name` federates, from the
    /// stored documents; None if there is no such FederatedX or it federates no object of its
    /// own (FederatedNamespace).
    fn kubefed_spec(
        &self,
        kind: FederatedKind,
        namespace: &str,
        name: &str,
    ) -> Option<Result<ObjectSpec, Rejection>> {
        if kind == FederatedKind::Namespace {
            return None;
        }
        let rec = self.door.policies.get(&PolicyRef {
            kind: PolicyKindTag::Federated(kind),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })?;
        let stored = parse_stored(rec);
        let mut fed =
            match kubefed::parse_federated(kind, &stored, namespace, name, LOG_ENTRY_VERSION) {
                Ok(f) => f,
                Err(e) => return Some(Err(e.into())),
            };
        let rsp = self.door.policies.get(&PolicyRef {
            kind: PolicyKindTag::ReplicaSchedulingPreference,
            namespace: namespace.to_string(),
            name: name.to_string(),
        });
        if let Some(Ok(rsp)) = rsp.map(|r| kubefed::parse_rsp(&parse_stored(r), LOG_ENTRY_VERSION))
        {
            if rsp.target == kind {
                rsp.apply(&mut fed);
            }
        }
        let ns = self.door.policies.get(&PolicyRef {
            kind: PolicyKindTag::Federated(FederatedKind::Namespace),
            namespace: namespace.to_string(),
            name: namespace.to_string(),
        });
        if let Some(ns) = ns {
            match kubefed::parse_federated(
                FederatedKind::Namespace,
                &parse_stored(ns),
                namespace,
                namespace,
                LOG_ENTRY_VERSION,
            ) {
                Ok(n) => intersect(&mut fed.placement, &n.placement),
                Err(e) => return Some(Err(e.into())),
            }
        }
        Some(Ok(ObjectSpec {
            template: fed.template.to_string(),
            placement: fed.placement,
            overrides: fed.overrides,
        }))
    }

    /// Re-derives the objects the document `changed` shapes: a FederatedX its own, an RSP its
    /// target's, a FederatedNamespace every FederatedX of its namespace. Every spec is checked
    /// before any is put.
    fn rederive_kubefed(&mut self, changed: &PolicyRef, ctx: &mut Ctx) -> Result<(), Rejection> {
        let ns = changed.namespace.as_str();
        let targets: Vec<(FederatedKind, String)> = match changed.kind {
            PolicyKindTag::Federated(FederatedKind::Namespace) => self
                .door
                .policies
                .keys()
                .filter(|k| k.namespace == ns)
                .filter_map(|k| match k.kind {
                    PolicyKindTag::Federated(kind) if kind.namespaced_target() => {
                        Some((kind, k.name.clone()))
                    }
                    _ => None,
                })
                .collect(),
            PolicyKindTag::Federated(kind) => vec![(kind, changed.name.clone())],
            _ => FederatedKind::ALL
                .into_iter()
                .filter(|k| k.schedulable())
                .map(|k| (k, changed.name.clone()))
                .collect(),
        };
        let mut changes = Vec::new();
        for (kind, name) in targets {
            let Some(spec) = self.kubefed_spec(kind, ns, &name) else {
                continue;
            };
            let spec = spec?;
            let target = target_key(kind, ns, &name);
            // A cluster-scoped target's object lives where the door keeps cluster-scoped ones.
            let (obj_ns, object) = (target.object_namespace(), target.object_name());
            let existing = self.object(obj_ns, &object);
            if existing.is_some_and(|o| o.spec == spec) {
                continue;
            }
            self.admit_object(obj_ns, &spec, existing, (ctx.version, &ctx.actor))
                .map_err(|r| {
                    Rejection::new(
                        r.code,
                        r.field.as_deref(),
                        format!(
                            "would make {} {ns}/{name} inadmissible: {}",
                            kind.kind(),
                            r.message
                        ),
                    )
                })?;
            changes.push((obj_ns.to_string(), object, spec));
        }
        for (obj_ns, object, spec) in changes {
            self.put_object(&obj_ns, &object, &spec, None, ctx)?;
        }
        Ok(())
    }

    /// A namespaced document follows its namespace's rights; a federated cluster-scoped kind
    /// reaches every namespace of the members it is placed on, so it is never a tenant's.
    fn check_kubefed_rights(
        &self,
        tag: PolicyKindTag,
        namespace: &str,
        ctx: &Ctx,
    ) -> Result<(), Rejection> {
        // Older entries are answered as they were (no such document could exist before).
        if tag.namespaced() || ctx.version < PEER_WIDENED_SINCE {
            return self.check_rights(namespace, &ctx.actor);
        }
        if matches!(ctx.actor, Actor::Tenant { .. }) {
            let (_, kind) = tag.api_version_kind();
            return Err(Rejection::new(
                RejectCode::Forbidden,
                Some("kind"),
                format!(
                    "a {kind} federates a cluster-scoped kind: only an administrator may write it"
                ),
            ));
        }
        Ok(())
    }

    /// Whether a plain template of `key` would fight a FederatedX over one member object.
    pub(crate) fn federated_owner(&self, key: &ResourceKey) -> Option<&'static str> {
        FederatedKind::ALL.into_iter().find_map(|kind| {
            let owns = kind != FederatedKind::Namespace
                && target_key(kind, &key.namespace, &key.name) == *key
                && self.door.policies.contains_key(&PolicyRef {
                    kind: PolicyKindTag::Federated(kind),
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                });
            owns.then_some(kind.kind())
        })
    }
}
