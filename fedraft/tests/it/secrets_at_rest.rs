//! Member credentials at rest, against three real `fedraft server` processes and a simulated
//! member cluster that demands a bearer token: a token registered through the API is used by
//! the executors (the member only answers with it) yet is found in no file of any data
//! directory (RocksDB, raft log, snapshots, audit archive) nor in a backup, while an ordinary
//! string of the same writes is (so the search can see plaintext). Then the key rotates: the
//! new key becomes current, `fedraft credentials rotate` re-seals as one logged command, the
//! old key leaves every config, and the member is still reached. `fedraft audit verify` passes
//! on a data directory afterwards, and the backup restores into a new cluster that, given the
//! keys that sealed it, reaches the member too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fedraft_kubesim::{SimConfig, SimHandle, Simulator};
use fedraft_testkit::procs::{Cluster, Layout};
use serde_json::{json, Value};

use crate::support::{deployment, eventually, BIN, LIMIT};

const ADMIN: &str = "seal-admin-token-0123456789abcdef";
const MEMBER_TOKEN: &str = "MEMBER-TOKEN-c6f1e0a94b7d2358";
/// An image name written in the clear by the same writes: the positive control of the search.
/// No inner repeats, so block compression (lz4) keeps it a literal, as it would the token.
const MARKER: &str = "qz7vxk2plw9rtb4m";

async fn start_member() -> SimHandle {
    Simulator::start(SimConfig {
        name: "dc1".into(),
        nodes: 2,
        status_delay: Duration::from_millis(100),
        bookmark_interval: Duration::from_millis(500),
        token: Some(MEMBER_TOKEN.into()),
        ..SimConfig::default()
    })
    .await
    .expect("starting the member cluster")
}

fn layout() -> Layout {
    let mut l = Layout::new(BIN, ADMIN);
    l.cluster_id = "fedraft-seal".into();
    l.raft = vec![
        "heartbeat_interval_ms = 200".into(),
        "election_timeout_min_ms = 1000".into(),
        "election_timeout_max_ms = 2000".into(),
        "tick_interval_ms = 500".into(),
        "snapshot_every_entries = 20".into(),
        "propose_timeout_ms = 10000".into(),
    ];
    l.executors = vec![
        "probe_interval_ms = 300".into(),
        "probe_timeout_ms = 1000".into(),
        "resync_period_ms = 2000".into(),
        "status_flush_interval_ms = 200".into(),
        "backoff_max_ms = 1000".into(),
    ];
    l.log_filter = "info,openraft=warn,kube_client=warn".into();
    l
}

fn write_key(dir: &Path, name: &str, byte: u8) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, [byte; 32]).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Replaces every node config's `[credentials]` section (it is always the last one).
fn set_keys(procs: &Cluster, current: &str, keys: &[(&str, &Path)]) {
    let list: Vec<String> = keys
        .iter()
        .map(|(id, p)| format!("{{ id = \"{id}\", file = \"{}\" }}", p.display()))
        .collect();
    let section = format!(
        "[credentials]\ncurrent = \"{current}\"\nkeys = [{}]\n",
        list.join(", ")
    );
    for n in &procs.nodes {
        let text = std::fs::read_to_string(&n.config).unwrap();
        let base = text.split("[credentials]").next().unwrap_or_default();
        std::fs::write(&n.config, format!("{base}{section}")).unwrap();
    }
}

async fn restart_all(procs: &mut Cluster) {
    for i in 0..procs.nodes.len() {
        procs.stop(i);
    }
    procs.start_all();
    procs.wait_agreed_leader(Duration::from_secs(60)).await;
}

/// One write through whichever node answers, retried through elections.
async fn call(procs: &Cluster, m: reqwest::Method, path: &str, body: Value) -> Value {
    eventually(LIMIT, &format!("{m} {path}"), || {
        let (m, body) = (m.clone(), body.clone());
        async move {
            for i in 0..procs.nodes.len() {
                let Ok(r) = procs.req(i, m.clone(), path).json(&body).send().await else {
                    continue;
                };
                let status = r.status();
                let v: Value = r.json().await.unwrap_or(Value::Null);
                if status.is_success() || status == reqwest::StatusCode::CONFLICT {
                    return Some(v);
                }
                assert!(status.is_server_error(), "{m} {path}: {status} {v}");
            }
            None
        }
    })
    .await
}

/// Waits until the member holds Deployment `name` with `image` (the member answers only to
/// its token, so this proves the executor opened the sealed credentials).
async fn wait_on_member(sim: &SimHandle, name: &str, image: &str) {
    let http = reqwest::Client::new();
    let url = format!(
        "{}/apis/apps/v1/namespaces/shop/deployments/{name}",
        sim.url()
    );
    eventually(LIMIT, &format!("{name} with {image} on the member"), || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let d: Value = http
                .get(&url)
                .bearer_auth(MEMBER_TOKEN)
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (fedraft_testkit::manifests::image_of(&d) == image).then_some(())
        }
    })
    .await;
}

fn object(name: &str, image: &str) -> Value {
    json!({
        "template": deployment(name, 1, image),
        "placement": { "clusters": ["dc1"] },
    })
}

