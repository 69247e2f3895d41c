//! Karmada's `Cluster` (`cluster.karmada.io/v1alpha1`) read into a [`MemberDoc`]: what fedraft
//! registers as a member cluster when a Karmada user applies the document `karmadactl join`
//! writes.
//!
//! The mapping: `apiEndpoint` is the member's API URL; `secretRef` names the Secret holding the
//! `token` and `caBundle` (it must live in a [`CREDENTIALS_NAMESPACES`] namespace, so that it
//! is sealed and never propagated); `provider`, `region` and `zone` (or a one-element `zones`)
//! become the cluster labels Karmada's field selectors and `spreadByField` read; `taints` are the
//! cluster's taints. `syncMode: Push` is what fedraft does; `Pull` needs Karmada's agent in the
//! member and is refused. `id` and `impersonatorSecretRef` are accepted and not used (fedraft
//! acts with the credentials of `secretRef`). Every other field is refused, naming it.
//!
//! Must not: look at the Secret or any state; `state/handlers/members.rs` joins them.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{typed, unsupported, PROVIDER_LABEL, REGION_LABEL, ZONE_LABEL};
use crate::door::{is_credentials_namespace, MemberDoc, SecretRef, CREDENTIALS_NAMESPACES};
use crate::error::FieldError;
use crate::policy::{Taint, TaintEffect};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawCluster {
    #[serde(default)]
    sync_mode: Option<SyncMode>,
    #[serde(default)]
    api_endpoint: Option<String>,
    #[serde(default)]
    secret_ref: Option<RawSecretRef>,
    #[serde(default)]
    impersonator_secret_ref: Option<Value>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    zones: Vec<String>,
    #[serde(default)]
    taints: Vec<RawTaint>,
    #[serde(default)]
    insecure_skip_tls_verification: bool,
    #[serde(default, rename = "proxyURL")]
    proxy_url: Option<Value>,
    #[serde(default)]
    proxy_header: Option<Value>,
    #[serde(default)]
    resource_models: Option<Value>,
}

#[derive(Deserialize, PartialEq, Eq)]
enum SyncMode {
    Push,
    Pull,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSecretRef {
    namespace: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTaint {
    key: String,
    #[serde(default)]
    value: String,
    effect: String,
    #[serde(default)]
    time_added: Option<Value>,
}

/// Reads a Karmada `Cluster` manifest (the whole document). Errors name the field from the
/// document's root.
pub fn parse_cluster(manifest: &Value) -> Result<MemberDoc, FieldError> {
    let name = member_name(manifest)?;
    let spec = manifest.get("spec").unwrap_or(&Value::Null);
    let raw: RawCluster = typed(spec, "spec")?;
    if raw.sync_mode == Some(SyncMode::Pull) {
        return Err(unsupported(
            "spec.syncMode",
            "Pull needs Karmada's agent inside the member; fedraft's executors push (give Push)",
        ));
    }
    for (field, given) in [
        ("spec.proxyURL", raw.proxy_url.is_some()),
        ("spec.proxyHeader", raw.proxy_header.is_some()),
    ] {
        if given {
            return Err(unsupported(
                field,
                "executors reach members directly; no proxy is configured per cluster",
            ));
        }
    }
    if raw.resource_models.is_some() {
        return Err(unsupported(
            "spec.resourceModels",
            "fedraft divides replicas on the capacity its executors report, not on resource models",
        ));
    }
    if raw.insecure_skip_tls_verification {
        return Err(unsupported(
            "spec.insecureSkipTLSVerification",
            "members are verified against the Secret's caBundle; put the member's CA there",
        ));
    }
    let _ = (raw.id, raw.impersonator_secret_ref);
    let api_endpoint = raw
        .api_endpoint
        .filter(|s| !s.is_empty())
        .ok_or_else(|| FieldError::new("spec.apiEndpoint", "required for a Push cluster"))?;
    let secret = raw
        .secret_ref
        .ok_or_else(|| FieldError::new("spec.secretRef", "required for a Push cluster"))?;
    if !is_credentials_namespace(&secret.namespace) {
        return Err(FieldError::new(
            "spec.secretRef.namespace",
            format!(
                "{:?}: the credentials Secret must live in one of {CREDENTIALS_NAMESPACES:?}, \
                 where fedraft seals it and never propagates it",
                secret.namespace
            ),
        ));
    }
    let mut labels = metadata_labels(manifest);
    if raw.zones.len() > 1 {
        return Err(unsupported(
            "spec.zones",
            "a cluster carries one zone label; give one zone",
        ));
    }
    let zone = raw.zone.or_else(|| raw.zones.into_iter().next());
    for (label, value) in [
        (PROVIDER_LABEL, raw.provider),
        (REGION_LABEL, raw.region),
        (ZONE_LABEL, zone),
    ] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            labels.insert(label.to_string(), v);
        }
    }
    let mut taints = Vec::with_capacity(raw.taints.len());
    for (i, t) in raw.taints.into_iter().enumerate() {
        let _ = t.time_added;
        let effect = match t.effect.as_str() {
            "NoSchedule" => TaintEffect::NoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            other => {
                return Err(unsupported(
                    format!("spec.taints[{i}].effect"),
                    &format!("{other:?}: fedraft's taints are NoSchedule or NoExecute"),
                ))
            }
        };
        taints.push(Taint {
            key: t.key,
            value: t.value,
            effect,
        });
    }
    Ok(MemberDoc {
        name,
        api_endpoint,
        secret: SecretRef {
            namespace: secret.namespace,
            name: secret.name,
        },
        labels,
        taints,
        ca_bundle: None,
    })
}

/// `metadata.name`, required.
pub(crate) fn member_name(manifest: &Value) -> Result<String, FieldError> {
    manifest
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| FieldError::new("metadata.name", "required: a non-empty string"))
}

/// `metadata.labels` with string values.
pub(crate) fn metadata_labels(manifest: &Value) -> BTreeMap<String, String> {
    manifest
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}
