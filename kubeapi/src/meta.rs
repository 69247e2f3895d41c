//! Object metadata helpers: names, labels, the spec part `generation` tracks, and the comparison
//! that decides whether a write changed anything. Pure functions over `serde_json::Value`; no
//! storage, no HTTP, no clock (callers stamp times and uids).

use serde_json::{Map, Value};

/// RFC 1123 subdomain, the rule most kinds use for `metadata.name`.
pub fn invalid_name_reason(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("name or generateName is required");
    }
    if name.len() > 253 {
        return Some("must be no more than 253 characters");
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !name.chars().all(ok_char) || !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character",
        );
    }
    None
}

pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let o = ensure_object(obj);
    ensure_object(o.entry("metadata").or_insert(Value::Null))
}

/// Turns `v` into an object if it is not one, and returns its map.
pub fn ensure_object(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("the value was just made an object"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

pub fn labels(obj: &Value) -> Map<String, Value> {
    metadata(obj)
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The part of an object that `generation` tracks: everything but metadata and status.
pub fn spec_part(obj: &Value) -> Value {
    let mut o = obj.as_object().cloned().unwrap_or_default();
    o.remove("metadata");
    o.remove("status");
    o.remove("apiVersion");
    o.remove("kind");
    Value::Object(o)
}

/// Equality that ignores what the server stamps on every write (resourceVersion, managedFields
/// times), so a write that changes nothing else is recognised as a no-op and not stored.
pub fn same_content(a: &Value, b: &Value) -> bool {
    normalise(a) == normalise(b)
}

fn normalise(obj: &Value) -> Value {
    let mut o = obj.clone();
    let m = metadata_mut(&mut o);
    m.remove("resourceVersion");
    if let Some(Value::Array(entries)) = m.get_mut("managedFields") {
        for e in entries.iter_mut() {
            if let Some(e) = e.as_object_mut() {
                e.remove("time");
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert!(invalid_name_reason("web-1.a").is_none());
        assert!(invalid_name_reason("Web").is_some());
        assert!(invalid_name_reason("-a").is_some());
        assert!(invalid_name_reason("").is_some());
    }

    #[test]
    fn content_ignores_stamps() {
        let a = json!({"metadata": {"resourceVersion": "1", "managedFields": [{"manager": "m", "time": "t1"}]}, "spec": 1});
        let b = json!({"metadata": {"resourceVersion": "2", "managedFields": [{"manager": "m", "time": "t2"}]}, "spec": 1});
        assert!(same_content(&a, &b));
        let c = json!({"metadata": {"resourceVersion": "2"}, "spec": 2});
        assert!(!same_content(&a, &c));
    }
}
