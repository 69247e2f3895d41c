//! Helm 4 (the release binary, found or installed by `scripts/helm`) against three `fedraft
//! server` processes with three simulated members, through the Kubernetes-compatible door
//! only: `helm install --wait` of an ordinary chart (`fedraft/tests/charts/shop`: a Deployment,
//! Service, ConfigMap, ServiceAccount and the PropagationPolicy that places them), `upgrade`
//! (server-side apply, Helm 4's default, and the client-side three-way merge), `list`/`history`,
//! `rollback` and `uninstall`, each followed on the members; Helm's release Secrets stay on
//! fedraft.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use crate::kubectl_door::{kubectl_federation, write_kubeconfig, Kubectl};
use crate::support::*;

fn repo() -> PathBuf {
    crate::manifest_dir()
        .parent()
        .expect("the crate lives in the workspace")
        .to_path_buf()
}

/// The Helm binary `scripts/helm` names (installing it on first use). Without one the test is
/// skipped, except under CI, where a missing Helm is a failure.
fn helm_binary() -> Option<PathBuf> {
    let out = Command::new(repo().join("scripts/helm"))
        .stderr(Stdio::inherit())
        .output();
    let path = match out {
        Ok(out) if out.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        }
        other => {
            assert!(
                std::env::var_os("CI").is_none(),
                "scripts/helm found no Helm: {other:?}"
            );
            eprintln!("no Helm (scripts/helm failed: {other:?}): skipped");
            return None;
        }
    };
    Some(path)
}

/// Helm with the kubeconfig `fedraft kubeconfig` wrote, and its cache, config and data in a
/// home of its own.
struct Helm {
    bin: PathBuf,
    home: tempfile::TempDir,
}

impl Helm {
    fn for_fed(fed: &Fed, bin: PathBuf) -> Helm {
        let home = tempfile::tempdir().unwrap();
        write_kubeconfig(fed, home.path());
        Helm { bin, home }
    }

    fn run(&self, args: &[&str]) -> Output {
        let dir = self.home.path();
        Command::new(&self.bin)
            .arg(format!("--kubeconfig={}", dir.join("kubeconfig").display()))
            .args(args)
            .env("HOME", dir)
            .env("HELM_CACHE_HOME", dir.join("cache"))
            .env("HELM_CONFIG_HOME", dir.join("config"))
            .env("HELM_DATA_HOME", dir.join("data"))
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .expect("helm runs")
    }

    /// `helm ARGS` on the chart's namespace, waiting (Helm's status watcher) until what it
    /// changed is ready or gone; asserts success, returns stdout.
    fn waiting(&self, args: &[&str]) -> String {
        let mut all = args.to_vec();
        all.extend(["-n", "shop", "--wait", "--timeout", "3m"]);
        self.ok(&all)
    }

