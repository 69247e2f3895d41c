//! The few protobuf bodies kubectl insists on sending: typed clients (`kubectl create
//! namespace`, `kubectl create configmap`) post `application/vnd.kubernetes.protobuf` and do not
//! fall back to JSON on a 415. This decodes the Kubernetes envelope (`k8s\0` + `runtime.Unknown`)
//! and, for a Namespace or a ConfigMap, the fields those commands set (ObjectMeta's name,
//! generateName, namespace, labels and annotations; a ConfigMap's data and immutable) into the
//! JSON object the JSON path would have received. Anything else is `None` (the caller answers
//! 415). Must not: accept a body it cannot decode completely as something else.

use serde_json::{json, Map, Value};

/// One field of a protobuf message.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        out |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(out);
        }
    }
    None
}

/// Every (field number, value) of a message; None if it is not well formed.
fn fields(mut b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let value = match key & 7 {
            0 => Field::Varint(varint(&mut b)?),
            2 => {
                let len = usize::try_from(varint(&mut b)?).ok()?;
                if len > b.len() {
                    return None;
                }
                let (v, rest) = b.split_at(len);
                b = rest;
                Field::Bytes(v)
            }
            // Fixed-width fields: none of the decoded messages has one.
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

fn text(v: &Field<'_>) -> Option<String> {
    match v {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).ok(),
        Field::Varint(_) => None,
    }
}

/// A `map<string, string>` entry.
fn entry(v: &Field<'_>) -> Option<(String, Value)> {
    let Field::Bytes(b) = v else { return None };
    let (mut k, mut val) = (String::new(), String::new());
    for (n, f) in fields(b)? {
        match n {
            1 => k = text(&f)?,
            2 => val = text(&f)?,
            _ => return None,
        }
    }
    Some((k, json!(val)))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    for (n, f) in fields(b)? {
        match n {
            1 => m.insert("name".into(), json!(text(&f)?)),
            2 => m.insert("generateName".into(), json!(text(&f)?)),
            3 => m.insert("namespace".into(), json!(text(&f)?)),
            11 => {
                let (k, v) = entry(&f)?;
                labels.insert(k, v)
            }
            12 => {
                let (k, v) = entry(&f)?;
                annotations.insert(k, v)
            }
            // Server-populated or empty fields a create sends (creationTimestamp, ...).
            _ => None,
        };
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    Some(Value::Object(m))
}

/// The JSON object of a protobuf-encoded Namespace or ConfigMap.
pub fn decode(body: &[u8]) -> Option<Value> {
    let unknown = body.strip_prefix(b"k8s\0")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    for (n, f) in fields(unknown)? {
        match (n, &f) {
            (1, Field::Bytes(tm)) => {
                for (m, g) in fields(tm)? {
                    match m {
                        1 => api_version = text(&g)?,
                        2 => kind = text(&g)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = Some(*r),
            _ => {}
        }
    }
    let raw = raw?;
    let mut doc = json!({ "apiVersion": api_version, "kind": kind, "metadata": {} });
    let mut data = Map::new();
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, &f) {
            (_, 1, Field::Bytes(m)) => doc["metadata"] = object_meta(m)?,
            ("Namespace", 2 | 3, _) => {}
            ("ConfigMap", 2, _) => {
                let (k, v) = entry(&f)?;
                data.insert(k, v);
            }
            ("ConfigMap", 4, Field::Varint(b)) => doc["immutable"] = json!(*b != 0),
            _ => return None,
        }
    }
    if !data.is_empty() {
        doc["data"] = Value::Object(data);
    }
    (api_version == "v1" && matches!(kind.as_str(), "Namespace" | "ConfigMap")).then_some(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(n: u8, b: &[u8]) -> Vec<u8> {
        let mut out = vec![(n << 3) | 2, u8::try_from(b.len()).unwrap()];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn a_namespace_and_a_configmap_as_kubectl_creates_them() {
        let meta = [
            bytes_field(1, b"shop"),
            bytes_field(
                11,
                &[bytes_field(1, b"team"), bytes_field(2, b"a")].concat(),
            ),
        ]
        .concat();
        let type_meta = [bytes_field(1, b"v1"), bytes_field(2, b"Namespace")].concat();
        let ns = [
            bytes_field(1, &meta),
            bytes_field(2, b""),
            bytes_field(3, b""),
        ]
        .concat();
        let body = [
            b"k8s\0".to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &ns),
        ]
        .concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "shop", "labels": {"team": "a"}}})
        );
        let type_meta = [bytes_field(1, b"v1"), bytes_field(2, b"ConfigMap")].concat();
        let cm = [
            bytes_field(1, &bytes_field(1, b"c")),
            bytes_field(2, &[bytes_field(1, b"k"), bytes_field(2, b"v")].concat()),
        ]
        .concat();
        let body = [
            b"k8s\0".to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &cm),
        ]
        .concat();
        assert_eq!(decode(&body).unwrap()["data"], json!({"k": "v"}));
        // A kind it does not know, a truncated body, no envelope: not decoded.
        let type_meta = [bytes_field(1, b"apps/v1"), bytes_field(2, b"Deployment")].concat();
        let body = [
            b"k8s\0".to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &cm),
        ]
        .concat();
        assert!(decode(&body).is_none());
        assert!(decode(&body[..body.len() - 1]).is_none());
        assert!(decode(b"{}").is_none());
    }
}
