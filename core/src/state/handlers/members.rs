//! Member clusters registered through the door: Karmada's `Cluster`, KubeFed's `KubeFedCluster`
//! and the Secrets holding their credentials (`PutMemberCluster`, `PutMemberSecret`, and
//! `DeleteResource` of either).
//!
//! A cluster document and its Secret are kept in the door's policy table as written (the
//! Secret without its data: its credentials, sealed at the API edge, in
//! `door::SECRET_CREDENTIALS_FIELD`). When both are there, the document registers (or updates)
//! the fedraft cluster of its name through the native entry points, with the credentials the
//! edge sealed for that cluster name; either may come first, and a document whose Secret is
//! missing waits, registering nothing. Deleting the document deregisters the cluster; deleting
//! the Secret leaves the cluster with the credentials it has (a running member is not cut off
//! because its join Secret was cleaned up).
//!
//! The join happens at the edge, which alone holds the keys: it reads one side, seals the
//! credentials for the cluster, and names the version of the side it read in a
//! `MemberBinding`. Apply (here) checks that version, so a write that raced another is refused
//! as a conflict and the edge reads again. A name registered through the native API is never
//! taken over by a document, nor one document's cluster by another's.
//!
//! Must not: open, compare or judge credentials (core holds no key), or hand them to anything
//! but the cluster spec they are for.

use serde_json::Value;

use super::clusters::{check_version, validate_spec};
use super::door::{read_manifest, spec_part, Identity, PolicyWrite};
use super::validate;
use crate::admission::{Actor, Refusal};
use crate::command::MemberBinding;
use crate::door::{
    is_credentials_namespace, member_secret_manifest, parse_member, MemberDoc, PolicyKindTag,
    PolicyRef, ResourceKey, SecretRef, KARMADA_CLUSTER_GROUP, KUBEFED_CORE_GROUP, MEMBERS_SINCE,
};
use crate::error::FieldError;
use crate::model::{ClusterSpec, Credentials};
use crate::state::{Ctx, HandlerResult, RejectCode, Rejection, State};

fn admin_only(actor: &Actor) -> Result<(), Rejection> {
    if matches!(actor, Actor::Tenant { .. }) {
        return Err(Refusal::forbidden(
            "admin-only",
            "metadata.name",
            "member clusters and their credentials are an administrator's".to_string(),
        )
        .into());
    }
    Ok(())
}

/// The member kind a `DeleteResource` key names, if any.
fn member_tag_of_key(key: &ResourceKey) -> Option<PolicyKindTag> {
    match (key.group.as_str(), key.kind.as_str()) {
        (KARMADA_CLUSTER_GROUP, "Cluster") => Some(PolicyKindTag::KarmadaCluster),
        (KUBEFED_CORE_GROUP, "KubeFedCluster") => Some(PolicyKindTag::KubeFedCluster),
        ("", "Secret") if is_credentials_namespace(&key.namespace) => {
            Some(PolicyKindTag::MemberSecret)
        }
        _ => None,
    }
}

/// Refuses a `PutResource` manifest only the member commands may write (they carry its
/// credentials sealed; as a template a Secret would be stored in the clear and propagated).
pub(super) fn refuse_member_manifest(id: &Identity) -> Result<(), Rejection> {
    let (av, kind) = (id.api_version.as_str(), id.kind.as_str());
    let member = PolicyKindTag::member_doc(av, kind).is_some()
        || (av == "v1" && kind == "Secret" && is_credentials_namespace(&id.namespace));
    if !member {
        return Ok(());
    }
    Err(Rejection::new(
        RejectCode::Invalid,
        Some("kind"),
        format!(
            "{av} {kind} is written with the member commands, which carry its credentials sealed"
        ),
    ))
}

impl State {
    /// The member kind a `DeleteResource` of an entry of `version` removes, if any. A Secret of
    /// a credentials namespace written before `MEMBERS_SINCE` is a template, and is deleted as one.
    pub(super) fn member_to_delete(
        &self,
        key: &ResourceKey,
        version: u16,
    ) -> Option<PolicyKindTag> {
        if version < MEMBERS_SINCE {
            return None;
        }
        member_tag_of_key(key).filter(|tag| {
            *tag != PolicyKindTag::MemberSecret
                || self.door.policies.contains_key(&PolicyRef {
                    kind: *tag,
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                })
        })
    }

