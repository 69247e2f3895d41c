//! A quick read of what validation needs from a template, for the common, well-formed case.
//!
//! Every put validates its template, and building a `serde_json::Value` tree for it (a map and
//! a string allocation per key) was most of a put's cost. This module reads the same fields
//! straight from the text into borrowed structs and skips everything else without building it.
//!
//! It is an accelerator, not an authority: it answers only when the template is plainly
//! well-formed (every field it reads present with the expected JSON type, no duplicate keys
//! among them, every quantity parseable) and returns `None` otherwise, so the `Value`-based
//! path in `validate::template` decides every unusual case and words every error. Whenever it
//! answers, it answers exactly what that path would (a property test checks this).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::model::TemplateInfo;
use crate::policy::Resources;
use crate::render::{kind_carries_replicas, parse_quantity, PodRequests};
use crate::state::validate::TemplateFacts;

/// The fields of one template that validation and scheduling read, if the fast read applies.
pub(crate) fn template_info(text: &str) -> Option<TemplateFacts> {
    if !plain_json(text) {
        return None;
    }
    let Field::Map(top) = serde_json::from_str::<Field<Top<'_>>>(text).ok()? else {
        return None;
    };
    let non_empty = |s: &Option<Cow<'_, str>>| s.as_deref().is_some_and(|s| !s.is_empty());
    let Field::Map(meta) = &top.metadata else {
        return None;
    };
    if !non_empty(&top.api_version) || !non_empty(&top.kind) || !non_empty(&meta.name) {
        return None;
    }
    let spec = match &top.spec {
        Field::Map(spec) => Some(spec),
        Field::Absent => None,
    };
    let replicas = match spec.and_then(|s| s.replicas) {
        Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
        None => 1,
    };
    let pod = pod_lists(top.kind.as_deref(), spec);
    let runs_pods = pod.is_some();
    let per_replica = requests(pod)?;
    let carries_replicas = spec.is_some_and(|s| s.replicas.is_some())
        || top.kind.as_deref().is_some_and(kind_carries_replicas);
    Some(TemplateFacts {
        info: TemplateInfo {
            replicas,
            per_replica,
        },
        carries_replicas,
        runs_pods,
    })
}

/// The containers and init containers of the pod spec, searched in the same order as
/// `render::pod_spec`: a workload's pod template, a CronJob's, then a Pod's own spec.
fn pod_lists<'s, 'a>(kind: Option<&str>, spec: Option<&'s Spec<'a>>) -> Option<PodLists<'s, 'a>> {
    let spec = spec?;
    if let Field::Map(t) = &spec.template {
        if let Field::Map(pod) = &t.spec {
            return Some([&pod.containers, &pod.init_containers]);
        }
    }
    if let Field::Map(job) = &spec.job_template {
        if let Field::Map(job_spec) = &job.spec {
            if let Field::Map(t) = &job_spec.template {
                if let Field::Map(pod) = &t.spec {
                    return Some([&pod.containers, &pod.init_containers]);
                }
            }
        }
    }
    (kind == Some("Pod")).then_some([&spec.containers, &spec.init_containers])
}

/// Containers, then init containers.
type PodLists<'s, 'a> = [&'s Containers<'a>; 2];
type Containers<'a> = Option<Vec<Field<Container<'a>>>>;

/// Per-replica requests as `render::requests` computes them; None if a quantity does not parse.
fn requests(pod: Option<PodLists<'_, '_>>) -> Option<Resources> {
    let mut total = PodRequests::default();
    let Some(pod) = pod else {
        return Some(total.total());
    };
    for (list, is_init) in [(pod[0], false), (pod[1], true)] {
        for c in list.iter().flatten() {
            let Field::Map(c) = c else {
                continue;
            };
            let Field::Map(res) = &c.resources else {
                continue;
            };
            let Field::Map(req) = &res.requests else {
                continue;
            };
            let q = |text: &Option<Cow<'_, str>>, scale: u64| match text {
                None => Some(0),
                Some(t) => parse_quantity(t, scale).ok(),
            };
            let r = Resources {
                cpu_millis: q(&req.cpu, 1000)?,
                memory_bytes: q(&req.memory, 1)?,
                pods: 0,
            };
            total.add(r, is_init);
        }
    }
    Some(total.total())
}

