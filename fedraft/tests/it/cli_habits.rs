//! The CLI's kubectl habits, each through the real binary against a dev server it starts:
//! ages and RFC 3339 times, `-A`, `-l`, `-o name`, `-o jsonpath=`, `get -w`, `delete -f`,
//! `join --kubeconfig`, client contexts, shell completions, and `audit replay` without `--at`.

use fedraft_testkit::net::free_port;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

// The dev server these tests drive is the one the golden-output tests start.
use super::cli::{start_dev, Server, BIN, TOKEN};

/// The binary with the server and token in the environment and no client config file.
fn cmd(s: &Server, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("FEDRAFT_SERVER", &s.url)
        .env("FEDRAFT_TOKEN", TOKEN)
        .env("HOME", "/nonexistent")
        .env_remove("FEDRAFT_CLIENT_CONFIG")
        .env_remove("FEDRAFT_CONTEXT");
    c
}

fn fedraft(s: &Server, args: &[&str]) -> Output {
    cmd(s, args).output().unwrap()
}

fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

const MANIFEST: &str = r#"
kind: Cluster
name: dc1
labels: {region: eu, tier: gold}
apiEndpoint: https://10.0.0.1:6443
---
kind: Cluster
name: dc2
labels: {region: us}
apiEndpoint: https://10.0.0.2:6443
---
kind: FederatedObject
metadata: {namespace: blue, name: web}
template:
  apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, labels: {app: web}}
  spec: {replicas: 2}
---
kind: FederatedObject
metadata: {namespace: red, name: api}
template:
  apiVersion: apps/v1
  kind: Deployment
  metadata: {name: api, labels: {app: api}}
  spec: {replicas: 1}
"#;

/// An age as kubectl prints one: digits and unit letters, alternating.
fn is_age(t: &str) -> bool {
    let units: Vec<&str> = t.split(|c: char| c.is_ascii_digit()).collect();
    !t.is_empty()
        && t.starts_with(|c: char| c.is_ascii_digit())
        && units[1..]
            .iter()
            .all(|u| matches!(*u, "s" | "m" | "h" | "d" | "y"))
}

