//! Roles scoped to namespaces through both doors of a real three-node group: a member scoped to
//! one namespace of its tenant writes and reads there, is 403 (with a JSON body) in the
//! tenant's other namespace, and lists only its own; a scoped reader reads there and writes
//! nothing. The native `/v1` API and the Kubernetes-compatible one hold the same line.

use std::sync::Mutex;

use crate::common::{send, Resp, ADMIN};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
}

/// A native 403: a JSON error body.
fn native_forbidden(r: &Resp) {
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.json["error"].is_object(), "{}", r.text);
}

/// A Kubernetes-door 403: a Status body.
fn k8s_forbidden(r: &Resp) {
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(
        (&r.json["kind"], &r.json["reason"]),
        (&json!("Status"), &json!("Forbidden")),
        "{}",
        r.text
    );
}

/// The namespaces of a list's items, native (`namespace`) or Kubernetes (`metadata.namespace`).
fn namespaces_of(r: &Resp) -> Vec<String> {
    let items = r.json["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .filter_map(|o| {
            o["namespace"]
                .as_str()
                .or(o["metadata"]["namespace"].as_str())
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scoped_roles_hold_in_both_doors() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    let call = |m: Method, path: &str, token: &str, body: Option<Value>| {
        let mut rb = c.req(leader, m, path, Some(token));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        send(rb, &seen)
    };
    let r = call(
        Method::PUT,
        "/v1/tenants/blue",
        ADMIN,
        Some(json!({"namespaces": ["blue-a", "blue-b"]})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    for ns in ["blue-a", "blue-b"] {
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        let r = call(Method::POST, &path, ADMIN, Some(cm("seed"))).await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    // A namespace outside the tenant is refused when the role is made.
    let r = call(
        Method::POST,
        "/v1/users",
        ADMIN,
        Some(json!({"name": "sam", "role": "tenant:blue/elsewhere"})),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let mut tokens = Vec::new();
    for (name, role) in [
        ("sam", "tenant:blue/blue-a"),
        ("rita", "tenant-reader:blue/blue-a"),
    ] {
        let body = json!({"name": name, "role": role});
        let r = call(Method::POST, "/v1/users", ADMIN, Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.json["role"], role, "{}", r.text);
        let r = call(
            Method::POST,
            &format!("/v1/users/{name}/tokens"),
            ADMIN,
            Some(json!({})),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text);
        tokens.push(r.json["token"].as_str().unwrap_or_default().to_string());
    }
    let (sam, rita) = (tokens[0].as_str(), tokens[1].as_str());

    // The scoped member, native door: writes and reads inside, 403 outside, lists filtered.
    let yaml = json!({"template": cm("web")});
    let r = call(
        Method::PUT,
        "/v1/namespaces/blue-a/objects/web",
        sam,
        Some(yaml.clone()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(
        Method::PUT,
        "/v1/namespaces/blue-b/objects/web",
        sam,
        Some(yaml),
    )
    .await;
    native_forbidden(&r);
    native_forbidden(&call(Method::GET, "/v1/namespaces/blue-b/objects", sam, None).await);
    let r = call(Method::GET, "/v1/objects", sam, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(namespaces_of(&r), ["blue-a", "blue-a"], "{}", r.text);

    // The same member, Kubernetes door (its list holds the door's ConfigMaps: seed and k8s).
    let r = call(
        Method::POST,
        "/api/v1/namespaces/blue-a/configmaps",
        sam,
        Some(cm("k8s")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    k8s_forbidden(
        &call(
            Method::POST,
            "/api/v1/namespaces/blue-b/configmaps",
            sam,
            Some(cm("k8s")),
        )
        .await,
    );
    k8s_forbidden(
        &call(
            Method::GET,
            "/api/v1/namespaces/blue-b/configmaps",
            sam,
            None,
        )
        .await,
    );
    let r = call(Method::GET, "/api/v1/configmaps", sam, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(namespaces_of(&r), ["blue-a"; 2], "{}", r.text);

    // The scoped reader: reads inside only, writes nothing.
    let r = call(Method::GET, "/v1/namespaces/blue-a/objects", rita, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    native_forbidden(&call(Method::GET, "/v1/namespaces/blue-b/objects", rita, None).await);
    let r = call(
        Method::PUT,
        "/v1/namespaces/blue-a/objects/rita",
        rita,
        Some(json!({"template": cm("rita")})),
    )
    .await;
    native_forbidden(&r);
    let r = call(Method::GET, "/api/v1/configmaps", rita, None).await;
    assert_eq!(namespaces_of(&r), ["blue-a"; 2], "{}", r.text);
    k8s_forbidden(
        &call(
            Method::POST,
            "/api/v1/namespaces/blue-a/configmaps",
            rita,
            Some(cm("rita")),
        )
        .await,
    );
    k8s_forbidden(
        &call(
            Method::GET,
            "/api/v1/namespaces/blue-b/configmaps",
            rita,
            None,
        )
        .await,
    );
}

fn deploy(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx",
                                          "resources": {"requests": {"cpu": "100m"}}}]}}}})
}

/// A member scoped to one namespace of its tenant reads the tenant (native and door, get, list
/// and queue) with that namespace only: no other namespace's name and none of its use.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scoped_member_sees_only_its_namespaces_of_its_tenant() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    let call = |m: Method, path: &str, token: &str, body: Option<Value>| {
        let mut rb = c.req(leader, m, path, Some(token));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        send(rb, &seen)
    };
    let r = call(
        Method::PUT,
        "/v1/tenants/blue",
        ADMIN,
        Some(json!({"namespaces": ["blue-a", "hidden-b"], "quota": {"cpuMillis": 100000}})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(
        Method::POST,
        "/apis/apps/v1/namespaces/hidden-b/deployments",
        ADMIN,
        Some(deploy("big")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let mut tokens = Vec::new();
    for (name, role) in [
        ("sam", "tenant:blue/blue-a"),
        ("rita", "tenant-reader:blue/blue-a"),
    ] {
        let body = json!({"name": name, "role": role});
        let r = call(Method::POST, "/v1/users", ADMIN, Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
        let path = format!("/v1/users/{name}/tokens");
        let r = call(Method::POST, &path, ADMIN, Some(json!({}))).await;
        assert_eq!(r.status, 201, "{}", r.text);
        tokens.push(r.json["token"].as_str().unwrap_or_default().to_string());
    }

    // The administrator sees the whole tenant and its use.
    let r = call(Method::GET, "/v1/tenants/blue", ADMIN, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("hidden-b"), "{}", r.text);
    assert_eq!(r.json["status"]["used"]["cpuMillis"], 200, "{}", r.text);

    for token in &tokens {
        let door = "/apis/fedraft.io/v1alpha1/tenants";
        for path in [
            "/v1/tenants/blue".to_string(),
            "/v1/tenants".to_string(),
            "/v1/tenants/blue/queue".to_string(),
            format!("{door}/blue"),
            door.to_string(),
        ] {
            let r = call(Method::GET, &path, token, None).await;
            assert_eq!(r.status, 200, "{path}: {}", r.text);
            assert!(!r.text.contains("hidden-b"), "{path}: {}", r.text);
        }
        let r = call(Method::GET, "/v1/tenants/blue", token, None).await;
        assert_eq!(r.json["namespaces"], json!(["blue-a"]), "{}", r.text);
        assert_eq!(r.json["status"]["used"]["cpuMillis"], 0, "{}", r.text);
        assert!(r.json["status"].get("extendedUsed").is_none(), "{}", r.text);
        let r = call(
            Method::GET,
            "/apis/fedraft.io/v1alpha1/tenants/blue",
            token,
            None,
        )
        .await;
        assert_eq!(
            r.json["spec"]["namespaces"],
            json!(["blue-a"]),
            "{}",
            r.text
        );
        assert_eq!(r.json["status"]["used"]["cpuMillis"], 0, "{}", r.text);
    }
}
