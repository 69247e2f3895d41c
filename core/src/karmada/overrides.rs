//! `OverridePolicy` / `ClusterOverridePolicy` specs onto fedraft's [`Override`]s.
//!
//! Each rule's `targetCluster` becomes the override's target (one override per listed cluster
//! name, or one with a label selector, or one for every cluster; a target that also excludes
//! names, uses a field selector, or gives names and a label selector becomes one selector with
//! the names as requirements on the cluster's name). A rule of the first mapping becomes one
//! override: `plaintext` → JSON patch operations; `imageOverrider` with `replace` and no
//! predicate → fedraft's image override of every container; `labelsOverrider` and
//! `annotationsOverrider` with `add` or `replace` → labels and annotations set on the object;
//! render applies them in that order. A rule that uses what fedraft learned since
//! (`PEER_WIDENED_SINCE`: `commandOverrider`, `argsOverrider`, the `remove` operator of the
//! labels and annotations overriders) is kept as edits resolved against each template
//! (`edits`), in Karmada's order of overriders. Since `OVERRIDERS_WIDENED_SINCE` so is a rule
//! with `fieldOverrider` (`field_overrider`) or with an `imageOverrider` item that uses `add`,
//! `remove` or a `predicate`: all of that rule's image items then apply as Karmada applies them
//! (`image_overrider`). An older entry is refused those as it was when written.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::edits::{self, Edit, ListField, MetaField};
use super::image_overrider::{Component, ImageEdit, ImageOp};
use super::propagation::{cluster_selector, ClusterAffinity};
use super::select::ResourceSelector;
use super::{
    field_overrider, unsupported, KARMADA_WIDENED_SINCE, OVERRIDERS_WIDENED_SINCE,
    PEER_WIDENED_SINCE,
};
use crate::error::FieldError;
use crate::policy::{
    validate_label_key, ImageOverride, JsonPatchOp, LabelSelector, LabelSelectorRequirement,
    Override, PatchOpKind, SelectorOperator, CLUSTER_NAME_KEY,
};

/// An override policy's spec as fedraft keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideSpec {
    pub resource_selectors: Vec<ResourceSelector>,
    /// In the order the rules are written; applied in that order.
    steps: Vec<Step>,
}

/// One target of one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A rule of the first mapping: the same override for every template.
    Fixed(Override),
    /// A rule resolved per template: its target (an override with only the cluster fields set)
    /// and its overriders as edits.
    OnTemplate(Override, Vec<Edit>),
}

impl OverrideSpec {
    /// Whether [`OverrideSpec::overrides`] reads the template (callers parse it only then).
    pub fn reads_template(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, Step::OnTemplate(..)))
    }

    /// The overrides this policy makes for `template`, in the order they apply.
    pub fn overrides(&self, template: &Value) -> Vec<Override> {
        let mut out = Vec::new();
        for step in &self.steps {
            match step {
                Step::Fixed(o) => out.push(o.clone()),
                Step::OnTemplate(target, list) => {
                    out.extend(
                        edits::resolve(list, template)
                            .into_iter()
                            .map(|o| Override {
                                cluster_name: target.cluster_name.clone(),
                                cluster_selector: target.cluster_selector.clone(),
                                ..o
                            }),
                    );
                }
            }
        }
        out
    }
}

/// What a rule's overriders make, before a target is given.
enum Body {
    Fixed(Box<Override>),
    Edits(Vec<Edit>),
}

