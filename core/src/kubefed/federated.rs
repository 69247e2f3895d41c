//! One FederatedX document read into what fedraft places: the target object KubeFed would have
//! created (its template, with apiVersion, kind, name and namespace taken from the federated
//! kind and object), KubeFed's placement and its per-cluster overrides.
//!
//! KubeFed's placement rules, restated (its user guide, "Using Cluster Selector"):
//! 1. `placement.clusters` given, even empty: exactly those clusters; `clusterSelector` is
//!    ignored.
//! 2. Only `clusterSelector` given: the clusters whose labels it matches; an empty selector
//!    (`{}`) matches every cluster.
//! 3. Neither: no cluster.
//!
//! Without a ReplicaSchedulingPreference every selected cluster gets the whole template, replica
//! count included (KubeFed has no division of its own). Overrides are JSON patches per cluster
//! whose `op` defaults to `replace` and whose `value` is any JSON; like KubeFed, fedraft refuses
//! a patch of the object's identity and a cluster named twice.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::FederatedKind;
use crate::error::FieldError;
use crate::policy::{
    validate_dns_label, JsonPatchOp, LabelSelector, Override, PatchOpKind, Placement, ReplicaMode,
    ReplicaPolicy,
};

/// Paths an override may not touch: they name the object, and a member copy renamed by an
/// override would be an object fedraft does not know it placed.
const IDENTITY_PATHS: [&str; 5] = [
    "/apiVersion",
    "/kind",
    "/metadata/name",
    "/metadata/namespace",
    "/metadata/generateName",
];

