//! `fedraft audit` on a real data directory: a dev server (the real binary) takes a few writes
//! and is killed; then `verify`, `replay`, `explain` and `export` run offline on its directory,
//! and `verify` exits non-zero on a copy with one record removed.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use fedraft_testkit::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
const TOKEN: &str = "audit-cli-admin-token";

const MANIFEST: &str = r#"
kind: Cluster
name: dc1
apiEndpoint: https://10.0.0.1:6443
credentials: {bearerToken: never-shown}
---
kind: Cluster
name: dc2
apiEndpoint: https://10.0.0.2:6443
---
kind: FederatedObject
metadata: {namespace: default, name: web}
template:
  apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web}
  spec: {replicas: 3}
"#;

fn run(args: &[&str], url: &str) -> Output {
    Command::new(BIN)
        .args(args)
        .env("FEDRAFT_SERVER", url)
        .env("FEDRAFT_TOKEN", TOKEN)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn audit(data: &Path, args: &[&str]) -> Output {
    let mut all = vec!["audit", "--data-dir", data.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all, "http://127.0.0.1:1")
}

/// Waits until the node's online audit lists a `command` record. The archive is written off the
/// apply path, so an acknowledged command may still be queued for it; a SIGKILL then leaves the
/// record to the log, which a restarted node replays into the archive, but which this test's
/// offline reading of the killed directory does not see.
fn wait_archived(url: &str, command: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    fedraft_raft::install_crypto_provider();
    rt.block_on(async {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let page: serde_json::Value = http
                .get(format!("{url}/v1/audit?limit=1000"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let items = page["items"].as_array().cloned().unwrap_or_default();
            if items.iter().any(|r| r["command"] == command) {
                return;
            }
            assert!(Instant::now() < deadline, "no {command} archived: {page}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

#[test]
fn audit_verbs_on_a_killed_dev_servers_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let listen = format!("127.0.0.1:{}", free_port());
    let url = format!("http://{listen}");
    let mut child = Command::new(BIN)
        .args(["server", "--dev", "--data-dir"])
        .arg(&data)
        .args(["--listen", &listen])
        .env("FEDRAFT_DEV_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while run(&["get", "clusters"], &url).status.code() != Some(0) {
        assert!(Instant::now() < deadline, "dev server did not come up");
        std::thread::sleep(Duration::from_millis(200));
    }
    let file = dir.path().join("m.yaml");
    std::fs::write(&file, MANIFEST).unwrap();
    let o = run(&["apply", "-f", file.to_str().unwrap()], &url);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["cordon", "dc1"], &url);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    wait_archived(&url, "Cordon");
    // SIGKILL: the archive must hold up without a clean shutdown.
    child.kill().unwrap();
    child.wait().unwrap();

    let o = audit(&data, &["verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("matches the replay") && out.ends_with("OK\n"),
        "{out}"
    );

    let o = audit(&data, &["export", "--format", "jsonl"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!out.contains("never-shown"), "credentials leaked:\n{out}");
    let records: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |cmd: &str, target: &str| {
        records
            .iter()
            .find(|r| r["command"] == cmd && r["target"] == target)
            .unwrap_or_else(|| panic!("no {cmd} {target} in {out}"))
    };
    let dc2 = find("RegisterCluster", "dc2");
    assert_eq!(dc2["actor"], "dev-admin");
    let cordon = find("Cordon", "dc1")["index"].as_u64().unwrap();
    let dc2_index = dc2["index"].as_u64().unwrap();

    // Replay just after dc2's registration: both clusters, nothing cordoned yet.
    let at = dc2_index.to_string();
    let o = audit(&data, &["replay", "--at", &at, "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["index"], dc2_index);
    let names: Vec<&str> = v["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dc1", "dc2"]);
    assert_eq!(v["clusters"][0]["cordoned"], false);
    let o = audit(&data, &["replay", "--at", &cordon.to_string()]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("dc1    Unknown"),
        "{}",
        text(&o)
    );

    let o = audit(&data, &["diff", "--from", &at, "--to", &cordon.to_string()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("cluster dc1 Modified\n  cordoned: false -> true"),
        "{out}"
    );

    let o = audit(&data, &["explain", "default/web", "-o", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // One record removed from a copy: verify must fail.
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&data).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    {
        let db = rocksdb::DB::open_cf(
            &rocksdb::Options::default(),
            &copy,
            ["log", "meta", "snapshot", "audit"],
        )
        .unwrap();
        db.delete_cf(db.cf_handle("audit").unwrap(), dc2_index.to_be_bytes())
            .unwrap();
    }
    let o = audit(&copy, &["verify"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("FAILED"),
        "{}",
        text(&o)
    );
}