    /// The stored cluster documents that name `secret`, with their resource versions, in key
    /// order: what a Secret write must bind.
    pub fn member_docs_naming(&self, secret: &SecretRef) -> Vec<(PolicyRef, MemberDoc, u64)> {
        let from = PolicyRef {
            kind: PolicyKindTag::KarmadaCluster,
            namespace: String::new(),
            name: String::new(),
        };
        self.door
            .policies
            .range(from..)
            .take_while(|(k, _)| {
                matches!(
                    k.kind,
                    PolicyKindTag::KarmadaCluster | PolicyKindTag::KubeFedCluster
                )
            })
            .filter_map(|(k, rec)| {
                let doc: Value = serde_json::from_str(&rec.manifest).ok()?;
                let member = parse_member(k.kind, &doc)?.ok()?;
                (member.secret == *secret).then(|| (k.clone(), member, rec.resource_version))
            })
            .collect()
    }

    /// The cluster spec `member` asks for: the registered cluster's (thresholds, and its
    /// credentials unless `credentials` replaces them) or, for a new one, the defaults; None
    /// when the cluster is not registered and there are no credentials yet.
    fn member_spec(
        &self,
        member: &MemberDoc,
        credentials: Option<&Credentials>,
    ) -> Option<ClusterSpec> {
        let mut spec = match (self.d.clusters.get(&member.name), credentials) {
            (Some(c), _) => c.spec.clone(),
            (None, Some(_)) => ClusterSpec::new(member.name.clone(), member.api_endpoint.clone()),
            (None, None) => return None,
        };
        spec.api_endpoint = member.api_endpoint.clone();
        spec.labels = member.labels.clone();
        spec.taints = member.taints.clone();
        if let Some(c) = credentials {
            spec.credentials = c.clone();
        }
        Some(spec)
    }

    fn apply_member_spec(&mut self, spec: &ClusterSpec, ctx: &mut Ctx) -> Result<(), Rejection> {
        if self.d.clusters.get(&spec.name).is_some() {
            self.on_update_cluster(spec, None, ctx)?;
        } else {
            self.on_register_cluster(spec, ctx)?;
        }
        Ok(())
    }

