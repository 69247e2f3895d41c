//! The user database through the Kubernetes-compatible door of a real three-node group: an
//! administrator creates a user with a scoped role, issues it a token that holds exactly that
//! role's rights in both doors, lists tokens without their secret or hash, rotates (issue, then
//! revoke: the old token is 401), changes the role with a merge patch and deletes the user.
//! Every other role is 403 on every write; a bad role is a 422 naming `spec.role`.

use std::sync::Mutex;

use crate::common::{send, Resp, ADMIN, CAROL, OPERATOR};
use fedraft_apiserver::ApiConfig;
use reqwest::Method;
use serde_json::{json, Value};

const USERS: &str = "/apis/fedraft.io/v1alpha1/users";
const TOKENS: &str = "/apis/fedraft.io/v1alpha1/usertokens";

fn status(r: &Resp, code: u16, reason: &str) {
    assert_eq!(r.status, code, "{}", r.text);
    assert_eq!(r.json["kind"], "Status", "{}", r.text);
    assert_eq!(r.json["reason"], reason, "{}", r.text);
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
}

fn user(name: &str, role: &str) -> Value {
    json!({"apiVersion": "fedraft.io/v1alpha1", "kind": "User",
           "metadata": {"name": name}, "spec": {"kind": "serviceAccount", "role": role}})
}

