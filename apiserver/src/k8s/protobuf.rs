//! The few protobuf bodies clients insist on sending: typed clients (`kubectl create
//! namespace`, `kubectl create configmap`, Helm's release storage, which writes Secrets) post
//! `application/vnd.kubernetes.protobuf` and do not fall back to JSON on a 415. This decodes the
//! Kubernetes envelope (`k8s\0` + `runtime.Unknown`) and, for a Namespace, a ConfigMap or a
//! Secret, the fields those clients set (ObjectMeta's name, generateName, namespace,
//! resourceVersion, labels and annotations; a ConfigMap's data and immutable; a Secret's data,
//! stringData, type and immutable) into the JSON object the JSON path would have received.
//! Anything else is `None` (the caller answers 415). Must not: accept a body it cannot decode
//! completely as something else.

use base64::Engine as _;
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
    let (k, val) = raw_entry(v)?;
    Some((k, json!(String::from_utf8(val.to_vec()).ok()?)))
}

/// A `map<string, bytes>` entry, its value base64 as in JSON.
fn bytes_entry(v: &Field<'_>) -> Option<(String, Value)> {
    let (k, val) = raw_entry(v)?;
    Some((
        k,
        json!(base64::engine::general_purpose::STANDARD.encode(val)),
    ))
}

fn raw_entry<'a>(v: &Field<'a>) -> Option<(String, &'a [u8])> {
    let Field::Bytes(b) = v else { return None };
    let (mut k, mut val): (String, &[u8]) = (String::new(), &[]);
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, f) => k = text(&f)?,
            (2, Field::Bytes(b)) => val = b,
            _ => return None,
        }
    }
    Some((k, val))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    for (n, f) in fields(b)? {
        match n {
            1 => m.insert("name".into(), json!(text(&f)?)),
            2 => m.insert("generateName".into(), json!(text(&f)?)),
            3 => m.insert("namespace".into(), json!(text(&f)?)),
            // An update's precondition; a create sends it empty.
            6 => Some(text(&f)?)
                .filter(|rv| !rv.is_empty())
                .and_then(|rv| m.insert("resourceVersion".into(), json!(rv))),
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

/// The JSON object of a protobuf-encoded Namespace, ConfigMap or Secret.
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
    // Field numbers are those of k8s.io/api/core/v1's generated.proto.
    let (mut data, mut string_data, mut binary_data) = (Map::new(), Map::new(), Map::new());
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, &f) {
            (_, 1, Field::Bytes(m)) => doc["metadata"] = object_meta(m)?,
            ("Namespace", 2 | 3, _) => {}
            ("ConfigMap", 2, _) => {
                let (k, v) = entry(&f)?;
                data.insert(k, v);
            }
            ("Secret", 2, _) => {
                let (k, v) = bytes_entry(&f)?;
                data.insert(k, v);
            }
            ("Secret", 3, _) => doc["type"] = json!(text(&f)?),
            ("Secret", 4, _) => {
                let (k, v) = entry(&f)?;
                string_data.insert(k, v);
            }
            ("ConfigMap", 3, _) => {
                let (k, v) = bytes_entry(&f)?;
                binary_data.insert(k, v);
            }
            ("ConfigMap", 4, Field::Varint(b)) | ("Secret", 5, Field::Varint(b)) => {
                doc["immutable"] = json!(*b != 0)
            }
            _ => return None,
        }
    }
    if !data.is_empty() {
        doc["data"] = Value::Object(data);
    }
    if !string_data.is_empty() {
        doc["stringData"] = Value::Object(string_data);
    }
    if !binary_data.is_empty() {
        doc["binaryData"] = Value::Object(binary_data);
    }
    (api_version == "v1" && matches!(kind.as_str(), "Namespace" | "ConfigMap" | "Secret"))
        .then_some(doc)
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
    fn namespaces_configmaps_and_secrets_as_typed_clients_send_them() {
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
        // A Secret as Helm stores a release: bytes data, a type, labels; an update's version.
        let type_meta = [bytes_field(1, b"v1"), bytes_field(2, b"Secret")].concat();
        let meta = [
            bytes_field(1, b"sh.helm.release.v1.shop.v1"),
            bytes_field(6, b"42"),
            bytes_field(
                11,
                &[bytes_field(1, b"owner"), bytes_field(2, b"helm")].concat(),
            ),
        ]
        .concat();
        let secret = [
            bytes_field(1, &meta),
            bytes_field(
                2,
                &[bytes_field(1, b"release"), bytes_field(2, &[0, 255, 7])].concat(),
            ),
            bytes_field(3, b"helm.sh/release.v1"),
            vec![5 << 3, 1],
        ]
        .concat();
        let body = [
            b"k8s\0".to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &secret),
        ]
        .concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
                   "immutable": true, "data": {"release": "AP8H"},
                   "metadata": {"name": "sh.helm.release.v1.shop.v1", "resourceVersion": "42",
                                "labels": {"owner": "helm"}}})
        );
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
