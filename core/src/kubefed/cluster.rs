//! KubeFed's `KubeFedCluster` (`core.kubefed.io/v1beta1`) read into a [`MemberDoc`]: what
//! fedraft registers as a member cluster when a KubeFed user applies the document
//! `kubefedctl join` writes.
//!
//! The mapping: `apiEndpoint` is the member's API URL; `caBundle` the CA it presents;
//! `secretRef.name` the Secret beside the document (same namespace, which must be one of
//! [`CREDENTIALS_NAMESPACES`]) whose `token` fedraft authenticates with; `metadata.labels` are
//! the cluster labels KubeFed's `clusterSelector` matches. `disabledTLSValidations` (other than
//! empty) and `proxyURL` are refused, naming the field.
//!
//! Must not: look at the Secret or any state; `state/handlers/members.rs` joins them.

use serde::Deserialize;
use serde_json::Value;

use crate::door::{is_credentials_namespace, MemberDoc, SecretRef, CREDENTIALS_NAMESPACES};
use crate::error::FieldError;
use crate::karmada::{member_name, metadata_labels};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawKubeFedCluster {
    #[serde(default)]
    api_endpoint: String,
    #[serde(default)]
    ca_bundle: Option<String>,
    #[serde(default)]
    secret_ref: Option<RawLocalRef>,
    #[serde(default)]
    disabled_tls_validations: Vec<String>,
    #[serde(default, rename = "proxyURL")]
    proxy_url: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocalRef {
    name: String,
}

/// Reads a `KubeFedCluster` manifest (the whole document). Errors name the field from the
/// document's root.
pub fn parse_kubefed_cluster(manifest: &Value) -> Result<MemberDoc, FieldError> {
    let name = member_name(manifest)?;
    let namespace = manifest
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !is_credentials_namespace(namespace) {
        return Err(FieldError::new(
            "metadata.namespace",
            format!(
                "{namespace:?}: a KubeFedCluster and its Secret live in one of \
                 {CREDENTIALS_NAMESPACES:?}, where fedraft seals the Secret and never \
                 propagates it"
            ),
        ));
    }
    let spec = manifest.get("spec").unwrap_or(&Value::Null);
    let raw: RawKubeFedCluster = crate::karmada::typed(spec, "spec")?;
    if raw.api_endpoint.is_empty() {
        return Err(FieldError::new("spec.apiEndpoint", "required"));
    }
    if !raw.disabled_tls_validations.is_empty() {
        return Err(FieldError::new(
            "spec.disabledTLSValidations",
            "not supported by fedraft: members are verified against spec.caBundle",
        ));
    }
    if raw.proxy_url.is_some_and(|p| !p.is_empty()) {
        return Err(FieldError::new(
            "spec.proxyURL",
            "not supported by fedraft: executors reach members directly",
        ));
    }
    let secret = raw
        .secret_ref
        .ok_or_else(|| FieldError::new("spec.secretRef", "required"))?;
    Ok(MemberDoc {
        name,
        api_endpoint: raw.api_endpoint,
        secret: SecretRef {
            namespace: namespace.to_string(),
            name: secret.name,
        },
        labels: metadata_labels(manifest),
        taints: Vec::new(),
        ca_bundle: raw.ca_bundle.filter(|c| !c.is_empty()),
    })
}
