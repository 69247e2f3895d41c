//! The replicated user database on three real server processes, driven by the CLI: an admin
//! from the token file creates a user and issues its token, the token works on every node, the
//! user (an admin of the database) creates another, a rotation (issue a new token, revoke the
//! old) refuses the old token on all three nodes once applied, the audit log names the user
//! (`/v1/audit?actor=` and `fedraft audit export --actor`), and no token secret is found in any
//! data directory, log, backup or exported archive.

use std::path::Path;
use std::time::Duration;

use crate::deploy_common::*;
use fedraft_testkit::eventually;

/// Every file under `dir` whose bytes contain `needle`.
pub(crate) fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    hits.push(p.display().to_string());
                }
            }
        }
    }
    hits
}

/// Waits until node `i` answers `GET /v1/clusters` with `token` by `status`.
async fn answers(c: &Cluster, i: usize, token: &str, status: u16) {
    eventually(
        Duration::from_secs(30),
        &format!("node {} answers {status}", i + 1),
        || async {
            // Not `Cluster::req`: that one already carries the admin token.
            let r = c
                .http
                .get(c.url(i, "/v1/clusters"))
                .bearer_auth(token)
                .send()
                .await
                .ok()?;
            (r.status().as_u16() == status).then_some(())
        },
    )
    .await
}

fn ok(out: (i32, String, String)) -> String {
    assert_eq!(out.0, 0, "stdout: {}\nstderr: {}", out.1, out.2);
    out.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rotate_and_revoke_on_every_node_and_no_secret_is_stored() {
    let root = tempfile::tempdir().unwrap();
    let mut c = Cluster::layout(
        root.path(),
        "users",
        &Layout {
            nodes: 3,
            ..layout()
        },
    );
    c.start_all();
    c.wait_all_ready(Duration::from_secs(60)).await;

    ok(c.cli(0, &["user", "create", "eve", "--role", "admin"], &[]));
    let issued: serde_json::Value =
        serde_json::from_str(&ok(c.cli(1, &["token", "issue", "eve"], &[]))).unwrap();
    let first = issued["token"].as_str().unwrap().to_string();
    let first_id = issued["id"].as_str().unwrap().to_string();
    for i in 0..3 {
        answers(&c, i, &first, 200).await;
    }
    // eve manages users with her own token: her entries name her.
    let as_eve = [("FEDRAFT_TOKEN", first.as_str())];
    ok(c.cli(2, &["user", "create", "dora", "--role", "auditor"], &as_eve));
    let dora = ok(c.cli(
        0,
        &[
            "token",
            "issue",
            "dora",
            "--token-only",
            "--ttl-seconds",
            "3600",
        ],
        &as_eve,
    ))
    .trim()
    .to_string();
    for i in 0..3 {
        answers(&c, i, &dora, 200).await;
    }

    // Rotate: a new token, then the old one revoked; refused on every node.
    let second = ok(c.cli(0, &["token", "issue", "eve", "--token-only"], &[]))
        .trim()
        .to_string();
    let revoked = ok(c.cli(1, &["token", "revoke", "eve", &first_id], &[]));
    assert!(revoked.contains("Success"), "{revoked}");
    for i in 0..3 {
        answers(&c, i, &first, 401).await;
        answers(&c, i, &second, 200).await;
    }
    let listed = ok(c.cli(2, &["token", "list", "eve"], &[]));
    assert!(
        listed.contains(&first_id) && !listed.contains(&first),
        "{listed}"
    );

    // The audit log names the user; the auditor may read it.
    let audit = c
        .http
        .get(c.url(1, "/v1/audit?actor=eve"))
        .bearer_auth(&dora)
        .send()
        .await
        .unwrap();
    assert_eq!(audit.status(), 200);
    let audit: serde_json::Value = audit.json().await.unwrap();
    let actors: Vec<&str> = audit["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["actor"].as_str())
        .collect();
    assert!(actors.len() >= 2, "{audit}");
    assert!(actors.iter().all(|a| *a == "user:eve"), "{actors:?}");

    let backup = root.path().join("users.backup");
    ok(c.cli(1, &["backup", "-o", backup.to_str().unwrap()], &[]));
    for i in 0..3 {
        c.stop(i);
    }
    let data = c.nodes[0].data_dir.clone();
    let export = ok(c.cli(
        0,
        &[
            "audit",
            "--data-dir",
            data.to_str().unwrap(),
            "export",
            "--actor",
            "eve",
        ],
        &[],
    ));
    assert_eq!(export.lines().count(), actors.len(), "{export}");
    assert!(export.contains("user:eve"), "{export}");

    for t in [&first, &second, &dora] {
        let secret = t.rsplit('_').next().unwrap();
        assert!(secret.len() >= 64, "{t}");
        assert!(!export.contains(secret));
        let hits = files_containing(root.path(), secret.as_bytes());
        assert!(hits.is_empty(), "a token's secret is stored in {hits:?}");
    }
}
