//! What a propagation policy learned in the second widening of the peer documents
//! (`PEER_WIDENED_SINCE`): ordered affinity groups (`placement.clusterAffinities`), lazy
//! activation, dependent overrides, the deprecated `association`, and the refusals that name
//! what fedraft offers instead (placement fields written beside `placement` instead of under
//! it, `workloadAffinity` for entries before `WORKLOAD_AFFINITY_SINCE`). A group's
//! `overflowAffinities` are read by `super::overflow`.
//!
//! Must not: decide which group an object uses; that is the state machine's, from the fleet
//! (`state/handlers/affinity_groups.rs`). Everything here is read only from entries of
//! `PEER_WIDENED_SINCE` on; an older entry sees the document exactly as it did when written.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::Value;

use super::overflow::{self, RawOverflow};
use super::propagation::{ClusterAffinity, FieldSelector};
use super::{typed, unsupported, PEER_WIDENED_SINCE, WORKLOAD_AFFINITY_SINCE};
use crate::error::FieldError;
use crate::policy::{LabelSelector, Placement};
use crate::scheduler::Overflow;

/// One of `placement.clusterAffinities`: its name, the whole placement it stands for and the
/// overflow tiers after its own clusters (`super::overflow`; None without
/// `overflowAffinities`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityGroup {
    pub name: String,
    pub placement: Placement,
    pub overflow: Option<Overflow>,
}

/// Karmada's `ClusterAffinityTerm`: a `ClusterAffinity` with a name.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTerm {
    #[serde(default)]
    affinity_name: String,
    #[serde(default)]
    label_selector: Option<LabelSelector>,
    #[serde(default)]
    field_selector: Option<FieldSelector>,
    #[serde(default)]
    cluster_names: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    overflow_affinities: Option<Value>,
}

/// The fields of Karmada's `Placement`, which a document indented one level too little puts
/// beside `placement` (the published "resume propagation" sample does).
const PLACEMENT_FIELDS: [&str; 6] = [
    "clusterAffinity",
    "clusterAffinities",
    "clusterTolerations",
    "spreadConstraints",
    "replicaScheduling",
    "workloadAffinity",
];

/// The `spec` of a propagation policy as the typed reader should see it under `version`:
/// from `PEER_WIDENED_SINCE` on, `association` read as `propagateDeps`, and the fields fedraft
/// refuses for a reason refused with that reason rather than as unknown. Older entries get the
/// spec untouched, so they are refused with exactly the words they were refused with.
pub(super) fn widen(spec: &Value, version: u16) -> Result<Cow<'_, Value>, FieldError> {
    if version < PEER_WIDENED_SINCE {
        return Ok(Cow::Borrowed(spec));
    }
    let Some(obj) = spec.as_object() else {
        return Ok(Cow::Borrowed(spec));
    };
    for field in PLACEMENT_FIELDS {
        if obj.contains_key(field) {
            return Err(FieldError::new(
                format!("spec.{field}"),
                "unknown field here: it belongs under spec.placement (Karmada refuses it \
                 beside placement too)",
            ));
        }
    }
    if let Some(placement) = obj.get("placement").and_then(Value::as_object) {
        // Read from its own version on (`super::workload`); refused to the entries before it.
        if placement.contains_key("workloadAffinity") && version < WORKLOAD_AFFINITY_SINCE {
            return Err(unsupported(
                "spec.placement.workloadAffinity",
                "workloads are not co-located or separated by their labels; place related \
                 workloads with one policy (clusterAffinity, spreadConstraints) or name the \
                 clusters of each in clusterAffinity.clusterNames",
            ));
        }
    }
    let Some(association) = obj.get("association") else {
        return Ok(Cow::Borrowed(spec));
    };
    let Some(association) = association.as_bool() else {
        return Err(FieldError::new("spec.association", "must be true or false"));
    };
    let mut owned = obj.clone();
    owned.remove("association");
    match owned.get("propagateDeps").and_then(Value::as_bool) {
        Some(deps) if deps != association => {
            return Err(FieldError::new(
                "spec.association",
                "the deprecated name of propagateDeps; give one of them, or the same value",
            ))
        }
        Some(_) => {}
        None => {
            owned.insert("propagateDeps".to_string(), Value::Bool(association));
        }
    }
    Ok(Cow::Owned(Value::Object(owned)))
}

/// `placement.clusterAffinities` at `field`: each group's name, its cluster affinity and its
/// overflow groups (`super::overflow`), in order.
pub(super) fn terms(value: &Value, field: &str, version: u16) -> Result<Vec<Term>, FieldError> {
    let raw: Vec<RawTerm> = typed(value, field)?;
    if raw.is_empty() {
        return Err(FieldError::new(field, "give at least one affinity group"));
    }
    let mut names = BTreeSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, t) in raw.into_iter().enumerate() {
        let f = format!("{field}[{i}]");
        if t.affinity_name.is_empty() {
            return Err(FieldError::new(format!("{f}.affinityName"), "required"));
        }
        if !names.insert(t.affinity_name.clone()) {
            return Err(FieldError::new(
                format!("{f}.affinityName"),
                format!("{:?} names two groups", t.affinity_name),
            ));
        }
        let empty = t.label_selector.is_none()
            && t.field_selector.is_none()
            && t.cluster_names.is_empty()
            && t.exclude.is_empty();
        let overflow = overflow::read(t.overflow_affinities, &t.affinity_name, empty, &f, version)?;
        out.push(Term {
            name: t.affinity_name,
            affinity: ClusterAffinity::new(
                t.label_selector,
                t.field_selector,
                t.cluster_names,
                t.exclude,
            ),
            overflow,
        });
    }
    Ok(out)
}

/// One of `placement.clusterAffinities` as read, before it becomes an [`AffinityGroup`].
pub(super) struct Term {
    pub name: String,
    pub affinity: ClusterAffinity,
    pub overflow: Option<RawOverflow>,
}

/// `activationPreference`: Karmada knows only `Lazy` (absent or empty is immediate).
pub(super) fn lazy(value: Option<&str>) -> Result<bool, FieldError> {
    match value {
        None | Some("") => Ok(false),
        Some("Lazy") => Ok(true),
        Some(other) => Err(FieldError::new(
            "spec.activationPreference",
            format!("{other:?}: must be Lazy or left out"),
        )),
    }
}

/// `dependentOverrides`: names of override policies, each a DNS subdomain, none twice.
pub(super) fn dependent_overrides(names: Vec<String>) -> Result<Vec<String>, FieldError> {
    let mut seen = BTreeSet::new();
    for (i, n) in names.iter().enumerate() {
        let field = format!("spec.dependentOverrides[{i}]");
        crate::state::validate::dns_subdomain(n, &field)?;
        if !seen.insert(n.as_str()) {
            return Err(FieldError::new(field, format!("{n:?} is named twice")));
        }
    }
    Ok(names)
}
