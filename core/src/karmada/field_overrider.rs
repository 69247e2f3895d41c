//! Karmada's `fieldOverrider` (since `OVERRIDERS_WIDENED_SINCE`): `fieldPath` points at a string
//! field holding a JSON or YAML document (a ConfigMap's `/data/config.yaml`); the item's `json`
//! or `yaml` operations (`subPath`, `operator` add, remove or replace, `value`) are applied as
//! JSON patch operations to the parsed document, which is written back in its format, as
//! Karmada does: JSON compact, YAML as a block document. Exactly one of `json` and `yaml` is
//! given, as Karmada's validation requires.
//!
//! Must not: read anything but the string it is handed; resolving against a template, and
//! turning a failure into the cluster's render error, is `edits`' job.

use serde::Deserialize;
use serde_json::Value;

use super::image_overrider::check_pointer;
use super::typed;
use crate::error::FieldError;

/// The format of the document a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum SubOperator {
    Add,
    Remove,
    Replace,
}

/// One operation inside the document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SubOp {
    op: SubOperator,
    path: String,
    /// None for `remove`.
    value: Option<Value>,
}

/// One `fieldOverrider` item, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FieldEdit {
    pub path: String,
    format: Format,
    ops: Vec<SubOp>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawField {
    field_path: String,
    #[serde(default)]
    json: Vec<RawSubOp>,
    #[serde(default)]
    yaml: Vec<RawSubOp>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSubOp {
    sub_path: String,
    operator: SubOperator,
    #[serde(default)]
    value: Option<Value>,
}

/// Checks a rule's `fieldOverrider` list (`field` names it).
pub(super) fn check(raw: &Value, field: &str) -> Result<Vec<FieldEdit>, FieldError> {
    let list: Vec<RawField> = typed(raw, field)?;
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.into_iter().enumerate() {
        let f = format!("{field}[{i}]");
        check_pointer(&item.field_path, &format!("{f}.fieldPath"))?;
        let (format, name, raw_ops) = match (item.json.is_empty(), item.yaml.is_empty()) {
            (false, true) => (Format::Json, "json", item.json),
            (true, false) => (Format::Yaml, "yaml", item.yaml),
            (false, false) => {
                return Err(FieldError::new(f, "has both json and yaml; give one"));
            }
            (true, true) => return Err(FieldError::new(f, "requires json or yaml operations")),
        };
        let mut ops = Vec::with_capacity(raw_ops.len());
        for (j, o) in raw_ops.into_iter().enumerate() {
            let of = format!("{f}.{name}[{j}]");
            // The whole document is "" (RFC 6901), which replace may swap out.
            if !o.sub_path.is_empty() {
                check_pointer(&o.sub_path, &format!("{of}.subPath"))?;
            }
            let value = match (o.operator, o.value) {
                (SubOperator::Remove, _) => None,
                (_, Some(v)) => Some(v),
                (_, None) => {
                    return Err(FieldError::new(
                        format!("{of}.value"),
                        "required for add and replace",
                    ))
                }
            };
            ops.push(SubOp {
                op: o.operator,
                path: o.sub_path,
                value,
            });
        }
        out.push(FieldEdit {
            path: item.field_path,
            format,
            ops,
        });
    }
    Ok(out)
}

impl FieldEdit {
    /// The field's new text, from its current `text`; Err says why it cannot be edited.
    pub(super) fn apply(&self, text: &str) -> Result<String, String> {
        let mut doc: Value = match self.format {
            Format::Json => serde_json::from_str(text)
                .map_err(|e| format!("{} does not hold JSON: {e}", self.path))?,
            Format::Yaml => serde_yaml::from_str(text)
                .map_err(|e| format!("{} does not hold YAML: {e}", self.path))?,
        };
        for o in &self.ops {
            apply_op(&mut doc, o).map_err(|e| {
                let op = match o.op {
                    SubOperator::Add => "add",
                    SubOperator::Remove => "remove",
                    SubOperator::Replace => "replace",
                };
                format!("{op} {:?} in {}: {e}", o.path, self.path)
            })?;
        }
        match self.format {
            Format::Json => serde_json::to_string(&doc).map_err(|e| e.to_string()),
            Format::Yaml => serde_yaml::to_string(&doc).map_err(|e| e.to_string()),
        }
    }
}

fn apply_op(doc: &mut Value, o: &SubOp) -> Result<(), String> {
    use json_patch::jsonptr::PointerBuf;
    use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
    let path = PointerBuf::parse(&o.path).map_err(|e| e.to_string())?;
    let value = || o.value.clone().unwrap_or(Value::Null);
    let operation = match o.op {
        SubOperator::Add => PatchOperation::Add(AddOperation {
            path,
            value: value(),
        }),
        SubOperator::Remove => PatchOperation::Remove(RemoveOperation { path }),
        SubOperator::Replace => PatchOperation::Replace(ReplaceOperation {
            path,
            value: value(),
        }),
    };
    json_patch::patch(doc, std::slice::from_ref(&operation)).map_err(|e| e.kind.to_string())
}
