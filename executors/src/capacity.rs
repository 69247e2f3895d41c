//! Capacity of a member cluster as fedraft reports it, computed from what each node and each
//! pod contributes ([`NodeShare`], [`PodShare`]: a few integers and names, kept per object by
//! the probe's watches instead of the objects themselves, so a 5,000-node member costs little).
//!
//! Definition (the same as core's `Capacity`): `allocatable` is the sum of `status.allocatable`
//! over nodes that are Ready and schedulable; `available` is what remains for fedraft: that
//! allocatable minus the requests of running pods fedraft does not manage. fedraft's own pods
//! are left out on purpose: the state machine already books what it placed, and counting them
//! here too would subtract them twice. A pod is fedraft's when it carries the ownership label or
//! its controller is a workload fedraft manages (a ReplicaSet named `<deployment>-<hash>` counts
//! for its Deployment). When pods cannot be listed, no usage is visible and available equals
//! allocatable.
//!
//! Extended resources (`nvidia.com/gpu`...: any domain-prefixed name in a node's allocatable)
//! are reported apart ([`extended_capacity_of`], core's `ExtendedCapacity`): their sums, with
//! the same rule for `available`, and each node's free amount grouped into node shapes, so core
//! can tell that a 4-GPU replica does not fit eight 1-GPU nodes. A node's free amount counts
//! every running pod bound to it, fedraft's too (core adds an object's own replicas back);
//! a pod's extended request is its request, else its limit, as Kubernetes defaults it.
//!
//! Must not: talk to the cluster, or report capacity in anything but integers.

use std::collections::BTreeSet;

use fedraft_core::policy::{
    compact_shapes, validate_extended_name, Extended, ExtendedCapacity, Resources,
};
use fedraft_core::render::{parse_quantity, MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// Workloads fedraft manages in a cluster: (namespace, name), any kind.
pub type ManagedWorkloads = BTreeSet<(String, String)>;

/// What one node adds to the cluster's allocatable: all of it when Ready and schedulable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShare {
    pub usable: bool,
    pub allocatable: Resources,
    /// Extended resources of its allocatable (whole units).
    pub extended: Extended,
    pub name: String,
}

impl NodeShare {
    pub fn of(n: &Node) -> NodeShare {
        let map = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
        NodeShare {
            usable: node_usable(n),
            allocatable: map.map(from_map).unwrap_or(Resources::ZERO),
            extended: map.map(extended_of).unwrap_or_default(),
            name: n.metadata.name.clone().unwrap_or_default(),
        }
    }
}

/// What one pod may take from the cluster, and what decides whether it is fedraft's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodShare {
    namespace: String,
    /// Not Succeeded or Failed: it holds its requests.
    running: bool,
    /// Carries fedraft's ownership label.
    labelled: bool,
    /// (kind, name) of its controller owners.
    controllers: Vec<(String, String)>,
    requests: Resources,
    /// Extended requests (else limits), whole units.
    extended: Extended,
    /// The node it is bound to; None while unscheduled.
    node: Option<String>,
    /// Pending with `PodScheduled=False`, reason `Unschedulable`: the scheduler found no node.
    unschedulable: bool,
}

impl PodShare {
    pub fn of(p: &Pod) -> PodShare {
        let meta = &p.metadata;
        PodShare {
            namespace: meta.namespace.clone().unwrap_or_default(),
            running: running(p),
            labelled: meta
                .labels
                .as_ref()
                .and_then(|l| l.get(MANAGED_BY_LABEL))
                .map(String::as_str)
                == Some(MANAGED_BY_VALUE),
            controllers: meta
                .owner_references
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .filter(|o| o.controller == Some(true))
                .map(|o| (o.kind.clone(), o.name.clone()))
                .collect(),
            requests: pod_requests(p),
            extended: pod_extended(p),
            node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
            unschedulable: unschedulable(p),
        }
    }

    /// Whether it holds requests at all (finished pods need not be kept).
    pub fn running(&self) -> bool {
        self.running
    }

    fn is_fedrafts(&self, managed: &ManagedWorkloads) -> bool {
        if self.labelled {
            return true;
        }
        let ns = &self.namespace;
        self.controllers.iter().any(|(kind, name)| {
            let direct = managed.contains(&(ns.clone(), name.clone()));
            // Deployment -> ReplicaSet "<name>-<pod-template-hash>" -> Pod.
            let via_replicaset = kind == "ReplicaSet"
                && name
                    .rsplit_once('-')
                    .is_some_and(|(deploy, _)| managed.contains(&(ns.clone(), deploy.to_string())));
            direct || via_replicaset
        })
    }
}

