//! The stock kubectl against three `fedraft server` processes, for what goes beyond namespaced
//! built-in kinds: a CustomResourceDefinition applied, discovered (`api-resources`, both
//! discovery formats), printed with its `additionalPrinterColumns`, its objects applied (client-
//! and server-side) and placed, the CRD itself propagated by a ClusterPropagationPolicy and kept
//! while its objects live; a ClusterRole as a cluster-scoped template; an unknown kind refused;
//! and Helm's release bookkeeping as Helm's client makes it (release Secret create, list by
//! label, update, a strategic-merge upgrade of the chart's objects, delete), with the release
//! Secret never propagated by a policy that selects every Secret. (No `helm` binary could be
//! built here: the Go toolchain available is too old for Helm 3 and no module proxy is reachable,
//! so kubectl makes the same calls.) The simulated members serve no CRDs or ClusterRoles, so
//! placement is checked on fedraft, not convergence on the members.

use crate::kubectl_door::{kubectl_path, write_kubeconfig, Kubectl};
use crate::support::*;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [gadgets]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Colour, type: string, jsonPath: .spec.colour}
---
apiVersion: policy.karmada.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: crds
spec:
  resourceSelectors:
  - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: widgets.example.com}
  - {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole}
  placement:
    clusterAffinity:
      clusterNames: [dc1, dc2]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widget-reader
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [get, list]}
"#;

const WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  namespace: shop
spec: {size: 3, colour: blue}
---
apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: shop-all
  namespace: shop
spec:
  resourceSelectors:
  - {apiVersion: example.com/v1, kind: Widget}
  - {apiVersion: v1, kind: Secret}
  - {apiVersion: v1, kind: ConfigMap}
  placement:
    clusterAffinity:
      clusterNames: [dc3]
"#;

/// Helm's release record for revision `rev` of release `shop`, as Helm 3 stores it.
fn release(rev: u32, status: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
type: helm.sh/release.v1
metadata:
  name: sh.helm.release.v1.shop.v{rev}
  namespace: shop
  labels: {{owner: helm, name: shop, status: {status}, version: "{rev}"}}
data: {{release: SDRzSUFBQUFBQUFBLytxdUJBUUFBUC8vNmtQOXAwQUFBQT09}}
"#
    )
}

const CHART_CM: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: shop-config
  namespace: shop
  labels: {app.kubernetes.io/managed-by: Helm}
  annotations: {meta.helm.sh/release-name: shop, meta.helm.sh/release-namespace: shop}
