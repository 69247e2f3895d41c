//! Object validation: the checks that make kube-apiserver answer 422 Invalid, for the fields a
//! federation writes (names, labels, workload replicas/selector/containers, resource quantities,
//! service ports). Not a full schema validation. Pure; no storage.

use serde_json::Value;

use crate::controller::parse_quantity_milli;
use crate::discovery::ResourceDef;
use crate::meta;
use crate::status::{ApiError, Subject};

pub fn validate(res: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let subject = Subject {
        group: res.group.to_string(),
        kind: res.kind.to_string(),
        name: meta::name(obj).to_string(),
    };
    let invalid =
        |field: &str, detail: String| Err(ApiError::invalid(subject.clone(), field, &detail));
    let name = meta::name(obj);
    if let Some(why) = meta::invalid_name_reason(name) {
        return invalid("metadata.name", format!("Invalid value: {name:?}: {why}"));
    }
    if res.plural == "namespaces" && (name.len() > 63 || name.contains('.')) {
        return invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: a lowercase RFC 1123 label must be at most 63 characters and contain no '.'"),
        );
    }
    for (k, v) in meta::labels(obj) {
        let ok = v.as_str().is_some_and(|s| {
            s.len() <= 63
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        });
        if !ok || k.is_empty() || k.len() > 316 {
            return invalid("metadata.labels", format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'"));
        }
    }
    match (res.group.as_str(), res.plural.as_str()) {
        ("apps", "deployments" | "statefulsets" | "replicasets" | "daemonsets") => {
            if let Some(r) = obj.pointer("/spec/replicas") {
                if r.as_i64().is_none_or(|n| n < 0) {
                    return invalid(
                        "spec.replicas",
                        format!("Invalid value: {r}: must be greater than or equal to 0"),
                    );
                }
            }
            let Some(match_labels) = obj
                .pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
            else {
                return invalid("spec.selector", "Required value".into());
            };
            let template_labels = obj
                .pointer("/spec/template/metadata/labels")
                .and_then(Value::as_object);
            let selected = match_labels
                .iter()
                .all(|(k, v)| template_labels.and_then(|t| t.get(k)) == Some(v));
            if match_labels.is_empty() || !selected {
                return invalid(
                    "spec.template.metadata.labels",
                    "Invalid value: `selector` does not match template `labels`".into(),
                );
            }
            let containers = obj
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .filter(|c| !c.is_empty());
            let Some(containers) = containers else {
                return invalid("spec.template.spec.containers", "Required value".into());
            };
            for (i, c) in containers.iter().enumerate() {
                for field in ["name", "image"] {
                    if c.get(field)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        return invalid(
                            &format!("spec.template.spec.containers[{i}].{field}"),
                            "Required value".into(),
                        );
                    }
                }
                for kind in ["requests", "limits"] {
                    let Some(q) = c
                        .pointer(&format!("/resources/{kind}"))
                        .and_then(Value::as_object)
                    else {
                        continue;
                    };
                    for (r, v) in q {
                        let parsed = match v {
                            Value::String(s) => parse_quantity_milli(s),
                            Value::Number(n) => n.as_f64().filter(|f| *f >= 0.0).map(|_| 0),
                            _ => None,
                        };
                        if parsed.is_none() {
                            return invalid(
                                &format!(
                                    "spec.template.spec.containers[{i}].resources.{kind}[{r}]"
                                ),
                                format!("Invalid value: {v}: must be a valid quantity"),
                            );
                        }
                    }
                }
            }
        }
        ("", "services") => {
            let ports = obj.pointer("/spec/ports").and_then(Value::as_array);
            for (i, p) in ports.into_iter().flatten().enumerate() {
                let port = p.get("port").and_then(Value::as_i64);
                if !port.is_some_and(|n| (1..=65535).contains(&n)) {
                    return invalid(
                        &format!("spec.ports[{i}].port"),
                        format!(
                            "Invalid value: {}: must be between 1 and 65535, inclusive",
                            p.get("port").unwrap_or(&Value::Null)
                        ),
                    );
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::find;
    use serde_json::json;

    fn deploy() -> Value {
        json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                           "resources": {"requests": {"cpu": "100m"}}}]}}}
        })
    }

    #[test]
    fn cases() {
        let d = find("apps", "v1", "deployments").unwrap();
        assert!(validate(d, &deploy()).is_ok());
        let bad: Vec<(&str, Value)> = vec![
            ("/spec/replicas", json!(-1)),
            ("/spec/selector", json!({})),
            ("/spec/template/metadata/labels", json!({"app": "other"})),
            ("/spec/template/spec/containers", json!([])),
            (
                "/spec/template/spec/containers/0/resources/requests/cpu",
                json!("lots"),
            ),
            ("/metadata/name", json!("Web")),
            ("/metadata/labels/app", json!("a b")),
        ];
        for (ptr, v) in bad {
            let mut o = deploy();
            *o.pointer_mut(ptr).unwrap() = v;
            let e = validate(d, &o).unwrap_err();
            assert_eq!(e.code(), 422, "{ptr}");
        }
    }
}
