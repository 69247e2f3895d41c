//! The columns and cells kube-apiserver's printers give the built-in kinds, so `kubectl get`
//! (and `-o wide`, which shows the priority-1 columns) prints what it prints against a real
//! cluster. Workloads and simple kinds are here; `derived` holds the cells computed from status
//! in more detail (Pod, PVC, Node, HPA, Endpoints). `table` assembles rows. This module must not
//! read a clock: ages come from the caller's `now` (Unix seconds).

mod derived;
pub(crate) mod format;

use serde_json::{json, Value};

use crate::selector::LabelSelector;
use format::{age, format_labels, human_duration, unix_seconds, Column};

const NAME: &str = "Name must be unique within a namespace.";
const AGE: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";
const CONTAINERS: &str = "Names of each container in the template.";
const IMAGES: &str = "Images referenced by each container in the template.";

fn cols(spec: &[(&str, &str, i32)]) -> Vec<Column> {
    spec.iter()
        .map(|(name, kind, prio)| {
            let desc = match *name {
                "Name" => NAME,
                "Age" => AGE,
                "Containers" => CONTAINERS,
                "Images" => IMAGES,
                _ => "",
            };
            Column::new(name, kind, *prio, desc)
        })
        .collect()
}

/// The printer columns of a built-in kind, or None (the default NAME / CREATED AT table).
pub fn columns(group: &str, kind: &str) -> Option<Vec<Column>> {
    let s = "string";
    let i = "integer";
    let wide_workload = [("Containers", s, 1), ("Images", s, 1), ("Selector", s, 1)];
    let with_wide = |head: &[(&'static str, &'static str, i32)]| {
        let mut v = head.to_vec();
        v.extend_from_slice(&wide_workload);
        cols(&v)
    };
    Some(match (group, kind) {
        ("apps", "Deployment") => with_wide(&[
            ("Name", s, 0),
            ("Ready", s, 0),
            ("Up-to-date", s, 0),
            ("Available", s, 0),
            ("Age", s, 0),
        ]),
        ("apps", "StatefulSet") => cols(&[
            ("Name", s, 0),
            ("Ready", s, 0),
            ("Age", s, 0),
            ("Containers", s, 1),
            ("Images", s, 1),
        ]),
        ("apps", "DaemonSet") => with_wide(&[
            ("Name", s, 0),
            ("Desired", i, 0),
            ("Current", i, 0),
            ("Ready", i, 0),
            ("Up-to-date", i, 0),
            ("Available", i, 0),
            ("Node Selector", s, 0),
            ("Age", s, 0),
        ]),
        ("apps", "ReplicaSet") => with_wide(&[
            ("Name", s, 0),
            ("Desired", i, 0),
            ("Current", i, 0),
            ("Ready", i, 0),
            ("Age", s, 0),
        ]),
        ("batch", "Job") => with_wide(&[
            ("Name", s, 0),
            ("Status", s, 0),
            ("Completions", s, 0),
            ("Duration", s, 0),
            ("Age", s, 0),
        ]),
        ("batch", "CronJob") => with_wide(&[
            ("Name", s, 0),
            ("Schedule", s, 0),
            ("Timezone", s, 0),
            ("Suspend", "boolean", 0),
            ("Active", i, 0),
            ("Last Schedule", s, 0),
            ("Age", s, 0),
        ]),
        ("", "Pod") => cols(&[
            ("Name", s, 0),
            ("Ready", s, 0),
            ("Status", s, 0),
            ("Restarts", s, 0),
            ("Age", s, 0),
            ("IP", s, 1),
            ("Node", s, 1),
            ("Nominated Node", s, 1),
            ("Readiness Gates", s, 1),
        ]),
        ("", "Service") => cols(&[
            ("Name", s, 0),
            ("Type", s, 0),
            ("Cluster-IP", s, 0),
            ("External-IP", s, 0),
            ("Port(s)", s, 0),
            ("Age", s, 0),
            ("Selector", s, 1),
        ]),
        ("", "ConfigMap") => cols(&[("Name", s, 0), ("Data", s, 0), ("Age", s, 0)]),
        ("", "Secret") => cols(&[
            ("Name", s, 0),
            ("Type", s, 0),
            ("Data", s, 0),
            ("Age", s, 0),
        ]),
        ("", "ServiceAccount") => cols(&[("Name", s, 0), ("Secrets", s, 0), ("Age", s, 0)]),
        ("", "Namespace") => cols(&[("Name", s, 0), ("Status", s, 0), ("Age", s, 0)]),
        ("", "Endpoints") => cols(&[("Name", s, 0), ("Endpoints", s, 0), ("Age", s, 0)]),
        ("", "PersistentVolumeClaim") => cols(&[
            ("Name", s, 0),
            ("Status", s, 0),
            ("Volume", s, 0),
            ("Capacity", s, 0),
            ("Access Modes", s, 0),
            ("StorageClass", s, 0),
            ("VolumeAttributesClass", s, 0),
            ("Age", s, 0),
            ("VolumeMode", s, 1),
        ]),
        ("", "Node") => cols(&[
            ("Name", s, 0),
            ("Status", s, 0),
            ("Roles", s, 0),
            ("Age", s, 0),
            ("Version", s, 0),
            ("Internal-IP", s, 1),
            ("External-IP", s, 1),
            ("OS-Image", s, 1),
            ("Kernel-Version", s, 1),
            ("Container-Runtime", s, 1),
        ]),
        ("networking.k8s.io", "Ingress") => cols(&[
            ("Name", s, 0),
            ("Class", s, 0),
            ("Hosts", s, 0),
            ("Address", s, 0),
            ("Ports", s, 0),
            ("Age", s, 0),
        ]),
        ("networking.k8s.io", "NetworkPolicy") => {
            cols(&[("Name", s, 0), ("Pod-Selector", s, 0), ("Age", s, 0)])
        }
        ("autoscaling", "HorizontalPodAutoscaler") => cols(&[
            ("Name", s, 0),
            ("Reference", s, 0),
            ("Targets", s, 0),
            ("MinPods", s, 0),
            ("MaxPods", s, 0),
            ("Replicas", s, 0),
            ("Age", s, 0),
        ]),
        ("policy", "PodDisruptionBudget") => cols(&[
            ("Name", s, 0),
            ("Min Available", s, 0),
            ("Max Unavailable", s, 0),
            ("Allowed Disruptions", i, 0),
            ("Age", s, 0),
        ]),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => cols(&[
            ("Name", s, 0),
            ("Role", s, 0),
            ("Age", s, 0),
            ("Users", s, 1),
            ("Groups", s, 1),
            ("ServiceAccounts", s, 1),
        ]),
        _ => return None,
    })
}