/// Pods Pending unschedulable per workload, keyed (namespace, name): a pod counts for its
/// controller and, when that is a ReplicaSet `<deployment>-<hash>`, for the Deployment too, as
/// [`PodShare`] attributes pods to fedraft's workloads.
pub fn unschedulable_by_workload<'a>(
    pods: impl Iterator<Item = &'a PodShare>,
) -> BTreeMap<(String, String), u32> {
    let mut out: BTreeMap<(String, String), u32> = BTreeMap::new();
    for p in pods.filter(|p| p.unschedulable) {
        for (kind, name) in &p.controllers {
            *out.entry((p.namespace.clone(), name.clone())).or_default() += 1;
            if kind == "ReplicaSet" {
                if let Some((deploy, _)) = name.rsplit_once('-') {
                    *out.entry((p.namespace.clone(), deploy.to_string()))
                        .or_default() += 1;
                }
            }
        }
    }
    out
}

fn unschedulable(p: &Pod) -> bool {
    let Some(st) = p.status.as_ref() else {
        return false;
    };
    st.phase.as_deref() == Some("Pending")
        && st.conditions.iter().flatten().any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

/// Sum of allocatable over Ready, schedulable nodes.
pub fn allocatable(nodes: &[Node]) -> Resources {
    allocatable_of(nodes.iter().map(NodeShare::of).collect::<Vec<_>>().iter())
}

/// [`allocatable`] from node shares.
pub fn allocatable_of<'a>(nodes: impl Iterator<Item = &'a NodeShare>) -> Resources {
    nodes
        .filter(|n| n.usable)
        .fold(Resources::ZERO, |acc, n| acc.saturating_add(&n.allocatable))
}

fn node_usable(n: &Node) -> bool {
    let schedulable = !n
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    schedulable && ready
}

fn quantity(map: &BTreeMap<String, Quantity>, key: &str, scale: u64) -> u64 {
    map.get(key)
        .and_then(|q| parse_quantity(&q.0, scale).ok())
        .unwrap_or(0)
}

fn from_map(map: &BTreeMap<String, Quantity>) -> Resources {
    Resources {
        cpu_millis: quantity(map, "cpu", 1000),
        memory_bytes: quantity(map, "memory", 1),
        pods: quantity(map, "pods", 1),
    }
}

/// Requests of the running pods fedraft does not manage, plus one pod slot each.
pub fn foreign_usage(pods: &[Pod], managed: &ManagedWorkloads) -> Resources {
    foreign_usage_of(
        pods.iter().map(PodShare::of).collect::<Vec<_>>().iter(),
        managed,
    )
}

/// [`foreign_usage`] from pod shares.
pub fn foreign_usage_of<'a>(
    pods: impl Iterator<Item = &'a PodShare>,
    managed: &ManagedWorkloads,
) -> Resources {
    pods.filter(|p| p.running && !p.is_fedrafts(managed))
        .fold(Resources::ZERO, |acc, p| acc.saturating_add(&p.requests))
}

fn running(p: &Pod) -> bool {
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    !matches!(phase, "Succeeded" | "Failed")
}

/// Extended resources of a quantity map: valid domain-prefixed names, whole units.
fn extended_of(map: &BTreeMap<String, Quantity>) -> Extended {
    Extended::from_pairs(
        map.iter()
            .filter(|(k, _)| k.contains('/') && validate_extended_name(k, "").is_ok())
            .map(|(k, q)| (k.as_str(), parse_quantity(&q.0, 1).unwrap_or(0))),
    )
}

/// A pod's extended requests: per container its requests, else its limits; containers
/// summed, at least its largest init container.
fn pod_extended(p: &Pod) -> Extended {
    let Some(spec) = &p.spec else {
        return Extended::new();
    };
    let of = |c: &k8s_openapi::api::core::v1::Container| {
        let r = c.resources.as_ref();
        let req = r
            .and_then(|r| r.requests.as_ref())
            .map(extended_of)
            .unwrap_or_default();
        let mut lim = r
            .and_then(|r| r.limits.as_ref())
            .map(extended_of)
            .unwrap_or_default();
        lim.0.retain(|k, _| req.get(k) == 0);
        req.saturating_add(&lim)
    };
    let mut sum = spec
        .containers
        .iter()
        .fold(Extended::new(), |acc, c| acc.saturating_add(&of(c)));
    for c in spec.init_containers.as_deref().unwrap_or(&[]) {
        sum.max_with(&of(c));
    }
    sum
}

