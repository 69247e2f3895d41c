//! Server-side printing of the built-in kinds: the columns and cells `kubectl get` shows
//! against a real cluster (kubectl 1.32 output, header names upper-cased by kubectl).

use fedraft_kubeapi::resource::find_builtin;
use fedraft_kubeapi::table::{table, unix_seconds, IncludeObject};
use serde_json::{json, Value};

const CREATED: &str = "2026-01-01T00:00:00Z";

fn now() -> i64 {
    unix_seconds("2026-01-01T00:05:00Z").unwrap()
}

fn with_meta(mut o: Value, name: &str) -> Value {
    o["metadata"] = json!({"name": name, "namespace": "default", "creationTimestamp": CREATED});
    o
}

/// (column names shown without -o wide, the row's cells).
fn print(group: &str, plural: &str, obj: Value) -> (Vec<String>, Vec<String>, Value) {
    let res = find_builtin(group, "v1", plural)
        .or_else(|| find_builtin(group, "v2", plural))
        .unwrap();
    let t = table(res, &[obj], now(), IncludeObject::None);
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    let defs = t["columnDefinitions"].as_array().unwrap();
    let name = |c: &Value| c["name"].as_str().unwrap().to_uppercase();
    let narrow = defs
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(name)
        .collect();
    let wide = defs
        .iter()
        .filter(|c| c["priority"] != 0)
        .map(name)
        .collect();
    let cells = t["rows"][0]["cells"].clone();
    assert_eq!(cells.as_array().unwrap().len(), defs.len(), "{cells}");
    (narrow, wide, cells)
}

#[test]
fn deployment() {
    let d = with_meta(
        json!({"spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web", "tier": "front"}},
            "template": {"spec": {"containers": [
                {"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}
            ]}}
        }, "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}),
        "web",
    );
    let (narrow, wide, cells) = print("apps", "deployments", d);
    assert_eq!(narrow, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    assert_eq!(wide, ["CONTAINERS", "IMAGES", "SELECTOR"]);
    assert_eq!(
        cells,
        json!([
            "web",
            "2/3",
            3,
            2,
            "5m",
            "web,log",
            "nginx:1.27,busybox",
            "app=web,tier=front"
        ])
    );
}

#[test]
fn services() {
    let cases = [
        (
            json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.7", "selector": {"app": "web"},
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}),
            json!([
                "svc",
                "ClusterIP",
                "10.0.0.7",
                "<none>",
                "80/TCP,53/UDP",
                "5m",
                "app=web"
            ]),
        ),
        (
            json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.8",
                "ports": [{"port": 443, "nodePort": 30443, "protocol": "TCP"}]}}),
            json!([
                "svc",
                "LoadBalancer",
                "10.0.0.8",
                "<pending>",
                "443:30443/TCP",
                "5m",
                "<none>"
            ]),
        ),
        (
            json!({"spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.9", "ports": []},
                "status": {"loadBalancer": {"ingress": [{"ip": "10.1.2.3"}]}}}),
            json!([
                "svc",
                "LoadBalancer",
                "10.0.0.9",
                "10.1.2.3",
                "<none>",
                "5m",
                "<none>"
            ]),
        ),
        (
            json!({"spec": {"type": "ExternalName", "externalName": "db.example.com"}}),
            json!([
                "svc",
                "ExternalName",
                "<none>",
                "db.example.com",
                "<none>",
                "5m",
                "<none>"
            ]),
        ),
    ];
    for (svc, want) in cases {
        let (narrow, _, cells) = print("", "services", with_meta(svc, "svc"));
        assert_eq!(
            narrow,
            [
                "NAME",
                "TYPE",
                "CLUSTER-IP",
                "EXTERNAL-IP",
                "PORT(S)",
                "AGE"
            ]
        );
        assert_eq!(cells, want);
    }
}

#[test]
fn pods() {
    let pod = with_meta(
        json!({"spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.2.0.4", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
             "lastState": {"terminated": {"finishedAt": "2026-01-01T00:02:00Z"}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        ]}}),
        "p",
    );
    let (narrow, wide, cells) = print("", "pods", pod);
    assert_eq!(narrow, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(wide, ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]);
    assert_eq!(
        cells,
        json!([
            "p",
            "1/2",
            "CrashLoopBackOff",
            "2 (3m ago)",
            "5m",
            "10.2.0.4",
            "n1",
            "<none>",
            "<none>"
        ])
    );
}

