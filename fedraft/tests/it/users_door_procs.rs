//! The user database through the Kubernetes-compatible door on three real server processes
//! with TLS: the stock kubectl (when installed) creates, shows and deletes a user; a token
//! issued through the door works on every node, is revoked through the door on one node and is
//! then refused on all three once applied; its text is in no data directory or log.

use std::time::Duration;

use crate::deploy_common::*;
use crate::kubectl_door::{kubectl_path, Kubectl};
use crate::users_procs::files_containing;
use fedraft_testkit::eventually;
use serde_json::{json, Value};

const USERS: &str = "/apis/fedraft.io/v1alpha1/users";
const TOKENS: &str = "/apis/fedraft.io/v1alpha1/usertokens";

const KIM: &str = r#"apiVersion: fedraft.io/v1alpha1
kind: User
metadata:
  name: kim
spec:
  kind: serviceAccount
  role: auditor
"#;

/// Waits until node `i` answers a read of both doors with `token` by `status`.
async fn answers(c: &Cluster, i: usize, token: &str, status: u16) {
    eventually(
        Duration::from_secs(30),
        &format!("node {} answers {status}", i + 1),
        || async {
            for path in ["/v1/clusters", "/apis/fedraft.io/v1alpha1/clusters"] {
                let r = c
                    .http
                    .get(c.url(i, path))
                    .bearer_auth(token)
                    .send()
                    .await
                    .ok()?;
                if r.status().as_u16() != status {
                    return None;
                }
            }
            Some(())
        },
    )
    .await
}

async fn door(
    c: &Cluster,
    i: usize,
    m: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = c.req(i, m, path);
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.expect("the door answers");
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_through_the_door_is_refused_on_every_node() {
    let root = tempfile::tempdir().unwrap();
    let certs = crate::support::node_certs(root.path());
    let mut l = layout();
    l.nodes = 3;
    l.tls = Some(TlsDir { dir: certs.clone() });
    let mut c = Cluster::layout(root.path(), "users-door", &l);
    c.start_all();
    c.wait_all_ready(Duration::from_secs(60)).await;

    // kubectl: create, list (the User columns), show as YAML.
    let home = tempfile::tempdir().unwrap();
    let kubectl = kubectl_path().exists().then(|| {
        let token = home.path().join("token");
        std::fs::write(&token, format!("{ADMIN}\n")).unwrap();
        let out = std::process::Command::new(BIN)
            .arg("kubeconfig")
            .arg("--server")
            .arg(c.url(0, ""))
            .arg("--token-file")
            .arg(&token)
            .arg("--ca")
            .arg(certs.join("ca.crt"))
            .output()
            .expect("fedraft kubeconfig runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(home.path().join("kubeconfig"), &out.stdout).unwrap();
        Kubectl {
            dir: home.path().to_path_buf(),
        }
    });
    match &kubectl {
        Some(k) => {
            let kinds = k.ok(&["api-resources"]);
            assert!(kinds.contains("usertokens"), "{kinds}");
            let created = k.ok_in(&["create", "-f", "-"], Some(KIM));
            assert!(created.contains("user.fedraft.io/kim created"), "{created}");
            let table = k.ok(&["get", "users"]);
            assert!(
                table.contains("ROLE") && table.contains("TOKENS") && table.contains("auditor"),
                "{table}"
            );
            let yaml = k.ok(&["get", "user", "kim", "-o", "yaml"]);
            assert!(
                yaml.contains("kind: User") && yaml.contains("role: auditor"),
                "{yaml}"
            );
        }
        None => {
            eprintln!(
                "no kubectl at {}: the user is created over HTTP",
                kubectl_path().display()
            );
            let user = json!({"metadata": {"name": "kim"},
                              "spec": {"kind": "serviceAccount", "role": "auditor"}});
            let (code, doc) = door(&c, 0, reqwest::Method::POST, USERS, Some(user)).await;
            assert_eq!(code, 201, "{doc}");
        }
    }

    // Issue through the door on node 2; the token reads on all three.
    let (code, issued) = door(
        &c,
        1,
        reqwest::Method::POST,
        TOKENS,
        Some(json!({"spec": {"user": "kim"}})),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
    let token = issued["status"]["token"].as_str().unwrap().to_string();
    let id = issued["metadata"]["name"].as_str().unwrap().to_string();
    for i in 0..3 {
        answers(&c, i, &token, 200).await;
    }

    // Revoke through the door on node 3: refused everywhere once applied.
    let (code, doc) = door(
        &c,
        2,
        reqwest::Method::DELETE,
        &format!("{TOKENS}/{id}"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{doc}");
    for i in 0..3 {
        answers(&c, i, &token, 401).await;
    }
    let (code, listed) = door(&c, 0, reqwest::Method::GET, TOKENS, None).await;
    assert_eq!(code, 200, "{listed}");
    // Revoked is deleted, for the door.
    let text = listed.to_string();
    assert!(!text.contains(&id) && !text.contains(&token), "{text}");

    match &kubectl {
        Some(k) => {
            let deleted = k.ok(&["delete", "user", "kim"]);
            assert!(deleted.contains("deleted"), "{deleted}");
            let gone = k.run(&["get", "user", "kim"], None);
            assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
        }
        None => {
            let (code, doc) = door(
                &c,
                0,
                reqwest::Method::DELETE,
                &format!("{USERS}/kim"),
                None,
            )
            .await;
            assert_eq!(code, 200, "{doc}");
        }
    }

    for i in 0..3 {
        c.stop(i);
    }
    let secret = token.rsplit('_').next().unwrap();
    assert!(secret.len() >= 64, "{token}");
    let hits = files_containing(root.path(), secret.as_bytes());
    assert!(hits.is_empty(), "a token's secret is stored in {hits:?}");
}
