//! The strategic-merge-patch schema of the built-in kinds: for each field that is not merged
//! the default way, its `patchStrategy` and `patchMergeKey`, transcribed from the struct tags of
//! k8s.io/api (core/v1, apps/v1, batch/v1, autoscaling/v2) and k8s.io/apimachinery (ObjectMeta).
//! A field not listed is a map merged key by key, or a list replaced whole — which is what an
//! untagged Go field gets. This module must not merge anything; `strategic` does.

/// How a patch treats one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Untagged: maps merge, lists are replaced.
    Default,
    /// `patchStrategy:"merge" patchMergeKey:KEY`: list items are matched by KEY and merged.
    MergeByKey(&'static str),
    /// `patchStrategy:"merge"` on a list of scalars: the union, in order (`finalizers`).
    MergeScalars,
    /// `patchStrategy:"retainKeys"` on a map: a patch carrying `$retainKeys` clears the other
    /// keys (switching `strategy.type` drops `rollingUpdate`).
    RetainKeys,
    /// `patchStrategy:"merge,retainKeys"`: merge by KEY, items honour `$retainKeys`.
    MergeByKeyRetainKeys(&'static str),
}

/// One tagged field of a type; `of` is the type of the field (of its items, for a list).
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub strategy: Strategy,
    pub of: Option<&'static str>,
}

const fn f(name: &'static str, strategy: Strategy, of: Option<&'static str>) -> Field {
    Field { name, strategy, of }
}

const fn keyed(name: &'static str, key: &'static str) -> Field {
    f(name, Strategy::MergeByKey(key), None)
}

const fn typed(name: &'static str, of: &'static str) -> Field {
    f(name, Strategy::Default, Some(of))
}

const fn conditions() -> Field {
    keyed("conditions", "type")
}

/// Types by name, each with the fields that matter to a patch (children with tags below them
/// included, so the walk reaches them).
static TYPES: &[(&str, &[Field])] = &[
    (
        "ObjectMeta",
        &[
            keyed("ownerReferences", "uid"),
            f("finalizers", Strategy::MergeScalars, None),
        ],
    ),
    (
        "PodTemplateSpec",
        &[typed("metadata", "ObjectMeta"), typed("spec", "PodSpec")],
    ),
    (
        "PodSpec",
        &[
            f("volumes", Strategy::MergeByKeyRetainKeys("name"), None),
            f(
                "initContainers",
                Strategy::MergeByKey("name"),
                Some("Container"),
            ),
            f(
                "containers",
                Strategy::MergeByKey("name"),
                Some("Container"),
            ),
            f(
                "ephemeralContainers",
                Strategy::MergeByKey("name"),
                Some("Container"),
            ),
            keyed("imagePullSecrets", "name"),
            keyed("hostAliases", "ip"),
            keyed("topologySpreadConstraints", "topologyKey"),
            keyed("schedulingGates", "name"),
            f(
                "resourceClaims",
                Strategy::MergeByKeyRetainKeys("name"),
                None,
            ),
        ],
    ),
    (
        "Container",
        &[
            keyed("ports", "containerPort"),
            keyed("env", "name"),
            keyed("volumeMounts", "mountPath"),
            keyed("volumeDevices", "devicePath"),
        ],
    ),
    (
        "PodStatus",
        &[
            conditions(),
            keyed("hostIPs", "ip"),
            keyed("podIPs", "ip"),
            f(
                "resourceClaimStatuses",
                Strategy::MergeByKeyRetainKeys("name"),
                None,
            ),
        ],
    ),
    (
        "DeploymentSpec",
        &[
            typed("template", "PodTemplateSpec"),
            f("strategy", Strategy::RetainKeys, None),
        ],
    ),
    ("WorkloadSpec", &[typed("template", "PodTemplateSpec")]),
    ("ConditionsStatus", &[conditions()]),
    (
        "JobTemplateSpec",
        &[
            typed("metadata", "ObjectMeta"),
            typed("spec", "WorkloadSpec"),
        ],
    ),
    ("CronJobSpec", &[typed("jobTemplate", "JobTemplateSpec")]),
    ("ServiceSpec", &[keyed("ports", "port")]),
    ("NodeSpec", &[f("podCIDRs", Strategy::MergeScalars, None)]),
    ("NodeStatus", &[conditions(), keyed("addresses", "type")]),
    ("PersistentVolumeClaimStatus", &[conditions()]),
    // Kinds: metadata, spec and status, plus top-level tagged fields.
    (
        "Deployment",
        &[meta(), typed("spec", "DeploymentSpec"), status()],
    ),
    (
        "StatefulSet",
        &[meta(), typed("spec", "WorkloadSpec"), status()],
    ),
    (
        "DaemonSet",
        &[meta(), typed("spec", "WorkloadSpec"), status()],
    ),
    (
        "ReplicaSet",
        &[meta(), typed("spec", "WorkloadSpec"), status()],
    ),
    ("Job", &[meta(), typed("spec", "WorkloadSpec"), status()]),
    ("CronJob", &[meta(), typed("spec", "CronJobSpec")]),
    (
        "Pod",
        &[
            meta(),
            typed("spec", "PodSpec"),
            typed("status", "PodStatus"),
        ],
    ),
    (
        "PodTemplate",
        &[meta(), typed("template", "PodTemplateSpec")],
    ),
    ("Service", &[meta(), typed("spec", "ServiceSpec"), status()]),
    ("ConfigMap", &[meta()]),
    ("Secret", &[meta()]),
    ("ServiceAccount", &[meta(), keyed("secrets", "name")]),
    ("Ingress", &[meta()]),
    (
        "PersistentVolumeClaim",
        &[meta(), typed("status", "PersistentVolumeClaimStatus")],
    ),
    ("HorizontalPodAutoscaler", &[meta(), status()]),
    ("Role", &[meta()]),
    ("RoleBinding", &[meta()]),
    ("ClusterRole", &[meta()]),
    ("ClusterRoleBinding", &[meta()]),
    ("Namespace", &[meta(), status()]),
    (
        "Node",
        &[
            meta(),
            typed("spec", "NodeSpec"),
            typed("status", "NodeStatus"),
        ],
    ),
    ("Endpoints", &[meta()]),
    ("LimitRange", &[meta()]),
    ("ResourceQuota", &[meta()]),
    ("NetworkPolicy", &[meta()]),
    ("PodDisruptionBudget", &[meta(), status()]),
];

