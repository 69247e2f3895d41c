//! Printer cells that kube-apiserver derives from status in some detail: a Pod's READY, STATUS
//! and RESTARTS, a PVC's capacity and access modes, a Node's STATUS and ROLES, an HPA's
//! TARGETS, an Endpoints' address list. Pure; `now` is the caller's.

use serde_json::{json, Value};

use super::{at, count, int, list, since, text};

pub(crate) fn pod_cells(o: &Value, now: i64, name: Value, age: Value) -> Vec<Value> {
    let statuses = list(o, "/status/containerStatuses");
    let total = count(o, "/spec/containers");
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let mut reason = text(o, "/status/phase", "");
    if let Some(r) = at(o, "/status/reason").as_str().filter(|r| !r.is_empty()) {
        reason = r.to_string();
    }
    let mut running = false;
    for c in statuses.iter().rev() {
        let state = &c["state"];
        if let Some(r) = state["waiting"]["reason"]
            .as_str()
            .filter(|r| !r.is_empty())
        {
            reason = r.to_string();
        } else if let Some(t) = state["terminated"].as_object() {
            reason = match t.get("reason").and_then(Value::as_str) {
                Some(r) if !r.is_empty() => r.to_string(),
                _ => match t.get("signal").and_then(Value::as_i64) {
                    Some(sig) if sig != 0 => format!("Signal:{sig}"),
                    _ => format!(
                        "ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    ),
                },
            };
        } else if state.get("running").is_some() && c["ready"] == true {
            running = true;
        }
    }
    if reason == "Completed" && running {
        reason = "Running".into();
    }
    if !at(o, "/metadata/deletionTimestamp").is_null() {
        reason = if at(o, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let restarts: i64 = statuses
        .iter()
        .map(|c| c["restartCount"].as_i64().unwrap_or(0))
        .sum();
    let last = statuses
        .iter()
        .filter_map(|c| c["lastState"]["terminated"]["finishedAt"].as_str())
        .max();
    let restarts = match last {
        Some(t) if restarts > 0 => {
            let ago = since(&json!({ "t": t }), "/t", now).unwrap_or_default();
            format!("{restarts} ({ago} ago)")
        }
        _ => restarts.to_string(),
    };
    let gates = list(o, "/spec/readinessGates");
    let gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = list(o, "/status/conditions");
        let met = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{met}/{}", gates.len())
    };
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        age,
        json!(text(o, "/status/podIP", "<none>")),
        json!(text(o, "/spec/nodeName", "<none>")),
        json!(text(o, "/status/nominatedNodeName", "<none>")),
        json!(gates),
    ]
}

pub(crate) fn pvc_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let phase = if at(o, "/metadata/deletionTimestamp").is_null() {
        text(o, "/status/phase", "")
    } else {
        "Terminating".into()
    };
    let volume = text(o, "/spec/volumeName", "");
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let short = |m: &str| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            _ => "",
        };
        let modes: Vec<&str> = list(o, "/status/accessModes")
            .iter()
            .filter_map(Value::as_str)
            .map(short)
            .filter(|s| !s.is_empty())
            .collect();
        (text(o, "/status/capacity/storage", ""), modes.join(","))
    };
    vec![
        name,
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(text(o, "/spec/storageClassName", "")),
        json!(text(o, "/spec/volumeAttributesClassName", "<unset>")),
        age,
        json!(text(o, "/spec/volumeMode", "<unset>")),
    ]
}

pub(crate) fn node_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let ready = list(o, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| match c["status"].as_str() {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    let mut status = ready.to_string();
    if at(o, "/spec/unschedulable") == true {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<&str> = at(o, "/metadata/labels")
        .as_object()
        .map(|m| {
            m.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    let address = |kind: &str| {
        list(o, "/status/addresses")
            .iter()
            .find(|a| a["type"] == kind)
            .and_then(|a| a["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    let info = |k: &str| text(o, &format!("/status/nodeInfo/{k}"), "<unknown>");
    vec![
        name,
        json!(status),
        json!(roles),
        age,
        json!(text(o, "/status/nodeInfo/kubeletVersion", "")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

/// TARGETS: `cpu: 45%/80%` per metric (`<unknown>` before the first measurement), at most two
/// then `+ N more...`, `<none>` without metrics.
fn hpa_targets(o: &Value) -> String {
    let specs = list(o, "/spec/metrics");
    let current = list(o, "/status/currentMetrics");
    let mut out = Vec::new();
    for (i, m) in specs.iter().enumerate() {
        let cur = current.get(i);
        let entry = match m["type"].as_str() {
            Some(kind @ ("Resource" | "ContainerResource")) => {
                let field = if kind == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let res = &m[field];
                let now = cur.map(|c| &c[field]["current"]);
                let target = &res["target"];
                let metric = res["name"].as_str().unwrap_or("");
                if let Some(v) = target["averageValue"].as_str() {
                    let c = now
                        .and_then(|n| n["averageValue"].as_str())
                        .unwrap_or("<unknown>");
                    format!("{metric}: {c}/{v}")
                } else {
                    let c = now
                        .and_then(|n| n["averageUtilization"].as_i64())
                        .map_or("<unknown>".to_string(), |u| format!("{u}%"));
                    let t = target["averageUtilization"].as_i64().unwrap_or(0);
                    format!("{metric}: {c}/{t}%")
                }
            }
            _ => "<unknown>/<unknown>".into(),
        };
        out.push(entry);
    }
    match out.len() {
        0 => "<none>".into(),
        n if n > 2 => format!("{} + {} more...", out[..2].join(", "), n - 2),
        _ => out.join(", "),
    }
}

pub(crate) fn hpa_cells(o: &Value, name: Value, age: Value) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        text(o, "/spec/scaleTargetRef/kind", ""),
        text(o, "/spec/scaleTargetRef/name", "")
    );
    let min = match at(o, "/spec/minReplicas").as_i64() {
        Some(m) => json!(m),
        None => json!("<unset>"),
    };
    vec![
        name,
        json!(reference),
        json!(hpa_targets(o)),
        min,
        json!(int(o, "/spec/maxReplicas")),
        json!(int(o, "/status/currentReplicas")),
        age,
    ]
}

/// `ip:port` for every ready address and port, at most three then `+ N more...`.
pub(crate) fn endpoints(o: &Value) -> String {
    let mut all = Vec::new();
    for subset in list(o, "/subsets") {
        let ports: Vec<i64> = subset["ports"]
            .as_array()
            .map(|p| p.iter().filter_map(|p| p["port"].as_i64()).collect())
            .unwrap_or_default();
        for a in subset["addresses"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
        {
            let ip = a["ip"].as_str().unwrap_or("");
            if ports.is_empty() {
                all.push(ip.to_string());
            }
            for p in &ports {
                all.push(format!("{ip}:{p}"));
            }
        }
    }
    match all.len() {
        0 => "<none>".into(),
        n if n > 3 => format!("{} + {} more...", all[..3].join(","), n - 3),
        _ => all.join(","),
    }
}