    /// Runs and asserts success; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "helm {args:?} failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

/// Whether `cluster` holds the object at `path` (an API path below its root).
async fn member_has(fed: &Fed, cluster: &str, path: &str) -> bool {
    let url = format!("{}{path}", fed.sim(cluster).url());
    match fed.procs.http.get(url).send().await {
        Ok(resp) => resp.status().is_success(),
        Err(_) => false,
    }
}

async fn member_greeting(fed: &Fed, cluster: &str) -> Option<String> {
    let url = format!(
        "{}/api/v1/namespaces/shop/configmaps/shop-settings",
        fed.sim(cluster).url()
    );
    let resp = fed.procs.http.get(url).send().await.ok()?;
    let cm: serde_json::Value = resp.json().await.ok()?;
    cm.pointer("/data/greeting")?.as_str().map(str::to_string)
}

fn release_secrets(k: &Kubectl) -> Vec<String> {
    let names = k.ok(&[
        "get",
        "secrets",
        "-n",
        "shop",
        "-l",
        "owner=helm",
        "-o",
        "name",
    ]);
    names.lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_upgrades_rolls_back_and_uninstalls() {
    let Some(bin) = helm_binary() else { return };
    let Some((fed, _kube_home, k)) = kubectl_federation().await else {
        return;
    };
    let helm = Helm::for_fed(&fed, bin);
    let chart = repo().join("fedraft/tests/charts/shop");
    let chart = chart.to_str().expect("a UTF-8 path");

    // Install, waiting (Helm's status watcher) until the Deployment is ready: its status is
    // what fedraft sums over the members.
    let installed = helm.waiting(&["install", "shop", chart, "--create-namespace"]);
    assert!(installed.contains("STATUS: deployed"), "{installed}");
    fed.wait_deployment("dc1", "shop", "shop-web", 2, "nginx:1.27")
        .await;
    fed.wait_deployment("dc2", "shop", "shop-web", 2, "nginx:1.27")
        .await;
    assert!(fed.deployment("dc3", "shop", "shop-web").await.is_none());
    for c in ["dc1", "dc2"] {
        for path in [
            "/api/v1/namespaces/shop/services/shop-web",
            "/api/v1/namespaces/shop/serviceaccounts/shop",
        ] {
            eventually(LIMIT, "the chart's objects reach the members", || async {
                member_has(&fed, c, path).await.then_some(())
            })
            .await;
        }
    }
    assert_eq!(member_greeting(&fed, "dc1").await.as_deref(), Some("hello"));

    // Helm's release record lives on fedraft and nowhere else, though the policy selects
    // ConfigMaps and a policy could select every Secret.
    assert_eq!(release_secrets(&k), ["secret/sh.helm.release.v1.shop.v1"]);
    for c in CLUSTERS {
        assert!(
            !member_has(
                &fed,
                c,
                "/api/v1/namespaces/shop/secrets/sh.helm.release.v1.shop.v1"
            )
            .await,
            "{c} holds Helm's release Secret"
        );
    }

    // Upgrade: new replicas, image and settings reach the members.
    let upgraded = helm.waiting(&[
        "upgrade",
        "shop",
        chart,
        "--set",
        "replicas=6,image=nginx:1.28,greeting=bye",
    ]);
    assert!(upgraded.contains("REVISION: 2"), "{upgraded}");
    fed.wait_deployment("dc1", "shop", "shop-web", 3, "nginx:1.28")
        .await;
    fed.wait_deployment("dc2", "shop", "shop-web", 3, "nginx:1.28")
        .await;
    eventually(LIMIT, "the new settings reach dc2", || async {
        (member_greeting(&fed, "dc2").await.as_deref() == Some("bye")).then_some(())
    })
    .await;
    let listed = helm.ok(&["list", "-n", "shop"]);
    assert!(
        listed.contains("shop") && listed.contains("deployed"),
        "{listed}"
    );
    let history = helm.ok(&["history", "shop", "-n", "shop"]);
    assert!(
        history.contains("superseded") && history.contains("Upgrade complete"),
        "{history}"
    );
    let manifest = helm.ok(&["get", "manifest", "shop", "-n", "shop"]);
    assert!(manifest.contains("image: nginx:1.28"), "{manifest}");

    // Rollback to the first revision: the members follow back.
    helm.waiting(&["rollback", "shop", "1"]);
    fed.wait_deployment("dc1", "shop", "shop-web", 2, "nginx:1.27")
        .await;
    eventually(LIMIT, "the first settings are back on dc1", || async {
        (member_greeting(&fed, "dc1").await.as_deref() == Some("hello")).then_some(())
    })
    .await;
    assert_eq!(release_secrets(&k).len(), 3, "{:?}", release_secrets(&k));

    // Helm's client-side path (a three-way strategic merge patch per object), and a chart
    // value that drops the ServiceAccount's use: the members follow.
    helm.waiting(&[
        "upgrade",
        "shop",
        chart,
        "--server-side=false",
        "--set",
        "replicas=2,greeting=again",
    ]);
    fed.wait_deployment("dc1", "shop", "shop-web", 1, "nginx:1.27")
        .await;
    eventually(LIMIT, "client-side upgrade reaches dc2", || async {
        (member_greeting(&fed, "dc2").await.as_deref() == Some("again")).then_some(())
    })
    .await;

    // Uninstall: every object and every release record goes, on fedraft and on the members.
    let gone = helm.waiting(&["uninstall", "shop"]);
    assert!(gone.contains("uninstalled"), "{gone}");
    for c in ["dc1", "dc2"] {
        fed.wait_absent(c, "shop", "shop-web").await;
        eventually(LIMIT, "the ConfigMap leaves the member", || async {
            (!member_has(&fed, c, "/api/v1/namespaces/shop/configmaps/shop-settings").await)
                .then_some(())
        })
        .await;
    }
    assert!(release_secrets(&k).is_empty());
    let left = k.run(
        &["get", "deploy,cm,svc,pp", "-n", "shop", "-o", "name"],
        None,
    );
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "{}",
        String::from_utf8_lossy(&left.stdout)
    );
}
