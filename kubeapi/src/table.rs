//! Server-side printing: a `meta.k8s.io/v1` `Table` of objects, as kube-apiserver answers
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and `kubectl get` prints it.
//!
//! Built-in kinds get the columns of kube-apiserver's printers (`printers`); a custom resource
//! gets NAME plus its CRD's `additionalPrinterColumns` (simple JSONPath: fields, indexes, `[*]`
//! and `[?(@.k=="v")]` filters), or NAME and AGE; other kinds get NAME and CREATED AT, as the
//! apiserver's default converter does. Ages are computed from the caller's `now` (Unix seconds)
//! with kubectl's rounding (`human_duration`). This module must not read a clock or fetch
//! anything.

use serde_json::{json, Value};

use crate::meta;
use crate::negotiate::ObjectForm;
use crate::printers;
pub use crate::printers::format::{age, format_labels, human_duration, unix_seconds, Column};
use crate::resource::ResourceDef;
use crate::status::ApiError;

/// What each row carries besides its cells (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    /// A `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter (absent: Metadata).
    pub fn from_query(v: Option<&str>) -> Result<Self, ApiError> {
        match v {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(ApiError::BadRequest(format!(
                "includeObject: unsupported value {other:?}, must be one of None, Metadata, Object"
            ))),
        }
    }
}

/// The Table of `objects` of the built-in type `res` (its printer's columns, else NAME and
/// CREATED AT). `metadata` of the Table (resourceVersion, continue) is left for the caller.
pub fn table(res: &ResourceDef, objects: &[Value], now: i64, include: IncludeObject) -> Value {
    match printers::columns(&res.group, &res.kind) {
        Some(columns) => render(&columns, objects, include, |o| {
            printers::cells(&res.kind, o, now)
        }),
        None => {
            let columns = [
                Column::new("Name", "string", 0, "Name of the object"),
                Column::new("Created At", "date", 0, "When the object was created"),
            ];
            render(&columns, objects, include, |o| {
                vec![
                    json!(meta::name(o)),
                    meta::meta_str(o, "creationTimestamp").map_or(Value::Null, |t| json!(t)),
                ]
            })
        }
    }
}

/// The Table of custom resources whose CRD version declares `printer_columns`
/// (`additionalPrinterColumns`: name, type, format, description, priority, jsonPath); empty:
/// NAME and AGE, the CRD default.
pub fn custom_table(
    printer_columns: &[Value],
    objects: &[Value],
    now: i64,
    include: IncludeObject,
) -> Value {
    let mut columns = vec![Column::new(
        "Name",
        "string",
        0,
        "Name must be unique within a namespace.",
    )];
    let mut paths = Vec::new();
    let s = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if printer_columns.is_empty() {
        columns.push(Column::new("Age", "date", 0, "CreationTimestamp"));
        paths.push(".metadata.creationTimestamp".to_string());
    }
    for c in printer_columns {
        columns.push(Column {
            name: s(c, "name"),
            kind: s(c, "type"),
            format: s(c, "format"),
            description: s(c, "description"),
            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
        });
        paths.push(s(c, "jsonPath"));
    }
    let kinds: Vec<String> = columns[1..].iter().map(|c| c.kind.clone()).collect();
    render(&columns, objects, include, |o| {
        let mut cells = vec![json!(meta::name(o))];
        for (path, kind) in paths.iter().zip(&kinds) {
            cells.push(custom_cell(o, path, kind, now));
        }
        cells
    })
}

fn custom_cell(obj: &Value, path: &str, kind: &str, now: i64) -> Value {
    let found = jsonpath(obj, path);
    match found.as_slice() {
        [] => Value::Null,
        [one] if kind == "date" => match one.as_str().and_then(unix_seconds) {
            Some(t) => json!(human_duration(now - t)),
            None => Value::Null,
        },
        [one] if !one.is_object() && !one.is_array() => (*one).clone(),
        many => {
            let text: Vec<String> = many
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            json!(text.join(","))
        }
    }
}

fn render(
    columns: &[Column],
    objects: &[Value],
    include: IncludeObject,
    cells: impl Fn(&Value) -> Vec<Value>,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({ "cells": cells(o) });
            match include {
                IncludeObject::None => {}
                IncludeObject::Object => row["object"] = o.clone(),
                IncludeObject::Metadata => row["object"] = partial_metadata(o),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": columns.iter().map(Column::to_json).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// The `PartialObjectMetadata` of an object (also what `as=PartialObjectMetadata` answers).
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta::metadata(obj).cloned().unwrap_or_default(),
    })
}

/// One step of a simple JSONPath.
#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.path=="value")]` (or `!=`).
    Filter(Vec<String>, String, bool),
}

fn parse_path(path: &str) -> Option<Vec<Step>> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let mut rest = p.strip_prefix('$').unwrap_or(p);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            steps.push(Step::Field(r[..end].to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = if r.starts_with("?(") {
                r.find(")]").map(|i| i + 1)?
            } else {
                r.find(']')?
            };
            let inner = &r[..close];
            rest = &r[close + 1..];
            steps.push(parse_bracket(inner)?);
        } else {
            return None;
        }
    }
    Some(steps)
}