#[test]
fn times_selectors_names_jsonpath_and_delete_by_file() {
    let s = start_dev();
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "m.yaml", MANIFEST);
    ok(&fedraft(&s, &["apply", "-f", &file]));

    // Ages in the table, RFC 3339 with -o wide, never raw milliseconds.
    let table = ok(&fedraft(&s, &["get", "clusters"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header.last(), Some(&"SINCE"), "{table}");
    for row in table.lines().skip(1) {
        let age = row.split_whitespace().last().unwrap();
        assert!(is_age(age), "{age:?} in {table}");
    }
    let wide = ok(&fedraft(&s, &["get", "clusters", "-o", "wide"]));
    let t = wide
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap();
    assert!(
        t.len() >= 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
        "{wide}"
    );
    let described = ok(&fedraft(&s, &["describe", "object", "blue/web"]));
    assert!(
        described.contains("dc1: health Unknown for "),
        "{described}"
    );
    assert!(!described.contains(" ms"), "raw milliseconds:\n{described}");
    let described = ok(&fedraft(
        &s,
        &["describe", "object", "web", "-n", "blue", "-o", "wide"],
    ));
    assert!(
        described.contains("dc1: health Unknown since 20"),
        "{described}"
    );

    let cluster = ok(&fedraft(&s, &["describe", "cluster", "dc1"]));
    let health = cluster
        .lines()
        .find(|l| l.starts_with("Health:"))
        .unwrap_or("");
    assert!(health.contains("Unknown for "), "{cluster}");
    assert!(cluster.contains("region=eu,tier=gold"), "{cluster}");
    assert!(!cluster.contains("Ms"), "raw milliseconds:\n{cluster}");

    // -n, -A, -l and -o name.
    let names = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "name"]);
        ok(&fedraft(&s, &all)).lines().map(str::to_string).collect()
    };
    assert_eq!(
        names(&["objects", "-A"]),
        ["object/blue/web", "object/red/api"]
    );
    assert_eq!(names(&["objects", "-n", "red"]), ["object/red/api"]);
    assert_eq!(
        names(&["objects", "-A", "-l", "app=web"]),
        ["object/blue/web"]
    );
    assert_eq!(
        names(&["clusters", "-l", "region in (eu,us),!tier"]),
        ["cluster/dc2"]
    );
    assert_eq!(
        names(&["clusters", "--selector", "tier=gold"]),
        ["cluster/dc1"]
    );
    let o = fedraft(&s, &["get", "objects", "-A", "-n", "red"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "-A and -n together: {}",
        stderr(&o)
    );
    let o = fedraft(&s, &["get", "clusters", "-l", "bad key"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // -o jsonpath, with a range and a filter.
    let out = ok(&fedraft(
        &s,
        &["get", "clusters", "-o", "jsonpath={.items[*].name}"],
    ));
    assert_eq!(out, "dc1 dc2");
    let out = ok(&fedraft(
        &s,
        &[
            "get",
            "clusters",
            "-o",
            r#"jsonpath={range .items[?(@.labels.region=="eu")]}{.name}={.apiEndpoint}{"\n"}{end}"#,
        ],
    ));
    assert_eq!(out, "dc1=https://10.0.0.1:6443\n");
    let o = fedraft(&s, &["get", "clusters", "-o", "jsonpath={.items[}"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // delete -f: every document, in order; a second run reports them gone and exits 1.
    let out = ok(&fedraft(&s, &["delete", "-f", &file]));
    let deleted: Vec<&str> = out
        .lines()
        .map(|l| l.split(" (resourceVersion").next().unwrap_or(""))
        .collect();
    assert_eq!(
        deleted,
        [
            "cluster/dc1 deleted",
            "cluster/dc2 deleted",
            "object/blue/web deleted",
            "object/red/api deleted"
        ]
    );
    assert_eq!(
        ok(&fedraft(&s, &["get", "objects", "-A"])),
        "No resources found.\n"
    );
    let o = fedraft(&s, &["delete", "-f", &file]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cluster/dc1 not found"),
        "{}",
        stderr(&o)
    );
    let o = fedraft(&s, &["delete", "cluster"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // audit replay without --at is the latest state: the server's data directory, after it stops.
    let data = s.dir.path().join("data");
    let last_rv = {
        let v: serde_json::Value =
            serde_json::from_str(&ok(&fedraft(&s, &["get", "clusters", "-o", "json"]))).unwrap();
        v["resourceVersion"].as_u64().unwrap()
    };
    let mut s = s;
    let _ = s.child.kill();
    let _ = s.child.wait();
    let o = Command::new(BIN)
        .args([
            "audit",
            "--data-dir",
            data.to_str().unwrap(),
            "replay",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&ok(&o)).unwrap();
    assert!(v["index"].as_u64().unwrap() >= last_rv, "{v}");
    assert_eq!(v["objects"], serde_json::json!([]));
    assert!(v["logTime"].as_str().unwrap().ends_with('Z'), "{v}");
}

#[test]
fn watch_join_contexts_and_completions() {
    let s = start_dev();
    let dir = tempfile::tempdir().unwrap();

    // get -w: the list first, then a row per change.
    let mut watch = cmd(&s, &["get", "clusters", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let out = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no watch line: {what}"))
    };
    assert!(next("header").starts_with("NAME"));

    // join: a kubeconfig whose CA and token are files next to it; both travel inline.
    std::fs::write(dir.path().join("ca.pem"), "not-a-real-ca").unwrap();
    std::fs::write(dir.path().join("token"), "member-token\n").unwrap();
    let kubeconfig = write(
        dir.path(),
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: edge\n\
         clusters:\n- name: edge\n  cluster: {server: 'https://10.2.0.1:6443', certificate-authority: ca.pem}\n\
         users:\n- name: ops\n  user: {tokenFile: token}\n\
         - name: sso\n  user: {exec: {command: kubelogin, apiVersion: client.authentication.k8s.io/v1}}\n\
         contexts:\n- name: edge\n  context: {cluster: edge, user: ops}\n\
         - name: sso\n  context: {cluster: edge, user: sso}\n",
    );
    let o = fedraft(
        &s,
        &[
            "join",
            "edge1",
            "--kubeconfig",
            &kubeconfig,
            "--labels",
            "region=ap,zone=ap-1",
        ],
    );
    let out = ok(&o);
    assert!(
        out.starts_with("cluster/edge1 joined at https://10.2.0.1:6443"),
        "{out}"
    );
    assert!(
        stderr(&o).contains("certificate-authority ca.pem inlined"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("tokenFile token inlined"),
        "{}",
        stderr(&o)
    );
    let row = next("the joined cluster");
    assert!(row.starts_with("edge1 "), "{row}");
    let _ = watch.kill();
    let _ = watch.wait();
    let v: serde_json::Value =
        serde_json::from_str(&ok(&fedraft(&s, &["get", "clusters", "-o", "json"]))).unwrap();
    let edge = &v["items"][0];
    assert_eq!(edge["apiEndpoint"], "https://10.2.0.1:6443");
    assert_eq!(
        edge["labels"],
        serde_json::json!({"region": "ap", "zone": "ap-1"})
    );
    assert!(!v.to_string().contains("member-token"));
    let o = fedraft(
        &s,
        &[
            "join",
            "edge2",
            "--kubeconfig",
            &kubeconfig,
            "--context",
            "sso",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("exec plugin (kubelogin)"),
        "{}",
        stderr(&o)
    );

    // Contexts: two federations in one file (the second unreachable); flags and environment win.
    let config = dir.path().join("client.toml");
    let config = config.to_str().unwrap();
    let bare = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("HOME", "/nonexistent")
            .env("FEDRAFT_CLIENT_CONFIG", config)
            .env_remove("FEDRAFT_SERVER")
            .env_remove("FEDRAFT_TOKEN")
            .env_remove("FEDRAFT_CONTEXT")
            .output()
            .unwrap()
    };
    let dead = format!("http://127.0.0.1:{}", free_port());
    ok(&bare(&[
        "config",
        "set-context",
        "dev",
        "--server",
        &s.url,
        "--token",
        TOKEN,
    ]));
    ok(&bare(&[
        "config",
        "set-context",
        "gone",
        "--server",
        &dead,
        "-n",
        "blue",
    ]));
    // The environment is not stored: only what was typed.
    let o = cmd(&s, &["config", "set-context", "envonly"])
        .env("FEDRAFT_CLIENT_CONFIG", config)
        .output()
        .unwrap();
    ok(&o);
    let contexts = ok(&bare(&["config", "get-contexts"]));
    let rows: Vec<Vec<&str>> = contexts
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["*", "dev", s.url.as_str()],
            vec!["envonly", "-"],
            vec!["gone", dead.as_str(), "blue"]
        ],
        "{contexts}"
    );
    assert!(!contexts.contains(TOKEN));
    assert_eq!(ok(&bare(&["config", "current-context"])), "dev\n");
    assert!(ok(&bare(&["get", "clusters", "-o", "name"])).contains("cluster/edge1"));
    assert_eq!(
        bare(&["--fed-context", "gone", "get", "clusters"])
            .status
            .code(),
        Some(3)
    );
    ok(&bare(&["config", "use-context", "gone"]));
    assert_eq!(bare(&["get", "clusters"]).status.code(), Some(3));
    let o = bare(&[
        "--server", &s.url, "--token", TOKEN, "get", "clusters", "-o", "name",
    ]);
    assert!(ok(&o).contains("cluster/edge1"));
    assert_eq!(
        bare(&["config", "use-context", "nope"]).status.code(),
        Some(1)
    );

    // Completions and help.
    for (shell, marker) in [
        ("bash", "complete"),
        ("zsh", "#compdef"),
        ("fish", "complete -c fedraft"),
    ] {
        let out = ok(&Command::new(BIN)
            .args(["completion", shell])
            .output()
            .unwrap());
        assert!(out.contains(marker) && out.contains("join"), "{shell}");
    }
    let help = ok(&Command::new(BIN).args(["join", "--help"]).output().unwrap());
    assert!(
        help.contains("<NAME>") && help.contains("member cluster's name"),
        "{help}"
    );
}
