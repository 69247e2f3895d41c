//! Karmada's command, args and metadata-removal overriders, checked against the examples of
//! Karmada's override-policy guide: the policy applied to the guide's input renders the guide's
//! result.

use serde_json::{json, Value};

use super::*;
use crate::command::LOG_ENTRY_VERSION;
use crate::policy::Override;
use crate::render::render_overrides;

fn doc(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("test YAML: {e}"))
}

fn policy(rules: &str, version: u16) -> Result<OverrideSpec, crate::error::FieldError> {
    let v = doc(&format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {{name: example, namespace: default}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment}}]\n  overrideRules:\n{rules}"
    ));
    match parse_spec(PolicyKind::Override, &v, version)? {
        PolicySpec::Override(o) => Ok(o),
        other => panic!("expected an override spec, got {other:?}"),
    }
}

fn spec(rules: &str) -> OverrideSpec {
    policy(rules, LOG_ENTRY_VERSION).unwrap_or_else(|e| panic!("{}: {}", e.field, e.message))
}

/// The template with every override of `o` applied (as a cluster every rule targets gets it).
fn render(o: &OverrideSpec, template: &Value) -> Value {
    let overrides: Vec<Override> = o.overrides(template);
    render_overrides(&template.to_string(), overrides.iter().enumerate())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The guide's input Deployment for the command overrider examples.
fn myapp() -> Value {
    doc(r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: myapp}
spec:
  template:
    spec:
      containers:
        - image: myapp
          name: myapp
          command: [./myapp, --parameter1=foo, --parameter2=bar]
"#)
}

fn command(v: &Value) -> &Value {
    &v["spec"]["template"]["spec"]["containers"][0]["command"]
}

#[test]
fn command_overrider_adds_and_removes_flags_as_the_guide_shows() {
    let add = spec(
        "    - overriders:\n        commandOverrider:\n          - {containerName: myapp, operator: add, value: [--cluster=member1]}\n",
    );
    assert!(add.reads_template());
    assert_eq!(
        command(&render(&add, &myapp())),
        &json!([
            "./myapp",
            "--parameter1=foo",
            "--parameter2=bar",
            "--cluster=member1"
        ])
    );
    let remove = spec(
        "    - overriders:\n        commandOverrider:\n          - {containerName: myapp, operator: remove, value: [--parameter1=foo]}\n",
    );
    assert_eq!(
        command(&render(&remove, &myapp())),
        &json!(["./myapp", "--parameter2=bar"])
    );
    // Another container's name, or a kind without a pod spec: nothing to change.
    let other = spec(
        "    - overriders:\n        commandOverrider:\n          - {containerName: sidecar, operator: add, value: [-v]}\n",
    );
    assert!(other.overrides(&myapp()).is_empty());
    assert!(add.overrides(&json!({"kind": "ConfigMap"})).is_empty());
}

#[test]
fn args_overrider_creates_the_list_and_edits_in_order() {
    let o = spec(
        "    - overriders:\n        argsOverrider:\n          - {containerName: myapp, operator: add, value: [--a, --b, --a]}\n          - {containerName: myapp, operator: remove, value: [--a]}\n          - {containerName: myapp, operator: add, value: [--c]}\n",
    );
    let out = render(&o, &myapp());
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["args"],
        json!(["--b", "--c"])
    );
    assert_eq!(command(&out), command(&myapp()), "command untouched");
    // Remove on a container without the list changes nothing (Karmada would write an empty one).
    let remove = spec(
        "    - overriders:\n        argsOverrider:\n          - {containerName: myapp, operator: remove, value: [--a]}\n",
    );
    assert!(remove.overrides(&myapp()).is_empty());
}

#[test]
fn a_removal_behind_another_overrides_append_still_removes_the_right_element() {
    let add = spec(
        "    - overriders:\n        commandOverrider:\n          - {containerName: myapp, operator: add, value: [--x]}\n",
    );
    let remove = spec(
        "    - overriders:\n        commandOverrider:\n          - {containerName: myapp, operator: remove, value: [./myapp]}\n",
    );
    let t = myapp();
    let stacked: Vec<Override> = add
        .overrides(&t)
        .into_iter()
        .chain(remove.overrides(&t))
        .collect();
    let out = render_overrides(&t.to_string(), stacked.iter().enumerate())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        command(&out),
        &json!(["--parameter1=foo", "--parameter2=bar", "--x"])
    );
}