/// Files at or under `root` whose bytes contain `needle`.
fn files_containing(root: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if let Ok(bytes) = std::fs::read(&p) {
            if bytes.windows(needle.len()).any(|w| w == needle) {
                hits.push(p);
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_sealed_everywhere_and_survive_rotation() {
    let sim = start_member().await;
    let dir = fedraft_testkit::temp_dir("seal");
    let keys = dir.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (k1, k2) = (write_key(&keys, "k1", 0x11), write_key(&keys, "k2", 0x22));
    let mut procs = Cluster::layout(dir.path(), "fed", &layout());
    set_keys(&procs, "k1", &[("k1", &k1)]);
    procs.start_all();
    procs.wait_agreed_leader(Duration::from_secs(60)).await;

    let post = reqwest::Method::POST;
    let put = reqwest::Method::PUT;
    let cluster = json!({"name": "dc1", "apiEndpoint": sim.url(),
                         "credentials": {"bearerToken": MEMBER_TOKEN}});
    call(&procs, post.clone(), "/v1/clusters", cluster).await;
    // A client cannot hand in a sealed blob of its own.
    let forged = json!({"name": "dc9", "apiEndpoint": sim.url(), "credentials": {"sealed":
        {"keyId": "k1", "wrappedKey": [1], "nonce": [2], "ciphertext": [3]}}});
    let r = procs
        .req(0, post.clone(), "/v1/clusters")
        .json(&forged)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::BAD_REQUEST);
    call(
        &procs,
        put.clone(),
        "/v1/namespaces/shop/objects/web",
        object("web", MARKER),
    )
    .await;
    wait_on_member(&sim, "web", MARKER).await;
    let shown = procs.get(0, "/v1/clusters/dc1").await.unwrap().to_string();
    assert!(
        !shown.contains(MEMBER_TOKEN) && !shown.contains("credentials"),
        "{shown}"
    );

    // A backup, through the CLI like an operator takes it.
    let backup = dir.path().join("fed.backup");
    let (code, _, err) = procs.cli(0, &["backup", "-o", backup.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "backup: {err}");

    // Rotation: k2 becomes current (k1 still listed), one logged command re-seals, k1 goes.
    set_keys(&procs, "k2", &[("k2", &k2), ("k1", &k1)]);
    restart_all(&mut procs).await;
    let (code, out, err) = procs.cli(0, &["credentials", "rotate"], &[]);
    assert_eq!(code, 0, "rotate: {err}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["rewrapped"], 1, "{answer}");
    assert_eq!(answer["currentKey"], "k2", "{answer}");
    let (code, out, _) = procs.cli(0, &["credentials", "rotate"], &[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("\"rewrapped\": 0"),
        "a second rotation has nothing to do: {out}"
    );
    let audit = procs
        .get(0, "/v1/audit?limit=1000")
        .await
        .unwrap()
        .to_string();
    assert!(
        audit.contains("RewrapCredentials"),
        "rotation is in the audit log"
    );
    set_keys(&procs, "k2", &[("k2", &k2)]);
    restart_all(&mut procs).await;
    call(
        &procs,
        put,
        "/v1/namespaces/shop/objects/api",
        object("api", "api:2"),
    )
    .await;
    wait_on_member(&sim, "api", "api:2").await;

    // Everything on disk, clean shutdown first so memtables and archives are flushed.
    for i in 0..procs.nodes.len() {
        procs.stop(i);
    }
    let root = procs.root.clone();
    let control = files_containing(&root, MARKER.as_bytes());
    assert!(!control.is_empty(), "the search must see plaintext writes");
    let leaks = files_containing(&root, MEMBER_TOKEN.as_bytes());
    assert!(
        leaks.is_empty(),
        "the member token is on disk in: {leaks:?}"
    );
    assert!(files_containing(&backup, MEMBER_TOKEN.as_bytes()).is_empty());
    assert!(!files_containing(&backup, MARKER.as_bytes()).is_empty());

    let data = procs.nodes[0].data_dir.to_str().unwrap().to_string();
    let (code, out, err) = procs.cli(0, &["audit", "verify", "--data-dir", &data], &[]);
    assert_eq!(code, 0, "audit verify: {out} {err}");
    drop(procs);

    // Restore the backup (sealed under k1, before the rotation) into a new one-node cluster:
    // it needs the keys that sealed it, and rotating there re-seals under k2.
    let mut l = layout();
    l.nodes = 1;
    l.cluster_id = "fedraft-seal-restored".into();
    let mut restored = Cluster::layout(dir.path(), "restored", &l);
    set_keys(&restored, "k2", &[("k2", &k2), ("k1", &k1)]);
    let config = restored.nodes[0].config.to_str().unwrap().to_string();
    let from = backup.to_str().unwrap();
    let (code, _, err) = restored.cli(0, &["restore", "--from", from, "--config", &config], &[]);
    assert_eq!(code, 0, "restore: {err}");
    restored.start_all();
    restored.wait_agreed_leader(Duration::from_secs(60)).await;
    call(
        &restored,
        reqwest::Method::PUT,
        "/v1/namespaces/shop/objects/db",
        object("db", "db:1"),
    )
    .await;
    wait_on_member(&sim, "db", "db:1").await;
    let (code, out, err) = restored.cli(0, &["credentials", "rotate"], &[]);
    assert_eq!(code, 0, "rotate after restore: {err}");
    assert!(out.contains("\"rewrapped\": 1"), "{out}");
}
