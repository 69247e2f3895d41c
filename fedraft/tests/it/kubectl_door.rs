//! The stock kubectl (`/usr/bin/kubectl`, or `$KUBECTL`) against three `fedraft server`
//! processes with three simulated members, through the Kubernetes-compatible door only: a
//! kubeconfig from `fedraft kubeconfig`, discovery (`api-resources`), a multi-document apply
//! (Deployment, Service, ConfigMap, PropagationPolicy) placed and converged on the members,
//! table and YAML output, label selectors, each patch type, scale, server-side apply with its
//! field-manager conflicts, `--dry-run=server`, `diff`, `get -w`, namespaces created and labelled,
//! and `delete -f`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::*;

const APP: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
  labels: {app: web}
data:
  greeting: hello
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: web
  namespace: shop
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  - apiVersion: v1
    kind: Service
  - apiVersion: v1
    kind: ConfigMap
  placement:
    clusterAffinity:
      clusterNames: [dc1, dc2]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster: {clusterNames: [dc1]}
          weight: 1
        - targetCluster: {clusterNames: [dc2]}
          weight: 1
"#;

pub(crate) fn kubectl_path() -> PathBuf {
    std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/kubectl"))
}

/// kubectl with the kubeconfig `fedraft kubeconfig` wrote and a discovery cache of its own.
pub(crate) struct Kubectl {
    pub(crate) dir: PathBuf,
}

impl Kubectl {
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(kubectl_path());
        cmd.arg(format!(
            "--kubeconfig={}",
            self.dir.join("kubeconfig").display()
        ))
        .arg(format!("--cache-dir={}", self.dir.join("cache").display()))
        .arg("--request-timeout=30s")
        .args(args)
        .env("HOME", &self.dir)
        .env_remove("KUBECONFIG");
        cmd
    }

    pub(crate) fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut cmd = self.command(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(input) = stdin {
            use std::io::Write;
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(input.as_bytes())
                .expect("writing kubectl's stdin");
        }
        child.wait_with_output().expect("kubectl finishes")
    }

    /// Runs and asserts success; stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        self.ok_in(args, None)
    }

    pub(crate) fn ok_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    pub(crate) fn jsonpath(&self, args: &[&str], path: &str) -> String {
        let mut a = args.to_vec();
        let out = format!("jsonpath={path}");
        a.extend(["-o", &out]);
        self.ok(&a)
    }
}