/// Whether `text` avoids the JSON that a full parse refuses but a skipping parse lets through:
/// skipped parts are scanned, not decoded, so they escape the nesting limit, the range check of
/// numbers and the pairing of `\u` surrogate escapes. Exponents, very long numbers, `\u`
/// escapes and deep nesting are all rare in manifests; they go to the `Value` path.
fn plain_json(text: &str) -> bool {
    const MAX_DEPTH: usize = 64;
    const MAX_NUMBER: usize = 64;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut number = 0usize;
    for &b in text.as_bytes() {
        if in_string {
            if escaped {
                if b == b'u' {
                    return false;
                }
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'0'..=b'9' | b'-' | b'+' | b'.' => {
                number += 1;
                if number > MAX_NUMBER {
                    return false;
                }
                continue;
            }
            // Inside a number only as an exponent; `true` and `false` never follow a digit.
            b'e' | b'E' if number > 0 => return false,
            _ => {}
        }
        number = 0;
    }
    true
}

/// A field that must be a JSON object when present. Absent is the default; `null`, arrays and
/// scalars fail the whole read (the `Value` path then decides), because the two paths treat
/// them subtly differently and they are rare.
#[derive(Default)]
enum Field<T> {
    #[default]
    Absent,
    Map(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MapOnly<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for MapOnly<T> {
            type Value = Field<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Field::Map)
            }
        }
        // Only `visit_map` is implemented: derived structs would otherwise also accept arrays
        // (field by position), which the `Value` path never reads as objects.
        d.deserialize_map(MapOnly(PhantomData))
    }
}

// Derived structs refuse a duplicate key among their own fields, which fails the read; the
// `Value` path keeps the last one. Keys they do not name are skipped whatever they hold.

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Top<'a> {
    #[serde(default, borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    metadata: Field<Meta<'a>>,
    #[serde(default, borrow)]
    spec: Field<Spec<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
}

/// A workload's spec; for a Pod, its pod spec (the container lists, read in place).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    #[serde(default)]
    replicas: Option<u64>,
    #[serde(default, borrow)]
    template: Field<PodTemplate<'a>>,
    #[serde(default, borrow)]
    job_template: Field<JobTemplate<'a>>,
    #[serde(default, borrow)]
    containers: Containers<'a>,
    #[serde(default, borrow)]
    init_containers: Containers<'a>,
}

#[derive(Deserialize)]
struct JobTemplate<'a> {
    #[serde(default, borrow)]
    spec: Field<JobSpec<'a>>,
}

#[derive(Deserialize)]
struct JobSpec<'a> {
    #[serde(default, borrow)]
    template: Field<PodTemplate<'a>>,
}

#[derive(Deserialize)]
struct PodTemplate<'a> {
    #[serde(default, borrow)]
    spec: Field<PodSpec<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec<'a> {
    #[serde(default, borrow)]
    containers: Containers<'a>,
    #[serde(default, borrow)]
    init_containers: Containers<'a>,
}

#[derive(Deserialize)]
struct Container<'a> {
    #[serde(default, borrow)]
    resources: Field<ContainerResources<'a>>,
}

#[derive(Deserialize)]
struct ContainerResources<'a> {
    #[serde(default, borrow)]
    requests: Field<Requests<'a>>,
}

