//! What a simulated cluster fills in by itself: the node objects it starts with, and the
//! server-side defaults kube-apiserver (and its service IP allocator) would set on create.
//! Must not: run on a timer or read other objects.

use serde_json::{json, Value};

use crate::discovery::ResourceDef;
use crate::meta;
use crate::Shared;

/// The node objects a cluster starts with.
pub fn node_object(cluster: &str, index: u32, cpu: &str, memory: &str, pods: u32) -> Value {
    let name = format!("{cluster}-node-{index}");
    let now = meta::now_rfc3339();
    let resources = json!({ "cpu": cpu, "memory": memory, "pods": pods.to_string() });
    json!({
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "kubesim",
                "topology.kubernetes.io/region": cluster,
                "topology.kubernetes.io/zone": format!("{cluster}-{}", ["a", "b", "c"][(index % 3) as usize]),
            },
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
            "addresses": [
                { "type": "InternalIP", "address": format!("192.168.{}.{}", index / 250, index % 250 + 1) },
                { "type": "Hostname", "address": name },
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0", "kubeProxyVersion": "v1.32.0",
                "osImage": "fedraft-kubesim", "operatingSystem": "linux", "architecture": "amd64",
                "containerRuntimeVersion": "kubesim://1", "kernelVersion": "6.0.0",
                "machineID": "", "systemUUID": "", "bootID": "",
            },
        },
    })
}

/// Server-side defaults filled in on create, as kube-apiserver's defaulting and the service
/// IP allocator would.
pub(crate) fn defaults_on_create(shared: &Shared, res: &ResourceDef, obj: &mut Value) {
    match (res.group.as_str(), res.plural.as_str()) {
        ("apps", "deployments" | "statefulsets") => {
            if let Some(o) = obj.as_object_mut() {
                let spec = meta::ensure_object(o.entry("spec").or_insert(Value::Null));
                spec.entry("replicas").or_insert(json!(1));
            }
        }
        ("", "services") => {
            let n = shared.next_cluster_ip();
            if let Some(o) = obj.as_object_mut() {
                let spec = meta::ensure_object(o.entry("spec").or_insert(Value::Null));
                spec.entry("type").or_insert(json!("ClusterIP"));
                if !spec.contains_key("clusterIP") {
                    let ip = format!("10.96.{}.{}", n / 250, n % 250 + 1);
                    spec.insert("clusterIP".into(), json!(ip));
                    spec.insert("clusterIPs".into(), json!([ip]));
                }
            }
        }
        ("", "namespaces") => {
            if let Some(o) = obj.as_object_mut() {
                o.insert("spec".into(), json!({ "finalizers": ["kubernetes"] }));
                o.insert("status".into(), json!({ "phase": "Active" }));
            }
        }
        _ => {}
    }
}
