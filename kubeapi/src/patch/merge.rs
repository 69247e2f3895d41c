//! JSON merge patch (RFC 7386), both ways: applying one, and computing the one between two
//! objects. Must not: know kinds or schemas (strategic merge patch is `strategic`).

use serde_json::Value;

/// Applies a JSON merge patch (RFC 7386): maps merge, null deletes, anything else replaces.
pub fn merge_patch(current: &Value, patch: &Value) -> Value {
    let mut out = current.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// The JSON merge patch that turns `from` into `to` (removed keys become `null`). Exact when
/// `to` holds no `null` values, which a merge patch cannot express.
pub fn merge_diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut out = serde_json::Map::new();
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            for (k, v) in b {
                match a.get(k) {
                    Some(old) if old == v => {}
                    Some(old) => {
                        out.insert(k.clone(), merge_diff(old, v));
                    }
                    None => {
                        out.insert(k.clone(), merge_diff(&Value::Null, v));
                    }
                }
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}
