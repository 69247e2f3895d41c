//! Input checks shared by the command handlers: names, labels, taints and templates.
//!
//! Pure functions over one input at a time; they never look at the state (checks against the
//! state, like "already exists" or quota, live with their command).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::FieldError;
use crate::model::TemplateInfo;
use crate::policy::{
    validate_dns_label, validate_dns_subdomain, validate_label_key, validate_label_value, Taint,
};
use crate::render;

/// Largest template accepted, in bytes of JSON text (Kubernetes' own object limit is ~1.5 MiB
/// in etcd; one MiB leaves room for fedraft's labels and overrides).
pub const MAX_TEMPLATE_BYTES: usize = 1024 * 1024;
pub fn dns_subdomain(name: &str, field: &str) -> Result<(), FieldError> {
    validate_dns_subdomain(name, field)
}

pub fn dns_label(name: &str, field: &str) -> Result<(), FieldError> {
    validate_dns_label(name, field)
}

pub fn labels(labels: &BTreeMap<String, String>, field: &str) -> Result<(), FieldError> {
    for (k, v) in labels {
        let f = format!("{field}.{k}");
        validate_label_key(k, &f)?;
        validate_label_value(v, &f)?;
    }
    Ok(())
}

pub fn taints(taints: &[Taint], field: &str) -> Result<(), FieldError> {
    for (i, t) in taints.iter().enumerate() {
        let f = format!("{field}[{i}]");
        t.validate(&f)?;
        validate_label_value(&t.value, &format!("{f}.value"))?;
        if taints[..i]
            .iter()
            .any(|o| o.key == t.key && o.effect == t.effect)
        {
            return Err(FieldError::new(
                format!("{f}.key"),
                format!(
                    "duplicate taint {:?} with effect {}",
                    t.key,
                    t.effect.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// What a put learns from its template: the sizing the object keeps, and whether the kind carries
/// a replica count (which decides what a `ByKind` replica mode means).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TemplateFacts {
    pub info: TemplateInfo,
    pub carries_replicas: bool,
    /// It runs pods: a pod template (a workload's or a CronJob's job template), or a Pod's own
    /// spec. Kinds that run none (a ConfigMap, a Service) book no capacity from `PODLESS_SINCE` on.
    pub runs_pods: bool,
}

/// Parses and checks a template: a JSON object of at most `MAX_TEMPLATE_BYTES` with non-empty
/// string `apiVersion`, `kind` and `metadata.name`. Returns the fields scheduling needs.
pub fn template(text: &str, field: &str) -> Result<TemplateFacts, FieldError> {
    if text.len() > MAX_TEMPLATE_BYTES {
        return Err(FieldError::new(
            field,
            format!(
                "{} bytes exceeds the limit of {MAX_TEMPLATE_BYTES} bytes",
                text.len()
            ),
        ));
    }
    if let Some(info) = crate::state::store::template_fast::template_info(text) {
        return Ok(info);
    }
    template_by_value(text, field)
}

/// [`template`] through a full `serde_json::Value`: the authority for every case the fast read
/// declines, and the reference it is tested against.
pub(crate) fn template_by_value(text: &str, field: &str) -> Result<TemplateFacts, FieldError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| FieldError::new(field, format!("not valid JSON: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(FieldError::new(
            field,
            "must be a JSON object (a Kubernetes manifest)",
        ));
    };
    for key in ["apiVersion", "kind"] {
        match obj.get(key) {
            Some(Value::String(s)) if !s.is_empty() => {}
            _ => {
                return Err(FieldError::new(
                    format!("{field}.{key}"),
                    "required: a non-empty string",
                ))
            }
        }
    }
    let name_field = format!("{field}.metadata.name");
    match obj.get("metadata") {
        Some(Value::Object(meta)) => match meta.get("name") {
            Some(Value::String(s)) if !s.is_empty() => {}
            _ => return Err(FieldError::new(name_field, "required: a non-empty string")),
        },
        _ => {
            return Err(FieldError::new(
                format!("{field}.metadata"),
                "required: an object",
            ))
        }
    }
    let per_replica = render::try_template_requests(&value)
        .map_err(|e| FieldError::new(field, format!("resource requests: {e}")))?;
    Ok(TemplateFacts {
        info: TemplateInfo {
            replicas: render::template_replicas(&value),
            per_replica,
        },
        // A `null` count is no count (as the fast read sees it).
        carries_replicas: value
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(render::kind_carries_replicas)
            || value
                .pointer("/spec/replicas")
                .is_some_and(|r| !r.is_null()),
        runs_pods: runs_pods(&value),
    })
}

/// Whether `value` has a pod spec to run, read as the fast read does: every step an object.
fn runs_pods(value: &Value) -> bool {
    let object_at = |p: &str| value.pointer(p).is_some_and(Value::is_object);
    object_at("/spec/template/spec")
        || object_at("/spec/jobTemplate/spec/template/spec")
        || (value.get("kind").and_then(Value::as_str) == Some("Pod") && object_at("/spec"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains() {
        assert!(dns_subdomain("web.v1", "f").is_ok());
        assert!(dns_subdomain("Web", "f").is_err());
        assert!(dns_subdomain("a..b", "f").is_err());
        assert!(dns_subdomain(&"a".repeat(254), "f").is_err());
    }

    #[test]
    fn template_fields_are_named() {
        let err = |t: &str| template(t, "spec.template").unwrap_err().field;
        assert_eq!(err("[1]"), "spec.template");
        assert_eq!(err("{"), "spec.template");
        assert_eq!(
            err(r#"{"kind":"A","metadata":{"name":"x"}}"#),
            "spec.template.apiVersion"
        );
        assert_eq!(
            err(r#"{"apiVersion":"v1","metadata":{"name":"x"}}"#),
            "spec.template.kind"
        );
        assert_eq!(
            err(r#"{"apiVersion":"v1","kind":"A"}"#),
            "spec.template.metadata"
        );
        assert_eq!(
            err(r#"{"apiVersion":"v1","kind":"A","metadata":{"name":7}}"#),
            "spec.template.metadata.name"
        );
        let big = format!(
            r#"{{"apiVersion":"v1","kind":"A","metadata":{{"name":"x"}},"p":"{}"}}"#,
            "x".repeat(MAX_TEMPLATE_BYTES)
        );
        assert!(template(&big, "spec.template")
            .unwrap_err()
            .message
            .contains("exceeds"));
    }

    #[test]
    fn taints_checked() {
        use crate::policy::TaintEffect;
        let t = |k: &str, v: &str| Taint {
            key: k.into(),
            value: v.into(),
            effect: TaintEffect::NoSchedule,
        };
        assert!(taints(&[t("a", "b")], "spec.taints").is_ok());
        assert_eq!(
            taints(&[t("bad key", "")], "spec.taints")
                .unwrap_err()
                .field,
            "spec.taints[0].key"
        );
        assert_eq!(
            taints(&[t("a", "bad value")], "spec.taints")
                .unwrap_err()
                .field,
            "spec.taints[0].value"
        );
        assert_eq!(
            taints(&[t("a", ""), t("a", "x")], "spec.taints")
                .unwrap_err()
                .field,
            "spec.taints[1].key"
        );
    }
}
