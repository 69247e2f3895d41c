//! What a workload's pod template depends on, for `propagateDeps`: the ConfigMaps, Secrets,
//! ServiceAccounts and PersistentVolumeClaims of its own namespace that its pods name.
//!
//! Read as Karmada's default dependency interpreter reads them: volumes (`configMap`, `secret`,
//! `persistentVolumeClaim`, the sources of a `projected` volume, and the `secretRef`s of the
//! volume plugins that take one), `env[].valueFrom` and `envFrom` of every container, init
//! container and ephemeral container, `imagePullSecrets`, and a `serviceAccountName` other than
//! `default` (every namespace has that one already). The pod spec is found where each workload
//! kind keeps it; a kind without one has no dependencies.
//!
//! Must not: look anything up or decide where anything goes. It is a pure function of the
//! template text in the log, so every node derives the same set.

use std::collections::BTreeSet;

use serde_json::Value;

/// A dependency's kind. Ordered so that a set of them lists in one stable order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DependencyKind {
    ConfigMap,
    Secret,
    ServiceAccount,
    PersistentVolumeClaim,
}

impl DependencyKind {
    /// The kind as a manifest writes it (all four are in the core group, `v1`).
    pub fn kind(self) -> &'static str {
        match self {
            DependencyKind::ConfigMap => "ConfigMap",
            DependencyKind::Secret => "Secret",
            DependencyKind::ServiceAccount => "ServiceAccount",
            DependencyKind::PersistentVolumeClaim => "PersistentVolumeClaim",
        }
    }
}

/// One object a pod template names, in the template's namespace.
pub type Dependency = (DependencyKind, String);

/// The pod spec of a workload manifest of `kind` (in the `apps`, `batch` or core group), if the
/// kind has one.
fn pod_spec<'a>(kind: &str, manifest: &'a Value) -> Option<&'a Value> {
    let path = match kind {
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "Job"
        | "ReplicationController" => "/spec/template/spec",
        "CronJob" => "/spec/jobTemplate/spec/template/spec",
        "Pod" => "/spec",
        _ => return None,
    };
    manifest.pointer(path)
}

/// Every dependency the pod template of `manifest` (a workload of `kind`) names.
pub fn dependencies(kind: &str, manifest: &Value) -> BTreeSet<Dependency> {
    let mut out = BTreeSet::new();
    let Some(spec) = pod_spec(kind, manifest) else {
        return out;
    };
    let mut add = |k: DependencyKind, name: Option<&Value>| {
        if let Some(n) = name.and_then(Value::as_str).filter(|n| !n.is_empty()) {
            out.insert((k, n.to_string()));
        }
    };
    if let Some(sa) = spec
        .get("serviceAccountName")
        .filter(|v| v.as_str() != Some("default"))
    {
        add(DependencyKind::ServiceAccount, Some(sa));
    }
    for s in items(spec, "imagePullSecrets") {
        add(DependencyKind::Secret, s.get("name"));
    }
    for v in items(spec, "volumes") {
        add(DependencyKind::ConfigMap, v.pointer("/configMap/name"));
        add(DependencyKind::Secret, v.pointer("/secret/secretName"));
        add(
            DependencyKind::PersistentVolumeClaim,
            v.pointer("/persistentVolumeClaim/claimName"),
        );
        for source in items(v.get("projected").unwrap_or(&Value::Null), "sources") {
            add(DependencyKind::ConfigMap, source.pointer("/configMap/name"));
            add(DependencyKind::Secret, source.pointer("/secret/name"));
        }
        // The volume plugins that read their credentials from a Secret of the namespace.
        add(DependencyKind::Secret, v.pointer("/azureFile/secretName"));
        for plugin in [
            "cephfs",
            "cinder",
            "flexVolume",
            "iscsi",
            "rbd",
            "scaleIO",
            "storageos",
        ] {
            add(
                DependencyKind::Secret,
                v.get(plugin).and_then(|p| p.pointer("/secretRef/name")),
            );
        }
        add(
            DependencyKind::Secret,
            v.pointer("/csi/nodePublishSecretRef/name"),
        );
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in items(spec, list) {
            for e in items(c, "env") {
                add(
                    DependencyKind::ConfigMap,
                    e.pointer("/valueFrom/configMapKeyRef/name"),
                );
                add(
                    DependencyKind::Secret,
                    e.pointer("/valueFrom/secretKeyRef/name"),
                );
            }
            for e in items(c, "envFrom") {
                add(DependencyKind::ConfigMap, e.pointer("/configMapRef/name"));
                add(DependencyKind::Secret, e.pointer("/secretRef/name"));
            }
        }
    }
    out
}

/// The elements of the array `v[key]`, or none.
fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}
