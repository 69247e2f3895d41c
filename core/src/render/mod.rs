//! Rendering: the manifest fedraft applies to one member cluster for one federated object.
//!
//! Start at [`render`]: template, then the overrides that target the cluster in their order
//! (JSON patches, image, labels, annotations), then the replica count decided by the scheduler,
//! the namespace, and fedraft's ownership labels. Also reads what the scheduler needs from a
//! template: [`template_replicas`] and [`template_requests`] (Kubernetes quantities parsed in
//! integers by `quantity`).
//!
//! Must not: decide placement, or do any I/O. Errors name the override, the patch and its op.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::policy::{ImageOverride, JsonPatchOp, Override, PatchOpKind, Resources};

mod bounds;
mod image;
mod patch;
mod quantity;

pub use bounds::{RenderLimits, LIMITS};
pub use quantity::parse_quantity;

use bounds::Budget;

/// Label every rendered object carries so fedraft can find what it manages.
pub const MANAGED_BY_LABEL: &str = "fedraft.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "fedraft";
/// Label naming the federated object (`<namespace>.<name>`, shortened to a valid label value).
pub const OBJECT_LABEL: &str = "fedraft.io/object";
/// Annotation with the exact `<namespace>/<name>`, since the label may be shortened.
pub const OBJECT_ANNOTATION: &str = "fedraft.io/object";

/// Why a manifest could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("template: {0}")]
    Template(String),
    #[error("overrides[{override_index}].patches[{patch_index}] ({op} {path}): {reason}")]
    Patch {
        override_index: usize,
        patch_index: usize,
        op: &'static str,
        path: String,
        reason: String,
    },
    #[error("overrides[{override_index}].image: {reason}")]
    Image {
        override_index: usize,
        reason: String,
    },
    #[error("overrides[{override_index}].{field}: {reason}")]
    Metadata {
        override_index: usize,
        field: &'static str,
        reason: String,
    },
    #[error("{field}: bad quantity: {reason}")]
    Quantity { field: String, reason: String },
    /// A render limit ([`LIMITS`]) was reached; `patch_index` is None when the override's
    /// image, labels or annotations reached it.
    #[error("overrides[{override_index}]{}: exceeds the render limit on {reason}", patch_field(*.patch_index))]
    Limit {
        override_index: usize,
        patch_index: Option<usize>,
        reason: String,
    },
    /// The rendered manifest's identity is not the one admitted from the template: overrides
    /// may not change apiVersion, kind, metadata.name or metadata.namespace.
    #[error("{field}: the rendered manifest has {rendered:?}, but {admitted:?} was admitted (overrides may not change an object's identity)")]
    Identity {
        field: &'static str,
        admitted: String,
        rendered: String,
    },
}

fn patch_field(index: Option<usize>) -> String {
    index.map_or_else(String::new, |i| format!(".patches[{i}]"))
}

impl RenderError {
    /// The field at fault, in the path of an object spec (`spec.overrides[1].patches[0]`).
    pub fn field(&self) -> String {
        match self {
            RenderError::Template(_) => "spec.template".to_string(),
            RenderError::Patch {
                override_index,
                patch_index,
                ..
            } => format!("spec.overrides[{override_index}].patches[{patch_index}]"),
            RenderError::Image { override_index, .. } => {
                format!("spec.overrides[{override_index}].image")
            }
            RenderError::Metadata {
                override_index,
                field,
                ..
            } => format!("spec.overrides[{override_index}].{field}"),
            RenderError::Quantity { field, .. } => format!("spec.template.{field}"),
            RenderError::Limit {
                override_index,
                patch_index,
                ..
            } => format!(
                "spec.overrides[{override_index}]{}",
                patch_field(*patch_index)
            ),
            RenderError::Identity { field, .. } => format!("spec.overrides.{field}"),
        }
    }
}

