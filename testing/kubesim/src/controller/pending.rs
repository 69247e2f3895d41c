//! The pods a simulated cluster cannot schedule. For each Deployment or StatefulSet whose
//! replicas do not all fit on its nodes (the packing's `scheduled < desired`), one Pod per
//! missing replica is stored, in phase Pending with the condition `PodScheduled=False`, reason
//! `Unschedulable`, owned as a real cluster's pods are: a Deployment's by its ReplicaSet
//! `<name>-kubesim`, a StatefulSet's by the StatefulSet. Pods that fit are not stored (the
//! workload's status counts stand for them), so the pod list shows exactly what a scheduler
//! would leave Pending, and a client sees the same thing it would see on a real cluster.
//!
//! Must not: take part in the packing (pods never hold capacity here), or store more than
//! [`MAX_PENDING_PODS_PER_WORKLOAD`] per workload: a huge unschedulable Deployment in a bench
//! must not flood the store.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::{CapacityReport, Workload};
use crate::discovery::{find, ResourceDef};
use crate::meta;
use crate::store::{Change, Store};

/// Most Pending pods stored per workload; the count a client derives is capped there too.
pub const MAX_PENDING_PODS_PER_WORKLOAD: i64 = 64;

/// The label marking the pods this module owns, so it deletes only those.
pub const PENDING_LABEL: &str = "kubesim.fedraft.io/unschedulable";

/// One Pending pod of `workload` (of resource `res`), number `i`.
fn pending_pod(res: &ResourceDef, workload: &Value, i: i64, nodes: usize, now: &str) -> Value {
    let name = meta::name(workload);
    let ns = meta::meta_str(workload, "namespace").unwrap_or("");
    let uid = meta::meta_str(workload, "uid").unwrap_or("");
    let (owner_kind, owner_name, owner_api) = if res.plural == "statefulsets" {
        ("StatefulSet", name.to_string(), "apps/v1")
    } else {
        ("ReplicaSet", format!("{name}-kubesim"), "apps/v1")
    };
    let mut labels = workload
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.insert(PENDING_LABEL.into(), json!("true"));
    let spec = workload
        .pointer("/spec/template/spec")
        .filter(|s| s.get("containers").is_some_and(Value::is_array))
        .cloned()
        .unwrap_or_else(|| json!({"containers": []}));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{name}-unschedulable-{i}"),
            "namespace": ns,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": owner_api, "kind": owner_kind, "name": owner_name,
                "uid": uid, "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
        "status": {
            "phase": "Pending",
            "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": format!(
                    "0/{nodes} nodes are available: insufficient cpu, memory or pods."
                ),
                "lastProbeTime": Value::Null, "lastTransitionTime": now,
            }],
        },
    })
}

/// Makes the stored Pending pods match the packing: creates the missing ones, deletes those of
/// workloads that now fit or are gone. Returns how many pods it wrote.
pub(super) fn sync(
    store: &Store,
    report: &CapacityReport,
    workloads: &[Workload],
    now: &str,
) -> usize {
    let Some(pods) = find("", "v1", "pods") else {
        return 0;
    };
    let nodes = report.nodes.len();
    let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
    let mut to_create = Vec::new();
    for ((res, w), &scheduled) in workloads.iter().zip(&report.scheduled) {
        let missing = (super::replicas(w) - scheduled).clamp(0, MAX_PENDING_PODS_PER_WORKLOAD);
        for i in 0..missing {
            let pod = pending_pod(res, w, i, nodes, now);
            let key = (
                meta::meta_str(w, "namespace").unwrap_or("").to_string(),
                meta::name(&pod).to_string(),
            );
            wanted.insert(key.clone());
            to_create.push((key, pod));
        }
    }
    let (stored, _) = store.list(pods, None);
    let mut have = BTreeSet::new();
    let mut writes = 0;
    for p in &stored {
        let ours = p
            .pointer("/metadata/labels")
            .and_then(|l| l.get(PENDING_LABEL))
            .is_some();
        if !ours {
            continue;
        }
        let key = (
            meta::meta_str(p, "namespace").unwrap_or("").to_string(),
            meta::name(p).to_string(),
        );
        if wanted.contains(&key) {
            have.insert(key);
        } else if store
            .write(pods, &key.0, &key.1, false, |_| Ok(Change::Delete))
            .is_ok()
        {
            writes += 1;
        }
    }
    for (key, pod) in to_create {
        if have.contains(&key) {
            continue;
        }
        let out = store.write(pods, &key.0, &key.1, false, |cur| {
            Ok(match cur {
                Some(c) => Change::Replace(c.clone()),
                None => Change::Create(pod),
            })
        });
        match out {
            Ok(o) if o.changed() => writes += 1,
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, pod = %key.1, "pending pod not stored"),
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::controller::{node_object, pack};

    fn deployment(name: &str, replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "a", "uid": "u-1",
                "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"replicas": replicas, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "600m"}}}]}}},
        })
    }

    fn pending_names(store: &Store) -> Vec<String> {
        let pods = find("", "v1", "pods").expect("pods");
        let mut names: Vec<String> = store
            .list(pods, None)
            .0
            .iter()
            .map(|p| meta::name(p).to_string())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replicas_that_do_not_fit_stay_pending_unschedulable() {
        let store = Store::new(100);
        let ns = find("", "v1", "namespaces").expect("namespaces");
        store
            .write(ns, "", "a", false, |_| {
                Ok(Change::Create(
                    json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "a"}}),
                ))
            })
            .expect("namespace");
        let deploy = find("apps", "v1", "deployments").expect("deployments");
        // Two 1-CPU nodes hold one 600m replica each: three asked, one stays Pending.
        let nodes = vec![
            node_object("c", 0, "1", "4Gi", 110),
            node_object("c", 1, "1", "4Gi", 110),
        ];
        let workloads = vec![(deploy, Arc::new(deployment("web", 3)))];
        let report = pack(&nodes, &workloads);
        assert_eq!(sync(&store, &report, &workloads, "t"), 1);
        assert_eq!(pending_names(&store), ["web-unschedulable-0"]);
        let pods = find("", "v1", "pods").expect("pods");
        let pod = store.get(pods, "a", "web-unschedulable-0").expect("stored");
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["status"]["conditions"][0]["reason"], "Unschedulable");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["name"], "web-kubesim");
        // Unchanged packing: nothing written.
        assert_eq!(sync(&store, &report, &workloads, "t"), 0);
        // Scaled to what fits: the Pending pod goes.
        let workloads = vec![(deploy, Arc::new(deployment("web", 2)))];
        let report = pack(&nodes, &workloads);
        assert_eq!(sync(&store, &report, &workloads, "t"), 1);
        assert!(pending_names(&store).is_empty());
    }
}