fn token_for(user: &str) -> Value {
    json!({"apiVersion": "fedraft.io/v1alpha1", "kind": "UserToken",
           "metadata": {"generateName": "x-"}, "spec": {"user": user, "ttlSeconds": 3600}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn users_and_tokens_through_the_door() {
    let c = crate::common::start(ApiConfig::default()).await;
    let seen = Mutex::new(Vec::new());
    let (leader, follower) = (c.leader(), c.follower());
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
    let r = call(
        Method::POST,
        "/api/v1/namespaces/blue-a/configmaps",
        ADMIN,
        Some(cm("seed")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);

    // Discovery and OpenAPI name both kinds.
    let r = call(Method::GET, "/apis/fedraft.io/v1alpha1", OPERATOR, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let kinds: Vec<&str> = r.json["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"User") && kinds.contains(&"UserToken"),
        "{kinds:?}"
    );
    let r = call(
        Method::GET,
        "/openapi/v3/apis/fedraft.io/v1alpha1",
        OPERATOR,
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("usertokens"), "{}", r.text);

    // Bad input names the field, and nothing is written.
    let r = call(
        Method::POST,
        USERS,
        ADMIN,
        Some(user("rita", "tenant-reader:blue")),
    )
    .await;
    status(&r, 422, "Invalid");
    assert_eq!(
        r.json["details"]["causes"][0]["field"], "spec.role",
        "{}",
        r.text
    );
    let r = call(
        Method::POST,
        USERS,
        ADMIN,
        Some(user("rita", "tenant-reader:blue/elsewhere")),
    )
    .await;
    status(&r, 422, "Invalid");
    assert_eq!(r.json["details"]["causes"][0]["field"], "spec.role");
    let r = call(
        Method::POST,
        USERS,
        ADMIN,
        Some(json!({"metadata": {"name": "rita"}, "spec": {}})),
    )
    .await;
    status(&r, 422, "Invalid");
    assert_eq!(r.json["details"]["causes"][0]["field"], "spec.role");
    status(
        &call(Method::GET, &format!("{USERS}/rita"), ADMIN, None).await,
        404,
        "NotFound",
    );

    // An administrator creates the user (through a follower: forwarded).
    let r = send(
        c.req(follower, Method::POST, USERS, Some(ADMIN))
            .json(&user("rita", "tenant-reader:blue/blue-a")),
        &seen,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json["spec"]["role"], "tenant-reader:blue/blue-a");
    assert_eq!(r.json["spec"]["kind"], "serviceAccount");
    status(
        &call(Method::POST, USERS, ADMIN, Some(user("rita", "auditor"))).await,
        409,
        "AlreadyExists",
    );

    // Nobody else writes; operators and auditors read, tenant members do not.
    for who in [OPERATOR, CAROL] {
        let writes = [
            (Method::POST, USERS.to_string(), Some(user("eve", "admin"))),
            (
                Method::PUT,
                format!("{USERS}/rita"),
                Some(user("rita", "admin")),
            ),
            (Method::DELETE, format!("{USERS}/rita"), None),
            (Method::POST, TOKENS.to_string(), Some(token_for("rita"))),
        ];
        for (m, path, body) in writes {
            status(&call(m, &path, who, body).await, 403, "Forbidden");
        }
        let r = c
            .req(leader, Method::PATCH, &format!("{USERS}/rita"), Some(who))
            .header("content-type", "application/merge-patch+json")
            .body(json!({"spec": {"role": "admin"}}).to_string());
        status(&send(r, &seen).await, 403, "Forbidden");
    }
    let r = call(Method::GET, USERS, OPERATOR, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["kind"], "UserList");
    status(
        &call(Method::GET, USERS, CAROL, None).await,
        403,
        "Forbidden",
    );

    // Issue: the token's text is in this one answer, never cached.
    let r = call(Method::POST, TOKENS, ADMIN, Some(token_for("rita"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.headers["cache-control"], "no-store");
    let old_id = r.json["metadata"]["name"].as_str().unwrap().to_string();
    let old = r.json["status"]["token"].as_str().unwrap().to_string();
    assert!(old.starts_with("fedraft_"), "{}", r.text);
    assert_eq!(r.json["spec"]["ttlSeconds"], 3600);
    let r = call(
        Method::POST,
        TOKENS,
        ADMIN,
        Some(json!({"spec": {"user": "rita", "ttlSeconds": 0}})),
    )
    .await;
    status(&r, 422, "Invalid");
    assert_eq!(r.json["details"]["causes"][0]["field"], "spec.ttlSeconds");
    let r = call(
        Method::POST,
        TOKENS,
        ADMIN,
        Some(json!({"spec": {"user": "nobody"}})),
    )
    .await;
    status(&r, 422, "Invalid");
    assert_eq!(r.json["details"]["causes"][0]["field"], "spec.user");

    // The token holds exactly its role's rights, in both doors: reads blue-a, writes nothing.
    let cms = "/api/v1/namespaces/blue-a/configmaps";
    let r = call(Method::GET, cms, &old, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    status(
        &call(Method::POST, cms, &old, Some(cm("no"))).await,
        403,
        "Forbidden",
    );
    status(
        &call(
            Method::GET,
            "/api/v1/namespaces/blue-b/configmaps",
            &old,
            None,
        )
        .await,
        403,
        "Forbidden",
    );
    let r = call(Method::GET, "/v1/namespaces/blue-a/objects", &old, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = call(
        Method::PUT,
        "/v1/namespaces/blue-a/objects/no",
        &old,
        Some(json!({"template": cm("no")})),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text);
    status(
        &call(Method::GET, USERS, &old, None).await,
        403,
        "Forbidden",
    );

    // Lists and gets show metadata only: neither the text nor the hash.
    let hash = fedraft_core::users::token_hash_hex(&old);
    for path in [TOKENS.to_string(), format!("{TOKENS}/{old_id}")] {
        let r = call(Method::GET, &path, OPERATOR, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(!r.text.contains(&old), "{}", r.text);
        assert!(!r.text.contains(&hash), "{}", r.text);
        assert!(r.text.contains(&old_id), "{}", r.text);
    }
    let r = call(Method::GET, &format!("{USERS}/rita"), OPERATOR, None).await;
    assert_eq!(r.json["status"]["tokens"], 1, "{}", r.text);

    // `kubectl get users` columns.
    let r = c
        .req(leader, Method::GET, USERS, Some(ADMIN))
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io");
    let r = send(r, &seen).await;
    assert_eq!(r.json["kind"], "Table", "{}", r.text);
    let cols: Vec<&str> = r.json["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        cols,
        ["Name", "Kind", "Role", "Tokens", "Age"],
        "{}",
        r.text
    );
    let row = &r.json["rows"][0]["cells"];
    assert_eq!(
        (&row[0], &row[2], &row[3]),
        (
            &json!("rita"),
            &json!("tenant-reader:blue/blue-a"),
            &json!(1)
        ),
        "{}",
        r.text
    );

    // Rotation: issue a new token, revoke the old one; the old one is refused at once.
    let r = call(Method::POST, TOKENS, ADMIN, Some(token_for("rita"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let new = r.json["status"]["token"].as_str().unwrap().to_string();
    let r = call(Method::DELETE, &format!("{TOKENS}/{old_id}"), ADMIN, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    for path in [cms, "/v1/namespaces/blue-a/objects"] {
        let r = call(Method::GET, path, &old, None).await;
        assert_eq!(r.status, 401, "{}", r.text);
        let r = call(Method::GET, path, &new, None).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    // Revoked is deleted, for the door; the native API still lists it with its revocation.
    status(
        &call(Method::GET, &format!("{TOKENS}/{old_id}"), ADMIN, None).await,
        404,
        "NotFound",
    );
    let r = call(Method::GET, TOKENS, ADMIN, None).await;
    assert!(!r.text.contains(&old_id), "{}", r.text);
    let r = call(Method::GET, "/v1/users/rita/tokens", ADMIN, None).await;
    let revoked: Vec<&Value> = r.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["id"] == old_id.as_str())
        .collect();
    assert!(revoked[0]["revokedMs"].is_u64(), "{}", r.text);

    // A merge patch widens the role: the same token now writes in blue-a.
    let r = c
        .req(leader, Method::PATCH, &format!("{USERS}/rita"), Some(ADMIN))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"spec": {"role": "tenant:blue/blue-a"}}).to_string());
    let r = send(r, &seen).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["spec"]["role"], "tenant:blue/blue-a");
    let r = call(Method::POST, cms, &new, Some(cm("rita"))).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = c
        .req(leader, Method::PATCH, &format!("{USERS}/rita"), Some(ADMIN))
        .header("content-type", "application/merge-patch+json")
        .body(json!({"spec": {"role": "root"}}).to_string());
    let r = send(r, &seen).await;
    status(&r, 422, "Invalid");
    assert_eq!(r.json["details"]["causes"][0]["field"], "spec.role");

    // Delete: the user and its tokens go.
    let r = call(Method::DELETE, &format!("{USERS}/rita"), ADMIN, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(call(Method::GET, cms, &new, None).await.status, 401);
    status(
        &call(Method::GET, &format!("{USERS}/rita"), ADMIN, None).await,
        404,
        "NotFound",
    );

    // Each change is one log entry naming its actor: the token file's admin `alice`.
    let r = call(Method::GET, "/v1/audit?actor=alice&limit=500", ADMIN, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let commands: Vec<&str> = r.json["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["command"].as_str())
        .filter(|c| c.contains("User") || c.contains("Token"))
        .collect();
    assert_eq!(
        commands,
        [
            "PutUser",
            "IssueToken",
            "IssueToken",
            "RevokeToken",
            "PutUser",
            "DeleteUser"
        ],
        "{}",
        r.text
    );

    // No answer but the two issues carried a token's text.
    let bodies = seen.lock().unwrap().clone();
    for t in [&old, &new] {
        assert_eq!(bodies.iter().filter(|b| b.contains(t.as_str())).count(), 1);
    }
}