/// Renders the manifest of `object_name` in `namespace` for `cluster`. `replicas` is the
/// scheduler's count for this cluster (Divided mode), written to `spec.replicas` of
/// replica-bearing kinds.
pub fn render(
    template_json: &str,
    namespace: &str,
    object_name: &str,
    cluster: &str,
    cluster_labels: &BTreeMap<String, String>,
    overrides: &[Override],
    replicas: Option<u32>,
) -> Result<Value, RenderError> {
    let targeted = overrides
        .iter()
        .enumerate()
        .filter(|(_, ov)| ov.targets(cluster, cluster_labels));
    let mut doc = render_overrides(template_json, targeted)?;
    if let Some(n) = replicas {
        if carries_replicas(&doc) {
            let spec = object_at(&mut doc, "spec").map_err(RenderError::Template)?;
            spec.insert("replicas".to_string(), Value::from(n));
        }
    }
    let meta = object_at(&mut doc, "metadata").map_err(RenderError::Template)?;
    meta.insert("namespace".to_string(), Value::from(namespace));
    let labels = object_at_map(meta, "labels").map_err(RenderError::Template)?;
    labels.insert(MANAGED_BY_LABEL.to_string(), Value::from(MANAGED_BY_VALUE));
    labels.insert(
        OBJECT_LABEL.to_string(),
        Value::from(object_label_value(namespace, object_name)),
    );
    let annotations = object_at_map(meta, "annotations").map_err(RenderError::Template)?;
    // Who manages which field on fedraft is no member's business.
    annotations.remove(crate::door::MANAGED_FIELDS_ANNOTATION);
    annotations.insert(
        OBJECT_ANNOTATION.to_string(),
        Value::from(format!("{namespace}/{object_name}")),
    );
    Ok(doc)
}

/// The template with the given overrides (index, override) applied in order, within
/// [`LIMITS`]: the part of [`render`] that overrides decide, which admission runs for every
/// combination of overrides a cluster may get.
pub fn render_overrides<'o>(
    template_json: &str,
    overrides: impl IntoIterator<Item = (usize, &'o Override)>,
) -> Result<Value, RenderError> {
    let mut doc: Value = serde_json::from_str(template_json)
        .map_err(|e| RenderError::Template(format!("not JSON: {e}")))?;
    if !doc.is_object() {
        return Err(RenderError::Template("not a JSON object".to_string()));
    }
    let mut budget = Budget::new(LIMITS, template_json.len(), &doc)
        .map_err(|reason| RenderError::Template(format!("exceeds the render limit on {reason}")))?;
    for (oi, ov) in overrides {
        apply_override(&mut doc, oi, ov, &mut budget)?;
    }
    Ok(doc)
}

fn apply_override(
    doc: &mut Value,
    oi: usize,
    ov: &Override,
    budget: &mut Budget,
) -> Result<(), RenderError> {
    let limit = |patch_index: Option<usize>| {
        move |reason: String| RenderError::Limit {
            override_index: oi,
            patch_index,
            reason,
        }
    };
    for (pi, p) in ov.patches.iter().enumerate() {
        apply_patch(doc, oi, pi, p, budget)?;
    }
    if let Some(img) = &ov.image {
        let matched = apply_image(doc, img).map_err(|reason| RenderError::Image {
            override_index: oi,
            reason,
        })?;
        let per_image = [&img.registry, &img.repository, &img.tag]
            .iter()
            .map(|part| part.as_deref().map_or(0, str::len) + 1)
            .sum::<usize>();
        budget
            .add_bytes(matched.saturating_mul(per_image))
            .map_err(limit(None))?;
    }
    for (field, map) in [("labels", &ov.labels), ("annotations", &ov.annotations)] {
        if map.is_empty() {
            continue;
        }
        let added = map
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>();
        budget.add_bytes(added).map_err(limit(None))?;
        let err = |reason| RenderError::Metadata {
            override_index: oi,
            field,
            reason,
        };
        let meta = object_at(doc, "metadata").map_err(err)?;
        let target = object_at_map(meta, field).map_err(err)?;
        for (k, v) in map {
            target.insert(k.clone(), Value::from(v.as_str()));
        }
    }
    Ok(())
}

