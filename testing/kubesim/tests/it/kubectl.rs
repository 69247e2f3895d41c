//! The installed kubectl against the simulator: the check that it is faithful enough for a
//! real client that knows nothing about it. Also runs the `fedraft-kubesim` binary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::{eventually, PATIENCE};
use fedraft_kubesim::{SimConfig, Simulator};
use serde_json::Value;

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web}
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources:
          requests: {cpu: 250m, memory: 128Mi}
"#;

fn kubectl_path() -> PathBuf {
    std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/kubectl"))
}

/// A kubectl bound to one server, with its own empty kubeconfig and discovery cache.
struct Kubectl {
    server: String,
    dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(server: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config"), "apiVersion: v1\nkind: Config\n").unwrap();
        Kubectl {
            server: server.to_string(),
            dir,
        }
    }

    fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = Command::new(kubectl_path());
        cmd.arg(format!("--server={}", self.server))
            .arg(format!(
                "--kubeconfig={}",
                self.dir.path().join("config").display()
            ))
            .arg(format!(
                "--cache-dir={}",
                self.dir.path().join("cache").display()
            ))
            .arg("--request-timeout=20s")
            .args(args)
            .env("HOME", self.dir.path())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// Runs and requires success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args, None);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

fn have_kubectl() -> bool {
    let found = Path::new(&kubectl_path()).exists();
    if !found {
        eprintln!(
            "kubectl not found at {}; set KUBECTL",
            kubectl_path().display()
        );
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_apply_converge_delete() {
    assert!(have_kubectl(), "these tests need kubectl");
    let sim = Simulator::start(SimConfig {
        name: "dc1".into(),
        nodes: 3,
        status_delay: Duration::from_millis(300),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let k = Kubectl::new(&sim.url());

    let k2 = Kubectl::new(&sim.url());
    let out = tokio::task::spawn_blocking(move || k2.ok(&["get", "ns"]))
        .await
        .unwrap();
    for ns in ["default", "kube-system"] {
        assert!(out.contains(ns), "{out}");
    }

    let nodes = k.ok(&["get", "nodes", "-o", "json"]);
    let nodes: Value = serde_json::from_str(&nodes).unwrap();
    let items = nodes["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["status"]["allocatable"]["cpu"], "8");
    let plain = k.ok(&["get", "nodes"]);
    assert!(plain.contains("dc1-node-0"), "{plain}");
    // Aggregated discovery: a kubectl with an empty cache learns every resource from /api and
    // /apis alone, without asking any group version for its legacy resource list.
    let fresh = Kubectl::new(&sim.url());
    let run = fresh.run(&["api-resources", "-v=6"], None);
    let out = String::from_utf8_lossy(&run.stdout).to_string();
    let log = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(run.status.success(), "{log}");
    assert!(log.contains("/apis?"), "{log}");
    assert!(
        !log.contains("/apis/apps/v1?"),
        "fell back to legacy discovery: {log}"
    );
    assert!(
        out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["deployments", "deploy", "apps/v1", "true", "Deployment"]),
        "{out}"
    );
    assert!(out.contains("horizontalpodautoscalers"), "{out}");
    // Server-side printing: kubectl shows the columns of the Table the server sends.
    let header = plain.lines().next().unwrap_or("");
    let header: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        "{plain}"
    );

    let file = k.file("deploy.yaml", DEPLOYMENT);
    let file = file.to_str().unwrap();
    let out = k.ok(&["apply", "--server-side", "-f", file]);
    assert!(out.contains("serverside-applied"), "{out}");

    let before = sim.admin().stats();
    k.ok(&["apply", "--server-side", "-f", file]);
    let after = sim.admin().stats();
    assert_eq!(
        after.total_changes, before.total_changes,
        "a repeated apply must not write"
    );
    assert!(after.requests["apply"] > before.requests["apply"]);

    let kk = &k;
    let d: Value = eventually(
        PATIENCE,
        "the deployment status to converge",
        || async move {
            let out = kk.ok(&[
                "get",
                "deploy",
                "web",
                "-n",
                "default",
                "-o",
                "json",
                "--show-managed-fields",
            ]);
            let d: Value = serde_json::from_str(&out).ok()?;
            let st = &d["status"];
            (st["readyReplicas"] == 3 && st["observedGeneration"] == d["metadata"]["generation"])
                .then_some(d)
        },
    )
    .await;
    assert_eq!(d["metadata"]["managedFields"][0]["manager"], "kubectl");

    // A conflicting apply from another manager is refused; kubectl reports the conflict.
    let other = k.file(
        "other.yaml",
        &DEPLOYMENT.replace("replicas: 3", "replicas: 1"),
    );
    let out = k.run(
        &[
            "apply",
            "--server-side",
            "--field-manager=ops",
            "-f",
            other.to_str().unwrap(),
        ],
        None,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("conflict"), "{err}");

    let out = k.ok(&["get", "deploy", "-n", "default", "-o", "wide"]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{out}"
    );
    let row: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    assert_eq!(row[..4], ["web", "3/3", "3", "3"], "{out}");
    assert_eq!(row[5..], ["web", "nginx:1.27", "app=web"], "{out}");

    let out = k.ok(&["delete", "deploy", "web", "-n", "default"]);
    assert!(out.contains("deleted"), "{out}");
    let out = k.run(&["get", "deploy", "web", "-n", "default"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    sim.shutdown().await;
}

/// Client-side `kubectl apply` sends strategic merge patches: dropping a container and an env
/// var from the file must drop them from the object, not replace the list with directives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_client_side_apply_removes_list_items() {
    assert!(have_kubectl(), "these tests need kubectl");
    let sim = Simulator::start(SimConfig {
        name: "dc1".into(),
        nodes: 1,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let two = DEPLOYMENT
        .replace(
            "        image: nginx:1.27\n",
            "        image: nginx:1.27\n        env: [{name: A, value: \"1\"}, {name: B, value: \"2\"}]\n",
        )
        .replace(
            "requests: {cpu: 250m, memory: 128Mi}\n",
            "requests: {cpu: 250m, memory: 128Mi}\n      - name: sidecar\n        image: envoy:1\n",
        );
    assert!(two.contains("sidecar"), "the fixture changed shape");
    let one = DEPLOYMENT.replace(
        "        image: nginx:1.27\n",
        "        image: nginx:1.28\n        env: [{name: A, value: \"1\"}]\n",
    );
    let url = sim.url();
    let containers = tokio::task::spawn_blocking(move || {
        let k = Kubectl::new(&url);
        let first = k.file("two.yaml", &two);
        k.ok(&["apply", "-f", first.to_str().unwrap()]);
        let second = k.file("one.yaml", &one);
        k.ok(&["apply", "-f", second.to_str().unwrap()]);
        let out = k.ok(&["get", "deploy", "web", "-n", "default", "-o", "json"]);
        let d: Value = serde_json::from_str(&out).unwrap();
        d["spec"]["template"]["spec"]["containers"].clone()
    })
    .await
    .unwrap();
    let cs = containers.as_array().unwrap();
    assert_eq!(cs.len(), 1, "{containers}");
    assert_eq!(cs[0]["name"], "web");
    assert_eq!(cs[0]["image"], "nginx:1.28");
    assert_eq!(
        cs[0]["env"],
        serde_json::json!([{"name": "A", "value": "1"}])
    );
    assert_eq!(cs[0]["resources"]["requests"]["cpu"], "250m");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_kubectl() {
    assert!(have_kubectl(), "these tests need kubectl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fedraft-kubesim"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--name",
            "dc2",
            "--nodes",
            "5",
            "--node-cpu",
            "4",
            "--node-memory",
            "16Gi",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let k = Kubectl::new(&url);
    let out = tokio::task::spawn_blocking(move || k.ok(&["get", "nodes", "-o", "name"]))
        .await
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(out.contains("node/dc2-node-4"), "{out}");
}
