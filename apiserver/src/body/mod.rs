//! Request body decoding: size limit, JSON or YAML by Content-Type, and serde errors turned into
//! [`ApiError`]s that name the offending field.
//!
//! Bodies are read whole (they are bounded by [`crate::ApiConfig::body_limit_bytes`]). JSON is
//! decoded straight into the typed document, with no intermediate tree: every write pays for this
//! step, and a `serde_json::Value` of the whole body (plus a copy of it) cost as much as the
//! decoding itself. YAML goes through a `Value` first (it is rare on the hot path), built by
//! `yaml` against a budget: aliases may not expand a document past what the largest accepted
//! JSON body could hold (413 otherwise). JSON nesting is bounded by serde_json's own recursion
//! limit (128 levels), YAML's by [`yaml::MAX_DEPTH`]; deeper is `MalformedBody`. Either way the
//! errors are the same: a document that is not valid JSON/YAML is `MalformedBody`, a wrong field
//! is named in `field`.
//!
//! Must not: read a body before the handler has authorised the request on its headers and path.

pub mod yaml;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Default request body limit: 2 MiB (a 1 MiB template plus its placement and overrides fits twice).
pub const DEFAULT_BODY_LIMIT_BYTES: usize = 2 * 1024 * 1024;

/// Reads the whole body, refusing more than `limit_bytes` (413) before or while reading.
pub async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit_bytes: usize,
) -> Result<bytes::Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit_bytes as u64) {
        return Err(ApiError::PayloadTooLarge { limit_bytes });
    }
    axum::body::to_bytes(body, limit_bytes)
        .await
        .map_err(|_| ApiError::PayloadTooLarge { limit_bytes })
}

/// True when the Content-Type says YAML.
pub fn is_yaml(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            let v = v.to_ascii_lowercase();
            v.starts_with("application/yaml")
                || v.starts_with("application/x-yaml")
                || v.starts_with("text/yaml")
        })
        .unwrap_or(false)
}

/// Parses bytes as JSON, or YAML when `yaml`, into a generic document. A YAML document may
/// expand no further than a JSON body of `limit_bytes` could ([`yaml::Budget::for_body_limit`]).
pub fn parse_document(
    bytes: &[u8],
    yaml: bool,
    limit_bytes: usize,
) -> Result<serde_json::Value, ApiError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::Malformed {
            message: "empty body".into(),
        });
    }
    if yaml {
        yaml::parse(bytes, yaml::Budget::for_body_limit(limit_bytes)).map_err(|e| match e {
            yaml::YamlError::TooLarge(message) => ApiError::TooLarge { message },
            yaml::YamlError::TooDeep => ApiError::Malformed {
                message: format!(
                    "invalid YAML: nested deeper than {} levels",
                    yaml::MAX_DEPTH
                ),
            },
            yaml::YamlError::Invalid(e) => ApiError::Malformed {
                message: format!("invalid YAML: {e}"),
            },
        })
    } else {
        serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| ApiError::Malformed {
            message: format!("invalid JSON: {e}"),
        })
    }
}

/// Decodes a generic document into `T`, naming the field of the first error.
pub fn decode_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::Malformed {
            message: "the body must be an object".into(),
        });
    }
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        field_error(if path == "." { "" } else { &path }, &inner)
    })
}

/// Turns one serde message at `path` into the right error kind and field path.
fn field_error(path: &str, message: &str) -> ApiError {
    let join = |leaf: &str| {
        // serde_path_to_error already ends the path with an unknown field's own name.
        if path.is_empty() || path == leaf || path.ends_with(&format!(".{leaf}")) {
            if path.is_empty() {
                return leaf.to_string();
            }
            return path.to_string();
        }
        if path.is_empty() {
            leaf.to_string()
        } else {
            format!("{path}.{leaf}")
        }
    };
    if let Some(name) = backticked(message, "missing field `") {
        return ApiError::MissingField { field: join(name) };
    }
    if let Some(name) = backticked(message, "unknown field `") {
        return ApiError::InvalidField {
            field: join(name),
            message: "unknown field".into(),
        };
    }
    if let Some(name) = backticked(message, "unknown variant `") {
        return ApiError::InvalidField {
            field: path.to_string(),
            message: format!("unknown value {name:?}"),
        };
    }
    // serde's own message names types and values, never the other fields of the document.
    ApiError::InvalidField {
        field: path.to_string(),
        message: message.to_string(),
    }
}

/// The text between `prefix` and the next backtick, if `message` contains `prefix`.
fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let start = message.find(prefix)? + prefix.len();
    let rest = &message[start..];
    Some(&rest[..rest.find('`')?])
}

/// Reads, parses and decodes a body in one step.
pub async fn decode_body<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    limit_bytes: usize,
) -> Result<T, ApiError> {
    let bytes = read_limited(headers, body, limit_bytes).await?;
    decode_bytes(&bytes, is_yaml(headers), limit_bytes)
}

/// Decodes a whole body into `T`: JSON directly, YAML through a generic document built within
/// the expansion budget of a `limit_bytes` body.
pub fn decode_bytes<T: DeserializeOwned>(
    bytes: &[u8],
    yaml: bool,
    limit_bytes: usize,
) -> Result<T, ApiError> {
    if yaml {
        return decode_value(parse_document(bytes, true, limit_bytes)?);
    }
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        // Empty, not JSON, or JSON that is not an object: the same answers as a parsed document
        // gets (a struct would otherwise accept an array of its fields).
        _ => return decode_value(parse_document(bytes, false, limit_bytes)?),
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let typed = serde_path_to_error::deserialize::<_, T>(&mut de)
        .map_err(|e| json_error(bytes, e))
        .and_then(|t| {
            de.end().map_err(|e| ApiError::Malformed {
                message: format!("invalid JSON: {e}"),
            })?;
            Ok(t)
        })?;
    Ok(typed)
}