/// A FederatedX, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct FederatedSpec {
    pub kind: FederatedKind,
    /// The target manifest: the template with the target's apiVersion, kind, name and
    /// namespace.
    pub template: Value,
    /// KubeFed's placement as fedraft's, a full copy per cluster.
    pub placement: Placement,
    pub overrides: Vec<Override>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    template: Option<Value>,
    #[serde(default)]
    placement: Option<RawPlacement>,
    #[serde(default)]
    overrides: Vec<RawOverride>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPlacement {
    /// `Some(empty)` and `None` differ: an empty list selects nothing and hides the selector.
    #[serde(default)]
    clusters: Option<Vec<RawCluster>>,
    #[serde(default)]
    cluster_selector: Option<LabelSelector>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawOverride {
    cluster_name: String,
    #[serde(default)]
    cluster_overrides: Vec<RawClusterOverride>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClusterOverride {
    #[serde(default)]
    op: Option<String>,
    path: String,
    #[serde(default)]
    value: Option<Value>,
}

/// Reads a FederatedX manifest of `kind` whose metadata names it `namespace`/`name` (the door
/// has read and checked the identity), as a log entry of `version` means it. Every error names
/// its field from the document's root.
///
/// The federated cluster-scoped kinds (FederatedClusterRole, FederatedClusterRoleBinding) are
/// read since `PEER_WIDENED_SINCE`: their target is placed like a cluster-scoped resource
/// template, under the same admission rules.
pub fn parse_federated(
    kind: FederatedKind,
    manifest: &Value,
    namespace: &str,
    name: &str,
    version: u16,
) -> Result<FederatedSpec, FieldError> {
    if !kind.namespaced_target()
        && kind != FederatedKind::Namespace
        && version < crate::karmada::PEER_WIDENED_SINCE
    {
        return Err(FieldError::new(
            "kind",
            format!(
                "not supported by fedraft: {} federates a cluster-scoped kind, and fedraft places \
                 only namespaced resource templates so far",
                kind.kind()
            ),
        ));
    }
    if kind == FederatedKind::Namespace && namespace != name {
        return Err(FieldError::new(
            "metadata.name",
            format!("a FederatedNamespace is named after its namespace ({namespace:?})"),
        ));
    }
    let Some(spec) = manifest.get("spec") else {
        return Err(FieldError::new("spec", "required"));
    };
    let raw: RawSpec = crate::karmada::typed(spec, "spec")?;
    let template = target_template(kind, raw.template, namespace, name)?;
    let placement = placement(raw.placement)?;
    let overrides = overrides(raw.overrides)?;
    Ok(FederatedSpec {
        kind,
        template,
        placement,
        overrides,
    })
}

fn target_template(
    kind: FederatedKind,
    template: Option<Value>,
    namespace: &str,
    name: &str,
) -> Result<Value, FieldError> {
    let mut doc = match template {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(FieldError::new("spec.template", "must be an object")),
    };
    let (api_version, target_kind) = kind.target();
    doc.remove("status");
    doc.insert("apiVersion".into(), Value::from(api_version));
    doc.insert("kind".into(), Value::from(target_kind));
    let meta = doc
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return Err(FieldError::new(
            "spec.template.metadata",
            "must be an object",
        ));
    };
    meta.insert("name".into(), Value::from(name));
    if kind.namespaced_target() {
        meta.insert("namespace".into(), Value::from(namespace));
    } else {
        meta.remove("namespace");
    }
    Ok(Value::Object(doc))
}

fn placement(raw: Option<RawPlacement>) -> Result<Placement, FieldError> {
    let raw = raw.unwrap_or(RawPlacement {
        clusters: None,
        cluster_selector: None,
    });
    let (clusters, cluster_selector) = match (raw.clusters, raw.cluster_selector) {
        (Some(list), _) => {
            let mut names = Vec::with_capacity(list.len());
            for (i, c) in list.into_iter().enumerate() {
                validate_dns_label(&c.name, &format!("spec.placement.clusters[{i}].name"))?;
                names.push(c.name);
            }
            names.sort();
            names.dedup();
            (Some(names), None)
        }
        (None, Some(sel)) => {
            sel.validate("spec.placement.clusterSelector")?;
            (None, Some(sel))
        }
        (None, None) => (Some(Vec::new()), None),
    };
    Ok(Placement {
        clusters,
        cluster_selector: cluster_selector.map(Box::new),
        replicas: ReplicaPolicy {
            mode: ReplicaMode::Duplicated,
            division: None,
        },
        ..Placement::default()
    })
}

fn overrides(raw: Vec<RawOverride>) -> Result<Vec<Override>, FieldError> {
    let mut out: Vec<Override> = Vec::with_capacity(raw.len());
    for (i, o) in raw.into_iter().enumerate() {
        let field = format!("spec.overrides[{i}]");
        validate_dns_label(&o.cluster_name, &format!("{field}.clusterName"))?;
        if out
            .iter()
            .any(|x| x.cluster_name.as_deref() == Some(&o.cluster_name))
        {
            return Err(FieldError::new(
                format!("{field}.clusterName"),
                format!("cluster {:?} appears more than once", o.cluster_name),
            ));
        }
        let mut patches = Vec::with_capacity(o.cluster_overrides.len());
        for (j, c) in o.cluster_overrides.into_iter().enumerate() {
            let cf = format!("{field}.clusterOverrides[{j}]");
            let op = match c.op.as_deref() {
                None | Some("") | Some("replace") => PatchOpKind::Replace,
                Some("add") => PatchOpKind::Add,
                Some("remove") => PatchOpKind::Remove,
                Some(other) => {
                    return Err(FieldError::new(
                        format!("{cf}.op"),
                        format!("{other:?} is not one of add, remove, replace"),
                    ))
                }
            };
            if IDENTITY_PATHS
                .iter()
                .any(|p| c.path == *p || c.path.starts_with(&format!("{p}/")))
            {
                return Err(FieldError::new(
                    format!("{cf}.path"),
                    format!("{} names the object and may not be overridden", c.path),
                ));
            }
            let value = match op {
                PatchOpKind::Remove => None,
                // KubeFed sends what it was given; an absent value is JSON null.
                _ => Some(c.value.unwrap_or(Value::Null).to_string()),
            };
            let patch = JsonPatchOp {
                op,
                path: c.path,
                from: None,
                value,
            };
            patch.validate(&cf)?;
            patches.push(patch);
        }
        out.push(Override {
            cluster_name: Some(o.cluster_name),
            patches,
            ..Override::default()
        });
    }
    Ok(out)
}