pub(crate) fn at<'a>(o: &'a Value, ptr: &str) -> &'a Value {
    o.pointer(ptr).unwrap_or(&Value::Null)
}

pub(crate) fn int(o: &Value, ptr: &str) -> i64 {
    at(o, ptr).as_i64().unwrap_or(0)
}

pub(crate) fn text(o: &Value, ptr: &str, missing: &str) -> String {
    match at(o, ptr).as_str() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => missing.to_string(),
    }
}

pub(crate) fn list<'a>(o: &'a Value, ptr: &str) -> &'a [Value] {
    at(o, ptr).as_array().map_or(&[], Vec::as_slice)
}

pub(crate) fn count(o: &Value, ptr: &str) -> usize {
    match at(o, ptr) {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    }
}

/// `Containers` and `Images` of a pod spec at `ptr`.
fn containers(o: &Value, ptr: &str) -> [Value; 2] {
    let cs = list(o, &format!("{ptr}/containers"));
    let field = |k: &str| {
        cs.iter()
            .map(|c| c.get(k).and_then(Value::as_str).unwrap_or(""))
            .collect::<Vec<_>>()
            .join(",")
    };
    [json!(field("name")), json!(field("image"))]
}

/// A structured selector as kubectl prints it: requirements sorted by key, or `<none>`.
fn selector(o: &Value, ptr: &str) -> String {
    match LabelSelector::from_object(at(o, ptr)) {
        Ok(s) if s.is_empty() => "<none>".into(),
        Ok(s) => s.sorted().to_string(),
        Err(_) => "<error>".into(),
    }
}

