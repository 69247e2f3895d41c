//! Karmada's `fieldOverrider`: the override-policy guide's example applied to its input renders
//! the guide's result; JSON and YAML documents, each operator, and fields the path does not fit
//! (a render error for the cluster, never a panic); older entries keep their refusal.

use serde_json::{json, Value};

use super::tests::doc;
use super::*;
use crate::command::LOG_ENTRY_VERSION;
use crate::policy::Override;
use crate::render::{render_overrides, RenderError};

const SAMPLES: &str = "/work/shared/peer-samples/karmada/website/override-policy";

fn sample(name: &str) -> Value {
    // The guide's samples are copied here so the test does not depend on the checkout.
    let text = match name {
        "23" => "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: myconfigmap\ndata:\n  config.yaml: |\n    app:\n      database:\n        port: 5432\n",
        "24" => "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata:\n  name: example\nspec:\n  #...\n  overrideRules:\n    - overriders:\n        fieldOverrider:\n          - fieldPath: /data/config.yaml\n            yaml:\n              - subPath: /app/database/port\n                operator: replace\n                value: \"3306\"\n",
        "25" => "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: myconfigmap\ndata:\n  config.yaml: |\n    app:\n      database:\n        port: 3306\n",
        other => panic!("no sample {other}"),
    };
    doc(text)
}

/// The sample policy with the selector the guide leaves out (`#...`).
fn with_selector(mut policy: Value) -> Value {
    policy["spec"]["resourceSelectors"] = json!([{"apiVersion": "v1", "kind": "ConfigMap"}]);
    policy
}

fn spec_at(policy: &Value, version: u16) -> Result<OverrideSpec, crate::error::FieldError> {
    match parse_spec(PolicyKind::Override, policy, version)? {
        PolicySpec::Override(o) => Ok(o),
        other => panic!("expected an override spec, got {other:?}"),
    }
}

fn rules(rules: &str) -> Value {
    doc(&format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {{name: example, namespace: default}}\nspec:\n  resourceSelectors: [{{apiVersion: v1, kind: ConfigMap}}]\n  overrideRules:\n    - overriders:\n        fieldOverrider:\n{rules}"
    ))
}

fn spec(policy: &Value) -> OverrideSpec {
    spec_at(policy, LOG_ENTRY_VERSION).unwrap_or_else(|e| panic!("{}: {}", e.field, e.message))
}

fn render(o: &OverrideSpec, template: &Value) -> Result<Value, RenderError> {
    let overrides: Vec<Override> = o.overrides(template);
    render_overrides(&template.to_string(), overrides.iter().enumerate())
}

fn configmap(key: &str, text: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {key: text}})
}

#[test]
fn the_guides_example_replaces_the_database_port() {
    // The samples as published, when this machine has them, are the ones copied above.
    for (name, file) in [
        ("23", "23-fieldoverrider-input.yaml"),
        (
            "24",
            "24-fieldoverrider-example-1-replace-the-database-port-w.yaml",
        ),
        (
            "25",
            "25-fieldoverrider-example-1-replace-the-database-port-w-result.yaml",
        ),
    ] {
        if let Ok(published) = std::fs::read_to_string(format!("{SAMPLES}/{file}")) {
            assert_eq!(doc(&published), sample(name), "{file}");
        }
    }
    let input = sample("23");
    let o = spec(&with_selector(sample("24")));
    assert!(o.reads_template());
    // Karmada's value is the JSON string "3306", and a string it stays (Karmada writes
    // `port: "3306"`); the guide's result shows the number, which `value: 3306` gives exactly.
    let got = render(&o, &input).unwrap();
    assert_eq!(
        doc(got["data"]["config.yaml"].as_str().unwrap()),
        json!({"app": {"database": {"port": "3306"}}})
    );
    assert_eq!(
        got["data"]["config.yaml"],
        json!("app:\n  database:\n    port: '3306'\n")
    );
    let mut number = sample("24");
    number["spec"]["overrideRules"][0]["overriders"]["fieldOverrider"][0]["yaml"][0]["value"] =
        json!(3306);
    let got = render(&spec(&with_selector(number)), &input).unwrap();
    assert_eq!(got["data"], sample("25")["data"]);
}

