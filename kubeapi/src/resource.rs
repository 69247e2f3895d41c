//! Resource definitions: what a served resource type is called, where it lives and what it
//! answers to, plus the table of Kubernetes' built-in types. Discovery, routing, apply and
//! printing all read a [`ResourceDef`]; this module must not build documents or hold objects.

use std::sync::LazyLock;

/// The verbs of an ordinary read-write resource, in the order kube-apiserver lists them.
pub const STANDARD_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One served resource type (built in, or from a CustomResourceDefinition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group, "" for the core group.
    pub group: String,
    pub version: String,
    /// URL segment, e.g. "deployments".
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub verbs: Vec<String>,
    pub short_names: Vec<String>,
    /// e.g. "all" (what `kubectl get all` lists).
    pub categories: Vec<String>,
    /// Served subresources: "status", "scale".
    pub subresources: Vec<String>,
}

impl ResourceDef {
    /// A namespaced type with the standard verbs, singular = lowercased kind, no subresources.
    pub fn new(group: &str, version: &str, plural: &str, kind: &str) -> Self {
        ResourceDef {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.to_string(),
            namespaced: true,
            verbs: STANDARD_VERBS.iter().map(|v| v.to_string()).collect(),
            short_names: Vec::new(),
            categories: Vec::new(),
            subresources: Vec::new(),
        }
    }

    pub fn cluster_scoped(mut self) -> Self {
        self.namespaced = false;
        self
    }

    pub fn singular(mut self, singular: &str) -> Self {
        self.singular = singular.to_string();
        self
    }

    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn categories(mut self, cats: &[&str]) -> Self {
        self.categories = cats.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn subresources(mut self, subs: &[&str]) -> Self {
        self.subresources = subs.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn verbs(mut self, verbs: &[&str]) -> Self {
        self.verbs = verbs.iter().map(|s| s.to_string()).collect();
        self
    }

    /// "apps/v1", or "v1" for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `{name}/status` is a subresource; if so, main-resource writes keep the old
    /// status and apply ignores it.
    pub fn has_status(&self) -> bool {
        self.has_subresource("status")
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| s == sub)
    }

    /// Stable key for this resource type (group and plural; one version is served).
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// `plural.group`, or the plural alone in the core group, as Status messages name types.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// Kubernetes' built-in types that fedraft knows, with their upstream scope, short names,
/// categories and subresources.
pub fn builtin() -> &'static [ResourceDef] {
    static TABLE: LazyLock<Vec<ResourceDef>> = LazyLock::new(build);
    &TABLE
}

/// The built-in type served at `group`/`version`/`plural`.
pub fn find_builtin(group: &str, version: &str, plural: &str) -> Option<&'static ResourceDef> {
    builtin()
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The built-in type of `apiVersion` + `kind`, as an object names itself.
pub fn builtin_by_kind(api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
    builtin()
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}

fn build() -> Vec<ResourceDef> {
    let core = |plural: &str, kind: &str| ResourceDef::new("", "v1", plural, kind);
    let status = &["status"][..];
    let scaled = &["scale", "status"][..];
    let all = &["all"][..];
    vec![
        core("namespaces", "Namespace")
            .cluster_scoped()
            .short_names(&["ns"])
            .subresources(status),
        core("nodes", "Node")
            .cluster_scoped()
            .short_names(&["no"])
            .subresources(status),
        core("services", "Service")
            .short_names(&["svc"])
            .categories(all)
            .subresources(status),
        core("configmaps", "ConfigMap").short_names(&["cm"]),
        core("secrets", "Secret"),
        core("pods", "Pod")
            .short_names(&["po"])
            .categories(all)
            .subresources(status),
        core("serviceaccounts", "ServiceAccount").short_names(&["sa"]),
        core("persistentvolumeclaims", "PersistentVolumeClaim")
            .short_names(&["pvc"])
            .subresources(status),
        core("resourcequotas", "ResourceQuota")
            .short_names(&["quota"])
            .subresources(status),
        core("limitranges", "LimitRange").short_names(&["limits"]),
        core("endpoints", "Endpoints")
            .singular("endpoints")
            .short_names(&["ep"]),
        ResourceDef::new("apps", "v1", "deployments", "Deployment")
            .short_names(&["deploy"])
            .categories(all)
            .subresources(scaled),
        ResourceDef::new("apps", "v1", "statefulsets", "StatefulSet")
            .short_names(&["sts"])
            .categories(all)
            .subresources(scaled),
        ResourceDef::new("apps", "v1", "daemonsets", "DaemonSet")
            .short_names(&["ds"])
            .categories(all)
            .subresources(status),
        ResourceDef::new("apps", "v1", "replicasets", "ReplicaSet")
            .short_names(&["rs"])
            .categories(all)
            .subresources(scaled),
        ResourceDef::new("batch", "v1", "jobs", "Job")
            .categories(all)
            .subresources(status),
        ResourceDef::new("batch", "v1", "cronjobs", "CronJob")
            .short_names(&["cj"])
            .categories(all)
            .subresources(status),
        ResourceDef::new("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
        ResourceDef::new("networking.k8s.io", "v1", "ingresses", "Ingress")
            .short_names(&["ing"])
            .subresources(status),
        ResourceDef::new(
            "networking.k8s.io",
            "v1",
            "networkpolicies",
            "NetworkPolicy",
        )
        .short_names(&["netpol"]),
        ResourceDef::new(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
        )
        .short_names(&["pdb"])
        .subresources(status),
        ResourceDef::new(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
        )
        .short_names(&["hpa"])
        .categories(all)
        .subresources(status),
        ResourceDef::new("rbac.authorization.k8s.io", "v1", "roles", "Role"),
        ResourceDef::new(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
        ),
        ResourceDef::new(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
        )
        .cluster_scoped(),
        ResourceDef::new(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
        )
        .cluster_scoped(),
        ResourceDef::new(
            "scheduling.k8s.io",
            "v1",
            "priorityclasses",
            "PriorityClass",
        )
        .cluster_scoped()
        .short_names(&["pc"]),
        ResourceDef::new("storage.k8s.io", "v1", "storageclasses", "StorageClass")
            .cluster_scoped()
            .short_names(&["sc"]),
        ResourceDef::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
        )
        .cluster_scoped()
        .short_names(&["crd", "crds"])
        .categories(&["api-extensions"])
        .subresources(status),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_kinds_are_unique() {
        for r in builtin() {
            assert_eq!(builtin().iter().filter(|x| x.key() == r.key()).count(), 1);
            assert_eq!(builtin_by_kind(&r.api_version(), &r.kind), Some(r));
        }
    }

    #[test]
    fn lookups() {
        let d = find_builtin("apps", "v1", "deployments").unwrap();
        assert_eq!(d.api_version(), "apps/v1");
        assert_eq!(d.qualified_plural(), "deployments.apps");
        assert!(d.has_status() && d.has_subresource("scale"));
        let ns = find_builtin("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        assert_eq!(ns.qualified_plural(), "namespaces");
        assert_eq!(
            find_builtin("", "v1", "endpoints").unwrap().singular,
            "endpoints"
        );
        assert!(find_builtin("apps", "v1", "nope").is_none());
    }
}
