//! Which Kubernetes kinds are namespaced: a fixed table of the well-known kinds, and the rule
//! for every other kind. Core never sees a member's discovery, so this table is what admission
//! decides with; the executor compares the decision with the member's discovery before writing.
//!
//! Must not: depend on anything a node could see differently (files, discovery, clocks).

/// Where a kind's objects live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// (group, kind, scope) of the well-known kinds.
const TABLE: &[(&str, &str, Scope)] = {
    use Scope::{Cluster as C, Namespaced as N};
    &[
        ("", "Binding", N),
        ("", "ConfigMap", N),
        ("", "Endpoints", N),
        ("", "Event", N),
        ("", "LimitRange", N),
        ("", "PersistentVolumeClaim", N),
        ("", "Pod", N),
        ("", "PodTemplate", N),
        ("", "ReplicationController", N),
        ("", "ResourceQuota", N),
        ("", "Secret", N),
        ("", "Service", N),
        ("", "ServiceAccount", N),
        ("", "ComponentStatus", C),
        ("", "Namespace", C),
        ("", "Node", C),
        ("", "PersistentVolume", C),
        ("apps", "ControllerRevision", N),
        ("apps", "DaemonSet", N),
        ("apps", "Deployment", N),
        ("apps", "ReplicaSet", N),
        ("apps", "StatefulSet", N),
        ("batch", "CronJob", N),
        ("batch", "Job", N),
        ("autoscaling", "HorizontalPodAutoscaler", N),
        ("policy", "PodDisruptionBudget", N),
        ("policy", "PodSecurityPolicy", C),
        ("networking.k8s.io", "Ingress", N),
        ("networking.k8s.io", "NetworkPolicy", N),
        ("networking.k8s.io", "IngressClass", C),
        ("networking.k8s.io", "IPAddress", C),
        ("networking.k8s.io", "ServiceCIDR", C),
        ("discovery.k8s.io", "EndpointSlice", N),
        ("coordination.k8s.io", "Lease", N),
        ("events.k8s.io", "Event", N),
        ("rbac.authorization.k8s.io", "Role", N),
        ("rbac.authorization.k8s.io", "RoleBinding", N),
        ("rbac.authorization.k8s.io", "ClusterRole", C),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", C),
        ("apiextensions.k8s.io", "CustomResourceDefinition", C),
        ("apiregistration.k8s.io", "APIService", C),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            C,
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            C,
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicy",
            C,
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingAdmissionPolicyBinding",
            C,
        ),
        ("storage.k8s.io", "CSIStorageCapacity", N),
        ("storage.k8s.io", "CSIDriver", C),
        ("storage.k8s.io", "CSINode", C),
        ("storage.k8s.io", "StorageClass", C),
        ("storage.k8s.io", "VolumeAttachment", C),
        ("scheduling.k8s.io", "PriorityClass", C),
        ("node.k8s.io", "RuntimeClass", C),
        ("certificates.k8s.io", "CertificateSigningRequest", C),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema", C),
        (
            "flowcontrol.apiserver.k8s.io",
            "PriorityLevelConfiguration",
            C,
        ),
    ]
};

/// The scope the table gives `kind` of `group`, if it lists it.
pub fn builtin_scope(group: &str, kind: &str) -> Option<Scope> {
    TABLE
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map(|(_, _, s)| *s)
}

/// Groups Kubernetes itself serves. Every kind of them that admission may meet is in the table;
/// one that is not (a newer release's) is treated as cluster-scoped.
pub fn is_builtin_group(group: &str) -> bool {
    matches!(
        group,
        "" | "apps" | "batch" | "autoscaling" | "policy" | "extensions"
    ) || group == "k8s.io"
        || group.ends_with(".k8s.io")
}

/// The scope admission assumes for `kind` of `group` when the template does (`template_ns`)
/// or does not carry a `metadata.namespace` equal to the object's namespace.
///
/// The rule: a kind in the table has the table's scope. Any other kind of a Kubernetes group is
/// cluster-scoped. A kind of any other group (a custom resource) is namespaced only when its
/// template says so by carrying the object's namespace in `metadata.namespace`; without it, it
/// may be cluster-scoped and is treated so. The executor refuses to write an object whose
/// member-discovered scope differs from this answer.
pub fn admitted_scope(group: &str, kind: &str, template_ns: bool) -> Scope {
    if let Some(s) = builtin_scope(group, kind) {
        return s;
    }
    if !is_builtin_group(group) && template_ns {
        Scope::Namespaced
    } else {
        Scope::Cluster
    }
}

/// The policy key of a kind: `Kind` for the core group, `group/Kind` otherwise.
pub fn kind_key(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{group}/{kind}")
    }
}

/// Splits an apiVersion into its group ("" for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes() {
        assert_eq!(
            admitted_scope("apps", "Deployment", false),
            Scope::Namespaced
        );
        assert_eq!(admitted_scope("", "Namespace", true), Scope::Cluster);
        assert_eq!(
            admitted_scope("rbac.authorization.k8s.io", "ClusterRoleBinding", true),
            Scope::Cluster
        );
        // Unlisted kind of a Kubernetes group: cluster-scoped whatever the template says.
        assert_eq!(
            admitted_scope("storage.k8s.io", "Future", true),
            Scope::Cluster
        );
        assert_eq!(admitted_scope("", "Future", true), Scope::Cluster);
        // Custom resources: namespaced only when the template carries the namespace.
        assert_eq!(
            admitted_scope("example.com", "Widget", true),
            Scope::Namespaced
        );
        assert_eq!(
            admitted_scope("example.com", "Widget", false),
            Scope::Cluster
        );
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(kind_key("", "Namespace"), "Namespace");
        assert_eq!(
            kind_key("apiextensions.k8s.io", "CustomResourceDefinition"),
            "apiextensions.k8s.io/CustomResourceDefinition"
        );
    }
}
