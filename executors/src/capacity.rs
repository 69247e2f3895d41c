//! Capacity of a member cluster as fedraft reports it, computed from one scan of its nodes and
//! pods (the Clusterless "periodic scan", not a watch on every node event).
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
//! Must not: watch nodes, or report capacity in anything but integers.

use std::collections::BTreeSet;

use fedraft_core::policy::Resources;
use fedraft_core::render::{parse_quantity, MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// Workloads fedraft manages in a cluster: (namespace, name), any kind.
pub type ManagedWorkloads = BTreeSet<(String, String)>;

/// Sum of allocatable over Ready, schedulable nodes.
pub fn allocatable(nodes: &[Node]) -> Resources {
    nodes
        .iter()
        .filter(|n| node_usable(n))
        .filter_map(|n| n.status.as_ref()?.allocatable.as_ref())
        .fold(Resources::ZERO, |acc, a| acc.saturating_add(&from_map(a)))
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
    pods.iter()
        .filter(|p| running(p) && !is_fedrafts(p, managed))
        .fold(Resources::ZERO, |acc, p| {
            acc.saturating_add(&pod_requests(p))
        })
}

fn running(p: &Pod) -> bool {
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    !matches!(phase, "Succeeded" | "Failed")
}

fn is_fedrafts(p: &Pod, managed: &ManagedWorkloads) -> bool {
    let meta = &p.metadata;
    if meta
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .map(String::as_str)
        == Some(MANAGED_BY_VALUE)
    {
        return true;
    }
    let ns = meta.namespace.clone().unwrap_or_default();
    let owners = meta.owner_references.as_deref().unwrap_or(&[]);
    owners
        .iter()
        .filter(|o| o.controller == Some(true))
        .any(|o| {
            let direct = managed.contains(&(ns.clone(), o.name.clone()));
            // Deployment -> ReplicaSet "<name>-<pod-template-hash>" -> Pod.
            let via_replicaset = o.kind == "ReplicaSet"
                && o.name
                    .rsplit_once('-')
                    .is_some_and(|(deploy, _)| managed.contains(&(ns.clone(), deploy.to_string())));
            direct || via_replicaset
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