#[derive(Deserialize)]
struct Requests<'a> {
    #[serde(default, borrow)]
    cpu: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    memory: Option<Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::validate::template_by_value;
    use proptest::prelude::*;

    /// JSON text built by hand so that tests can write what `serde_json` never does: duplicate
    /// keys, exponents, escapes, deep nesting.
    #[derive(Debug, Clone)]
    enum Node {
        Raw(&'static str),
        Str(String),
        Arr(Vec<Node>),
        Obj(Vec<(String, Node)>),
    }

    impl Node {
        fn write(&self, out: &mut String) {
            match self {
                Node::Raw(r) => out.push_str(r),
                Node::Str(s) => {
                    out.push('"');
                    out.push_str(s);
                    out.push('"');
                }
                Node::Arr(items) => {
                    out.push('[');
                    for (i, n) in items.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        n.write(out);
                    }
                    out.push(']');
                }
                Node::Obj(fields) => {
                    out.push('{');
                    for (i, (k, n)) in fields.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push('"');
                        out.push_str(k);
                        out.push_str("\":");
                        n.write(out);
                    }
                    out.push('}');
                }
            }
        }
    }

    fn s(text: &str) -> Node {
        Node::Str(text.to_string())
    }

    fn scalar() -> impl Strategy<Value = Node> {
        prop_oneof![
            Just(Node::Raw("null")),
            Just(Node::Raw("true")),
            Just(Node::Raw("3")),
            Just(Node::Raw("-1")),
            Just(Node::Raw("2.5")),
            Just(Node::Raw("1e3")),
            Just(Node::Raw("1e400")),
            Just(Node::Raw("5000000000")),
            Just(s("")),
            Just(s("x")),
            Just(s("100m")),
            Just(s("1Gi")),
            Just(s("bad")),
            Just(s("caf\\u00e9")),
            Just(s("\\ud800")),
            Just(s("a\\\"b")),
        ]
    }

    /// Any value: scalars, or objects and arrays of them.
    fn any() -> impl Strategy<Value = Node> {
        scalar().prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Node::Arr),
                prop::collection::vec((key(), inner), 0..3).prop_map(Node::Obj),
            ]
        })
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("cpu"),
            Just("memory"),
            Just("name"),
            Just("spec"),
            Just("template"),
            Just("containers"),
            Just("other"),
        ]
        .prop_map(str::to_string)
    }

    /// An object with some of `keys` (each from its strategy), maybe one twice, maybe extra
    /// keys, maybe not an object at all.
    fn object(fields: Vec<(&'static str, BoxedStrategy<Node>)>) -> BoxedStrategy<Node> {
        let n = fields.len();
        let picks: Vec<_> = fields
            .into_iter()
            .map(|(k, v)| (Just(k), prop::option::weighted(0.75, v)))
            .collect();
        let extra = prop::option::weighted(0.2, (key(), any()));
        let dup = prop::option::weighted(0.05, 0..n);
        let obj = (picks, extra, dup).prop_map(|(picks, extra, dup)| {
            let mut out: Vec<(String, Node)> = picks
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                .collect();
            if let Some(d) = dup.and_then(|d| out.get(d).cloned()) {
                out.push(d);
            }
            out.extend(extra);
            Node::Obj(out)
        });
        prop_oneof![30 => obj, 1 => scalar(), 1 => any()].boxed()
    }

    fn requests() -> BoxedStrategy<Node> {
        let q = || {
            prop_oneof![4 => Just(s("100m")), 4 => Just(s("2")), 4 => Just(s("64Mi")), 1 => scalar()]
                .boxed()
        };
        object(vec![("cpu", q()), ("memory", q())])
    }

    fn container() -> BoxedStrategy<Node> {
        let resources = object(vec![("requests", requests())]);
        object(vec![("resources", resources), ("name", scalar().boxed())])
    }

    fn containers() -> BoxedStrategy<Node> {
        prop_oneof![
            12 => prop::collection::vec(container(), 0..3).prop_map(Node::Arr),
            1 => any(),
        ]
        .boxed()
    }

    fn pod() -> BoxedStrategy<Node> {
        object(vec![
            ("containers", containers()),
            ("initContainers", containers()),
        ])
    }

    fn manifest() -> BoxedStrategy<Node> {
        let template = object(vec![("spec", pod())]);
        let job = object(vec![("spec", object(vec![("template", template.clone())]))]);
        let spec = object(vec![
            ("replicas", scalar().boxed()),
            ("template", template),
            ("jobTemplate", job),
            ("containers", containers()),
            ("initContainers", containers()),
        ]);
        let text = |v: &'static str| prop_oneof![12 => Just(s(v)), 1 => scalar()].boxed();
        let meta = object(vec![("name", text("web"))]);
        let kind = prop_oneof![
            Just(s("Deployment")),
            Just(s("Pod")),
            Just(s("CronJob")),
            scalar()
        ];
        object(vec![
            ("apiVersion", text("apps/v1")),
            ("kind", kind.boxed()),
            ("metadata", meta),
            ("spec", spec),
        ])
    }

    fn text_of(n: &Node) -> String {
        let mut out = String::new();
        n.write(&mut out);
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]
        /// Whenever the fast read answers, it is exactly the `Value` path's answer.
        #[test]
        fn agrees_with_the_value_path(m in manifest()) {
            let text = text_of(&m);
            if let Some(info) = template_info(&text) {
                prop_assert_eq!(Ok(info), template_by_value(&text, "t").map_err(|e| e.message));
            }
        }
    }

    #[test]
    fn answers_for_ordinary_manifests() {
        let deployment = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":4,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"a","image":"x:1","resources":{"requests":{"cpu":"100m","memory":"128Mi"}}},{"name":"b","resources":{"requests":{"cpu":"1"}}}],"initContainers":[{"name":"i","resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}]}}}}"#;
        let cronjob = r#"{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"nightly"},"spec":{"schedule":"0 3 * * *","jobTemplate":{"spec":{"template":{"spec":{"containers":[{"resources":{"requests":{"memory":"1Gi"}}}]}}}}}}"#;
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"resources":{"requests":{"cpu":"250m"}}}]}}"#;
        let configmap =
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#;
        for text in [deployment, cronjob, pod, configmap] {
            let fast = template_info(text);
            assert!(fast.is_some(), "{text}");
            assert_eq!(fast, template_by_value(text, "t").ok(), "{text}");
        }
        let info = template_info(deployment).unwrap_or_default().info;
        assert_eq!(info.replicas, 4);
        // Containers add up; an init container counts only where it is the largest.
        assert_eq!(info.per_replica.cpu_millis, 1100);
        assert_eq!(info.per_replica.memory_bytes, 1 << 30);
    }

    #[test]
    fn declines_what_only_a_full_parse_refuses() {
        let deep = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c"}},"data":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for text in [
            deep.as_str(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"x":1e400}"#,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"x":"\ud800"}"#,
            r#"{"apiVersion":"v1","apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"c"}}"#,
            r#"["v1","ConfigMap",{"name":"c"}]"#,
        ] {
            assert_eq!(template_info(text), None, "{text}");
        }
        assert!(template_by_value(&deep, "t").is_err());
    }
}