#[test]
fn labels_overrider_adds_replaces_and_removes_as_the_guide_shows() {
    let input = doc(r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: myapp
  labels: {foo: foo, baz: baz}
spec:
  template:
    spec:
      containers: [{image: "myapp:1.0.0", name: myapp}]
"#);
    let o = spec(
        r#"    - overriders:
        labelsOverrider:
          - operator: add
            value: {bar: bar}
          - operator: replace
            value: {foo: exist}
          - operator: remove
            value: {baz: baz}
"#,
    );
    let out = render(&o, &input);
    assert_eq!(
        out["metadata"]["labels"],
        json!({"foo": "exist", "bar": "bar"})
    );
    // Removing a key the object lacks, or from an object without the map, is no error.
    let absent = spec(
        "    - overriders:\n        annotationsOverrider:\n          - {operator: remove, value: {bom: bom}}\n          - {operator: add, value: {env: stage}}\n          - {operator: remove, value: {\"example.com/x\": \"\"}}\n",
    );
    let out = render(&absent, &input);
    assert_eq!(out["metadata"]["annotations"], json!({"env": "stage"}));
    let with = json!({"kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"example.com/x": "1", "keep": "1"}}});
    assert_eq!(
        render(&absent, &with)["metadata"]["annotations"],
        json!({"keep": "1", "env": "stage"})
    );
}

#[test]
fn a_rule_with_the_new_overriders_applies_them_in_karmadas_order() {
    // Image before plaintext: the plaintext patch of the image wins, as in Karmada.
    let o = spec(
        r#"    - targetCluster: {clusterNames: [member1, member2]}
      overriders:
        plaintext:
          - {path: /spec/template/spec/containers/0/image, operator: replace, value: "plain:1"}
        imageOverrider:
          - {component: Tag, operator: replace, value: "2"}
        commandOverrider:
          - {containerName: myapp, operator: add, value: [--v]}
"#,
    );
    let overrides = o.overrides(&myapp());
    let targets: Vec<Option<&str>> = overrides
        .iter()
        .map(|o| o.cluster_name.as_deref())
        .collect();
    assert!(targets.contains(&Some("member1")) && targets.contains(&Some("member2")));
    assert!(overrides.iter().all(|o| o.cluster_name.is_some()));
    let member1: Vec<&Override> = overrides
        .iter()
        .filter(|o| o.cluster_name.as_deref() == Some("member1"))
        .collect();
    let out = render_overrides(&myapp().to_string(), member1.into_iter().enumerate())
        .unwrap_or_else(|e| panic!("{e}"));
    let c = &out["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], json!("plain:1"));
    assert_eq!(c["command"][3], json!("--v"));
}

#[test]
fn older_entries_are_refused_the_new_overriders_as_before() {
    let before = PEER_WIDENED_SINCE - 1;
    let e = policy(
        "    - overriders:\n        commandOverrider:\n          - {containerName: myapp, operator: add, value: [x]}\n",
        before,
    )
    .err();
    assert_eq!(
        e.map(|e| e.field).as_deref(),
        Some("spec.overrideRules[0].overriders.commandOverrider")
    );
    let e = policy(
        "    - overriders:\n        labelsOverrider:\n          - {operator: remove, value: {a: a}}\n",
        before,
    )
    .err();
    assert_eq!(
        e.map(|e| e.field).as_deref(),
        Some("spec.overrideRules[0].overriders.labelsOverrider[0].operator")
    );
}

#[test]
fn bad_command_and_removal_overriders_name_the_field() {
    for (rules, field) in [
        (
            "    - overriders:\n        commandOverrider:\n          - {containerName: myapp, operator: replace, value: [x]}\n",
            "spec.overrideRules[0].overriders.commandOverrider[0].operator",
        ),
        (
            "    - overriders:\n        argsOverrider:\n          - {containerName: \"\", operator: add}\n",
            "spec.overrideRules[0].overriders.argsOverrider[0].containerName",
        ),
        (
            "    - overriders:\n        argsOverrider: {containerName: a}\n",
            "spec.overrideRules[0].overriders.argsOverrider",
        ),
        (
            "    - overriders:\n        labelsOverrider:\n          - {operator: remove, value: {\"bad key!\": x}}\n",
            "spec.overrideRules[0].overriders.labelsOverrider[0].value.bad key!",
        ),
        (
            "    - overriders:\n        commandOverrider: [{containerName: a, operator: add}]\n        fieldOverrider: [{fieldPath: /data/x}]\n",
            "spec.overrideRules[0].overriders.fieldOverrider[0]",
        ),
    ] {
        let e = policy(rules, LOG_ENTRY_VERSION).err();
        assert_eq!(e.map(|e| e.field).as_deref(), Some(field), "{rules}");
    }
}
