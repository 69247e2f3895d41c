//! `OverridePolicy` / `ClusterOverridePolicy` specs onto fedraft's [`Override`]s.
//!
//! Each rule's `targetCluster` becomes the override's target (one override per listed cluster
//! name, or one with a label selector, or one for every cluster; a target that also excludes
//! names, uses a field selector, or gives names and a label selector becomes one selector with
//! the names as requirements on the cluster's name), and its overriders become, in
//! Karmada's order: `plaintext` → JSON patch operations; `imageOverrider` with `replace` and no
//! predicate → fedraft's image override of every container; `labelsOverrider` and
//! `annotationsOverrider` with `add` or `replace` → labels and annotations set on the object.
//! Other operators, predicates and the command/args overriders are refused with a message
//! naming the field.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::propagation::{cluster_selector, ClusterAffinity};
use super::select::ResourceSelector;
use super::{unsupported, KARMADA_WIDENED_SINCE};
use crate::error::FieldError;
use crate::policy::{
    ImageOverride, JsonPatchOp, LabelSelector, LabelSelectorRequirement, Override, PatchOpKind,
    SelectorOperator, CLUSTER_NAME_KEY,
};

/// An override policy's spec as fedraft keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideSpec {
    pub resource_selectors: Vec<ResourceSelector>,
    /// In the order the rules are written; applied in that order.
    pub overrides: Vec<Override>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RawOverrideSpec {
    #[serde(default)]
    resource_selectors: Vec<ResourceSelector>,
    #[serde(default)]
    override_rules: Vec<RawRule>,
    /// Karmada's deprecated single-rule form (`targetCluster` + `overriders` at the top).
    #[serde(default)]
    target_cluster: Option<ClusterAffinity>,
    #[serde(default)]
    overriders: Option<RawOverriders>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawRule {
    #[serde(default)]
    target_cluster: Option<ClusterAffinity>,
    overriders: RawOverriders,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawOverriders {
    #[serde(default)]
    plaintext: Vec<Plaintext>,
    #[serde(default)]
    image_overrider: Vec<ImageOverrider>,
    #[serde(default)]
    labels_overrider: Vec<MapOverrider>,
    #[serde(default)]
    annotations_overrider: Vec<MapOverrider>,
    #[serde(default)]
    command_overrider: Option<Value>,
    #[serde(default)]
    args_overrider: Option<Value>,
    #[serde(default)]
    field_overrider: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Operator {
    Add,
    Remove,
    Replace,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Plaintext {
    path: String,
    operator: Operator,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ImageOverrider {
    component: ImageComponent,
    operator: Operator,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    predicate: Option<Value>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
enum ImageComponent {
    Registry,
    Repository,
    Tag,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MapOverrider {
    operator: Operator,
    #[serde(default)]
    value: BTreeMap<String, String>,
}

impl RawOverrideSpec {
    pub(super) fn check(self, version: u16) -> Result<OverrideSpec, FieldError> {
        if self.resource_selectors.is_empty() {
            return Err(FieldError::new(
                "spec.resourceSelectors",
                "must select at least one kind",
            ));
        }
        let mut rules: Vec<(String, RawRule)> = self
            .override_rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| (format!("spec.overrideRules[{i}]"), r))
            .collect();
        match (self.target_cluster, self.overriders) {
            (target, Some(overriders)) => rules.push((
                "spec".to_string(),
                RawRule {
                    target_cluster: target,
                    overriders,
                },
            )),
            (Some(_), None) => {
                return Err(FieldError::new(
                    "spec.overriders",
                    "required with spec.targetCluster",
                ))
            }
            (None, None) => {}
        }
        if rules.is_empty() {
            return Err(FieldError::new(
                "spec.overrideRules",
                "must have at least one rule",
            ));
        }
        let mut overrides = Vec::new();
        for (field, rule) in rules {
            let template = rule.overriders.check(&format!("{field}.overriders"))?;
            let target = rule.target_cluster.unwrap_or_default();
            let tf = format!("{field}.targetCluster");
            let general = target.field_selector.is_some()
                || !target.exclude.is_empty()
                || (!target.cluster_names.is_empty() && target.label_selector.is_some());
            if general && version >= KARMADA_WIDENED_SINCE {
                overrides.push(Override {
                    cluster_selector: Some(target_selector(target, &tf)?),
                    ..template
                });
                continue;
            }
            if target.field_selector.is_some() || !target.exclude.is_empty() {
                return Err(unsupported(
                    tf,
                    "a target is clusterNames or a labelSelector",
                ));
            }
            match (target.cluster_names.is_empty(), target.label_selector) {
                (false, Some(_)) => {
                    return Err(unsupported(
                        format!("{tf}.labelSelector"),
                        "a target is clusterNames or a labelSelector, not both",
                    ))
                }
                (false, None) => {
                    for name in target.cluster_names {
                        overrides.push(Override {
                            cluster_name: Some(name),
                            ..template.clone()
                        });
                    }
                }
                (true, selector) => overrides.push(Override {
                    cluster_selector: selector,
                    ..template
                }),
            }
        }
        for (i, o) in overrides.iter().enumerate() {
            o.validate(&format!("spec.overrideRules (override {i})"))?;
        }
        Ok(OverrideSpec {
            resource_selectors: self.resource_selectors,
            overrides,
        })
    }
}

/// Every part of a target ANDed into one selector over clusters, names by [`CLUSTER_NAME_KEY`].
/// Targets of names alone keep their first mapping (one override per name).
fn target_selector(target: ClusterAffinity, field: &str) -> Result<LabelSelector, FieldError> {
    let mut selector = cluster_selector(target.label_selector, target.field_selector, field)?;
    for (operator, names) in [
        (SelectorOperator::In, target.cluster_names),
        (SelectorOperator::NotIn, target.exclude),
    ] {
        if !names.is_empty() {
            selector.match_expressions.push(LabelSelectorRequirement {
                key: CLUSTER_NAME_KEY.to_string(),
                operator,
                values: names,
            });
        }
    }
    Ok(selector)
}

impl RawOverriders {
    /// The override these overriders make, without a target yet.
    fn check(self, field: &str) -> Result<Override, FieldError> {
        for (name, present) in [
            ("commandOverrider", self.command_overrider.is_some()),
            ("argsOverrider", self.args_overrider.is_some()),
            ("fieldOverrider", self.field_overrider.is_some()),
        ] {
            if present {
                return Err(unsupported(
                    format!("{field}.{name}"),
                    "not implemented yet; plaintext patches can express it",
                ));
            }
        }
        let mut out = Override::default();
        for (i, p) in self.plaintext.into_iter().enumerate() {
            let f = format!("{field}.plaintext[{i}]");
            let op = match p.operator {
                Operator::Add => PatchOpKind::Add,
                Operator::Remove => PatchOpKind::Remove,
                Operator::Replace => PatchOpKind::Replace,
            };
            let value = match (op, p.value) {
                (PatchOpKind::Remove, _) => None,
                (_, Some(v)) => Some(v.to_string()),
                (_, None) => {
                    return Err(FieldError::new(
                        format!("{f}.value"),
                        "required for add and replace",
                    ))
                }
            };
            out.patches.push(JsonPatchOp {
                op,
                path: p.path,
                from: None,
                value,
            });
        }
        if !self.image_overrider.is_empty() {
            let mut image = ImageOverride::default();
            for (i, o) in self.image_overrider.into_iter().enumerate() {
                let f = format!("{field}.imageOverrider[{i}]");
                if o.predicate.is_some() {
                    return Err(unsupported(
                        format!("{f}.predicate"),
                        "an image override applies to every container",
                    ));
                }
                if o.operator != Operator::Replace {
                    return Err(unsupported(
                        format!("{f}.operator"),
                        "only replace is implemented for images",
                    ));
                }
                let value = o
                    .value
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| FieldError::new(format!("{f}.value"), "required"))?;
                let slot = match o.component {
                    ImageComponent::Registry => &mut image.registry,
                    ImageComponent::Repository => &mut image.repository,
                    ImageComponent::Tag => &mut image.tag,
                };
                *slot = Some(value);
            }
            out.image = Some(image);
        }
        for (list, target, name) in [
            (self.labels_overrider, &mut out.labels, "labelsOverrider"),
            (
                self.annotations_overrider,
                &mut out.annotations,
                "annotationsOverrider",
            ),
        ] {
            for (i, o) in list.into_iter().enumerate() {
                if o.operator == Operator::Remove {
                    return Err(unsupported(
                        format!("{field}.{name}[{i}].operator"),
                        "remove is not implemented yet; add and replace set the value",
                    ));
                }
                target.extend(o.value);
            }
        }
        Ok(out)
    }
}