#[test]
fn small_kinds() {
    let cases: Vec<(&str, &str, Value, Vec<&str>, Value)> = vec![
        (
            "",
            "configmaps",
            json!({"data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}}),
            vec!["NAME", "DATA", "AGE"],
            json!(["x", 3, "5m"]),
        ),
        (
            "",
            "secrets",
            json!({"type": "Opaque", "data": {"a": "MQ=="}}),
            vec!["NAME", "TYPE", "DATA", "AGE"],
            json!(["x", "Opaque", 1, "5m"]),
        ),
        (
            "",
            "namespaces",
            json!({"status": {"phase": "Active"}}),
            vec!["NAME", "STATUS", "AGE"],
            json!(["x", "Active", "5m"]),
        ),
        (
            "apps",
            "statefulsets",
            json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 3}}),
            vec!["NAME", "READY", "AGE"],
            json!(["x", "3/3", "5m", "", ""]),
        ),
        (
            "apps",
            "daemonsets",
            json!({"spec": {"template": {"spec": {"nodeSelector": {"os": "linux"}}}},
                   "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                              "updatedNumberScheduled": 3, "numberAvailable": 2}}),
            vec![
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE SELECTOR",
                "AGE",
            ],
            json!(["x", 3, 3, 2, 3, 2, "os=linux", "5m", "", "", "<none>"]),
        ),
        (
            "batch",
            "jobs",
            json!({"spec": {"completions": 2}, "status": {"succeeded": 2,
                   "startTime": "2026-01-01T00:00:10Z", "completionTime": "2026-01-01T00:00:40Z",
                   "conditions": [{"type": "Complete", "status": "True"}]}}),
            vec!["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
            json!(["x", "Complete", "2/2", "30s", "5m", "", "", "<none>"]),
        ),
        (
            "batch",
            "cronjobs",
            json!({"spec": {"schedule": "*/5 * * * *", "suspend": false},
                   "status": {"lastScheduleTime": "2026-01-01T00:04:00Z", "active": [{"name": "j"}]}}),
            vec![
                "NAME",
                "SCHEDULE",
                "TIMEZONE",
                "SUSPEND",
                "ACTIVE",
                "LAST SCHEDULE",
                "AGE",
            ],
            json!([
                "x",
                "*/5 * * * *",
                "<none>",
                "False",
                1,
                "60s",
                "5m",
                "",
                "",
                "<none>"
            ]),
        ),
        (
            "networking.k8s.io",
            "ingresses",
            json!({"spec": {"ingressClassName": "nginx", "rules": [{"host": "a.example"}, {"host": "b.example"}],
                            "tls": [{"hosts": ["a.example"]}]},
                   "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}}}),
            vec!["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
            json!([
                "x",
                "nginx",
                "a.example,b.example",
                "lb.example",
                "80, 443",
                "5m"
            ]),
        ),
        (
            "",
            "persistentvolumeclaims",
            json!({"spec": {"volumeName": "pv-1", "storageClassName": "standard"},
                   "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}}),
            vec![
                "NAME",
                "STATUS",
                "VOLUME",
                "CAPACITY",
                "ACCESS MODES",
                "STORAGECLASS",
                "VOLUMEATTRIBUTESCLASS",
                "AGE",
            ],
            json!(["x", "Bound", "pv-1", "1Gi", "RWO", "standard", "<unset>", "5m", "<unset>"]),
        ),
        (
            "autoscaling",
            "horizontalpodautoscalers",
            json!({"spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 5,
                            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]},
                   "status": {"currentReplicas": 2}}),
            vec![
                "NAME",
                "REFERENCE",
                "TARGETS",
                "MINPODS",
                "MAXPODS",
                "REPLICAS",
                "AGE",
            ],
            json!(["x", "Deployment/web", "cpu: <unknown>/80%", 1, 5, 2, "5m"]),
        ),
        (
            "rbac.authorization.k8s.io",
            "roles",
            json!({"rules": []}),
            vec!["NAME", "CREATED AT"],
            json!(["x", CREATED]),
        ),
    ];
    for (group, plural, obj, want_cols, want_cells) in cases {
        let (narrow, _, cells) = print(group, plural, with_meta(obj, "x"));
        assert_eq!(narrow, want_cols, "{plural}");
        assert_eq!(cells, want_cells, "{plural}");
    }
}

#[test]
fn rows_carry_metadata_or_the_object() {
    let res = find_builtin("", "v1", "configmaps").unwrap();
    let cm = with_meta(json!({"data": {}}), "x");
    let t = table(
        res,
        std::slice::from_ref(&cm),
        now(),
        IncludeObject::Metadata,
    );
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert!(t["rows"][0]["object"].get("data").is_none());
    let t = table(res, std::slice::from_ref(&cm), now(), IncludeObject::Object);
    assert_eq!(t["rows"][0]["object"], cm);
}