/// A typed decoding failure: `MalformedBody` when the text is not JSON at all, else the field.
fn json_error(bytes: &[u8], e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    // A wrong field can be met before a syntax error further on; the whole text decides.
    let syntax = if inner.is_syntax() || inner.is_eof() {
        Some(inner.to_string())
    } else {
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
            .err()
            .map(|e| e.to_string())
    };
    if let Some(message) = syntax {
        return ApiError::Malformed {
            message: format!("invalid JSON: {message}"),
        };
    }
    // serde_json appends the position; the field path says where, in the document's terms.
    let message = inner.to_string();
    let message = match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => &message,
    };
    field_error(if path == "." { "" } else { &path }, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = DEFAULT_BODY_LIMIT_BYTES;

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Inner {
        min_replicas: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)] // api_endpoint is only decoded
    struct Outer {
        api_endpoint: String,
        inner: Option<Inner>,
    }

    fn err(doc: &str) -> ApiError {
        decode_value::<Outer>(parse_document(doc.as_bytes(), false, LIMIT).unwrap()).unwrap_err()
    }

    #[test]
    fn names_missing_unknown_and_mistyped_fields() {
        assert_eq!(
            err("{}"),
            ApiError::MissingField {
                field: "apiEndpoint".into()
            }
        );
        assert_eq!(
            err(r#"{"apiEndpoint":"x","inner":{}}"#),
            ApiError::MissingField {
                field: "inner.minReplicas".into()
            }
        );
        assert!(matches!(err(r#"{"apiEndpoint":"x","bogus":1}"#),
            ApiError::InvalidField { field, .. } if field == "bogus"));
        assert!(
            matches!(err(r#"{"apiEndpoint":"x","inner":{"minReplicas":"a"}}"#),
            ApiError::InvalidField { field, .. } if field == "inner.minReplicas")
        );
        assert!(matches!(err(r#"{"apiEndpoint":5}"#),
            ApiError::InvalidField { field, .. } if field == "apiEndpoint"));
    }

    fn direct(doc: &str) -> Result<Outer, ApiError> {
        decode_bytes::<Outer>(doc.as_bytes(), false, LIMIT)
    }

    #[test]
    fn direct_json_decoding_answers_as_the_document_path_does() {
        let cases = [
            "{}",
            r#"{"apiEndpoint":"x","inner":{}}"#,
            r#"{"apiEndpoint":"x","bogus":1}"#,
            r#"{"apiEndpoint":"x","inner":{"minReplicas":"a"}}"#,
            r#"{"apiEndpoint":5}"#,
        ];
        for doc in cases {
            assert_eq!(direct(doc).unwrap_err(), err(doc), "{doc}");
        }
        assert_eq!(
            direct(r#" {"apiEndpoint":"x","inner":{"minReplicas":2}} "#)
                .unwrap()
                .inner
                .unwrap()
                .min_replicas,
            2
        );
        // Not JSON, or not an object, or trailing garbage: malformed, whatever came first.
        for doc in [
            "",
            "  ",
            "{",
            r#"{"apiEndpoint": "#,
            r#"{"apiEndpoint":5,,}"#,
            r#"{"apiEndpoint":"x"} {"#,
            "[1]",
            "5",
        ] {
            assert!(
                matches!(direct(doc), Err(ApiError::Malformed { .. })),
                "{doc}: {:?}",
                direct(doc)
            );
        }
        // A field error carries no "at line N column M" position.
        let ApiError::InvalidField { message, .. } = direct(r#"{"apiEndpoint":5}"#).unwrap_err()
        else {
            panic!("expected InvalidField")
        };
        assert!(!message.contains("line"), "{message}");
    }

    #[test]
    fn yaml_and_json_decode_the_same() {
        let y = parse_document(b"apiEndpoint: https://x\n", true, LIMIT).unwrap();
        let j = parse_document(br#"{"apiEndpoint":"https://x"}"#, false, LIMIT).unwrap();
        assert_eq!(y, j);
        assert!(matches!(
            parse_document(b"{", false, LIMIT),
            Err(ApiError::Malformed { .. })
        ));
        assert!(matches!(
            parse_document(b"a: [", true, LIMIT),
            Err(ApiError::Malformed { .. })
        ));
    }

    #[test]
    fn deep_json_is_malformed_not_a_crash() {
        let deep = format!(
            "{{\"apiEndpoint\":{}1{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(matches!(
            decode_bytes::<serde_json::Value>(deep.as_bytes(), false, LIMIT),
            Err(ApiError::Malformed { .. })
        ));
        assert!(matches!(
            parse_document(deep.as_bytes(), false, LIMIT),
            Err(ApiError::Malformed { .. })
        ));
    }

    #[test]
    fn yaml_expansion_past_the_body_budget_is_too_large() {
        for doc in [
            yaml::tests::flat_bomb(2000, 2000),
            yaml::tests::nested_bomb(8),
        ] {
            let err = decode_bytes::<Outer>(doc.as_bytes(), true, LIMIT).unwrap_err();
            assert_eq!(err.status().as_u16(), 413, "{err:?}");
            assert!(err.to_string().contains("aliases"), "{err}");
        }
    }
}