    /// Refuses a document that would take a cluster it does not own: one registered through the
    /// native API, or one another document registers.
    fn check_member_owner(&self, key: &PolicyRef) -> Result<(), Rejection> {
        let other = self.door.policies.keys().find(|k| {
            matches!(
                k.kind,
                PolicyKindTag::KarmadaCluster | PolicyKindTag::KubeFedCluster
            ) && k.name == key.name
                && *k != key
        });
        if let Some(other) = other {
            let (_, kind) = other.kind.api_version_kind();
            return Err(Rejection::new(
                RejectCode::AlreadyExists,
                Some("metadata.name"),
                format!(
                    "cluster {:?} is registered by the {kind} {:?}",
                    key.name, other.name
                ),
            ));
        }
        if !self.door.policies.contains_key(key) && self.d.clusters.get(&key.name).is_some() {
            return Err(Rejection::new(
                RejectCode::AlreadyExists,
                Some("metadata.name"),
                format!(
                    "cluster {:?} is registered through fedraft's own API; deregister it there \
                     or name this document otherwise",
                    key.name
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn on_put_member_cluster(
        &mut self,
        manifest: &str,
        binding: Option<&MemberBinding>,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        admin_only(&ctx.actor)?;
        let (mut doc, id) = read_manifest(manifest)?;
        let tag = PolicyKindTag::member_doc(&id.api_version, &id.kind).ok_or_else(|| {
            FieldError::new(
                "kind",
                format!(
                    "{} {} is not a member cluster document",
                    id.api_version, id.kind
                ),
            )
        })?;
        let namespace = if tag.namespaced() {
            id.namespace
        } else {
            // Cluster-scoped: a namespace written in it is dropped, as kube-apiserver drops it.
            if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("namespace");
            }
            String::new()
        };
        validate::dns_label(&id.name, "metadata.name")?;
        let member = match parse_member(tag, &doc) {
            Some(parsed) => parsed?,
            None => return Err(FieldError::new("kind", "not a member cluster document").into()),
        };
        let key = PolicyRef {
            kind: tag,
            namespace,
            name: id.name,
        };
        self.check_member_owner(&key)?;
        let secret_key = PolicyRef {
            kind: PolicyKindTag::MemberSecret,
            namespace: member.secret.namespace.clone(),
            name: member.secret.name.clone(),
        };
        let secret_version = self
            .door
            .policies
            .get(&secret_key)
            .map(|r| r.resource_version);
        let fresh = match (secret_version, binding) {
            (None, None) => true,
            (Some(v), Some(b)) => b.read_version == v && b.cluster == member.name,
            _ => false,
        };
        if !fresh {
            return Err(Rejection::new(
                RejectCode::Conflict,
                Some("spec.secretRef"),
                format!(
                    "Secret {}/{} changed since this write read it (now at {secret_version:?})",
                    member.secret.namespace, member.secret.name
                ),
            ));
        }
        let spec = self.member_spec(&member, binding.map(|b| &b.credentials));
        if let Some(spec) = &spec {
            validate_spec(spec)?;
        }
        let changed = |old: &Value, new: &Value| spec_part(old) != spec_part(new);
        let (record, existed) = match self.policy_write(&key, expected, &doc, changed, ctx)? {
            PolicyWrite::Unchanged(version) => return Ok(version),
            PolicyWrite::Store { record, previous } => (record, previous.is_some()),
        };
        self.door.policies.insert(key.clone(), record);
        if let Some(spec) = spec {
            self.apply_member_spec(&spec, ctx)?;
        }
        self.policy_changed(&key, existed, ctx);
        Ok(Some(ctx.index))
    }

    pub(crate) fn on_put_member_secret(
        &mut self,
        manifest: &str,
        credentials: &Credentials,
        bindings: &[MemberBinding],
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        admin_only(&ctx.actor)?;
        let (doc, id) = read_manifest(manifest)?;
        if id.api_version != "v1" || id.kind != "Secret" {
            return Err(FieldError::new("kind", "a member Secret is a v1 Secret").into());
        }
        if !is_credentials_namespace(&id.namespace) {
            return Err(FieldError::new(
                "metadata.namespace",
                format!("{:?} is not a credentials namespace", id.namespace),
            )
            .into());
        }
        validate::dns_subdomain(&id.name, "metadata.name")?;
        for field in ["data", "stringData"] {
            if doc.get(field).is_some() {
                return Err(FieldError::new(
                    field,
                    "a member Secret's data travels sealed, in the command's credentials",
                )
                .into());
            }
        }
        if credentials == &Credentials::None {
            return Err(
                FieldError::new("data.token", "required: the member's bearer token").into(),
            );
        }
        let secret = SecretRef {
            namespace: id.namespace.clone(),
            name: id.name.clone(),
        };
        let naming = self.member_docs_naming(&secret);
        let bound = naming.len() == bindings.len()
            && naming
                .iter()
                .zip(bindings)
                .all(|((_, m, v), b)| b.cluster == m.name && b.read_version == *v);
        if !bound {
            return Err(Rejection::new(
                RejectCode::Conflict,
                Some("metadata.name"),
                format!(
                    "the cluster documents naming Secret {}/{} changed since this write read them",
                    id.namespace, id.name
                ),
            ));
        }
        let mut specs = Vec::with_capacity(naming.len());
        for ((_, member, _), b) in naming.iter().zip(bindings) {
            if let Some(spec) = self.member_spec(member, Some(&b.credentials)) {
                validate_spec(&spec)?;
                specs.push(spec);
            }
        }
        let key = PolicyRef {
            kind: PolicyKindTag::MemberSecret,
            namespace: id.namespace,
            name: id.name,
        };
        let stored: Value = match serde_json::from_str(&member_secret_manifest(&doc, credentials)) {
            Ok(v) => v,
            Err(e) => return Err(FieldError::new("manifest", e.to_string()).into()),
        };
        // Sealing is fresh each time: any write of the credentials is a change of the Secret.
        let changed = |old: &Value, new: &Value| spec_part(old) != spec_part(new);
        let (record, existed) = match self.policy_write(&key, expected, &stored, changed, ctx)? {
            PolicyWrite::Unchanged(version) => return Ok(version),
            PolicyWrite::Store { record, previous } => (record, previous.is_some()),
        };
        self.door.policies.insert(key.clone(), record);
        for spec in &specs {
            self.apply_member_spec(spec, ctx)?;
        }
        self.policy_changed(&key, existed, ctx);
        Ok(Some(ctx.index))
    }

    /// `DeleteResource` of a cluster document (deregistering its cluster) or a member Secret.
    pub(super) fn delete_member(
        &mut self,
        tag: PolicyKindTag,
        key: &ResourceKey,
        expected: Option<u64>,
        ctx: &mut Ctx,
    ) -> HandlerResult {
        admin_only(&ctx.actor)?;
        let pkey = PolicyRef {
            kind: tag,
            namespace: if tag.namespaced() {
                key.namespace.clone()
            } else {
                String::new()
            },
            name: key.name.clone(),
        };
        let Some(record) = self.door.policies.get(&pkey) else {
            return Err(Rejection::not_found("metadata.name", key));
        };
        check_version(expected, Some(record.resource_version))?;
        self.door.policies.remove(&pkey);
        if tag != PolicyKindTag::MemberSecret && self.d.clusters.get(&pkey.name).is_some() {
            self.on_deregister_cluster(&pkey.name, None, ctx)?;
        }
        self.policy_changed(&pkey, true, ctx);
        Ok(Some(ctx.index))
    }
}
