//! Admission through the API of a real three-node group: a tenant's cluster-scoped kinds and
//! foreign namespaces are 403, a patch bomb and an identity-changing override are 422, each
//! body naming the field and the rule; the cluster keeps serving and stores nothing refused.

use std::sync::Mutex;

use crate::common::{send, Resp, ADMIN, CAROL};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn refused(r: &Resp, status: u16, field_part: &str, rule: &str) {
    assert_eq!(r.status, status, "{}", r.text);
    let field = r.json["error"]["field"].as_str().unwrap_or_default();
    assert!(field.contains(field_part), "field {field:?}: {}", r.text);
    let message = r.json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(rule), "rule {rule}: {}", r.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refusals_name_field_and_rule_and_change_nothing() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let leader = c.leader();
    let put = |path: &str, token: &'static str, body: Value| {
        let rb = c.req(leader, Method::PUT, path, Some(token)).json(&body);
        send(rb, &seen)
    };
    let tenant = json!({"namespaces": ["blue"], "members": ["carol"]});
    let r = put("/v1/tenants/blue", ADMIN, tenant).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let obj = "/v1/namespaces/blue/objects/x";
    let ns =
        json!({"template": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "red"}}});
    refused(
        &put(obj, CAROL, ns.clone()).await,
        403,
        "kind",
        "cluster-scoped-kind",
    );
    // Admins too, until the admission policy lists the kind (422: policy, not rights).
    refused(
        &put("/v1/namespaces/infra/objects/x", ADMIN, ns).await,
        422,
        "kind",
        "cluster-scoped-kind",
    );
    let crb = json!({"template": {"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding", "metadata": {"name": "me"},
        "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}}});
    refused(
        &put(obj, CAROL, crb).await,
        403,
        "kind",
        "cluster-scoped-kind",
    );

    // Forty copies of the whole document: refused after a few doublings.
    let bomb: Vec<Value> = (0..40)
        .map(|i| json!({"op": "copy", "from": "", "path": format!("/x{i}")}))
        .collect();
    let body = json!({"template": cm("x"), "overrides": [{"patches": bomb}]});
    refused(
        &put(obj, CAROL, body).await,
        422,
        "overrides[0].patches[",
        "render-limits",
    );
    // An override renaming the kind on one cluster.
    let body = json!({"template": cm("x"), "overrides": [{"clusterName": "dc9",
        "patches": [{"op": "replace", "path": "/kind", "value": "\"Secret\""}]}]});
    refused(
        &put(obj, CAROL, body).await,
        422,
        "kind",
        "rendered-identity",
    );

    // Nothing was stored.
    let r = send(
        c.req(leader, Method::GET, "/v1/objects", Some(ADMIN)),
        &seen,
    )
    .await;
    assert_eq!(r.json["items"], json!([]), "{}", r.text);
    // Still serving, and a plain object is admitted.
    let r = put(obj, CAROL, json!({"template": cm("x")})).await;
    assert_eq!(r.status, 200, "{}", r.text);

    // The policy: readable by everyone, set by admins; then the admin's namespace object goes in.
    let policy = json!({"clusterScopedKinds": ["Namespace"]});
    let r = put("/v1/admin/admission", CAROL, policy.clone()).await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = put(
        "/v1/admin/admission",
        ADMIN,
        json!({"clusterScopedKinds": ["apps/Deployment"]}),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let r = put("/v1/admin/admission", ADMIN, policy).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = send(
        c.req(leader, Method::GET, "/v1/admin/admission", Some(CAROL)),
        &seen,
    )
    .await;
    assert_eq!(
        r.json["clusterScopedKinds"],
        json!(["Namespace"]),
        "{}",
        r.text
    );
    assert_eq!(
        r.json["bindableClusterRoles"],
        json!(["view", "edit", "admin"])
    );
    let ns =
        json!({"template": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "red"}}});
    let r = put("/v1/namespaces/infra/objects/x", ADMIN, ns.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    refused(
        &put(obj, CAROL, ns).await,
        403,
        "kind",
        "cluster-scoped-kind",
    );
}
