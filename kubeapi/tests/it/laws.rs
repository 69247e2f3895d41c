//! Property tests: laws that hold for every input, checked on generated documents.
//! - a merge patch computed from a to b turns a into b;
//! - a strategic merge patch without directives over maps only is a merge patch;
//! - a strategic merge patch, applied twice, changes nothing the second time;
//! - server-side apply of the same configuration twice is a no-op.

use fedraft_kubeapi::{apply, meta, patch, resource};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("c".to_string()),
        Just("metadata".to_string()),
        Just("spec".to_string()),
        "[a-z]{1,3}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(|b| json!(b)),
        "[a-z0-9]{0,4}".prop_map(|s| json!(s)),
    ]
}

/// Nested maps with scalar leaves and no nulls.
fn map_doc() -> impl Strategy<Value = Value> {
    let leaf = scalar();
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop::collection::btree_map(key(), inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>()))
    })
    .prop_map(|v| match v {
        Value::Object(_) => v,
        other => json!({ "v": other }),
    })
}

/// A merge-patch-like document over maps: scalars, nulls (deletions) and nested maps.
fn map_patch() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![scalar(), Just(Value::Null)];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop::collection::btree_map(key(), inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>()))
    })
    .prop_map(|v| match v {
        Value::Object(_) => v,
        other => json!({ "p": other }),
    })
}

fn container() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("web"), Just("sidecar"), Just("log")],
        "[a-z]{1,5}",
        prop::collection::vec(
            (prop_oneof![Just("A"), Just("B"), Just("C")], "[0-9]{1,2}"),
            0..3,
        ),
    )
        .prop_map(|(name, image, env)| {
            let env: Vec<Value> = env
                .into_iter()
                .map(|(n, v)| json!({"name": n, "value": v}))
                .collect();
            json!({"name": name, "image": image, "env": env})
        })
}

fn deployment(containers: Vec<Value>, labels: Value, finalizers: Vec<String>) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels, "finalizers": finalizers},
        "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}
    })
}

fn labels() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-c]", "[a-z0-9]{1,3}", 0..4)
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k, json!(v))).collect()))
}

fn finalizers() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![Just("x".to_string()), Just("y".to_string())],
        0..3,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn merge_diff_then_merge_patch_gives_the_target(a in map_doc(), b in map_doc()) {
        let p = patch::merge_diff(&a, &b);
        prop_assert_eq!(patch::merge_patch(&a, &p), b);
    }

    #[test]
    fn strategic_without_directives_on_maps_is_merge_patch(a in map_doc(), p in map_patch()) {
        let want = patch::merge_patch(&a, &p);
        for (group, kind) in [("", "ConfigMap"), ("apps", "Deployment"), ("", "Pod")] {
            let got = patch::strategic_merge_patch(group, kind, &a, &p).unwrap();
            prop_assert_eq!(&got, &want, "{}", kind);
        }
    }

    #[test]
    fn strategic_patch_twice_equals_once(
        cur in prop::collection::vec(container(), 0..3),
        upd in prop::collection::vec(container(), 0..3),
        l in labels(),
        f in finalizers(),
        pf in finalizers(),
    ) {
        let a = deployment(cur, l, f);
        let p = json!({
            "metadata": {"finalizers": pf},
            "spec": {"template": {"spec": {"containers": upd}}}
        });
        let once = patch::strategic_merge_patch("apps", "Deployment", &a, &p).unwrap();
        let twice = patch::strategic_merge_patch("apps", "Deployment", &once, &p).unwrap();
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn apply_twice_is_a_no_op(
        cs in prop::collection::vec(container(), 1..3),
        l in labels(),
        extra in map_doc(),
        manager in "[a-z]{1,6}",
    ) {
        let res = resource::find_builtin("apps", "v1", "deployments").unwrap();
        let mut cfg = deployment(cs, l, Vec::new());
        cfg["spec"]["extra"] = extra;
        let first = apply::apply(res, None, &cfg, &manager, false, "2026-01-01T00:00:00Z").unwrap();
        let second = apply::apply(res, Some(&first), &cfg, &manager, false, "2026-01-02T00:00:00Z").unwrap();
        prop_assert!(meta::same_content(&first, &second), "{first}\n{second}");
    }
}