fn apply_patch(
    doc: &mut Value,
    oi: usize,
    pi: usize,
    p: &JsonPatchOp,
    budget: &mut Budget,
) -> Result<(), RenderError> {
    let limit = |reason: String| RenderError::Limit {
        override_index: oi,
        patch_index: Some(pi),
        reason,
    };
    budget.op().map_err(limit)?;
    let err = |reason: String| RenderError::Patch {
        override_index: oi,
        patch_index: pi,
        op: p.op.as_str(),
        path: p.path.clone(),
        reason,
    };
    let value = || -> Result<Value, RenderError> {
        let text = p
            .value
            .as_deref()
            .ok_or_else(|| err("missing value".to_string()))?;
        serde_json::from_str(text).map_err(|e| err(format!("value is not JSON: {e}")))
    };
    let from = || {
        p.from
            .as_deref()
            .ok_or_else(|| err("missing from".to_string()))
    };
    let path = p.path.as_str();
    let op = match p.op {
        PatchOpKind::Add => patch::Op::Add {
            path,
            value: value()?,
        },
        PatchOpKind::Remove => patch::Op::Remove { path },
        PatchOpKind::Replace => patch::Op::Replace {
            path,
            value: value()?,
        },
        PatchOpKind::Move => patch::Op::Move {
            from: from()?,
            path,
        },
        PatchOpKind::Copy => patch::Op::Copy {
            from: from()?,
            path,
        },
        PatchOpKind::Test => patch::Op::Test {
            path,
            value: value()?,
        },
    };
    // Measured before it is applied: a copy is refused before the crate clones anything.
    match &op {
        patch::Op::Add { path, value } | patch::Op::Replace { path, value } => {
            budget.insert(path, value).map_err(limit)?
        }
        patch::Op::Copy { from, path } => {
            if let Some(source) = doc.pointer(from) {
                budget.insert(path, source).map_err(limit)?;
            }
        }
        patch::Op::Move { from, path } => budget.relocate(from, path).map_err(limit)?,
        patch::Op::Remove { .. } | patch::Op::Test { .. } => {}
    }
    patch::apply(doc, op).map_err(err)?;
    if !doc.is_object() {
        return Err(err("the manifest must stay a JSON object".to_string()));
    }
    Ok(())
}

/// Rewrites the images; returns how many it rewrote.
fn apply_image(doc: &mut Value, ov: &ImageOverride) -> Result<usize, String> {
    let Some(pod) = pod_spec_mut(doc) else {
        return Err("the template has no pod spec".to_string());
    };
    let mut matched = 0;
    for list in ["initContainers", "containers"] {
        let Some(Value::Array(containers)) = pod.get_mut(list) else {
            continue;
        };
        for c in containers.iter_mut() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            if ov.container.as_deref().is_some_and(|want| want != name) {
                continue;
            }
            let Some(Value::String(img)) = c.get_mut("image") else {
                continue;
            };
            let mut r = image::ImageRef::parse(img);
            r.apply(ov);
            *img = r.to_string();
            matched += 1;
        }
    }
    if matched == 0 {
        return Err(match &ov.container {
            Some(name) => format!("no container named {name:?} with an image"),
            None => "no container with an image".to_string(),
        });
    }
    Ok(matched)
}

/// Kinds whose `spec.replicas` the scheduler owns; any other kind that already has a
/// `spec.replicas` is treated the same.
pub fn carries_replicas(doc: &Value) -> bool {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    kind_carries_replicas(kind) || doc.pointer("/spec/replicas").is_some()
}

/// The built-in kinds whose replica count is the scheduler's even when `spec.replicas` is
/// absent (Kubernetes then defaults it to 1).
pub(crate) fn kind_carries_replicas(kind: &str) -> bool {
    matches!(
        kind,
        "Deployment" | "StatefulSet" | "ReplicaSet" | "ReplicationController"
    )
}

/// Where a workload manifest keeps its pod spec: its pod template's, its CronJob job
/// template's, or, for a Pod, its own spec.
pub(crate) fn pod_spec_pointer(doc: &Value) -> Option<&'static str> {
    [
        "/spec/template/spec",
        "/spec/jobTemplate/spec/template/spec",
    ]
    .into_iter()
    .find(|p| doc.pointer(p).is_some())
    .or_else(|| (doc.get("kind").and_then(Value::as_str) == Some("Pod")).then_some("/spec"))
}

pub(crate) fn pod_spec(doc: &Value) -> Option<&Value> {
    doc.pointer(pod_spec_pointer(doc)?)
}

fn pod_spec_mut(doc: &mut Value) -> Option<&mut Value> {
    let pointer = pod_spec_pointer(doc)?;
    doc.pointer_mut(pointer)
}

