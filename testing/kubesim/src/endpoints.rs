//! The simulated EndpointSlice controller: one `discovery.k8s.io/v1` EndpointSlice per Service
//! with a selector, listing one endpoint per replica of the Deployments and StatefulSets whose
//! pod template matches the selector. The first `status.readyReplicas` endpoints of each
//! workload are `ready` (so capacity pressure and node failures, which lower ready replicas in
//! `controller`, show up as fewer ready endpoints), the rest are not.
//!
//! Slices are named `<service>-sim`, labelled `kubernetes.io/service-name=<service>` (what
//! clients select on, as with kube-controller-manager's slices) and
//! `endpointslice.kubernetes.io/managed-by=endpointslice-controller.kubesim`; a slice whose
//! Service is gone is deleted. Pod addresses are deterministic (`10.244.<h>.<i>`, h from the
//! workload's name). Writes go through the store only when the slice changed (the store answers
//! an identical replace with no new resourceVersion). This module must not serve HTTP.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::discovery::find;
use crate::meta;
use crate::store::{Change, Outcome};
use crate::Shared;

/// Label naming the Service a slice belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller that owns a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This simulator's controller name in [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "endpointslice-controller.kubesim";
/// Most endpoints in one slice (kube-controller-manager's default is 100 per slice and more
/// slices; one bounded slice is enough for a simulator).
const MAX_ENDPOINTS_PER_SLICE: i64 = 1000;

fn matches(selector: &Map<String, Value>, labels: &Map<String, Value>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn third_octet(ns: &str, name: &str) -> u64 {
    let h = ns
        .bytes()
        .chain([b'/'])
        .chain(name.bytes())
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
    h % 250
}

/// The slice a Service should have now, given the workloads of its namespace.
fn desired_slice(svc: &Value, workloads: &[Arc<Value>]) -> Option<Value> {
    let selector = svc.pointer("/spec/selector")?.as_object()?;
    if selector.is_empty() {
        return None;
    }
    let ns = meta::meta_str(svc, "namespace").unwrap_or("");
    let name = meta::name(svc);
    let mut endpoints = Vec::new();
    for w in workloads {
        let labels = w
            .pointer("/spec/template/metadata/labels")
            .and_then(Value::as_object);
        if !labels.is_some_and(|l| matches(selector, l)) {
            continue;
        }
        let replicas = w
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .clamp(0, MAX_ENDPOINTS_PER_SLICE);
        let ready = w
            .pointer("/status/readyReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let wname = meta::name(w);
        let octet = third_octet(ns, wname);
        for i in 0..replicas {
            if endpoints.len() as i64 >= MAX_ENDPOINTS_PER_SLICE {
                break;
            }
            let ok = i < ready;
            endpoints.push(json!({
                "addresses": [format!("10.244.{octet}.{}", i % 250 + 1)],
                "conditions": { "ready": ok, "serving": ok, "terminating": false },
                "targetRef": { "kind": "Pod", "namespace": ns, "name": format!("{wname}-{i}") },
            }));
        }
    }
    let ports: Vec<Value> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let port = p
                        .get("targetPort")
                        .and_then(Value::as_i64)
                        .or_else(|| p.get("port").and_then(Value::as_i64))
                        .unwrap_or(0);
                    json!({
                        "name": p.get("name").and_then(Value::as_str).unwrap_or(""),
                        "protocol": p.get("protocol").and_then(Value::as_str).unwrap_or("TCP"),
                        "port": port,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{name}-sim"),
            "namespace": ns,
            "labels": { SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY },
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    }))
}

/// One pass of the controller over every Service; how many slices it wrote.
pub(crate) fn sync(shared: &Shared) -> usize {
    let (Some(svc_res), Some(slice_res), Some(deploy), Some(sts)) = (
        find("", "v1", "services"),
        find("discovery.k8s.io", "v1", "endpointslices"),
        find("apps", "v1", "deployments"),
        find("apps", "v1", "statefulsets"),
    ) else {
        return 0;
    };
    let store = &shared.store;
    let mut writes = 0;
    let (services, _) = store.list(svc_res, None);
    let (slices, _) = store.list(slice_res, None);
    let mut workloads: std::collections::BTreeMap<String, Vec<Arc<Value>>> = Default::default();
    if !services.is_empty() {
        for res in [deploy, sts] {
            for w in store.list(res, None).0 {
                let ns = meta::meta_str(&w, "namespace").unwrap_or("").to_string();
                workloads.entry(ns).or_default().push(w);
            }
        }
    }
    let mut wanted = std::collections::BTreeSet::new();
    for svc in &services {
        let ns = meta::meta_str(svc, "namespace").unwrap_or("").to_string();
        let none = Vec::new();
        let Some(slice) = desired_slice(svc, workloads.get(&ns).unwrap_or(&none)) else {
            continue;
        };
        let name = meta::name(&slice).to_string();
        wanted.insert((ns.clone(), name.clone()));
        let out = store.write(slice_res, &ns, &name, false, |cur| {
            Ok(match cur {
                None => Change::Create(slice),
                Some(cur) => {
                    let mut next = slice;
                    if let (Some(m), Some(old)) = (next.get_mut("metadata"), meta::metadata(cur)) {
                        // Keep what the store owns; only labels and the body are ours.
                        if let Some(m) = m.as_object_mut() {
                            for (k, v) in old {
                                if k != "labels" {
                                    m.entry(k.clone()).or_insert(v.clone());
                                }
                            }
                        }
                    }
                    Change::Replace(next)
                }
            })
        });
        match out {
            Ok(Outcome::Unchanged(_)) => {}
            Ok(_) => {
                shared.stats.controller_write();
                writes += 1;
            }
            Err(e) => tracing::debug!(error = %e, %name, "endpointslice write skipped"),
        }
    }
    for s in slices {
        let ours = s
            .pointer("/metadata/labels")
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .and_then(Value::as_str)
            == Some(MANAGED_BY);
        let ns = meta::meta_str(&s, "namespace").unwrap_or("").to_string();
        let name = meta::name(&s).to_string();
        if ours && !wanted.contains(&(ns.clone(), name.clone())) {
            match store.write(slice_res, &ns, &name, false, |_| Ok(Change::Delete)) {
                Ok(_) => {
                    shared.stats.controller_write();
                    writes += 1;
                }
                Err(e) => tracing::debug!(error = %e, %name, "endpointslice delete skipped"),
            }
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_endpoints_follow_ready_replicas_of_matching_workloads() {
        let svc = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}});
        let w = |name: &str, app: &str, replicas: i64, ready: i64| {
            json!({"metadata": {"name": name, "namespace": "default"},
                "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": app}}}},
                "status": {"readyReplicas": ready}})
        };
        let workloads = [w("web", "web", 3, 2), w("db", "db", 5, 5)].map(Arc::new);
        let slice = desired_slice(&svc, &workloads).unwrap();
        let eps = slice["endpoints"].as_array().unwrap();
        assert_eq!(eps.len(), 3);
        let ready = eps
            .iter()
            .filter(|e| e["conditions"]["ready"] == json!(true))
            .count();
        assert_eq!(ready, 2);
        assert_eq!(slice["ports"][0]["port"], json!(8080));
        assert_eq!(
            slice["metadata"]["labels"][SERVICE_NAME_LABEL],
            json!("web")
        );
        // No selector: no slice (as with a Service for external endpoints).
        let bare = json!({"metadata": {"name": "x", "namespace": "default"}, "spec": {}});
        assert!(desired_slice(&bare, &[]).is_none());
    }
}
