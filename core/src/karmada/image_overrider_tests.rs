//! Karmada's `imageOverrider` with `add`, `remove` and a `predicate`: each operator on each
//! component, the override-policy guide's examples, images the path does not fit (a render
//! error for the cluster, never a panic); older entries keep their refusals, and `replace`
//! without a predicate keeps fedraft's image override.

use serde_json::{json, Value};

use super::image_overrider::{Component, ImageEdit, ImageOp};
use super::tests::doc;
use super::*;
use crate::command::LOG_ENTRY_VERSION;
use crate::policy::Override;
use crate::render::{render_overrides, RenderError};

fn edit(component: Component, op: ImageOp, value: &str) -> ImageEdit {
    ImageEdit {
        component,
        op,
        value: value.to_string(),
        predicate: None,
    }
}

#[test]
fn each_operator_on_each_component() {
    use Component::*;
    use ImageOp::*;
    let digest = "sha256:0123456789abcdef0123456789abcdef";
    for (image, component, op, value, want) in [
        (
            "myapp:1.0.0",
            Registry,
            Add,
            "test-repo",
            "test-repo/myapp:1.0.0",
        ),
        ("reg.io/myapp", Registry, Add, ".cn", "reg.io.cn/myapp"),
        (
            "reg.io/myapp",
            Registry,
            Replace,
            "mirror.eu",
            "mirror.eu/myapp",
        ),
        (
            "reg.io/team/myapp:v1",
            Registry,
            Remove,
            "",
            "team/myapp:v1",
        ),
        ("myapp:1.0.0", Repository, Replace, "myapp2", "myapp2:1.0.0"),
        (
            "reg.io/myapp:1",
            Repository,
            Add,
            "-eu",
            "reg.io/myapp-eu:1",
        ),
        ("reg.io/myapp:1", Repository, Remove, "", "reg.io/:1"),
        ("myapp:1.0.0", Tag, Remove, "", "myapp"),
        ("myapp:1.0.0", Tag, Add, "-eu", "myapp:1.0.0-eu"),
        ("myapp", Tag, Add, "v2", "myapp:v2"),
        ("myapp:1.0.0", Tag, Replace, "2.0.0", "myapp:2.0.0"),
        (
            "myapp:1.0.0",
            Tag,
            Replace,
            digest,
            &format!("myapp@{digest}"),
        ),
        (&format!("myapp@{digest}"), Tag, Replace, "v3", "myapp:v3"),
        (&format!("myapp@{digest}"), Tag, Remove, "", "myapp"),
        // Karmada keeps the tag of an image with both, and ignores a value that is neither.
        (
            &format!("myapp:v1@{digest}"),
            Registry,
            Add,
            "r.io",
            "r.io/myapp:v1",
        ),
        ("myapp:v1", Tag, Replace, "not a tag", "myapp:v1"),
        (
            "localhost:5000/app:v1",
            Tag,
            Replace,
            "v2",
            "localhost:5000/app:v2",
        ),
    ] {
        let got = edit(component, op, value).rewrite(image);
        assert_eq!(
            got.as_deref(),
            Ok(want),
            "{image} {component:?} {op:?} {value}"
        );
    }
    assert!(edit(Tag, Remove, "").rewrite("").is_err());
    assert!(edit(Tag, Remove, "").rewrite("reg.io/").is_err());
}

fn policy(items: &str, version: u16) -> Result<OverrideSpec, crate::error::FieldError> {
    let v = doc(&format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: OverridePolicy\nmetadata: {{name: example, namespace: default}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment}}]\n  overrideRules:\n    - overriders:\n        imageOverrider:\n{items}"
    ));
    match parse_spec(PolicyKind::Override, &v, version)? {
        PolicySpec::Override(o) => Ok(o),
        other => panic!("expected an override spec, got {other:?}"),
    }
}

fn spec(items: &str) -> OverrideSpec {
    policy(items, LOG_ENTRY_VERSION).unwrap_or_else(|e| panic!("{}: {}", e.field, e.message))
}

fn render(o: &OverrideSpec, template: &Value) -> Result<Value, RenderError> {
    let overrides: Vec<Override> = o.overrides(template);
    render_overrides(&template.to_string(), overrides.iter().enumerate())
}

/// The guide's input, with an init container and a second container.
fn myapp() -> Value {
    doc(r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: myapp}
spec:
  template:
    spec:
      initContainers:
        - {name: init, image: "init:1"}
      containers:
        - {name: myapp, image: "myapp:1.0.0"}
        - {name: side, image: "reg.io/side:2"}
"#)
}

