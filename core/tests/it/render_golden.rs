//! Golden tests of rendering: template + overrides + replicas + namespace + ownership labels.
//!
//! Each case renders one manifest and compares it with `tests/golden/<case>.json`. To rewrite
//! the expected files after an intended change: `FEDRAFT_BLESS=1 cargo test -p fedraft-core
//! --test it render_golden::`, then review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use fedraft_core::policy::*;
use fedraft_core::render::*;
use serde_json::{json, Value};

fn deployment() -> String {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 9,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "initContainers": [{"name": "migrate", "image": "docker.io/acme/migrate:1.0",
                        "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}],
                    "containers": [
                        {"name": "app", "image": "docker.io/acme/web:2.3",
                         "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}},
                        {"name": "sidecar", "image": "envoyproxy/envoy@sha256:0123",
                         "resources": {"requests": {"cpu": "0.1", "memory": "1e8"}}}
                    ]
                }
            }
        }
    })
    .to_string()
}

fn op(op: PatchOpKind, path: &str, value: Option<Value>) -> JsonPatchOp {
    JsonPatchOp {
        op,
        path: path.into(),
        from: None,
        value: value.map(|v| v.to_string()),
    }
}

fn mv(kind: PatchOpKind, from: &str, path: &str) -> JsonPatchOp {
    JsonPatchOp {
        op: kind,
        path: path.into(),
        from: Some(from.into()),
        value: None,
    }
}

fn overrides() -> Vec<Override> {
    vec![
        // Only dc1: an env var, a changed strategy, labels and an annotation.
        Override {
            cluster_name: Some("dc1".into()),
            patches: vec![
                op(
                    PatchOpKind::Add,
                    "/spec/template/spec/containers/0/env",
                    Some(json!([{"name": "REGION", "value": "eu-1"}])),
                ),
                op(
                    PatchOpKind::Add,
                    "/spec/strategy",
                    Some(json!({"type": "Recreate"})),
                ),
                op(
                    PatchOpKind::Test,
                    "/metadata/labels/app",
                    Some(json!("web")),
                ),
            ],
            labels: [("tier".to_string(), "frontend".to_string())].into(),
            annotations: [("example.com/owner".to_string(), "team-a".to_string())].into(),
            ..Default::default()
        },
        // Every EU cluster pulls from the EU mirror.
        Override {
            cluster_selector: Some(LabelSelector {
                match_labels: [("region".to_string(), "eu".to_string())].into(),
                match_expressions: vec![],
            }),
            image: Some(ImageOverride {
                container: None,
                registry: Some("mirror.eu.example.com".into()),
                repository: None,
                tag: None,
            }),
            ..Default::default()
        },
        // dc2: pin the app image, drop the sidecar, copy and move fields.
        Override {
            cluster_name: Some("dc2".into()),
            patches: vec![
                op(
                    PatchOpKind::Remove,
                    "/spec/template/spec/containers/1",
                    None,
                ),
                mv(
                    PatchOpKind::Copy,
                    "/metadata/labels",
                    "/spec/template/metadata/annotations",
                ),
                mv(PatchOpKind::Move, "/spec/selector", "/spec/selectorMoved"),
                op(
                    PatchOpKind::Replace,
                    "/spec/selectorMoved",
                    Some(json!({"matchLabels": {"app": "web", "pinned": "true"}})),
                ),
            ],
            image: Some(ImageOverride {
                container: Some("app".into()),
                registry: None,
                repository: Some("acme/web-lts".into()),
                tag: Some("2.2.9".into()),
            }),
            ..Default::default()
        },
    ]
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn golden(case: &str, got: &Value) {
    let path = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("tests/golden")
        .join(format!("{case}.json"));
    let pretty = serde_json::to_string_pretty(got).unwrap() + "\n";
    if std::env::var_os("FEDRAFT_BLESS").is_some() {
        std::fs::write(&path, &pretty).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with FEDRAFT_BLESS=1)", path.display()));
    let want: Value = serde_json::from_str(&want).unwrap();
    assert_eq!(
        got,
        &want,
        "rendered {case} differs from {}:\n{pretty}",
        path.display()
    );
}

#[test]
fn deployment_on_dc1_gets_its_patches_the_mirror_and_its_replicas() {
    let got = render(
        &deployment(),
        "shop",
        "web",
        "dc1",
        &labels(&[("region", "eu")]),
        &overrides(),
        Some(4),
    )
    .unwrap();
    assert_eq!(got["spec"]["replicas"], json!(4));
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("mirror.eu.example.com/acme/web:2.3")
    );
    golden("deployment_dc1", &got);
}

