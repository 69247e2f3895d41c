//! Per-cluster overrides of a federated object's template: RFC 6902 JSON patch ops (values as
//! JSON text, so bincode can carry them), the image overrider, and label/annotation overriders.
//! Must not: apply them (that is `render`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::names::{
    validate_dns_label, validate_label_key, validate_label_value, validate_pointer,
};
use super::LabelSelector;
use crate::error::FieldError;

/// The six RFC 6902 operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchOpKind {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

impl PatchOpKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PatchOpKind::Add => "add",
            PatchOpKind::Remove => "remove",
            PatchOpKind::Replace => "replace",
            PatchOpKind::Move => "move",
            PatchOpKind::Copy => "copy",
            PatchOpKind::Test => "test",
        }
    }
}

/// One RFC 6902 JSON Patch operation. `value` is JSON text (bincode cannot carry a JSON value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonPatchOp {
    pub op: PatchOpKind,
    pub path: String,
    /// Source pointer for `move` and `copy`.
    #[serde(default)]
    pub from: Option<String>,
    /// JSON text, for `add`, `replace` and `test`.
    #[serde(default)]
    pub value: Option<String>,
}

impl JsonPatchOp {
    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        validate_pointer(&self.path, &format!("{field_prefix}.path"))?;
        match self.op {
            PatchOpKind::Move | PatchOpKind::Copy => match &self.from {
                Some(from) => validate_pointer(from, &format!("{field_prefix}.from"))?,
                None => {
                    return Err(FieldError::new(
                        format!("{field_prefix}.from"),
                        format!("required for op {}", self.op.as_str()),
                    ))
                }
            },
            PatchOpKind::Add | PatchOpKind::Replace | PatchOpKind::Test => match &self.value {
                Some(text) => {
                    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                        return Err(FieldError::new(
                            format!("{field_prefix}.value"),
                            format!("not valid JSON: {e}"),
                        ));
                    }
                }
                None => {
                    return Err(FieldError::new(
                        format!("{field_prefix}.value"),
                        format!("required for op {}", self.op.as_str()),
                    ))
                }
            },
            PatchOpKind::Remove => {}
        }
        Ok(())
    }
}

/// Rewrites parts of container image references (`registry/repository:tag`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageOverride {
    /// Container name to rewrite; None = every container and init container.
    #[serde(default)]
    pub container: Option<String>,
    /// New registry host (e.g. `mirror.eu.example.com`); empty string removes the registry.
    #[serde(default)]
    pub registry: Option<String>,
    /// New repository path (e.g. `library/nginx`).
    #[serde(default)]
    pub repository: Option<String>,
    /// New tag; replaces any digest.
    #[serde(default)]
    pub tag: Option<String>,
}

/// Changes applied to the template for the clusters it targets, in this order: JSON patches,
/// image, labels, annotations.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Override {
    /// Targets one cluster by name. With neither this nor a selector, every cluster.
    #[serde(default)]
    pub cluster_name: Option<String>,
    #[serde(default)]
    pub cluster_selector: Option<LabelSelector>,
    #[serde(default)]
    pub patches: Vec<JsonPatchOp>,
    #[serde(default)]
    pub image: Option<ImageOverride>,
    /// Added or replaced on `metadata.labels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Added or replaced on `metadata.annotations`.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl Override {
    /// Whether this override applies to the named cluster.
    pub fn targets(&self, cluster: &str, labels: &BTreeMap<String, String>) -> bool {
        if let Some(name) = &self.cluster_name {
            if name != cluster {
                return false;
            }
        }
        if let Some(sel) = &self.cluster_selector {
            if !sel.matches_cluster(cluster, labels) {
                return false;
            }
        }
        true
    }

    /// The field of a use of [`CLUSTER_NAME_KEY`](super::CLUSTER_NAME_KEY), if any (see
    /// [`Placement::cluster_name_key_field`](super::Placement::cluster_name_key_field)).
    pub fn cluster_name_key_field(&self, field_prefix: &str) -> Option<String> {
        let i = self.cluster_selector.as_ref()?.cluster_name_key_at()?;
        Some(format!(
            "{field_prefix}.clusterSelector.matchExpressions[{i}].key"
        ))
    }

    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        if self.cluster_name.is_some() && self.cluster_selector.is_some() {
            return Err(FieldError::new(
                format!("{field_prefix}.clusterSelector"),
                "give clusterName or clusterSelector, not both",
            ));
        }
        if let Some(name) = &self.cluster_name {
            validate_dns_label(name, &format!("{field_prefix}.clusterName"))?;
        }
        if let Some(sel) = &self.cluster_selector {
            sel.validate_cluster_selector(&format!("{field_prefix}.clusterSelector"))?;
        }
        for (i, p) in self.patches.iter().enumerate() {
            p.validate(&format!("{field_prefix}.patches[{i}]"))?;
        }
        if let Some(img) = &self.image {
            let field = format!("{field_prefix}.image");
            if img.registry.is_none() && img.repository.is_none() && img.tag.is_none() {
                return Err(FieldError::new(
                    field,
                    "set at least one of registry, repository, tag",
                ));
            }
            if let Some(repo) = &img.repository {
                if repo.is_empty() || repo.contains(':') || repo.contains('@') {
                    return Err(FieldError::new(
                        format!("{field}.repository"),
                        "must be a non-empty path without ':' or '@'",
                    ));
                }
            }
            if let Some(tag) = &img.tag {
                if tag.is_empty() || tag.len() > 128 || tag.contains('/') || tag.contains(':') {
                    return Err(FieldError::new(
                        format!("{field}.tag"),
                        "must be 1 to 128 characters without '/' or ':'",
                    ));
                }
            }
            if let Some(reg) = &img.registry {
                if reg.contains('/') {
                    return Err(FieldError::new(
                        format!("{field}.registry"),
                        "must not contain '/'",
                    ));
                }
            }
        }
        for (k, v) in &self.labels {
            let field = format!("{field_prefix}.labels.{k}");
            validate_label_key(k, &field)?;
            validate_label_value(v, &field)?;
        }
        for k in self.annotations.keys() {
            validate_label_key(k, &format!("{field_prefix}.annotations.{k}"))?;
        }
        Ok(())
    }
}