fn parse_bracket(inner: &str) -> Option<Step> {
    let unquote = |s: &str| {
        let s = s.trim();
        s.strip_prefix('\'')
            .and_then(|x| x.strip_suffix('\''))
            .or_else(|| s.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
            .map(str::to_string)
    };
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse::<usize>() {
        return Some(Step::Index(i));
    }
    if let Some(name) = unquote(inner) {
        return Some(Step::Field(name));
    }
    let cond = inner.strip_prefix("?(")?.strip_suffix(')')?;
    let (lhs, rhs, equal) = match cond.split_once("!=") {
        Some((l, r)) => (l, r, false),
        None => {
            let (l, r) = cond.split_once("==")?;
            (l, r, true)
        }
    };
    let field: Vec<String> = lhs
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    Some(Step::Filter(field, unquote(rhs)?, equal))
}

/// The values at a simple JSONPath (`.status.replicas`, `.spec.containers[*].image`,
/// `.status.conditions[?(@.type=="Ready")].status`); an unsupported path finds nothing.
pub fn jsonpath<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse_path(path) else {
        return Vec::new();
    };
    let mut cur = vec![obj];
    for step in &steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(k) => next.extend(v.get(k.as_str())),
                Step::Index(i) => next.extend(v.get(*i)),
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter(field, want, equal) => {
                    for item in v.as_array().map(Vec::as_slice).unwrap_or_default() {
                        let got = field.iter().try_fold(item, |c, k| c.get(k.as_str()));
                        let text = got.map(|g| match g {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        });
                        if (text.as_deref() == Some(want.as_str())) == *equal {
                            next.push(item);
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur.retain(|v| !v.is_null());
    cur
}

/// The body of a get (`list` false) or list answer `v` in `form`: `None` for the objects as they
/// are, else a `Table` built by `table` (from the objects and the `includeObject` query value
/// `include_object`) or partial object metadata. A list's `metadata` (resourceVersion, continue)
/// is carried over.
pub fn read_body(
    form: ObjectForm,
    v: &Value,
    list: bool,
    include_object: Option<&str>,
    table: impl FnOnce(&[Value], IncludeObject) -> Value,
) -> Result<Option<Value>, ApiError> {
    let objects = || -> Vec<Value> {
        if list {
            v["items"].as_array().cloned().unwrap_or_default()
        } else {
            vec![v.clone()]
        }
    };
    Ok(Some(match form {
        ObjectForm::Object => return Ok(None),
        ObjectForm::Table(version) => {
            let include = IncludeObject::from_query(include_object)?;
            let mut t = table(&objects(), include);
            t["apiVersion"] = json!(format!("meta.k8s.io/{version}"));
            if list {
                t["metadata"] = v["metadata"].clone();
            }
            t
        }
        ObjectForm::Metadata if list => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v["metadata"].clone(),
            "items": objects().iter().map(partial_metadata).collect::<Vec<_>>(),
        }),
        ObjectForm::Metadata => partial_metadata(v),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (192, "3m12s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (47 * 3600, "47h"),
            (4 * 86400 + 3 * 3600, "4d3h"),
            (9 * 86400, "9d"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn jsonpath_cases() {
        let o = json!({
            "spec": {"replicas": 3, "containers": [{"image": "a"}, {"image": "b"}], "dotted.key": 1},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}]}
        });
        let cases: [(&str, Vec<Value>); 8] = [
            (".spec.replicas", vec![json!(3)]),
            ("{.spec.replicas}", vec![json!(3)]),
            (".spec.containers[*].image", vec![json!("a"), json!("b")]),
            (".spec.containers[1].image", vec![json!("b")]),
            (".spec['dotted.key']", vec![json!(1)]),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                vec![json!("True")],
            ),
            (
                ".status.conditions[?(@.type!='Ready')].type",
                vec![json!("Synced")],
            ),
            (".nope.deeper", vec![]),
        ];
        for (path, want) in cases {
            let got: Vec<Value> = jsonpath(&o, path).into_iter().cloned().collect();
            assert_eq!(got, want, "{path}");
        }
        assert!(jsonpath(&o, "spec..x[").is_empty());
    }

    #[test]
    fn custom_resource_tables() {
        let now = unix_seconds("2026-01-01T01:00:00Z").unwrap();
        let cr = json!({
            "metadata": {"name": "w1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"size": 3},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let cols = [
            json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size"}),
            json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}),
            json!({"name": "Missing", "type": "string", "priority": 1, "jsonPath": ".spec.nope"}),
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
        ];
        let t = custom_table(&cols, std::slice::from_ref(&cr), now, IncludeObject::None);
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(t["columnDefinitions"][3]["priority"], 1);
        assert_eq!(t["rows"][0]["cells"], json!(["w1", 3, "True", null, "60m"]));
        assert!(t["rows"][0].get("object").is_none());

        let t = custom_table(&[], &[cr], now, IncludeObject::Metadata);
        let names: Vec<&Value> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["name"])
            .collect();
        assert_eq!(names, [&json!("Name"), &json!("Age")]);
        assert_eq!(t["rows"][0]["cells"], json!(["w1", "60m"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "w1");
    }

    #[test]
    fn include_object_values() {
        assert_eq!(
            IncludeObject::from_query(None).unwrap(),
            IncludeObject::Metadata
        );
        assert_eq!(
            IncludeObject::from_query(Some("Object")).unwrap(),
            IncludeObject::Object
        );
        assert_eq!(
            IncludeObject::from_query(Some("None")).unwrap(),
            IncludeObject::None
        );
        assert_eq!(
            IncludeObject::from_query(Some("All")).unwrap_err().code(),
            400
        );
    }
}
