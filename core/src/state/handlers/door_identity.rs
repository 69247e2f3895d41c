//! A resource template's identity as the door reads it from its manifest (server-populated
//! fields dropped), and its scope: which templates may go without a namespace, who may write
//! them, and the one rule cluster-scoped templates add (a CustomResourceDefinition is not
//! deleted while objects of its kind are stored).
//!
//! From `door::CLUSTER_TEMPLATES_SINCE` on, a template without `metadata.namespace` of a kind
//! admission holds cluster-scoped (`admission::kinds::admitted_scope`: ClusterRole, StorageClass,
//! PriorityClass, CustomResourceDefinition, a custom kind written without a namespace...) is
//! stored under a key with an empty namespace; its federated object lives in
//! `door::CLUSTER_SCOPE_NAMESPACE` and is placed by ClusterPropagationPolicies only (a
//! namespaced PropagationPolicy selects templates of its own namespace). The object then goes
//! through the same admission as a native one: an administrator's cluster-scoped kinds must be
//! listed in the admission policy's `clusterScopedKinds`. Tenants are refused here, before
//! anything else, with a reason naming the kind. Must not: change anything (checks only).

use serde_json::{Map, Value};

use super::validate::{self, MAX_TEMPLATE_BYTES};
use crate::admission::kinds::{admitted_scope, kind_key};
use crate::admission::{Actor, Scope};
use crate::door::{self, ResourceKey, CLUSTER_SCOPE_NAMESPACE, CLUSTER_TEMPLATES_SINCE};
use crate::error::FieldError;
use crate::state::{Ctx, RejectCode, Rejection, State};

/// Metadata a server populates; a written manifest's values are dropped, never stored.
const SERVER_FIELDS: [&str; 7] = [
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
];

/// A manifest's identity, read once.
pub(crate) struct Identity {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) group: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

pub(super) fn read_manifest(text: &str) -> Result<(Value, Identity), Rejection> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err(FieldError::new(
            "manifest",
            format!(
                "{} bytes exceeds the limit of {MAX_TEMPLATE_BYTES} bytes",
                text.len()
            ),
        )
        .into());
    }
    let mut doc: Value = serde_json::from_str(text)
        .map_err(|e| FieldError::new("manifest", format!("not valid JSON: {e}")))?;
    let Some(obj) = doc.as_object_mut() else {
        return Err(FieldError::new("manifest", "must be a JSON object").into());
    };
    let text_of = |obj: &Map<String, Value>, key: &str| -> Result<String, Rejection> {
        match obj.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(FieldError::new(key, "required: a non-empty string").into()),
        }
    };
    let api_version = text_of(obj, "apiVersion")?;
    let kind = text_of(obj, "kind")?;
    obj.remove("status");
    let Some(Value::Object(meta)) = obj.get_mut("metadata") else {
        return Err(FieldError::new("metadata", "required: an object").into());
    };
    for f in SERVER_FIELDS {
        meta.remove(f);
    }
    let name = text_of(meta, "name").map_err(|_| {
        Rejection::from(FieldError::new(
            "metadata.name",
            "required: a non-empty string",
        ))
    })?;
    let namespace = match meta.get("namespace") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(FieldError::new("metadata.namespace", "must be a string").into());
        }
    };
    let group = match api_version.split_once('/') {
        Some((g, _)) => g.to_string(),
        None => String::new(),
    };
    Ok((
        doc,
        Identity {
            api_version,
            kind,
            group,
            namespace,
            name,
        },
    ))
}

pub(super) fn labels_of(doc: &Value) -> std::collections::BTreeMap<String, String> {
    doc.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

impl State {
    /// Whether a template of identity `id` may be stored with the scope its namespace gives it.
    pub(super) fn check_template_scope(&self, id: &Identity, ctx: &Ctx) -> Result<(), Rejection> {
        let newer = ctx.version >= CLUSTER_TEMPLATES_SINCE;
        if !id.namespace.is_empty() {
            validate::dns_label(&id.namespace, "metadata.namespace")?;
            if newer && id.namespace == CLUSTER_SCOPE_NAMESPACE {
                return Err(Rejection::new(
                    RejectCode::Invalid,
                    Some("metadata.namespace"),
                    format!(
                        "namespace {CLUSTER_SCOPE_NAMESPACE} is reserved for cluster-scoped \
                         templates; use another"
                    ),
                ));
            }
            return Ok(());
        }
        if !newer {
            return Err(Rejection::new(
                RejectCode::Invalid,
                Some("metadata.namespace"),
                "cluster-scoped resource templates are not supported yet; give a namespace",
            ));
        }
        let key = kind_key(&id.group, &id.kind);
        if admitted_scope(&id.group, &id.kind, false) != Scope::Cluster {
            return Err(Rejection::new(
                RejectCode::Invalid,
                Some("metadata.namespace"),
                format!("{key} is a namespaced kind: give a namespace"),
            ));
        }
        if matches!(ctx.actor, Actor::Tenant { .. }) {
            return Err(Rejection::new(
                RejectCode::Forbidden,
                Some("kind"),
                format!(
                    "{key} {} is cluster-scoped: it would reach every namespace of the members it \
                     is placed on, so only an administrator may write it",
                    id.name
                ),
            ));
        }
        Ok(())
    }

    /// Refuses to delete the CustomResourceDefinition `key` while templates of the kind it
    /// defines are stored: deleting it would orphan them (Kubernetes deletes them with it; the
    /// door asks for that to be done first, so no member loses objects as a side effect).
    pub(super) fn refuse_crd_in_use(&self, key: &ResourceKey) -> Result<(), Rejection> {
        if !key.is_crd() {
            return Ok(());
        }
        let Some(obj) = self.object(key.object_namespace(), &key.object_name()) else {
            return Ok(());
        };
        // Stored only after it parsed as JSON at apply.
        let doc: serde_json::Value =
            serde_json::from_str(&obj.spec.template).unwrap_or(serde_json::Value::Null);
        let Some((group, kind)) = door::crd_names(&doc) else {
            return Ok(());
        };
        let live = self
            .door
            .templates
            .keys()
            .filter(|k| k.group == group && k.kind == kind)
            .count();
        if live == 0 {
            return Ok(());
        }
        Err(Rejection::new(
            RejectCode::FailedPrecondition,
            Some("metadata.name"),
            format!(
                "CustomResourceDefinition {} still has {live} {kind} object(s) of group {group}; \
                 delete them first",
                key.name
            ),
        ))
    }
}