/// Extended resources and node shapes from shares; `pods` None when pods are not visible
/// (available = allocatable, every node wholly free).
pub fn extended_capacity_of<'a>(
    nodes: impl Iterator<Item = &'a NodeShare>,
    pods: Option<impl Iterator<Item = &'a PodShare>>,
    managed: &ManagedWorkloads,
) -> ExtendedCapacity {
    let usable: Vec<&NodeShare> = nodes.filter(|n| n.usable).collect();
    let allocatable = usable
        .iter()
        .fold(Extended::new(), |acc, n| acc.saturating_add(&n.extended));
    let mut foreign = Extended::new();
    let mut on_node: BTreeMap<&str, (Resources, Extended)> = BTreeMap::new();
    for p in pods.into_iter().flatten().filter(|p| p.running) {
        if !p.is_fedrafts(managed) {
            foreign = foreign.saturating_add(&p.extended);
        }
        if let Some(node) = &p.node {
            let u = on_node.entry(node.as_str()).or_default();
            u.0 = u.0.saturating_add(&p.requests);
            u.1 = u.1.saturating_add(&p.extended);
        }
    }
    let nodes = compact_shapes(usable.iter().map(|n| match on_node.get(n.name.as_str()) {
        Some((r, e)) => (
            n.allocatable.saturating_sub(r),
            n.extended.saturating_sub(e),
        ),
        None => (n.allocatable, n.extended.clone()),
    }));
    ExtendedCapacity {
        available: allocatable.saturating_sub(&foreign),
        allocatable,
        nodes,
    }
}

/// A pod's effective request: containers summed, at least its largest init container.
fn pod_requests(p: &Pod) -> Resources {
    let Some(spec) = &p.spec else {
        return Resources {
            pods: 1,
            ..Resources::ZERO
        };
    };
    let req = |c: &k8s_openapi::api::core::v1::Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .map(from_map)
            .unwrap_or_default()
    };
    let mut sum = spec
        .containers
        .iter()
        .fold(Resources::ZERO, |acc, c| acc.saturating_add(&req(c)));
    for c in spec.init_containers.as_deref().unwrap_or(&[]) {
        let r = req(c);
        sum.cpu_millis = sum.cpu_millis.max(r.cpu_millis);
        sum.memory_bytes = sum.memory_bytes.max(r.memory_bytes);
    }
    sum.pods = 1;
    sum
}

/// The capacity pair core expects.
pub fn capacity(
    nodes: &[Node],
    pods: Option<&[Pod]>,
    managed: &ManagedWorkloads,
) -> fedraft_core::model::Capacity {
    let allocatable = allocatable(nodes);
    let used = pods
        .map(|p| foreign_usage(p, managed))
        .unwrap_or(Resources::ZERO);
    fedraft_core::model::Capacity {
        allocatable,
        available: allocatable.saturating_sub(&used),
    }
}