impl Body {
    fn at(&self, target: Override) -> Step {
        match self {
            Body::Fixed(o) => Step::Fixed(Override {
                cluster_name: target.cluster_name,
                cluster_selector: target.cluster_selector,
                ..(**o).clone()
            }),
            Body::Edits(e) => Step::OnTemplate(target, e.clone()),
        }
    }
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

impl ImageOverrider {
    fn edit(self, field: &str) -> Result<ImageEdit, FieldError> {
        let component = match self.component {
            ImageComponent::Registry => Component::Registry,
            ImageComponent::Repository => Component::Repository,
            ImageComponent::Tag => Component::Tag,
        };
        let op = match self.operator {
            Operator::Add => ImageOp::Add,
            Operator::Remove => ImageOp::Remove,
            Operator::Replace => ImageOp::Replace,
        };
        ImageEdit::check(component, op, self.value, self.predicate.as_ref(), field)
    }
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

/// A `commandOverrider` or `argsOverrider` item. Read only under `PEER_WIDENED_SINCE`: before,
/// the overrider was refused whatever it held, and an older entry still is, with its message.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListOverrider {
    container_name: String,
    operator: ListOperator,
    #[serde(default)]
    value: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ListOperator {
    Add,
    Remove,
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
        let mut steps = Vec::new();
        for (field, rule) in rules {
            let body = rule
                .overriders
                .check(&format!("{field}.overriders"), version)?;
            let target = rule.target_cluster.unwrap_or_default();
            let tf = format!("{field}.targetCluster");
            let general = target.field_selector.is_some()
                || !target.exclude.is_empty()
                || (!target.cluster_names.is_empty() && target.label_selector.is_some());
            if general && version >= KARMADA_WIDENED_SINCE {
                steps.push(body.at(Override {
                    cluster_selector: Some(target_selector(target, &tf)?),
                    ..Override::default()
                }));
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
                        steps.push(body.at(Override {
                            cluster_name: Some(name),
                            ..Override::default()
                        }));
                    }
                }
                (true, selector) => steps.push(body.at(Override {
                    cluster_selector: selector,
                    ..Override::default()
                })),
            }
        }
        for (i, step) in steps.iter().enumerate() {
            let (Step::Fixed(o) | Step::OnTemplate(o, _)) = step;
            o.validate(&format!("spec.overrideRules (override {i})"))?;
        }
        Ok(OverrideSpec {
            resource_selectors: self.resource_selectors,
            steps,
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
    /// What these overriders make, without a target yet.
    fn check(self, field: &str, version: u16) -> Result<Body, FieldError> {
        let widened = version >= PEER_WIDENED_SINCE;
        let overriders_widened = version >= OVERRIDERS_WIDENED_SINCE;
        for (name, present) in [
            (
                "commandOverrider",
                self.command_overrider.is_some() && !widened,
            ),
            ("argsOverrider", self.args_overrider.is_some() && !widened),
            (
                "fieldOverrider",
                self.field_overrider.is_some() && !overriders_widened,
            ),
        ] {
            if present {
                return Err(unsupported(
                    format!("{field}.{name}"),
                    "not implemented yet; plaintext patches can express it",
                ));
            }
        }
        let removes = self
            .labels_overrider
            .iter()
            .chain(&self.annotations_overrider)
            .any(|o| o.operator == Operator::Remove);
        // Karmada's own image semantics only where fedraft's image override cannot say it, so
        // that what was accepted before applies as it did.
        let karmada_images = overriders_widened
            && self
                .image_overrider
                .iter()
                .any(|o| o.predicate.is_some() || o.operator != Operator::Replace);
        let on_template = self.command_overrider.is_some()
            || self.args_overrider.is_some()
            || removes
            || karmada_images
            || self.field_overrider.is_some();
        let patches = plaintext(self.plaintext, field)?;
        let mut image_edits = Vec::new();
        let image = if karmada_images {
            for (i, o) in self.image_overrider.into_iter().enumerate() {
                image_edits.push(Edit::KarmadaImage(
                    o.edit(&format!("{field}.imageOverrider[{i}]"))?,
                ));
            }
            None
        } else {
            image(self.image_overrider, field)?
        };
        if !(widened && on_template) {
            let mut out = Override {
                patches,
                image,
                ..Override::default()
            };
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
            return Ok(Body::Fixed(Box::new(out)));
        }
        // Karmada's order: image, command, args, labels, annotations, plaintext.
        let mut out = Vec::new();
        let mut check = Override::default();
        if let Some(image) = image {
            check.image = Some(image.clone());
            out.push(Edit::Image(image));
        }
        out.extend(image_edits);
        for (raw, list, name) in [
            (
                self.command_overrider,
                ListField::Command,
                "commandOverrider",
            ),
            (self.args_overrider, ListField::Args, "argsOverrider"),
        ] {
            let Some(raw) = raw else { continue };
            let Value::Array(items) = raw else {
                return Err(FieldError::new(
                    format!("{field}.{name}"),
                    "must be a list of {containerName, operator, value}",
                ));
            };
            for (i, item) in items.iter().enumerate() {
                let o: ListOverrider = super::typed(item, &format!("{field}.{name}[{i}]"))?;
                if o.container_name.is_empty() {
                    return Err(FieldError::new(
                        format!("{field}.{name}[{i}].containerName"),
                        "required",
                    ));
                }
                out.push(Edit::List {
                    field: list,
                    container: o.container_name,
                    add: o.operator == ListOperator::Add,
                    values: o.value,
                });
            }
        }
        for (items, meta, name) in [
            (self.labels_overrider, MetaField::Labels, "labelsOverrider"),
            (
                self.annotations_overrider,
                MetaField::Annotations,
                "annotationsOverrider",
            ),
        ] {
            for (i, o) in items.into_iter().enumerate() {
                if o.operator != Operator::Remove {
                    let set = match meta {
                        MetaField::Labels => &mut check.labels,
                        MetaField::Annotations => &mut check.annotations,
                    };
                    set.extend(o.value.clone());
                    out.push(Edit::SetMeta(meta, o.value));
                    continue;
                }
                for k in o.value.keys() {
                    validate_label_key(k, &format!("{field}.{name}[{i}].value.{k}"))?;
                }
                out.push(Edit::RemoveMeta(meta, o.value.into_keys().collect()));
            }
        }
        if let Some(raw) = &self.field_overrider {
            let list = field_overrider::check(raw, &format!("{field}.fieldOverrider"))?;
            out.extend(list.into_iter().map(Edit::Field));
        }
        if !patches.is_empty() {
            check.patches = patches.clone();
            out.push(Edit::Patches(patches));
        }
        check.validate(field)?;
        Ok(Body::Edits(out))
    }
}

fn plaintext(list: Vec<Plaintext>, field: &str) -> Result<Vec<JsonPatchOp>, FieldError> {
    let mut out = Vec::with_capacity(list.len());
    for (i, p) in list.into_iter().enumerate() {
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
        out.push(JsonPatchOp {
            op,
            path: p.path,
            from: None,
            value,
        });
    }
    Ok(out)
}

fn image(list: Vec<ImageOverrider>, field: &str) -> Result<Option<ImageOverride>, FieldError> {
    if list.is_empty() {
        return Ok(None);
    }
    let mut image = ImageOverride::default();
    for (i, o) in list.into_iter().enumerate() {
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
    Ok(Some(image))
}
