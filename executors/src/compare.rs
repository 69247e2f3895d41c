//! Deciding, without writing, whether a member cluster already holds what fedraft would apply.
//!
//! Two checks, both pure:
//! - [`manifest_hash`]: SHA-256 over a canonical encoding (keys sorted at every level) of the
//!   rendered manifest. It is written into the applied object as an annotation, so any fedraft
//!   node (a new leader included) can tell whether the live object came from this exact
//!   manifest without a memory of its own.
//! - [`covers`]: every field the manifest sets has the same value in the live object. The live
//!   object may hold more (server defaults, status, other managers' fields); a field that differs
//!   is drift and is applied again. Lists whose items all carry a `name` are matched by name (as
//!   server-side apply merges them); other lists must match item by item. Quantities compare by
//!   value ("1000m" equals "1"), numbers by value (1 equals 1.0).
//!
//! Must not: talk to a cluster, or treat the absence of a field we never set as drift.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Annotation holding [`manifest_hash`] of the manifest an object was last applied from.
pub const APPLIED_HASH_ANNOTATION: &str = "fedraft.io/applied-hash";

/// SHA-256 of a manifest's canonical JSON ([`manifest_hash`]). Annotations carry it as 64
/// lowercase hex digits; an executor keeps the 32 bytes, since it holds one per object per
/// cluster in its prepared manifests, live copies and write memos.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ManifestHash([u8; 32]);

impl ManifestHash {
    /// The hash an applied-hash annotation names; `None` for anything but 64 lowercase hex
    /// digits, which no fedraft write stamps (so it equals no manifest's hash).
    pub fn parse(text: &str) -> Option<ManifestHash> {
        if !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(ManifestHash(bytes))
    }
}

impl std::fmt::Display for ManifestHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl std::fmt::Debug for ManifestHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// SHA-256 of the canonical JSON of `manifest`.
pub fn manifest_hash(manifest: &Value) -> ManifestHash {
    let mut buf = Vec::with_capacity(512);
    canonical(manifest, &mut buf);
    ManifestHash(Sha256::digest(&buf).into())
}

/// Compact JSON with object keys sorted, whatever map type serde_json was built with.
fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_json(&Value::String((*k).clone()), out);
                out.push(b':');
                canonical(&map[k.as_str()], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(item, out);
            }
            out.push(b']');
        }
        scalar => push_json(scalar, out),
    }
}

fn push_json(v: &Value, out: &mut Vec<u8>) {
    // Serializing a scalar Value into a Vec has no failure mode (no I/O, no non-string keys).
    if let Ok(bytes) = serde_json::to_vec(v) {
        out.extend_from_slice(&bytes);
    }
}

/// Whether `live` holds every field of `desired` with an equal value.
pub fn covers(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(d), Value::Object(l)) => covers_fields(d, |k| l.get(k)),
        (Value::Array(d), Value::Array(l)) => lists_cover(d, l),
        (Value::Number(a), Value::Number(b)) => numbers_equal(a, b),
        (Value::String(a), Value::String(b)) => a == b || quantities_equal(a, b),
        // Kubernetes serializes some int-or-string and quantity fields either way.
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) => {
            quantities_equal(&n.to_string(), s)
        }
        (d, l) => d == l || (is_empty_value(d) && l.is_null()),
    }
}