fn object_at<'v>(doc: &'v mut Value, key: &str) -> Result<&'v mut Map<String, Value>, String> {
    match doc {
        Value::Object(map) => object_at_map(map, key),
        _ => Err("the manifest is not a JSON object".to_string()),
    }
}

fn object_at_map<'v>(
    map: &'v mut Map<String, Value>,
    key: &str,
) -> Result<&'v mut Map<String, Value>, String> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
        .ok_or_else(|| format!("{key} is not an object"))
}

/// `<namespace>.<name>` as a valid label value: invalid characters become '-', and a value
/// longer than 63 characters is cut to 52 and suffixed with '-' and 10 hex digits of its SHA-256
/// so distinct objects keep distinct labels.
pub fn object_label_value(namespace: &str, name: &str) -> String {
    let full = format!("{namespace}.{name}");
    let cleaned: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut out = if cleaned.len() <= 63 && cleaned == full {
        cleaned
    } else {
        let digest = Sha256::digest(full.as_bytes());
        let short: String = cleaned.chars().take(52).collect();
        format!(
            "{}-{}",
            short.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()),
            &hex::encode(digest)[..10]
        )
    };
    let trimmed = out
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string();
    if trimmed.len() != out.len() {
        out = trimmed;
    }
    out
}

/// The template's `spec.replicas`, 1 when absent or not a non-negative integer.
pub fn template_replicas(template: &Value) -> u32 {
    match template.pointer("/spec/replicas").and_then(Value::as_u64) {
        Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
        None => 1,
    }
}

/// Per-replica requests: sum over containers, at least the largest init container (as
/// Kubernetes computes a pod's effective request), and one pod. Unparseable quantities count
/// as zero here; use [`try_template_requests`] to reject them.
pub fn template_requests(template: &Value) -> Resources {
    requests(template, false).unwrap_or(Resources {
        cpu_millis: 0,
        memory_bytes: 0,
        pods: 1,
    })
}

/// Like [`template_requests`] but fails on a quantity that does not parse, naming the field.
pub fn try_template_requests(template: &Value) -> Result<Resources, RenderError> {
    requests(template, true)
}

fn requests(template: &Value, strict: bool) -> Result<Resources, RenderError> {
    let mut total = PodRequests::default();
    let Some(pod) = pod_spec(template) else {
        return Ok(total.total());
    };
    for (list, is_init) in [("containers", false), ("initContainers", true)] {
        let Some(Value::Array(containers)) = pod.get(list) else {
            continue;
        };
        for (i, c) in containers.iter().enumerate() {
            let Some(req) = c.pointer("/resources/requests") else {
                continue;
            };
            let q = |key: &str, scale: u64| -> Result<u64, RenderError> {
                let text = match req.get(key) {
                    None | Some(Value::Null) => return Ok(0),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    Some(other) => other.to_string(),
                };
                match parse_quantity(&text, scale) {
                    Ok(v) => Ok(v),
                    Err(reason) if strict => Err(RenderError::Quantity {
                        field: format!("{list}[{i}].resources.requests.{key}"),
                        reason,
                    }),
                    Err(_) => Ok(0),
                }
            };
            let r = Resources {
                cpu_millis: q("cpu", 1000)?,
                memory_bytes: q("memory", 1)?,
                pods: 0,
            };
            total.add(r, is_init);
        }
    }
    Ok(total.total())
}

/// A pod's effective request, as Kubernetes computes it: containers run together and add up,
/// init containers run one at a time so only the largest counts, the pod needs the larger of the
/// two, and one pod slot.
#[derive(Default)]
pub(crate) struct PodRequests {
    sum: Resources,
    init_max: Resources,
}

impl PodRequests {
    pub(crate) fn add(&mut self, r: Resources, is_init: bool) {
        if is_init {
            self.init_max.cpu_millis = self.init_max.cpu_millis.max(r.cpu_millis);
            self.init_max.memory_bytes = self.init_max.memory_bytes.max(r.memory_bytes);
        } else {
            self.sum = self.sum.saturating_add(&r);
        }
    }

    pub(crate) fn total(self) -> Resources {
        Resources {
            cpu_millis: self.sum.cpu_millis.max(self.init_max.cpu_millis),
            memory_bytes: self.sum.memory_bytes.max(self.init_max.memory_bytes),
            pods: 1,
        }
    }
}