#[test]
fn deployment_on_dc2_gets_only_its_own_override() {
    let got = render(
        &deployment(),
        "shop",
        "web",
        "dc2",
        &labels(&[("region", "us")]),
        &overrides(),
        Some(5),
    )
    .unwrap();
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["image"],
        json!("docker.io/acme/web-lts:2.2.9")
    );
    assert!(got["spec"].get("selector").is_none());
    golden("deployment_dc2", &got);
}

#[test]
fn deployment_on_an_unmatched_cluster_is_the_template_plus_ownership() {
    let got = render(
        &deployment(),
        "shop",
        "web",
        "dc9",
        &labels(&[]),
        &overrides(),
        Some(0),
    )
    .unwrap();
    golden("deployment_dc9", &got);
}

#[test]
fn configmap_duplicated_keeps_no_replicas_and_gets_labels() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "ignored"}, "data": {"a": "1"}}).to_string();
    let ov = vec![Override {
        patches: vec![op(PatchOpKind::Add, "/data/b", Some(json!("2")))],
        labels: [(
            "fedraft.io/managed-by".to_string(),
            "someone-else".to_string(),
        )]
        .into(),
        ..Default::default()
    }];
    let got = render(&cm, "shop", "settings", "dc1", &labels(&[]), &ov, Some(3)).unwrap();
    assert!(got.get("spec").is_none(), "a ConfigMap has no replicas");
    assert_eq!(got["metadata"]["namespace"], json!("shop"));
    assert_eq!(
        got["metadata"]["labels"][MANAGED_BY_LABEL],
        json!("fedraft"),
        "ownership wins over overrides"
    );
    golden("configmap_all", &got);
}

#[test]
fn long_object_names_get_a_valid_hashed_label() {
    let name = "a".repeat(200);
    let v = object_label_value("team-namespace", &name);
    assert!(v.len() <= 63, "{v}");
    assert!(v.starts_with("team-namespace.aaaa"));
    assert_ne!(v, object_label_value("team-namespace", &"a".repeat(199)));
    validate_label_value(&v, "x").unwrap();
    assert_eq!(object_label_value("shop", "web"), "shop.web");
}

#[test]
fn errors_name_the_override_the_patch_and_the_op() {
    let ov = vec![
        Override::default(),
        Override {
            patches: vec![
                op(PatchOpKind::Add, "/spec/x", Some(json!(1))),
                op(PatchOpKind::Test, "/spec/replicas", Some(json!(1))),
            ],
            ..Default::default()
        },
    ];
    let err = render(&deployment(), "shop", "web", "dc1", &labels(&[]), &ov, None).unwrap_err();
    assert!(
        matches!(
            err,
            RenderError::Patch {
                override_index: 1,
                patch_index: 1,
                op: "test",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("overrides[1].patches[1] (test /spec/replicas)"),
        "{err}"
    );

    let ov = vec![Override {
        patches: vec![op(PatchOpKind::Remove, "/spec/nothing", None)],
        ..Default::default()
    }];
    let err = render(&deployment(), "shop", "web", "dc1", &labels(&[]), &ov, None).unwrap_err();
    assert!(matches!(
        err,
        RenderError::Patch {
            override_index: 0,
            patch_index: 0,
            op: "remove",
            ..
        }
    ));

    let bad_json = vec![Override {
        patches: vec![JsonPatchOp {
            op: PatchOpKind::Add,
            path: "/a".into(),
            from: None,
            value: Some("{nope".into()),
        }],
        ..Default::default()
    }];
    let err = render(
        &deployment(),
        "shop",
        "web",
        "dc1",
        &labels(&[]),
        &bad_json,
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("value is not JSON"), "{err}");

    let whole = vec![Override {
        patches: vec![op(PatchOpKind::Replace, "", Some(json!([1])))],
        ..Default::default()
    }];
    assert!(
        render(
            &deployment(),
            "shop",
            "web",
            "dc1",
            &labels(&[]),
            &whole,
            None
        )
        .is_err(),
        "manifest must stay an object"
    );

    let cm =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}).to_string();
    let img = vec![Override {
        image: Some(ImageOverride {
            tag: Some("x".into()),
            ..Default::default()
        }),
        ..Default::default()
    }];
    let err = render(&cm, "shop", "c", "dc1", &labels(&[]), &img, None).unwrap_err();
    assert!(matches!(
        err,
        RenderError::Image {
            override_index: 0,
            ..
        }
    ));
    let img = vec![Override {
        image: Some(ImageOverride {
            container: Some("nope".into()),
            tag: Some("x".into()),
            ..Default::default()
        }),
        ..Default::default()
    }];
    let err = render(
        &deployment(),
        "shop",
        "web",
        "dc1",
        &labels(&[]),
        &img,
        None,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("no container named \"nope\""),
        "{err}"
    );

    assert!(matches!(
        render("[1]", "n", "o", "c", &labels(&[]), &[], None),
        Err(RenderError::Template(_))
    ));
    assert!(matches!(
        render("{", "n", "o", "c", &labels(&[]), &[], None),
        Err(RenderError::Template(_))
    ));
}