/// [`capacity`] from shares; `pods` None when pods are not visible (available = allocatable).
pub fn capacity_of<'a>(
    nodes: impl Iterator<Item = &'a NodeShare>,
    pods: Option<impl Iterator<Item = &'a PodShare>>,
    managed: &ManagedWorkloads,
) -> fedraft_core::model::Capacity {
    let allocatable = allocatable_of(nodes);
    let used = pods
        .map(|p| foreign_usage_of(p, managed))
        .unwrap_or(Resources::ZERO);
    fedraft_core::model::Capacity {
        allocatable,
        available: allocatable.saturating_sub(&used),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gpu_node(name: &str, gpus: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": gpus},
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        }))
        .unwrap()
    }

    fn gpu_pod(node: &str, gpus: &str, fedrafts: bool) -> Pod {
        let labels = if fedrafts {
            json!({MANAGED_BY_LABEL: MANAGED_BY_VALUE})
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": {"phase": "Running"},
        }))
        .unwrap()
    }

    #[test]
    fn extended_resources_and_node_shapes() {
        let nodes: Vec<NodeShare> = [gpu_node("a", "4"), gpu_node("b", "4"), gpu_node("c", "1")]
            .iter()
            .map(NodeShare::of)
            .collect();
        let pods: Vec<PodShare> = [gpu_pod("a", "2", false), gpu_pod("b", "4", true)]
            .iter()
            .map(PodShare::of)
            .collect();
        let cap = extended_capacity_of(nodes.iter(), Some(pods.iter()), &ManagedWorkloads::new());
        let g = |n| Extended::from_pairs([("nvidia.com/gpu", n)]);
        assert_eq!(cap.allocatable, g(9));
        // Only the foreign pod counts against available; both count on their nodes.
        assert_eq!(cap.available, g(7));
        assert_eq!(cap.largest_chunk("nvidia.com/gpu"), 2);
        let free: u64 = cap
            .nodes
            .iter()
            .map(|n| u64::from(n.count) * n.extended.get("nvidia.com/gpu"))
            .sum();
        assert_eq!(free, 3);
        let none = extended_capacity_of(
            nodes.iter(),
            None::<std::slice::Iter<'_, PodShare>>,
            &ManagedWorkloads::new(),
        );
        assert_eq!(none.largest_chunk("nvidia.com/gpu"), 4);
        assert_eq!(none.available, g(9));
    }

    fn node(cpu: &str, mem: &str, ready: &str, unschedulable: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "allocatable": {"cpu": cpu, "memory": mem, "pods": "110"},
                "conditions": [{"type": "Ready", "status": ready}],
            }
        }))
        .unwrap()
    }

    fn pod(ns: &str, labels: Value, owner: Option<(&str, &str)>, cpu: &str, phase: &str) -> Pod {
        let owners = owner
            .map(|(k, n)| json!([{"apiVersion": "apps/v1", "kind": k, "name": n, "uid": "u", "controller": true}]))
            .unwrap_or(json!([]));
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": ns, "labels": labels, "ownerReferences": owners},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    use serde_json::Value;

    #[test]
    fn unschedulable_pods_count_for_their_workload() {
        let mut stuck = pod(
            "shop",
            json!({}),
            Some(("ReplicaSet", "web-5d9f")),
            "1",
            "Pending",
        );
        let mut waiting = stuck.clone();
        let cond = |reason: &str| {
            serde_json::from_value(
                json!({"type": "PodScheduled", "status": "False", "reason": reason}),
            )
            .unwrap()
        };
        if let Some(st) = stuck.status.as_mut() {
            st.conditions = Some(vec![cond("Unschedulable")]);
        }
        // Not placed yet for another reason (a scheduling gate): not counted.
        if let Some(st) = waiting.status.as_mut() {
            st.conditions = Some(vec![cond("SchedulingGated")]);
        }
        let mut db = pod(
            "shop",
            json!({}),
            Some(("StatefulSet", "db")),
            "1",
            "Pending",
        );
        if let Some(st) = db.status.as_mut() {
            st.conditions = Some(vec![cond("Unschedulable")]);
        }
        let running = pod(
            "shop",
            json!({}),
            Some(("ReplicaSet", "web-5d9f")),
            "1",
            "Running",
        );
        let shares: Vec<PodShare> = [&stuck, &stuck, &waiting, &db, &running]
            .into_iter()
            .map(PodShare::of)
            .collect();
        let counts = unschedulable_by_workload(shares.iter());
        let of = |n: &str| counts.get(&("shop".to_string(), n.to_string())).copied();
        assert_eq!(of("web"), Some(2), "{counts:?}");
        assert_eq!(of("web-5d9f"), Some(2));
        assert_eq!(of("db"), Some(1));
        assert_eq!(counts.len(), 3);
    }

    #[test]
    fn allocatable_sums_ready_schedulable_nodes() {
        let nodes = vec![
            node("4", "8Gi", "True", false),
            node("2", "4Gi", "True", false),
            node("8", "8Gi", "False", false),
            node("8", "8Gi", "True", true),
        ];
        let a = allocatable(&nodes);
        assert_eq!(
            a,
            Resources {
                cpu_millis: 6000,
                memory_bytes: 12 << 30,
                pods: 220
            }
        );
    }

    #[test]
    fn available_subtracts_only_foreign_running_pods() {
        let nodes = vec![node("4", "8Gi", "True", false)];
        let managed: ManagedWorkloads = [("web".to_string(), "api".to_string())]
            .into_iter()
            .collect();
        let pods = vec![
            pod(
                "web",
                json!({}),
                Some(("ReplicaSet", "api-5d9c7")),
                "1",
                "Running",
            ), // fedraft's via its RS
            pod(
                "web",
                json!({MANAGED_BY_LABEL: MANAGED_BY_VALUE}),
                None,
                "1",
                "Running",
            ), // labelled
            pod(
                "web",
                json!({}),
                Some(("ReplicaSet", "other-1234")),
                "500m",
                "Running",
            ), // foreign
            pod("ops", json!({}), None, "250m", "Pending"), // foreign, pending still holds its request
            pod("ops", json!({}), None, "2", "Succeeded"),  // finished: holds nothing
        ];
        let cap = capacity(&nodes, Some(&pods), &managed);
        assert_eq!(cap.allocatable.cpu_millis, 4000);
        assert_eq!(cap.available.cpu_millis, 3250);
        assert_eq!(cap.available.memory_bytes, 6 << 30);
        assert_eq!(cap.available.pods, 108);
        assert_eq!(capacity(&nodes, None, &managed).available, cap.allocatable);
    }
}