#[test]
fn json_documents_take_each_operator_and_stay_json() {
    let o = spec(&rules(
        "          - fieldPath: /data/app.json\n            json:\n              - {subPath: /db/port, operator: replace, value: 3306}\n              - {subPath: /db/hosts/-, operator: add, value: b}\n              - {subPath: /debug, operator: remove}\n",
    ));
    let input = configmap(
        "app.json",
        r#"{"db": {"port": 5432, "hosts": ["a"]}, "debug": true}"#,
    );
    let got = render(&o, &input).unwrap();
    assert_eq!(
        got["data"]["app.json"],
        json!(r#"{"db":{"hosts":["a","b"],"port":3306}}"#)
    );
}

#[test]
fn yaml_documents_are_written_back_as_yaml() {
    let o = spec(&rules(
        "          - fieldPath: /data/db.yaml\n            yaml:\n              - {subPath: /replicas, operator: add, value: [x, y]}\n              - {subPath: /name, operator: replace, value: updated}\n",
    ));
    let got = render(&o, &configmap("db.yaml", "name: old\n")).unwrap();
    assert_eq!(
        got["data"]["db.yaml"],
        json!("name: updated\nreplicas:\n- x\n- y\n")
    );
}

#[test]
fn a_path_that_does_not_fit_is_the_clusters_render_error() {
    let o = spec(&rules(
        "          - fieldPath: /data/db.yaml\n            yaml:\n              - {subPath: /a/b, operator: replace, value: 1}\n",
    ));
    let cases = [
        (json!({"kind": "ConfigMap", "data": {}}), "names no value"),
        (
            json!({"kind": "ConfigMap", "data": {"db.yaml": 3}}),
            "not a string",
        ),
        (configmap("db.yaml", "a: [unclosed"), "does not hold YAML"),
        (
            configmap("db.yaml", "a: {c: 1}\n"),
            "replace \\\"/a/b\\\" in /data/db.yaml",
        ),
        (
            configmap("db.yaml", "- a\n- b\n"),
            "replace \\\"/a/b\\\" in /data/db.yaml",
        ),
    ];
    for (template, why) in cases {
        let e = render(&o, &template).expect_err("the path does not fit");
        assert!(matches!(e, RenderError::Patch { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(why), "{text}");
    }
    // A template that is not an object at all resolves without panicking.
    assert_eq!(o.overrides(&Value::Null).len(), 1);
}

#[test]
fn malformed_field_overriders_are_refused_naming_the_field() {
    for (items, field) in [
        (
            "          - {fieldPath: data/x, yaml: [{subPath: /a, operator: remove}]}\n",
            "spec.overrideRules[0].overriders.fieldOverrider[0].fieldPath",
        ),
        (
            "          - {fieldPath: /data/x}\n",
            "spec.overrideRules[0].overriders.fieldOverrider[0]",
        ),
        (
            "          - {fieldPath: /data/x, json: [{subPath: /a, operator: remove}], yaml: [{subPath: /a, operator: remove}]}\n",
            "spec.overrideRules[0].overriders.fieldOverrider[0]",
        ),
        (
            "          - {fieldPath: /data/x, yaml: [{subPath: /a, operator: add}]}\n",
            "spec.overrideRules[0].overriders.fieldOverrider[0].yaml[0].value",
        ),
        (
            "          - {fieldPath: /data/x, json: [{subPath: a, operator: remove}]}\n",
            "spec.overrideRules[0].overriders.fieldOverrider[0].json[0].subPath",
        ),
    ] {
        let e = spec_at(&rules(items), LOG_ENTRY_VERSION).expect_err(items);
        assert_eq!(e.field, field, "{items}: {}", e.message);
    }
}

#[test]
fn older_entries_refuse_field_overriders_as_before() {
    let policy = with_selector(sample("24"));
    let e = spec_at(&policy, OVERRIDERS_WIDENED_SINCE - 1).expect_err("refused before");
    assert_eq!(e.field, "spec.overrideRules[0].overriders.fieldOverrider");
    assert_eq!(
        e.message,
        "not supported by fedraft: not implemented yet; plaintext patches can express it"
    );
    assert!(spec_at(&policy, OVERRIDERS_WIDENED_SINCE).is_ok());
}