pub(crate) fn write_kubeconfig(fed: &Fed, dir: &Path) {
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let out = Command::new(BIN)
        .arg("kubeconfig")
        .arg("--server")
        .arg(fed.procs.url(0, ""))
        .arg("--token-file")
        .arg(&token)
        .arg("--ca")
        .arg(fed.root().join("tls").join("ca.crt"))
        .output()
        .expect("fedraft kubeconfig runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("kubeconfig"), &out.stdout).unwrap();
}

/// Whether the stock kubectl is on this machine; a test without it says it is skipped.
pub(crate) fn have_kubectl() -> bool {
    let found = kubectl_path().exists();
    if !found {
        eprintln!("no kubectl at {}: skipped", kubectl_path().display());
    }
    found
}

/// kubectl pointed at `fed`, its configuration in a home that lives as long as the directory
/// returned with it.
pub(crate) fn kubectl_for(fed: &Fed) -> (tempfile::TempDir, Kubectl) {
    let home = tempfile::tempdir().unwrap();
    write_kubeconfig(fed, home.path());
    let k = Kubectl {
        dir: home.path().to_path_buf(),
    };
    (home, k)
}

/// The federation most kubectl tests drive: three TLS nodes with every member registered
/// (failure threshold 10 s), and kubectl pointed at it; None (the test is skipped) without
/// kubectl.
pub(crate) async fn kubectl_federation() -> Option<(Fed, tempfile::TempDir, Kubectl)> {
    if !have_kubectl() {
        return None;
    }
    let fed = Fed::start_tls().await;
    fed.register_all(10, 1).await;
    let (home, k) = kubectl_for(&fed);
    Some((fed, home, k))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_the_federation() {
    let Some((fed, _home, k)) = kubectl_federation().await else {
        return;
    };

    // Discovery: every kind, fedraft's own and Karmada's policies.
    let kinds = k.ok(&["api-resources"]);
    for want in [
        "deployments",
        "configmaps",
        "propagationpolicies",
        "clusterpropagationpolicies",
        "overridepolicies",
        "clusteroverridepolicies",
        "fedraft.io/v1alpha1",
    ] {
        assert!(kinds.contains(want), "{want} missing:\n{kinds}");
    }
    let clusters = k.ok(&["get", "clusters"]);
    for c in CLUSTERS {
        assert!(clusters.contains(c), "{clusters}");
    }
    assert!(clusters.contains("HEALTH"), "{clusters}");

    // The app: placed by the policy, converged on dc1 and dc2 only.
    let applied = k.ok_in(&["apply", "-f", "-"], Some(APP));
    assert!(applied.contains("deployment.apps/web created"), "{applied}");
    assert!(
        applied.contains("propagationpolicy.policy.karmada.io/web created"),
        "{applied}"
    );
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.27")
        .await;
    fed.wait_deployment("dc2", "shop", "web", 2, "nginx:1.27")
        .await;
    assert!(fed.deployment("dc3", "shop", "web").await.is_none());
    // Status summed over the members, in kube-apiserver's columns.
    eventually(LIMIT, "kubectl get deploy shows 4/4", || async {
        let table = k.ok(&["get", "deploy", "-n", "shop"]);
        (table.contains("UP-TO-DATE") && table.contains("4/4")).then_some(())
    })
    .await;
    let yaml = k.ok(&["get", "deploy", "web", "-n", "shop", "-o", "yaml"]);
    assert!(
        yaml.contains("kind: Deployment") && yaml.contains("resourceVersion:"),
        "{yaml}"
    );
    assert!(
        yaml.contains("name: dc1") && yaml.contains("type: Placed"),
        "{yaml}"
    );
    let by_label = k.ok(&["get", "cm", "-n", "shop", "-l", "app=web", "-o", "name"]);
    assert_eq!(by_label.trim(), "configmap/settings");
    let none = k.run(&["get", "cm", "-n", "shop", "-l", "app=other"], None);
    assert!(String::from_utf8_lossy(&none.stderr).contains("No resources found"));
    let named = k.ok(&[
        "get",
        "cm",
        "-A",
        "--field-selector",
        "metadata.name=settings",
    ]);
    assert!(
        named.contains("shop") && named.contains("settings"),
        "{named}"
    );

    // Each patch type, then scale: the members follow.
    let cm = ["get", "cm", "settings", "-n", "shop"];
    k.ok(&[
        "patch",
        "cm",
        "settings",
        "-n",
        "shop",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"m":"1"}}"#,
    ]);
    k.ok(&[
        "patch",
        "cm",
        "settings",
        "-n",
        "shop",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"2"}]"#,
    ]);
    assert_eq!(k.jsonpath(&cm, "{.data.m}{.data.j}"), "12");
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        "shop",
        "--type",
        "strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}"#,
    ]);
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.28")
        .await;
    k.ok(&["scale", "deploy", "web", "-n", "shop", "--replicas=6"]);
    fed.wait_deployment("dc2", "shop", "web", 3, "nginx:1.28")
        .await;

    // --dry-run=server answers the result and changes nothing.
    let dry = k.ok(&[
        "patch",
        "cm",
        "settings",
        "-n",
        "shop",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"dry":"yes"}}"#,
        "--dry-run=server",
        "-o",
        "jsonpath={.data.dry}",
    ]);
    assert_eq!(dry, "yes");
    assert_eq!(k.jsonpath(&cm, "{.data.dry}"), "");

    // diff: nothing to show for what is applied, the change for an edit.
    let edited = APP.replace("greeting: hello", "greeting: hi");
    let same = k.run(
        &["diff", "-f", "-"],
        Some(
            &APP.replace("nginx:1.27", "nginx:1.28")
                .replace("replicas: 4", "replicas: 6"),
        ),
    );
    let diff = k.run(&["diff", "-f", "-"], Some(&edited));
    assert_eq!(
        diff.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(String::from_utf8_lossy(&diff.stdout).contains("+  greeting: hi"));
    assert!(String::from_utf8_lossy(&same.stdout)
        .lines()
        .all(|l| !l.contains("greeting")));
    assert_eq!(k.jsonpath(&cm, "{.data.greeting}"), "hello");

    // get -w streams the next change.
    let mut watch = k
        .command(&["get", "cm", "settings", "-n", "shop", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w runs");
    let stdout = watch.stdout.take().expect("stdout");
    let lines = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .take(2)
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    std::thread::sleep(Duration::from_secs(2));
    k.ok(&["label", "cm", "settings", "-n", "shop", "watched=yes"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !lines.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let seen = lines.join().expect("reader");
    assert_eq!(seen, ["configmap/settings", "configmap/settings"]);

    // Server-side apply of the edited app: the image kubectl patch set and the replicas
    // kubectl scale set belong to those managers, so kubectl is told of the conflict and
    // nothing changes; forced, it takes them over.
    let refused = k.run(&["apply", "--server-side", "-f", "-"], Some(&edited));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "a conflict must refuse the apply"
    );
    assert!(
        err.contains("conflict") && err.contains("kubectl-patch"),
        "{err}"
    );
    assert_eq!(k.jsonpath(&cm, "{.data.greeting}"), "hello");
    let ssa = k.ok_in(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&edited),
    );
    assert!(ssa.contains("serverside-applied"), "{ssa}");
    assert_eq!(k.jsonpath(&cm, "{.data.greeting}"), "hi");
    fed.wait_deployment("dc1", "shop", "web", 2, "nginx:1.27")
        .await;
    let managers = k.jsonpath(
        &[
            "get",
            "deploy",
            "web",
            "-n",
            "shop",
            "--show-managed-fields",
        ],
        "{.metadata.managedFields[*].manager}",
    );
    assert!(managers.contains("kubectl"), "{managers}");
    // Namespaces: created with the default admission policy, labelled (a patch), and one that
    // exists only because something used it takes a label too.
    k.ok(&["create", "namespace", "blue"]);
    k.ok(&["label", "namespace", "blue", "team=a"]);
    k.ok(&["label", "namespace", "shop", "team=b"]);
    let teams = k.jsonpath(
        &["get", "namespaces", "-l", "team"],
        "{.items[*].metadata.name}",
    );
    assert_eq!(teams, "blue shop");
    two_field_managers(&k, &fed).await;
    let deleted = k.ok_in(&["delete", "-f", "-"], Some(APP));
    assert!(
        deleted.contains("deployment.apps \"web\" deleted"),
        "{deleted}"
    );
    fed.wait_absent("dc1", "shop", "web").await;
    fed.wait_absent("dc2", "shop", "web").await;
    let gone = k.run(&["get", "deploy", "web", "-n", "shop"], None);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
}

/// Two teams apply one ConfigMap with their own field managers: a field the other team set to
/// another value is a conflict, a field of its own is not, a field a team stops applying is
/// removed unless the other team applies it too, and members hold the result.
async fn two_field_managers(k: &Kubectl, fed: &Fed) {
    let doc = |data: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: shop\n  labels: {{app: web}}\ndata:\n{data}"
        )
    };
    let apply = |manager: &str, data: &str| {
        let m = format!("--field-manager={manager}");
        k.run(&["apply", "--server-side", &m, "-f", "-"], Some(&doc(data)))
    };
    let get = ["get", "cm", "shared", "-n", "shop"];
    assert!(apply("team-a", "  size: \"1\"\n  owner: a\n")
        .status
        .success());
    let clash = apply("team-b", "  size: \"2\"\n");
    let err = String::from_utf8_lossy(&clash.stderr);
    assert!(
        !clash.status.success(),
        "team-b must not take team-a's field"
    );
    assert!(
        err.contains("team-a") && err.contains(".data.size"),
        "{err}"
    );
    // The same value is no conflict: both teams own it then.
    assert!(apply("team-b", "  size: \"1\"\n  color: blue\n")
        .status
        .success());
    assert_eq!(
        k.jsonpath(&get, "{.data.size}{.data.owner}{.data.color}"),
        "1ablue"
    );
    // team-a stops applying size and owner: owner goes, size stays (team-b applies it).
    assert!(apply("team-a", "  mode: fast\n").status.success());
    assert_eq!(
        k.jsonpath(
            &get,
            "{.data.size}|{.data.owner}|{.data.color}|{.data.mode}"
        ),
        "1||blue|fast"
    );
    // Applying the same again writes nothing: the resourceVersion stays. Members' status
    // reports move it too, so it is read once every placed member has reported this version.
    eventually(
        LIMIT,
        "the shared ConfigMap applied everywhere placed",
        || async {
            let applied = k.jsonpath(&get, "{.status.clusters[*].applied}");
            (!applied.is_empty() && applied.split(' ').all(|a| a == "true")).then_some(())
        },
    )
    .await;
    let rv = k.jsonpath(&get, "{.metadata.resourceVersion}");
    assert!(apply("team-a", "  mode: fast\n").status.success());
    assert_eq!(k.jsonpath(&get, "{.metadata.resourceVersion}"), rv);
    // No member sees fedraft's bookkeeping.
    eventually(LIMIT, "the shared ConfigMap on dc1", || async {
        let cm = member_configmap(fed, "dc1", "shop", "shared").await?;
        (cm.pointer("/data/mode").and_then(serde_json::Value::as_str) == Some("fast")).then_some(cm)
    })
    .await;
    let cm = member_configmap(fed, "dc1", "shop", "shared")
        .await
        .expect("on dc1");
    let annotations = cm
        .pointer("/metadata/annotations")
        .cloned()
        .unwrap_or_default();
    assert!(
        annotations.get("fedraft.io/managed-fields").is_none(),
        "{annotations}"
    );
    k.ok(&["delete", "cm", "shared", "-n", "shop"]);
}

/// The ConfigMap as the member cluster holds it.
async fn member_configmap(
    fed: &Fed,
    cluster: &str,
    ns: &str,
    name: &str,
) -> Option<serde_json::Value> {
    let url = format!(
        "{}/api/v1/namespaces/{ns}/configmaps/{name}",
        fed.sim(cluster).url()
    );
    let resp = fed.procs.http.get(url).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.json().await.ok()
}
