//! `GET /v1/namespaces/{ns}/objects/{name}/rendered`: the manifest fedraft writes to each member
//! cluster the object is placed on, rendered from the applied state through the same function the
//! executors use (`State::render_for`: the template revision that cluster runs, the overrides
//! that target it, its replica share, the identity check against what admission allowed).
//!
//! Must not: show secret material. A Secret's `data` and `stringData` values are replaced by
//! their sizes: the console and the CLI show this to people, and reading a Secret's contents
//! is what member clusters' own RBAC is for. Member-cluster credentials never enter a manifest.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::{Extension, Json};
use serde_json::{json, Map, Value};

use super::common::{allow, read, ReadParams, P, Q};
use crate::auth::{Access, Principal};
use crate::error::ApiError;
use crate::wire::{valid_label, valid_object_ref};
use crate::App;

pub async fn get(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    valid_label(&ns, "namespace")?;
    valid_object_ref(&name, "name")?;
    allow(&app, &p, Access::ReadNamespace(&ns))?;
    let (n, m) = (ns.clone(), name.clone());
    read(&app, q.stale, move |s| {
        let obj = s.object(&n, &m)?;
        let no_labels = BTreeMap::new();
        let clusters: Vec<Value> = obj
            .status
            .clusters
            .iter()
            .map(|placed| {
                let cluster = &*placed.cluster;
                let replicas = obj.replicas_on(cluster);
                let labels = s.cluster(cluster).map_or(&no_labels, |c| &c.spec.labels);
                let (manifest, _) = s.render_for(obj, cluster, labels);
                match manifest {
                    Ok(mut m) => {
                        redact_secret(&mut m);
                        json!({"cluster": cluster, "replicas": replicas, "manifest": m})
                    }
                    Err(e) => {
                        json!({"cluster": cluster, "replicas": replicas, "error": e.to_string()})
                    }
                }
            })
            .collect();
        Some(json!({
            "namespace": n,
            "name": m,
            "resourceVersion": obj.resource_version,
            "appliedIndex": s.applied_index(),
            "clusters": clusters,
        }))
    })
    .await?
    .map(Json)
    .ok_or_else(|| ApiError::not_found("object", format!("{ns}/{name}")))
}

/// Replaces every value under a core/v1 Secret's `data` and `stringData` with its size.
fn redact_secret(manifest: &mut Value) {
    let is_secret = manifest.get("kind").and_then(Value::as_str) == Some("Secret")
        && manifest.get("apiVersion").and_then(Value::as_str) == Some("v1");
    if !is_secret {
        return;
    }
    for field in ["data", "stringData"] {
        if let Some(Value::Object(values)) = manifest.get_mut(field) {
            let redacted: Map<String, Value> = values
                .iter()
                .map(|(k, v)| {
                    let size = v.as_str().map_or(0, str::len);
                    (
                        k.clone(),
                        Value::String(format!("<redacted: {size} bytes>")),
                    )
                })
                .collect();
            *values = redacted;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_lose_their_values_and_nothing_else_does() {
        let mut secret = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db"},
            "data": {"password": "aHVudGVyMg=="},
            "stringData": {"user": "admin"},
        });
        redact_secret(&mut secret);
        assert_eq!(secret["data"]["password"], "<redacted: 12 bytes>");
        assert_eq!(secret["stringData"]["user"], "<redacted: 5 bytes>");
        assert_eq!(secret["metadata"]["name"], "db");

        let mut config = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}});
        let before = config.clone();
        redact_secret(&mut config);
        assert_eq!(config, before);
    }
}