/// [`covers`] for an object whose live fields come from `live` (a map, or a live object kept in
/// parts).
pub fn covers_fields<'a>(
    desired: &serde_json::Map<String, Value>,
    live: impl Fn(&str) -> Option<&'a Value>,
) -> bool {
    desired.iter().all(|(k, dv)| match live(k) {
        Some(lv) => covers(dv, lv),
        // Setting a field to null or {} / [] asks for nothing the server must keep.
        None => is_empty_value(dv),
    })
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn lists_cover(desired: &[Value], live: &[Value]) -> bool {
    let named = |items: &[Value]| {
        !items.is_empty()
            && items
                .iter()
                .all(|i| i.get("name").and_then(Value::as_str).is_some())
    };
    if named(desired) && named(live) {
        // Merge by key, as server-side apply does for lists like containers, env and ports.
        // Extra live items belong to another manager; fedraft only answers for its own.
        return desired.iter().all(|d| {
            let name = d.get("name");
            live.iter()
                .find(|l| l.get("name") == name)
                .is_some_and(|l| covers(d, l))
        });
    }
    desired.len() == live.len() && desired.iter().zip(live).all(|(d, l)| covers(d, l))
}

fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    if a == b {
        return true;
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// Two Kubernetes quantities with the same value ("1" and "1000m", "1Gi" and "1024Mi"),
/// compared in thousandths so cpu and memory forms both work.
fn quantities_equal(a: &str, b: &str) -> bool {
    let looks_numeric = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
    };
    if !looks_numeric(a) || !looks_numeric(b) {
        return false;
    }
    match (
        fedraft_core::render::parse_quantity(a, 1000),
        fedraft_core::render::parse_quantity(b, 1000),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hash_ignores_key_order_and_sees_values() {
        let a = json!({"a": 1, "b": {"y": [1, 2], "x": "s"}});
        let b: Value = serde_json::from_str(r#"{"b": {"x": "s", "y": [1, 2]}, "a": 1}"#).unwrap();
        assert_eq!(manifest_hash(&a), manifest_hash(&b));
        let c = json!({"a": 1, "b": {"y": [2, 1], "x": "s"}});
        assert_ne!(manifest_hash(&a), manifest_hash(&c));
        let text = manifest_hash(&a).to_string();
        assert_eq!(text.len(), 64);
        assert_eq!(ManifestHash::parse(&text), Some(manifest_hash(&a)));
        assert_eq!(ManifestHash::parse(&text.to_uppercase()), None);
        assert_eq!(ManifestHash::parse(&text[1..]), None);
        assert_eq!(ManifestHash::parse("not a hash"), None);
    }

    #[test]
    fn covers_cases() {
        let cases: Vec<(Value, Value, bool, &str)> = vec![
            (
                json!({"a": 1}),
                json!({"a": 1, "extra": true}),
                true,
                "extra live fields are fine",
            ),
            (
                json!({"a": 1}),
                json!({"a": 2}),
                false,
                "changed scalar is drift",
            ),
            (json!({"a": 1}), json!({}), false, "missing field is drift"),
            (
                json!({"a": {}}),
                json!({}),
                true,
                "empty map asks for nothing",
            ),
            (json!({"a": null}), json!({}), true, "null asks for nothing"),
            (json!({"n": 1}), json!({"n": 1.0}), true, "numbers by value"),
            (
                json!({"cpu": "1"}),
                json!({"cpu": "1000m"}),
                true,
                "cpu quantity forms",
            ),
            (
                json!({"mem": "1Gi"}),
                json!({"mem": "1024Mi"}),
                true,
                "memory quantity forms",
            ),
            (
                json!({"mem": "1Gi"}),
                json!({"mem": "1G"}),
                false,
                "different quantities",
            ),
            (
                json!({"port": 80}),
                json!({"port": "80"}),
                true,
                "int-or-string",
            ),
            (
                json!({"img": "nginx:1"}),
                json!({"img": "nginx:2"}),
                false,
                "plain strings",
            ),
            (
                json!({"c": [{"name": "app", "image": "x"}]}),
                json!({"c": [{"name": "side", "image": "y"}, {"name": "app", "image": "x", "imagePullPolicy": "Always"}]}),
                true,
                "named lists merge by name",
            ),
            (
                json!({"c": [{"name": "app", "image": "x"}]}),
                json!({"c": [{"name": "app", "image": "z"}]}),
                false,
                "named item changed",
            ),
            (
                json!({"l": [1, 2]}),
                json!({"l": [1, 2, 3]}),
                false,
                "plain lists are atomic",
            ),
            (
                json!({"l": [1, 2]}),
                json!({"l": [1, 2]}),
                true,
                "equal plain lists",
            ),
            (
                json!({"l": []}),
                json!({}),
                true,
                "empty list asks for nothing",
            ),
        ];
        for (desired, live, want, what) in cases {
            assert_eq!(covers(&desired, &live), want, "{what}: {desired} vs {live}");
        }
    }
}