data: {colour: blue}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_crds_cluster_scoped_templates_and_helm_calls() {
    if !kubectl_path().exists() {
        eprintln!("no kubectl at {}: skipped", kubectl_path().display());
        return;
    }
    let fed = Fed::start_tls().await;
    fed.register_all(10, 1).await;
    // An administrator allows the cluster-scoped kinds once (admission's clusterScopedKinds).
    fed.call(
        reqwest::Method::PUT,
        "/v1/admin/admission",
        Some(serde_json::json!({"clusterScopedKinds": [
            "apiextensions.k8s.io/CustomResourceDefinition",
            "rbac.authorization.k8s.io/ClusterRole"]})),
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    write_kubeconfig(&fed, home.path());
    let k = Kubectl {
        dir: home.path().to_path_buf(),
    };

    // An object of a kind no CRD defines yet: the door answers 404 for its resource, and
    // kubectl says no kind matches (`--validate=false`: kubectl's own schema check would
    // otherwise stop first, asking for the OpenAPI v2 document fedraft does not serve).
    let raw = k.run(
        &[
            "get",
            "--raw",
            "/apis/example.com/v1/namespaces/shop/widgets",
        ],
        None,
    );
    assert!(!raw.status.success());
    assert!(String::from_utf8_lossy(&raw.stderr).contains("NotFound"));
    let early = k.run(&["apply", "--validate=false", "-f", "-"], Some(WIDGET));
    assert!(!early.status.success());
    let err = String::from_utf8_lossy(&early.stderr);
    assert!(err.contains(r#"no matches for kind "Widget""#), "{err}");

    let applied = k.ok_in(&["apply", "-f", "-"], Some(CRD));
    assert!(
        applied
            .contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"),
        "{applied}"
    );
    assert!(
        applied.contains("clusterrole.rbac.authorization.k8s.io/widget-reader created"),
        "{applied}"
    );
    let kinds = k.ok(&["api-resources"]);
    let widgets = kinds
        .lines()
        .find(|l| l.starts_with("widgets "))
        .unwrap_or_else(|| panic!("widgets missing:\n{kinds}"));
    for want in ["wd", "example.com/v1", "true", "Widget"] {
        assert!(widgets.contains(want), "{want} missing: {widgets}");
    }
    for want in [
        "clusterroles",
        "customresourcedefinitions",
        "storageclasses",
        "priorityclasses",
    ] {
        assert!(kinds.contains(want), "{want} missing:\n{kinds}");
    }
    let cluster_kinds = k.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(cluster_kinds.contains("clusterroles.rbac.authorization.k8s.io"));
    assert!(!cluster_kinds.contains("widgets.example.com"));
    let legacy = k.ok(&["get", "--raw", "/apis/example.com/v1"]);
    assert!(legacy.contains(r#""name":"widgets""#), "{legacy}");

    // The CRD and the ClusterRole are placed by the ClusterPropagationPolicy.
    for (kind, name) in [
        ("crd", "widgets.example.com"),
        ("clusterrole", "widget-reader"),
    ] {
        eventually(LIMIT, "cluster-scoped template placed", || async {
            let yaml = k.ok(&["get", kind, name, "-o", "yaml"]);
            (yaml.contains("name: dc1")
                && yaml.contains("name: dc2")
                && yaml.contains("reason: Placed"))
            .then_some(())
        })
        .await;
        let yaml = k.ok(&["get", kind, name, "-o", "yaml"]);
        assert!(!yaml.contains("namespace:"), "{yaml}");
    }
    assert!(!k.ok(&["get", "ns"]).contains("fedraft-cluster-scoped"));

    // Objects of the kind: client-side apply (a merge patch the second time), printed with the
    // CRD's columns, placed by a namespaced policy, server-side applied.
    k.ok_in(&["apply", "-f", "-"], Some(WIDGET));
    let bigger = WIDGET.replace("size: 3", "size: 5");
    let again = k.ok_in(&["apply", "-f", "-"], Some(&bigger));
    assert!(
        again.contains("widget.example.com/w1 configured"),
        "{again}"
    );
    let table = k.ok(&["get", "wd", "-n", "shop"]);
    assert!(
        table.contains("SIZE") && table.contains("COLOUR"),
        "{table}"
    );
    let row = table.lines().find(|l| l.starts_with("w1")).unwrap_or("");
    assert!(row.contains('5') && row.contains("blue"), "{table}");
    eventually(LIMIT, "widget placed on dc3", || async {
        let yaml = k.ok(&["get", "widget", "w1", "-n", "shop", "-o", "yaml"]);
        (yaml.contains("name: dc3") && yaml.contains("reason: Placed")).then_some(())
    })
    .await;
    let ssa = k.ok_in(
        &["apply", "--server-side", "-f", "-"],
        Some(&bigger.replace("colour: blue", "colour: red")),
    );
    assert!(ssa.contains("serverside-applied"), "{ssa}");
    assert_eq!(
        k.jsonpath(&["get", "widget", "w1", "-n", "shop"], "{.spec.colour}"),
        "red"
    );
    let strategic = k.run(
        &[
            "patch",
            "wd",
            "w1",
            "-n",
            "shop",
            "--type",
            "strategic",
            "-p",
            r#"{"spec":{"size":1}}"#,
        ],
        None,
    );
    assert!(!strategic.status.success());
    assert!(String::from_utf8_lossy(&strategic.stderr).contains("not supported"));

    // Helm's calls: create the release record and the chart's objects, list releases by label,
    // upgrade (new record, strategic merge patch of the objects, old record superseded by an
    // update), uninstall (delete everything).
    k.ok_in(&["create", "-f", "-"], Some(&release(1, "deployed")));
    k.ok_in(&["create", "-f", "-"], Some(CHART_CM));
    let listed = k.ok(&[
        "get",
        "secrets",
        "-n",
        "shop",
        "-l",
        "owner=helm,name=shop",
        "-o",
        "name",
    ]);
    assert_eq!(listed.trim(), "secret/sh.helm.release.v1.shop.v1");
    k.ok_in(&["create", "-f", "-"], Some(&release(2, "pending-upgrade")));
    k.ok(&[
        "patch",
        "cm",
        "shop-config",
        "-n",
        "shop",
        "--type",
        "strategic",
        "-p",
        r#"{"data":{"colour":"green"}}"#,
    ]);
    k.ok_in(&["replace", "-f", "-"], Some(&release(1, "superseded")));
    k.ok_in(&["replace", "-f", "-"], Some(&release(2, "deployed")));
    let deployed = k.ok(&[
        "get",
        "secrets",
        "-n",
        "shop",
        "-l",
        "owner=helm,status=deployed",
        "-o",
        "name",
    ]);
    assert_eq!(deployed.trim(), "secret/sh.helm.release.v1.shop.v2");
    // The policy selects every Secret and ConfigMap of the namespace: the chart's ConfigMap is
    // placed, Helm's records are not.
    eventually(LIMIT, "chart ConfigMap placed", || async {
        let yaml = k.ok(&["get", "cm", "shop-config", "-n", "shop", "-o", "yaml"]);
        (yaml.contains("name: dc3") && yaml.contains("colour: green")).then_some(())
    })
    .await;
    let record = k.ok(&[
        "get",
        "secret",
        "sh.helm.release.v1.shop.v2",
        "-n",
        "shop",
        "-o",
        "yaml",
    ]);
    assert!(record.contains("reason: HelmRelease"), "{record}");
    assert!(!record.contains("name: dc3"), "{record}");
    for name in ["sh.helm.release.v1.shop.v1", "sh.helm.release.v1.shop.v2"] {
        k.ok(&["delete", "secret", name, "-n", "shop"]);
    }
    k.ok(&["delete", "cm", "shop-config", "-n", "shop"]);
    let none = k.run(&["get", "secrets", "-n", "shop", "-l", "owner=helm"], None);
    assert!(String::from_utf8_lossy(&none.stderr).contains("No resources found"));

    // The CRD is kept while its objects live, then deleted; the kind stops being served.
    let refused = k.run(&["delete", "crd", "widgets.example.com"], None);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("delete them first"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    k.ok(&["delete", "widget", "w1", "-n", "shop"]);
    k.ok(&["delete", "crd", "widgets.example.com"]);
    let gone = k.run(
        &[
            "get",
            "--raw",
            "/apis/example.com/v1/namespaces/shop/widgets",
        ],
        None,
    );
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
}
