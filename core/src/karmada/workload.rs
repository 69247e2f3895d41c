//! Karmada's `placement.workloadAffinity`, read from entries of `WORKLOAD_AFFINITY_SINCE` on:
//! the label keys whose values group a policy's workloads, to be co-located (`affinity`) or
//! kept apart (`antiAffinity`).
//!
//! Owns: the document's shape and checks (at least one term, each with a valid label key).
//! Must not: find peers or restrict clusters; the state machine does that from the templates
//! it stores when it decides a placement (`state/handlers/workload_affinity.rs`). An older entry
//! never reaches here: its `widen` refuses the field as it did when the entry was written.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::{typed, WORKLOAD_AFFINITY_SINCE};
use crate::error::FieldError;
use crate::policy::validate_label_key;

/// A policy's `placement.workloadAffinity`: the label key of each term given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadAffinity {
    /// `affinity.groupByLabelKey`: workloads with the same value go where the others are.
    pub affinity: Option<String>,
    /// `antiAffinity.groupByLabelKey`: workloads with the same value go where none of the
    /// others is.
    pub anti_affinity: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawWorkloadAffinity {
    #[serde(default)]
    affinity: Option<RawTerm>,
    #[serde(default)]
    anti_affinity: Option<RawTerm>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTerm {
    #[serde(default)]
    group_by_label_key: String,
}

const FIELD: &str = "spec.placement.workloadAffinity";

/// `spec` without `placement.workloadAffinity`, and that field read, for an entry of
/// `version`. Before `WORKLOAD_AFFINITY_SINCE` the spec is returned untouched, so the placement
/// reader refuses the field exactly as it did.
pub(super) fn split(
    spec: Cow<'_, Value>,
    version: u16,
) -> Result<(Cow<'_, Value>, Option<WorkloadAffinity>), FieldError> {
    let present = spec
        .get("placement")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("workloadAffinity"));
    if version < WORKLOAD_AFFINITY_SINCE || !present {
        return Ok((spec, None));
    }
    let mut owned = spec.into_owned();
    let raw = owned
        .get_mut("placement")
        .and_then(Value::as_object_mut)
        .and_then(|p| p.remove("workloadAffinity"))
        .unwrap_or(Value::Null);
    Ok((Cow::Owned(owned), Some(read(&raw)?)))
}

fn read(raw: &Value) -> Result<WorkloadAffinity, FieldError> {
    let raw: RawWorkloadAffinity = typed(raw, FIELD)?;
    if raw.affinity.is_none() && raw.anti_affinity.is_none() {
        return Err(FieldError::new(
            FIELD,
            "give affinity, antiAffinity or both (each with a groupByLabelKey)",
        ));
    }
    let key = |term: Option<RawTerm>, name: &str| -> Result<Option<String>, FieldError> {
        let Some(t) = term else {
            return Ok(None);
        };
        let field = format!("{FIELD}.{name}.groupByLabelKey");
        if t.group_by_label_key.is_empty() {
            return Err(FieldError::new(field, "required"));
        }
        validate_label_key(&t.group_by_label_key, &field)?;
        Ok(Some(t.group_by_label_key))
    };
    Ok(WorkloadAffinity {
        affinity: key(raw.affinity, "affinity")?,
        anti_affinity: key(raw.anti_affinity, "antiAffinity")?,
    })
}
