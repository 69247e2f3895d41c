//! Kubernetes label selectors over cluster labels (and the cluster's own name, by
//! [`CLUSTER_NAME_KEY`]), with their validation.
//!
//! Must not: know placements or the scheduler; they call `matches_cluster` per cluster.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::names::{validate_label_key, validate_label_value};
use crate::error::FieldError;

/// The key a cluster selector's expression or a spread constraint uses to mean the cluster's own
/// name, as if every cluster carried it as a label: what Karmada's `exclude` without
/// `clusterNames` and `spreadByField: cluster` need. It is not a valid label key, so no cluster
/// label can shadow it and no placement written before it existed can have meant anything else.
/// Only cluster selectors' `matchExpressions` and spread constraints accept it, and only in log
/// entries of version [`CLUSTER_NAME_KEY_SINCE`] and later.
pub const CLUSTER_NAME_KEY: &str = "(cluster name)";

/// The first log entry version whose placements may use [`CLUSTER_NAME_KEY`].
pub const CLUSTER_NAME_KEY_SINCE: u16 = 4;

/// A set-based label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default)]
    pub values: Vec<String>,
}

impl LabelSelectorRequirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }

    /// [`matches`](Self::matches) for a cluster's labels, where [`CLUSTER_NAME_KEY`] is the
    /// cluster's name.
    pub fn matches_cluster(&self, cluster: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.key == CLUSTER_NAME_KEY {
            self.matches_value(Some(cluster))
        } else {
            self.matches(labels)
        }
    }

    fn matches_value(&self, value: Option<&str>) -> bool {
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            // Kubernetes: NotIn matches a missing key too.
            SelectorOperator::NotIn => value.is_none_or(|v| self.values.iter().all(|x| x != v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// A Kubernetes label selector over cluster labels. An empty selector matches every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// [`matches`](Self::matches) for a cluster, whose name [`CLUSTER_NAME_KEY`] stands for.
    pub fn matches_cluster(&self, cluster: &str, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .match_expressions
                .iter()
                .all(|r| r.matches_cluster(cluster, labels))
    }

    /// The index of the first expression that names the cluster by [`CLUSTER_NAME_KEY`].
    pub fn cluster_name_key_at(&self) -> Option<usize> {
        self.match_expressions
            .iter()
            .position(|r| r.key == CLUSTER_NAME_KEY)
    }

    pub fn validate(&self, field_prefix: &str) -> Result<(), FieldError> {
        self.validate_keys(field_prefix, false)
    }

    /// [`validate`](Self::validate) for a selector over clusters, whose expressions may also
    /// use [`CLUSTER_NAME_KEY`] (with a cluster name as value).
    pub fn validate_cluster_selector(&self, field_prefix: &str) -> Result<(), FieldError> {
        self.validate_keys(field_prefix, true)
    }

    fn validate_keys(&self, field_prefix: &str, cluster_name_key: bool) -> Result<(), FieldError> {
        for (key, value) in &self.match_labels {
            let field = format!("{field_prefix}.matchLabels.{key}");
            validate_label_key(key, &field)?;
            validate_label_value(value, &field)?;
        }
        for (i, req) in self.match_expressions.iter().enumerate() {
            let field = format!("{field_prefix}.matchExpressions[{i}]");
            if !(cluster_name_key && req.key == CLUSTER_NAME_KEY) {
                validate_label_key(&req.key, &format!("{field}.key"))?;
            }
            let needs_values =
                matches!(req.operator, SelectorOperator::In | SelectorOperator::NotIn);
            if needs_values && req.values.is_empty() {
                return Err(FieldError::new(
                    format!("{field}.values"),
                    "must not be empty for operator In or NotIn",
                ));
            }
            if !needs_values && !req.values.is_empty() {
                return Err(FieldError::new(
                    format!("{field}.values"),
                    "must be empty for operator Exists or DoesNotExist",
                ));
            }
            for (j, v) in req.values.iter().enumerate() {
                validate_label_value(v, &format!("{field}.values[{j}]"))?;
            }
        }
        Ok(())
    }
}
