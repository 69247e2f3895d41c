//! The CLI against a running dev server (the real binary, spawned): golden output for `get` and
//! `describe`, and exit codes for success, refusals and unreachable servers (the demo has its
//! own test).
//! Resource versions depend on idle ticks, so the VERSION column and version lines are masked.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use fedraft_testkit::free_port;

pub(super) const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
pub(super) const TOKEN: &str = "cli-test-admin-token";

pub(super) struct Server {
    pub(super) child: Child,
    pub(super) url: String,
    pub(super) dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn start_dev() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let child = Command::new(BIN)
        .args(["server", "--dev", "--data-dir"])
        .arg(dir.path().join("data"))
        .args(["--listen", &listen])
        .env("FEDRAFT_DEV_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let s = Server {
        child,
        url: format!("http://{listen}"),
        dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while fedraft(&s, &["get", "clusters"]).status.code() != Some(0) {
        assert!(Instant::now() < deadline, "dev server did not come up");
        std::thread::sleep(Duration::from_millis(200));
    }
    s
}

pub(super) fn fedraft(s: &Server, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("FEDRAFT_SERVER", &s.url)
        .env("FEDRAFT_TOKEN", TOKEN)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Masks what depends on timing (idle ticks move versions and log time): every token that is
/// a bare number, an age (`5s`, `3m12s`) or an RFC 3339 time, and the version line of
/// `describe`.
fn mask(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("Resource version:") {
                return "Resource version: N".to_string();
            }
            let mut out = String::new();
            let mut token = String::new();
            for ch in l.chars().chain(std::iter::once('\n')) {
                if ch == ' ' || ch == '\n' {
                    let numeric = !token.is_empty() && token.chars().all(|c| c.is_ascii_digit())
                        || is_age(&token)
                        || (token.len() >= 20
                            && token.as_bytes()[4] == b'-'
                            && token.ends_with('Z'));
                    out.push_str(if numeric { "N" } else { &token });
                    token.clear();
                    if ch == ' ' {
                        out.push(' ');
                    }
                } else {
                    token.push(ch);
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// `5s`, `3m12s`, `2d`: digits and unit letters, alternating, starting with a digit.
fn is_age(token: &str) -> bool {
    let mut prev_digit = false;
    let mut units = 0;
    for (i, c) in token.chars().enumerate() {
        match c {
            '0'..='9' => prev_digit = true,
            's' | 'm' | 'h' | 'd' | 'y' if prev_digit && i > 0 => {
                prev_digit = false;
                units += 1;
            }
            _ => return false,
        }
    }
    units > 0 && !prev_digit
}

fn golden(name: &str, actual: &str) {
    let path = crate::manifest_dir().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        actual, expected,
        "golden {name} differs (UPDATE_GOLDEN=1 rewrites it)"
    );
}

const MANIFEST: &str = r#"
kind: Cluster
name: dc1
labels: {region: eu}
apiEndpoint: https://10.0.0.1:6443
credentials: {bearerToken: never-shown}
---
kind: Cluster
name: dc2
labels: {region: us}
apiEndpoint: https://10.0.0.2:6443
taints: [{key: gpu, value: "true", effect: NoSchedule}]
---
kind: Tenant
name: blue
namespaces: [blue]
members: [carol]
quota: {cpuMillis: 10000, memoryBytes: 0, pods: 100}
---
kind: FederatedObject
metadata: {namespace: blue, name: web}
template:
  apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web}
  spec: {replicas: 3}
placement:
  replicas: {mode: Divided}
"#;

#[test]
fn verbs_against_a_dev_server() {
    let s = start_dev();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    std::fs::write(&file, MANIFEST).unwrap();
    let o = fedraft(&s, &["apply", "-f", file.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = stdout(&o);
    let applied: Vec<&str> = out
        .lines()
        .map(|l| l.split(" (resourceVersion").next().unwrap_or(""))
        .collect();
    assert_eq!(
        applied,
        [
            "cluster/dc1 applied",
            "cluster/dc2 applied",
            "tenant/blue applied",
            "object/blue/web applied"
        ]
    );

    let o = fedraft(&s, &["get", "clusters"]);
    assert_eq!(o.status.code(), Some(0));
    golden("get_clusters.txt", &mask(&stdout(&o)));
    let o = fedraft(&s, &["get", "clusters", "-o", "wide"]);
    golden("get_clusters_wide.txt", &mask(&stdout(&o)));
    assert!(!stdout(&fedraft(&s, &["get", "clusters", "-o", "json"])).contains("never-shown"));
    let o = fedraft(&s, &["get", "objects", "-n", "blue"]);
    golden("get_objects.txt", &mask(&stdout(&o)));
    let o = fedraft(&s, &["get", "tenants"]);
    golden("get_tenants.txt", &mask(&stdout(&o)));
    let o = fedraft(&s, &["describe", "object", "blue/web"]);
    assert_eq!(o.status.code(), Some(0));
    golden("describe_object.txt", &mask(&stdout(&o)));
    let json: serde_json::Value =
        serde_json::from_slice(&fedraft(&s, &["get", "objects", "-o", "json"]).stdout).unwrap();
    assert_eq!(json["items"][0]["name"], "web");

    assert_eq!(fedraft(&s, &["cordon", "dc1"]).status.code(), Some(0));
    let o = fedraft(&s, &["get", "clusters"]);
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.starts_with("dc1") && l.contains("true")),
        "{}",
        stdout(&o)
    );
    assert_eq!(fedraft(&s, &["uncordon", "dc1"]).status.code(), Some(0));
    assert_eq!(
        fedraft(&s, &["delete", "object", "blue/web"]).status.code(),
        Some(0)
    );

    // The admission policy: read, replaced from YAML, read back; a malformed one is refused.
    let policy = |s: &Server| -> serde_json::Value {
        let o = fedraft(s, &["admission", "get"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    };
    assert_eq!(policy(&s)["clusterScopedKinds"], serde_json::json!([]));
    let policy_file = dir.path().join("policy.yaml");
    std::fs::write(
        &policy_file,
        "clusterScopedKinds: [Namespace]
",
    )
    .unwrap();
    let o = fedraft(
        &s,
        &["admission", "set", "-f", policy_file.to_str().unwrap()],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        policy(&s)["clusterScopedKinds"],
        serde_json::json!(["Namespace"])
    );
    std::fs::write(
        &policy_file,
        "clusterScopedKinds: 5
",
    )
    .unwrap();
    let o = fedraft(
        &s,
        &["admission", "set", "-f", policy_file.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        policy(&s)["clusterScopedKinds"],
        serde_json::json!(["Namespace"])
    );

    // Refusals exit 1 with the server's message; an unreachable server exits 3.
    let o = fedraft(&s, &["describe", "object", "blue/web"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("NotFound"));
    let o = Command::new(BIN)
        .args(["get", "clusters"])
        .env("FEDRAFT_SERVER", &s.url)
        .env("FEDRAFT_TOKEN", "bad")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("401"));
    std::fs::write(&file, "kind: Pod\nname: x\n").unwrap();
    let o = fedraft(&s, &["apply", "-f", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown kind"));
    let dead = format!("http://127.0.0.1:{}", free_port());
    let o = Command::new(BIN)
        .args(["get", "clusters", "--server", &dead])
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
}

#[test]
fn schedule_offline_prints_the_decision() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(
        &file,
        "kind: Cluster\nname: dc1\n---\nkind: Cluster\nname: dc2\nhealth: NotReady\n---\nkind: FederatedObject\nname: web\n\
         template: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 2}}\n",
    )
    .unwrap();
    let o = Command::new(BIN)
        .args(["schedule", "-f", file.to_str().unwrap(), "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["placement"], serde_json::json!({"dc1": 2}));
    assert_eq!(v["dropped"][0]["cluster"], "dc2");
    let o = Command::new(BIN)
        .args(["schedule", "-f", "/nonexistent.yaml"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}