fn images(v: &Value) -> Vec<&str> {
    let pod = &v["spec"]["template"]["spec"];
    ["initContainers", "containers"]
        .iter()
        .flat_map(|l| pod[l].as_array().into_iter().flatten())
        .filter_map(|c| c["image"].as_str())
        .collect()
}

#[test]
fn the_guides_examples_rewrite_every_container_but_init_containers() {
    let add = spec("          - {component: Registry, operator: add, value: test-repo}\n");
    assert!(add.reads_template());
    // `add` appends to the component as it is, without a separator.
    let got = render(&add, &myapp()).unwrap();
    assert_eq!(
        images(&got),
        ["init:1", "test-repo/myapp:1.0.0", "reg.iotest-repo/side:2"]
    );
    let remove = spec("          - {component: Tag, operator: remove}\n");
    let got = render(&remove, &myapp()).unwrap();
    assert_eq!(images(&got), ["init:1", "myapp", "reg.io/side"]);
    // In order, each on what the one before left; replace then applies as Karmada's too.
    let both = spec(
        "          - {component: Tag, operator: remove}\n          - {component: Tag, operator: replace, value: v9}\n",
    );
    let got = render(&both, &myapp()).unwrap();
    assert_eq!(images(&got), ["init:1", "myapp:v9", "reg.io/side:v9"]);
    // Kinds Karmada does not know get nothing.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert!(add.overrides(&cm).is_empty());
    assert!(add.overrides(&Value::Null).is_empty());
}

#[test]
fn a_predicate_rewrites_its_one_field() {
    let o = spec(
        "          - component: Registry\n            operator: replace\n            value: mirror.eu\n            predicate: {path: /spec/template/spec/initContainers/0/image}\n",
    );
    let got = render(&o, &myapp()).unwrap();
    assert_eq!(
        images(&got),
        ["mirror.eu/init:1", "myapp:1.0.0", "reg.io/side:2"]
    );
    // A path the template does not have, or that is no string, fails that render.
    for template in [
        json!({"kind": "Deployment", "spec": {}}),
        json!({"kind": "Deployment", "spec": {"template": {"spec": {"initContainers": [{"image": 1}]}}}}),
    ] {
        let e = render(&o, &template).expect_err("no such image");
        assert!(matches!(e, RenderError::Patch { .. }), "{e}");
    }
}

#[test]
fn a_container_without_an_image_is_the_clusters_render_error() {
    let o = spec("          - {component: Tag, operator: add, value: x}\n");
    let t = json!({"kind": "Pod", "spec": {"containers": [{"name": "a"}]}});
    let e = render(&o, &t).expect_err("no image");
    assert!(e.to_string().contains("names no value"), "{e}");
    let t = json!({"kind": "Pod", "spec": {"containers": [{"name": "a", "image": ""}]}});
    let e = render(&o, &t).expect_err("empty image");
    assert!(e.to_string().contains("the image is empty"), "{e}");
}

#[test]
fn malformed_items_are_refused_naming_the_field() {
    for (items, field) in [
        (
            "          - {component: Tag, operator: add}\n",
            "spec.overrideRules[0].overriders.imageOverrider[0].value",
        ),
        (
            "          - {component: Tag, operator: remove, predicate: {path: spec/x}}\n",
            "spec.overrideRules[0].overriders.imageOverrider[0].predicate.path",
        ),
        (
            "          - {component: Tag, operator: remove, predicate: {paths: /x}}\n",
            "spec.overrideRules[0].overriders.imageOverrider[0].predicate",
        ),
    ] {
        let e = policy(items, LOG_ENTRY_VERSION).expect_err(items);
        assert!(
            e.field.starts_with(field),
            "{items}: {} {}",
            e.field,
            e.message
        );
    }
}

#[test]
fn older_entries_refuse_add_remove_and_predicates_as_before() {
    let old = OVERRIDERS_WIDENED_SINCE - 1;
    let e = policy("          - {component: Tag, operator: remove}\n", old).unwrap_err();
    assert_eq!(
        e.field,
        "spec.overrideRules[0].overriders.imageOverrider[0].operator"
    );
    assert_eq!(
        e.message,
        "not supported by fedraft: only replace is implemented for images"
    );
    let e = policy(
        "          - {component: Tag, operator: replace, value: v, predicate: {path: /spec/x}}\n",
        old,
    )
    .unwrap_err();
    assert_eq!(
        e.field,
        "spec.overrideRules[0].overriders.imageOverrider[0].predicate"
    );
    // replace without a predicate keeps fedraft's image override, in either version.
    for version in [old, LOG_ENTRY_VERSION] {
        let o = policy(
            "          - {component: Tag, operator: replace, value: v}\n",
            version,
        )
        .unwrap();
        assert!(!o.reads_template());
    }
}
