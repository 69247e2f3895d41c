//! Which resource templates a policy's `resourceSelectors` select, and how well.
//!
//! Karmada's rules: a selector names an apiVersion and a kind, which must be equal; a namespace,
//! which must be equal if given (a namespaced policy selects only its own namespace whatever the
//! selector says); and either a name, which must be equal (the label selector is then ignored),
//! or a label selector over the template's labels, or neither (every template of the kind). The
//! strength of the best matching selector ([`MatchRank`]) is the implicit priority between
//! policies that both select a template.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::PolicyKind;
use crate::error::FieldError;
use crate::policy::LabelSelector;

/// One entry of `spec.resourceSelectors`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceSelector {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
}

/// How specifically a selector matched: by name beats by labels beats by kind alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchRank {
    Kind,
    Labels,
    Name,
}

/// What selection reads of a resource template.
#[derive(Debug, Clone, Copy)]
pub struct TemplateIdentity<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
    /// Empty for a cluster-scoped template.
    pub namespace: &'a str,
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

impl ResourceSelector {
    /// `own_namespace`: the namespaced policy's own namespace where a selector may name it.
    pub(super) fn validate(
        &self,
        kind: PolicyKind,
        own_namespace: Option<&str>,
        field: &str,
    ) -> Result<(), FieldError> {
        if self.api_version.is_empty() {
            return Err(FieldError::new(format!("{field}.apiVersion"), "required"));
        }
        if self.kind.is_empty() {
            return Err(FieldError::new(format!("{field}.kind"), "required"));
        }
        if kind.namespaced()
            && self.namespace.is_some()
            && self.namespace.as_deref() != own_namespace
        {
            // Karmada ignores it there; refusing says so instead of selecting nothing quietly.
            return Err(FieldError::new(
                format!("{field}.namespace"),
                format!(
                    "a {} selects only its own namespace; leave namespace out{}",
                    kind.kind(),
                    if own_namespace.is_some() {
                        " or give that one"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if let Some(sel) = &self.label_selector {
            sel.validate(&format!("{field}.labelSelector"))?;
        }
        Ok(())
    }

    /// How this selector matches `t`, for a policy in `policy_namespace` (None: cluster-wide).
    pub fn matches(
        &self,
        t: &TemplateIdentity<'_>,
        policy_namespace: Option<&str>,
    ) -> Option<MatchRank> {
        if self.api_version != t.api_version || self.kind != t.kind {
            return None;
        }
        if let Some(ns) = policy_namespace {
            if ns != t.namespace {
                return None;
            }
        }
        if let Some(ns) = &self.namespace {
            if ns != t.namespace {
                return None;
            }
        }
        if let Some(name) = &self.name {
            return (name == t.name).then_some(MatchRank::Name);
        }
        match &self.label_selector {
            Some(sel) => sel.matches(t.labels).then_some(MatchRank::Labels),
            None => Some(MatchRank::Kind),
        }
    }
}

/// The best rank any of `selectors` matches `t` with, if any matches.
pub fn best_match(
    selectors: &[ResourceSelector],
    t: &TemplateIdentity<'_>,
    policy_namespace: Option<&str>,
) -> Option<MatchRank> {
    selectors
        .iter()
        .filter_map(|s| s.matches(t, policy_namespace))
        .max()
}

/// The order in which policies that select one template are preferred, best first: a higher
/// explicit `priority`, then a namespaced policy over a cluster-wide one, then the stronger match,
/// then the name (a total order, so the choice never depends on the order of a table).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Precedence<'a> {
    pub priority: i32,
    pub namespaced: bool,
    pub rank: MatchRank,
    /// Compared reversed: of two otherwise equal policies, the one whose name sorts first wins.
    pub name: std::cmp::Reverse<&'a str>,
}