const fn meta() -> Field {
    typed("metadata", "ObjectMeta")
}

const fn status() -> Field {
    typed("status", "ConditionsStatus")
}

/// The built-in kinds that take strategic merge patches, by API group and kind. Custom
/// resources do not (kube-apiserver answers 415).
static KINDS: &[(&str, &str)] = &[
    ("", "Pod"),
    ("", "PodTemplate"),
    ("", "Service"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "ServiceAccount"),
    ("", "PersistentVolumeClaim"),
    ("", "Namespace"),
    ("", "Node"),
    ("", "Endpoints"),
    ("", "LimitRange"),
    ("", "ResourceQuota"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("networking.k8s.io", "Ingress"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("policy", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
];

/// Whether `group`/`kind` accepts `application/strategic-merge-patch+json`.
pub fn supports_strategic(group: &str, kind: &str) -> bool {
    KINDS.iter().any(|(g, k)| *g == group && *k == kind)
}

/// The root type of a kind that takes strategic merge patches.
pub fn root_type(group: &str, kind: &str) -> Option<&'static str> {
    KINDS
        .iter()
        .find(|(g, k)| *g == group && *k == kind)
        .map(|(_, k)| *k)
}

/// The tagged field `name` of type `ty` (None: the default strategy, no known type).
pub fn field(ty: &str, name: &str) -> Option<&'static Field> {
    TYPES
        .iter()
        .find(|(t, _)| *t == ty)
        .and_then(|(_, fields)| fields.iter().find(|f| f.name == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_type_exists() {
        let known = |t: &str| TYPES.iter().any(|(n, _)| *n == t);
        for (_, fields) in TYPES {
            for fl in fields.iter() {
                if let Some(of) = fl.of {
                    assert!(known(of), "{of} is referenced but not described");
                }
            }
        }
        for (_, k) in KINDS {
            assert!(known(k), "{k} has no root type");
        }
    }

    #[test]
    fn upstream_tags() {
        let key = |t: &str, n: &str| field(t, n).map(|f| f.strategy);
        assert_eq!(
            key("PodSpec", "containers"),
            Some(Strategy::MergeByKey("name"))
        );
        assert_eq!(
            key("PodSpec", "volumes"),
            Some(Strategy::MergeByKeyRetainKeys("name"))
        );
        assert_eq!(key("PodSpec", "tolerations"), None, "untagged: replaced");
        assert_eq!(
            key("Container", "ports"),
            Some(Strategy::MergeByKey("containerPort"))
        );
        assert_eq!(
            key("ServiceSpec", "ports"),
            Some(Strategy::MergeByKey("port"))
        );
        assert_eq!(
            key("Container", "volumeMounts"),
            Some(Strategy::MergeByKey("mountPath"))
        );
        assert_eq!(
            key("ObjectMeta", "finalizers"),
            Some(Strategy::MergeScalars)
        );
        assert_eq!(
            key("DeploymentSpec", "strategy"),
            Some(Strategy::RetainKeys)
        );
        assert!(supports_strategic("apps", "Deployment"));
        assert!(!supports_strategic("example.com", "Widget"));
        assert!(!supports_strategic("", "Deployment"));
    }
}
