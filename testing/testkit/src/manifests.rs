//! Deployment manifests as tests write and read them (plain JSON, as the API and the member
//! clusters carry them). Owns the shapes only; what fedraft does with them is for the tests.

use serde_json::{json, Value};

/// A Deployment template with `replicas` and one container requesting 100m CPU and 64Mi.
pub fn deployment(name: &str, replicas: u64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{
                    "name": "app", "image": image,
                    "resources": { "requests": { "cpu": "100m", "memory": "64Mi" } },
                }]},
            },
        },
    })
}

/// `spec.replicas` of a Deployment (0 when absent).
pub fn replicas_of(d: &Value) -> u64 {
    d.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// The first container's image ("" when absent).
pub fn image_of(d: &Value) -> String {
    d.pointer("/spec/template/spec/containers/0/image")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