fn has_condition(o: &Value, kind: &str) -> bool {
    list(o, "/status/conditions")
        .iter()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

pub(crate) fn since(o: &Value, ptr: &str, now: i64) -> Option<String> {
    at(o, ptr)
        .as_str()
        .and_then(unix_seconds)
        .map(|t| human_duration(now - t))
}

/// The cells of one object of a kind that has columns (same order as `columns`).
pub fn cells(kind: &str, o: &Value, now: i64) -> Vec<Value> {
    let name = json!(o
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(""));
    let age = json!(age(o, now));
    let ready = |spec: &str| {
        let want = at(o, spec).as_i64().unwrap_or(1);
        json!(format!("{}/{want}", int(o, "/status/readyReplicas")))
    };
    let tpl = "/spec/template/spec";
    let [cs, images] = containers(o, tpl);
    let sel = json!(selector(o, "/spec/selector"));
    match kind {
        "Deployment" => vec![
            name,
            ready("/spec/replicas"),
            json!(int(o, "/status/updatedReplicas")),
            json!(int(o, "/status/availableReplicas")),
            age,
            cs,
            images,
            sel,
        ],
        "StatefulSet" => vec![name, ready("/spec/replicas"), age, cs, images],
        "DaemonSet" => vec![
            name,
            json!(int(o, "/status/desiredNumberScheduled")),
            json!(int(o, "/status/currentNumberScheduled")),
            json!(int(o, "/status/numberReady")),
            json!(int(o, "/status/updatedNumberScheduled")),
            json!(int(o, "/status/numberAvailable")),
            json!(format_labels(
                at(o, "/spec/template/spec/nodeSelector").as_object()
            )),
            age,
            cs,
            images,
            sel,
        ],
        "ReplicaSet" => vec![
            name,
            json!(at(o, "/spec/replicas").as_i64().unwrap_or(1)),
            json!(int(o, "/status/replicas")),
            json!(int(o, "/status/readyReplicas")),
            age,
            cs,
            images,
            sel,
        ],
        "Job" => vec![
            name,
            json!(job_status(o)),
            json!(job_completions(o)),
            json!(job_duration(o, now)),
            age,
            cs,
            images,
            sel,
        ],
        "CronJob" => {
            let [cs, images] = containers(o, "/spec/jobTemplate/spec/template/spec");
            let suspend = match at(o, "/spec/suspend").as_bool() {
                Some(true) => "True",
                Some(false) => "False",
                None => "<unset>",
            };
            vec![
                name,
                json!(text(o, "/spec/schedule", "")),
                json!(text(o, "/spec/timeZone", "<none>")),
                json!(suspend),
                json!(count(o, "/status/active")),
                json!(since(o, "/status/lastScheduleTime", now).unwrap_or_else(|| "<none>".into())),
                age,
                cs,
                images,
                json!(selector(o, "/spec/jobTemplate/spec/selector")),
            ]
        }
        "Pod" => derived::pod_cells(o, now, name, age),
        "Service" => service_cells(o, name, age),
        "ConfigMap" => vec![
            name,
            json!(count(o, "/data") + count(o, "/binaryData")),
            age,
        ],
        "Secret" => vec![
            name,
            json!(text(o, "/type", "")),
            json!(count(o, "/data")),
            age,
        ],
        "ServiceAccount" => vec![name, json!(count(o, "/secrets")), age],
        "Namespace" => vec![name, json!(text(o, "/status/phase", "")), age],
        "Endpoints" => vec![name, json!(derived::endpoints(o)), age],
        "PersistentVolumeClaim" => derived::pvc_cells(o, name, age),
        "Node" => derived::node_cells(o, name, age),
        "Ingress" => ingress_cells(o, name, age),
        "NetworkPolicy" => vec![name, json!(selector(o, "/spec/podSelector")), age],
        "HorizontalPodAutoscaler" => derived::hpa_cells(o, name, age),
        "PodDisruptionBudget" => {
            let either = |p: &str| match at(o, p) {
                Value::Null => "N/A".to_string(),
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            vec![
                name,
                json!(either("/spec/minAvailable")),
                json!(either("/spec/maxUnavailable")),
                json!(int(o, "/status/disruptionsAllowed")),
                age,
            ]
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let subjects = |k: &str| {
                list(o, "/subjects")
                    .iter()
                    .filter(|s| s["kind"] == k)
                    .map(|s| {
                        let n = s["name"].as_str().unwrap_or("");
                        match (k, s["namespace"].as_str()) {
                            ("ServiceAccount", Some(ns)) => format!("{ns}/{n}"),
                            _ => n.to_string(),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    text(o, "/roleRef/kind", ""),
                    text(o, "/roleRef/name", "")
                )),
                age,
                json!(subjects("User")),
                json!(subjects("Group")),
                json!(subjects("ServiceAccount")),
            ]
        }
        _ => vec![name, age],
    }
}

fn job_status(o: &Value) -> &'static str {
    if has_condition(o, "Complete") {
        "Complete"
    } else if has_condition(o, "Failed") {
        "Failed"
    } else if !at(o, "/metadata/deletionTimestamp").is_null() {
        "Terminating"
    } else if has_condition(o, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if has_condition(o, "Suspended") {
        "Suspended"
    } else if has_condition(o, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

fn job_completions(o: &Value) -> String {
    let done = int(o, "/status/succeeded");
    match (
        at(o, "/spec/completions").as_i64(),
        at(o, "/spec/parallelism").as_i64(),
    ) {
        (Some(c), _) => format!("{done}/{c}"),
        (None, Some(p)) if p > 1 => format!("{done}/1 of {p}"),
        _ => format!("{done}/1"),
    }
}

fn job_duration(o: &Value, now: i64) -> String {
    let t = |p: &str| at(o, p).as_str().and_then(unix_seconds);
    match (t("/status/startTime"), t("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    }
}

/// `ip` or `hostname` of each load-balancer ingress point, comma-separated.
pub(crate) fn load_balancer(o: &Value, ptr: &str) -> String {
    list(o, ptr)
        .iter()
        .filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str()))
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}

fn service_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let kind = text(o, "/spec/type", "ClusterIP");
    let external: Vec<&str> = list(o, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external_ip = match kind.as_str() {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let mut lb = load_balancer(o, "/status/loadBalancer/ingress");
            if lb.len() > 16 {
                lb = format!("{}...", &lb[..13]);
            }
            let mut all: Vec<&str> = lb.split(',').filter(|s| !s.is_empty()).collect();
            all.extend(&external);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(o, "/spec/externalName", ""),
        _ => "<unknown>".into(),
    };
    let ports: Vec<String> = list(o, "/spec/ports")
        .iter()
        .map(|p| {
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            let port = p["port"].as_i64().unwrap_or(0);
            match p["nodePort"].as_i64() {
                Some(n) if n > 0 => format!("{port}:{n}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    };
    vec![
        name,
        json!(kind),
        json!(text(o, "/spec/clusterIP", "<none>")),
        json!(external_ip),
        json!(ports),
        age,
        json!(format_labels(at(o, "/spec/selector").as_object())),
    ]
}

fn ingress_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let hosts: Vec<&str> = list(o, "/spec/rules")
        .iter()
        .filter_map(|r| r["host"].as_str())
        .filter(|h| !h.is_empty())
        .collect();
    let hosts = match hosts.len() {
        0 => "*".to_string(),
        n if n > 4 => format!("{} + {} more...", hosts[..4].join(","), n - 4),
        _ => hosts.join(","),
    };
    let ports = if count(o, "/spec/tls") > 0 {
        "80, 443"
    } else {
        "80"
    };
    vec![
        name,
        json!(text(o, "/spec/ingressClassName", "<none>")),
        json!(hosts),
        json!(load_balancer(o, "/status/loadBalancer/ingress")),
        json!(ports),
        age,
    ]
}