#[test]
fn template_replicas_and_requests() {
    let t: Value = serde_json::from_str(&deployment()).unwrap();
    assert_eq!(template_replicas(&t), 9);
    assert_eq!(template_replicas(&json!({"kind": "ConfigMap"})), 1);
    // Containers: 250m + 100m = 350m, but the init container asks 1 CPU: the pod needs 1000m.
    // Memory: 256Mi + 1e8 bytes, more than the init container's 64Mi.
    assert_eq!(
        template_requests(&t),
        Resources {
            cpu_millis: 1000,
            memory_bytes: (256 << 20) + 100_000_000,
            pods: 1
        }
    );
    let cron = json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": 2, "memory": "1Gi"}}}]}}}}}});
    assert_eq!(
        template_requests(&cron),
        Resources {
            cpu_millis: 2000,
            memory_bytes: 1 << 30,
            pods: 1
        }
    );
    let bad = json!({"kind": "Pod", "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}});
    assert_eq!(template_requests(&bad).cpu_millis, 0);
    let err = try_template_requests(&bad).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("containers[0].resources.requests.cpu"),
        "{err}"
    );
}

#[test]
fn override_specs_validate_with_field_paths() {
    let ok = &overrides()[2];
    ok.validate("overrides[2]").unwrap();
    let both = Override {
        cluster_name: Some("dc1".into()),
        cluster_selector: Some(LabelSelector::default()),
        ..Default::default()
    };
    assert_eq!(both.validate("o").unwrap_err().field, "o.clusterSelector");
    let no_value = Override {
        patches: vec![op(PatchOpKind::Replace, "/a", None)],
        ..Default::default()
    };
    assert_eq!(
        no_value.validate("o").unwrap_err().field,
        "o.patches[0].value"
    );
    let bad_value = Override {
        patches: vec![JsonPatchOp {
            op: PatchOpKind::Add,
            path: "/a".into(),
            from: None,
            value: Some("nope".into()),
        }],
        ..Default::default()
    };
    assert_eq!(
        bad_value.validate("o").unwrap_err().field,
        "o.patches[0].value"
    );
    let no_from = Override {
        patches: vec![JsonPatchOp {
            op: PatchOpKind::Move,
            path: "/a".into(),
            from: None,
            value: None,
        }],
        ..Default::default()
    };
    assert_eq!(
        no_from.validate("o").unwrap_err().field,
        "o.patches[0].from"
    );
    let bad_path = Override {
        patches: vec![op(PatchOpKind::Remove, "a", None)],
        ..Default::default()
    };
    assert_eq!(
        bad_path.validate("o").unwrap_err().field,
        "o.patches[0].path"
    );
    let bad_tag = Override {
        image: Some(ImageOverride {
            tag: Some("a:b".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(bad_tag.validate("o").unwrap_err().field, "o.image.tag");
    let bad_label = Override {
        labels: [("ok".to_string(), "-bad".to_string())].into(),
        ..Default::default()
    };
    assert_eq!(bad_label.validate("o").unwrap_err().field, "o.labels.ok");
    // Overrides travel in log entries: bincode must round-trip them.
    let all = overrides();
    let bytes = bincode::serde::encode_to_vec(&all, bincode::config::standard()).unwrap();
    let (back, _): (Vec<Override>, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard()).unwrap();
    assert_eq!(back, all);
}
