//! Where pods would run: first-fit packing of every workload's pods onto Ready nodes, oldest
//! workload first, by the pod template's cpu/memory requests and the nodes' allocatable
//! cpu/memory/pods; and the quantities those are written in.
//!
//! A stored version of an object never changes, so what packing reads of a workload (its pod
//! requests, replicas and ordering key) is read once per version and kept in a [`PackCache`]
//! between ticks: a fleet host re-packs a cluster on every write to it, and re-reading each
//! workload's JSON was most of that cost. Must not: write to the store or keep anything of a
//! version that is no longer listed.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use crate::discovery::ResourceDef;
use crate::meta;

/// Parses a Kubernetes quantity ("500m", "2", "1.5Gi", "1e3") into thousandths of its unit.
pub fn parse_quantity_milli(s: &str) -> Option<i128> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let value: f64 = num.parse().ok()?;
    let factor: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    let milli = (value * factor * 1000.0).round();
    (milli.is_finite() && milli >= 0.0).then_some(milli as i128)
}

/// Resources in thousandths (cpu in millicores, memory in milli-bytes) and a pod count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub cpu_milli: i128,
    pub memory_milli: i128,
    pub pods: i128,
}

impl Resources {
    fn fits(&self, used: &Resources, pod: &Resources) -> bool {
        used.cpu_milli + pod.cpu_milli <= self.cpu_milli
            && used.memory_milli + pod.memory_milli <= self.memory_milli
            && used.pods < self.pods
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeUsage {
    pub name: String,
    pub ready: bool,
    pub allocatable: Resources,
    pub requested: Resources,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadUsage {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub desired: i64,
    pub scheduled: i64,
}

/// The last packing the controller computed; served at `/_sim/capacity`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReport {
    pub nodes: Vec<NodeUsage>,
    /// In packing order, oldest workload first.
    pub workloads: Vec<WorkloadUsage>,
    /// Scheduled replicas of each workload in the order `pack` was given them, so the
    /// controller need not search the report for every workload.
    #[serde(skip)]
    pub scheduled: Vec<i64>,
}

/// A workload as the controller lists it: its resource and the stored object, shared.
pub type Workload = (&'static ResourceDef, Arc<Value>);

fn pod_requests(workload: &Value) -> Resources {
    let mut r = Resources {
        pods: 1,
        ..Default::default()
    };
    let containers = workload
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array);
    for c in containers.into_iter().flatten() {
        let req = c.pointer("/resources/requests");
        let q = |k: &str| {
            req.and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .and_then(parse_quantity_milli)
                .unwrap_or(0)
        };
        r.cpu_milli += q("cpu");
        r.memory_milli += q("memory");
    }
    r
}

fn node_allocatable(node: &Value) -> Resources {
    let q = |k: &str| {
        node.pointer(&format!("/status/allocatable/{k}"))
            .and_then(|v| match v {
                Value::String(s) => parse_quantity_milli(s),
                Value::Number(n) => n.as_f64().map(|f| (f * 1000.0) as i128),
                _ => None,
            })
            .unwrap_or(0)
    };
    Resources {
        cpu_milli: q("cpu"),
        memory_milli: q("memory"),
        pods: q("pods") / 1000,
    }
}

fn node_ready(node: &Value) -> bool {
    let unschedulable = node.pointer("/spec/unschedulable") == Some(&json!(true));
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
    ready && !unschedulable
}

pub(super) fn replicas(workload: &Value) -> i64 {
    workload
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0)
}

/// What packing reads of one stored workload version.
struct Shape {
    requests: Resources,
    replicas: i64,
    /// Oldest first, then by namespace, name and resource, as the order of creation would be.
    key: (String, String, String, &'static str),
    kind: &'static str,
}

impl Shape {
    fn read((res, w): &Workload) -> Self {
        let res: &'static ResourceDef = res;
        Shape {
            requests: pod_requests(w),
            replicas: replicas(w),
            key: (
                meta::meta_str(w, "creationTimestamp")
                    .unwrap_or("")
                    .to_string(),
                meta::meta_str(w, "namespace").unwrap_or("").to_string(),
                meta::name(w).to_string(),
                res.plural.as_str(),
            ),
            kind: res.kind.as_str(),
        }
    }
}

/// Shapes of the workload versions the last packing was given, keyed by the stored version's
/// address and holding that version, so the address cannot be reused while cached.
#[derive(Default)]
pub struct PackCache {
    by_version: HashMap<usize, (Arc<Value>, Shape)>,
}

/// First-fit packing of every workload's pods, oldest workload first.
pub fn pack<N: std::borrow::Borrow<Value>>(nodes: &[N], workloads: &[Workload]) -> CapacityReport {
    pack_cached(nodes, workloads, &mut PackCache::default())
}

/// [`pack`], reading each workload version only if `cache` does not know it yet; afterwards
/// `cache` holds exactly the versions given.
pub fn pack_cached<N: std::borrow::Borrow<Value>>(
    nodes: &[N],
    workloads: &[Workload],
    cache: &mut PackCache,
) -> CapacityReport {
    let mut usage: Vec<NodeUsage> = nodes
        .iter()
        .map(N::borrow)
        .map(|n| NodeUsage {
            name: meta::name(n).to_string(),
            ready: node_ready(n),
            allocatable: node_allocatable(n),
            requested: Resources::default(),
        })
        .collect();
    let shapes: Vec<Shape> = workloads
        .iter()
        .map(|w| match cache.by_version.remove(&version_key(&w.1)) {
            Some((_, shape)) => shape,
            None => Shape::read(w),
        })
        .collect();
    let mut order: Vec<usize> = (0..workloads.len()).collect();
    order.sort_by(|&a, &b| shapes[a].key.cmp(&shapes[b].key));
    let mut report = Vec::with_capacity(workloads.len());
    let mut scheduled_in_input_order = vec![0; workloads.len()];
    for i in order {
        let shape = &shapes[i];
        let pod = &shape.requests;
        let mut scheduled = 0;
        for _ in 0..shape.replicas {
            let Some(n) = usage
                .iter_mut()
                .find(|n| n.ready && n.allocatable.fits(&n.requested, pod))
            else {
                break;
            };
            n.requested.cpu_milli += pod.cpu_milli;
            n.requested.memory_milli += pod.memory_milli;
            n.requested.pods += 1;
            scheduled += 1;
        }
        scheduled_in_input_order[i] = scheduled;
        report.push(WorkloadUsage {
            kind: shape.kind.to_string(),
            namespace: shape.key.1.clone(),
            name: shape.key.2.clone(),
            desired: shape.replicas,
            scheduled,
        });
    }
    // Whatever was not given this time is gone from the store (or replaced by a newer version).
    cache.by_version = workloads
        .iter()
        .zip(shapes)
        .map(|((_, w), shape)| (version_key(w), (w.clone(), shape)))
        .collect();
    CapacityReport {
        nodes: usage,
        workloads: report,
        scheduled: scheduled_in_input_order,
    }
}

fn version_key(w: &Arc<Value>) -> usize {
    Arc::as_ptr(w) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::node_object;
    use crate::discovery::find;

    #[test]
    fn quantities() {
        let cases = [
            ("500m", Some(500)),
            ("2", Some(2000)),
            ("0.5", Some(500)),
            ("1Ki", Some(1_024_000)),
            ("1Gi", Some(1_073_741_824_000)),
            ("1e3", Some(1_000_000)),
            ("1k", Some(1_000_000)),
            ("abc", None),
            ("1Qi", None),
        ];
        for (q, want) in cases {
            assert_eq!(parse_quantity_milli(q), want, "{q}");
        }
    }

    fn deployment(name: &str, created: &str, replicas: i64, cpu: &str) -> Arc<Value> {
        Arc::new(json!({
            "metadata": {"name": name, "namespace": "a", "creationTimestamp": created},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
            ]}}}
        }))
    }

    #[test]
    fn a_cached_packing_equals_a_fresh_one_and_forgets_what_is_gone() {
        let nodes = vec![node_object("c", 0, "2", "8Gi", 110)];
        let d = find("apps", "v1", "deployments").expect("deployments");
        let old = deployment("old", "2026-01-01T00:00:00Z", 1, "1");
        let mut cache = PackCache::default();
        let first: Vec<Workload> = vec![
            (d, deployment("new", "2026-01-02T00:00:00Z", 2, "1")),
            (d, old.clone()),
        ];
        let cached = pack_cached(&nodes, &first, &mut cache);
        assert_eq!(cached.scheduled, [1, 1]);
        assert_eq!(cache.by_version.len(), 2);
        // "new" is rewritten with less cpu: its new version is read, the old one forgotten.
        let second: Vec<Workload> = vec![
            (d, deployment("new", "2026-01-02T00:00:00Z", 2, "500m")),
            (d, old),
        ];
        let cached = pack_cached(&nodes, &second, &mut cache);
        let fresh = pack(&nodes, &second);
        assert_eq!(cached.scheduled, fresh.scheduled);
        assert_eq!(
            cached.scheduled,
            [2, 1],
            "the new version's smaller requests fit twice"
        );
        assert_eq!(cached.nodes[0].requested, fresh.nodes[0].requested);
        assert_eq!(cache.by_version.len(), 2);
        assert!(second
            .iter()
            .all(|(_, w)| cache.by_version.contains_key(&version_key(w))));
    }
}
