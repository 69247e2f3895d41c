//! Tests of the statePreservation JSONPath subset (`jsonpath`): what it reads, what it refuses
//! and why, what it finds, and that no input makes it panic.

use proptest::prelude::*;
use serde_json::json;

use super::jsonpath::{JsonPath, Step, MAX_PATH_BYTES};

fn steps(text: &str) -> Vec<Step> {
    JsonPath::parse(text)
        .unwrap_or_else(|e| panic!("{text:?}: {e}"))
        .steps()
        .to_vec()
}

fn key(k: &str) -> Step {
    Step::Key(k.to_string())
}

#[test]
fn reads_the_forms_a_rule_uses() {
    let job = vec![key("jobStatus"), key("jobID")];
    for text in [
        "{ .jobStatus.jobID }",
        "{.jobStatus.jobID}",
        "{$.jobStatus.jobID}",
        "{ $.jobStatus['jobID'] }",
        "{.jobStatus[\"jobID\"]}",
        "  {.jobStatus.jobID}\n",
    ] {
        assert_eq!(steps(text), job, "{text:?}");
    }
    assert_eq!(
        steps("{.conditions[0].type}"),
        vec![key("conditions"), Step::Index(0), key("type")]
    );
    assert_eq!(
        steps("{.a[-1]['x.y/z']}"),
        vec![key("a"), Step::Index(-1), key("x.y/z")]
    );
    assert_eq!(steps(r"{['it\'s']}"), vec![key("it's")]);
}

#[test]
fn refuses_what_could_name_several_fields_or_none() {
    for (text, says) in [
        ("{.items[*].name}", "wildcard"),
        ("{.items.*}", "wildcard"),
        ("{..jobID}", "recursive descent"),
        ("{.items[?(@.ready==true)].name}", "filter"),
        ("{.items[0:2]}", "slice"),
        ("{.items[0,1]}", "union"),
        ("{range .items[*]}{.name}{end}", "range"),
        (".jobStatus.jobID", "one {...} expression"),
        ("{.jobStatus.jobID} and more", "text after"),
        ("{.a}{.b}", "text after"),
        ("{}", "names no field"),
        ("{$}", "names no field"),
        ("{.}", "names no field"),
        ("{.a", "unclosed {"),
        ("{.a[0}", "unexpected"),
        ("{.a['b}", "unclosed '"),
        ("{.a[x]}", "unexpected"),
        ("{.a[-]}", "not an array index"),
        ("{.a[99999999999999999999]}", "not an array index"),
        ("", "one {...} expression"),
    ] {
        let err = JsonPath::parse(text).expect_err(text);
        assert!(err.contains(says), "{text:?}: {err}");
    }
    let long = format!("{{.{}}}", "a".repeat(MAX_PATH_BYTES));
    assert!(JsonPath::parse(&long).unwrap_err().contains("longer than"));
}

#[test]
fn finds_label_values_in_a_status() {
    let status = json!({
        "jobStatus": {"jobID": "e2b3c5f1", "state": "RUNNING", "savepoints": 3},
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "Stable"}],
        "ok": true,
        "nothing": null,
        "odd": "has spaces",
        "dotted.key": "v1",
    });
    let value = |p: &str| JsonPath::parse(p).unwrap().label_value(&status);
    assert_eq!(value("{ .jobStatus.jobID }").as_deref(), Some("e2b3c5f1"));
    assert_eq!(value("{.jobStatus.savepoints}").as_deref(), Some("3"));
    assert_eq!(value("{.ok}").as_deref(), Some("true"));
    assert_eq!(value("{.conditions[0].type}").as_deref(), Some("Ready"));
    assert_eq!(value("{.conditions[-1].type}").as_deref(), Some("Stable"));
    assert_eq!(value("{['dotted.key']}").as_deref(), Some("v1"));
    // Absent, out of range, through a scalar, null, not a scalar, not a label value: none.
    for p in [
        "{.jobStatus.missing}",
        "{.conditions[2].type}",
        "{.conditions[-3].type}",
        "{.ok.deeper}",
        "{.jobStatus[0]}",
        "{.nothing}",
        "{.jobStatus}",
        "{.conditions}",
        "{.odd}",
    ] {
        assert_eq!(value(p), None, "{p}");
    }
}

#[test]
fn canonical_text_reads_back_as_the_same_path() {
    for text in [
        "{ $.a['b c'][3] }",
        r"{.x['q\'s']['back\\slash'][-2]}",
        "{.a-b.c_d}",
    ] {
        let p = JsonPath::parse(text).unwrap();
        assert_eq!(JsonPath::parse(&p.to_string()).unwrap(), p, "{text}");
    }
    assert_eq!(
        JsonPath::parse("{ $.jobStatus['jobID'] }")
            .unwrap()
            .to_string(),
        "{.jobStatus.jobID}"
    );
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        "[a-zA-Z0-9_-]{1,8}".prop_map(Step::Key),
        "[ -~]{0,8}".prop_map(Step::Key),
        (-5i64..5).prop_map(Step::Index),
    ]
}

proptest! {
    /// Anything at all: an answer, never a panic.
    #[test]
    fn any_text_parses_or_is_refused(text in "\\PC{0,64}") {
        if let Ok(p) = JsonPath::parse(&text) {
            prop_assert!(!p.steps().is_empty());
        }
    }

    /// Texts made of the language's own characters reach deeper into the parser.
    #[test]
    fn near_misses_parse_or_are_refused(text in "[{}$.\\[\\]'\"*?@:,()a0 -]{0,24}") {
        if let Ok(p) = JsonPath::parse(&text) {
            prop_assert_eq!(JsonPath::parse(&p.to_string()).unwrap(), p);
        }
    }

    /// Every path prints as text that reads back as itself, and finds what it was built to
    /// find.
    #[test]
    fn paths_round_trip_and_find(steps in proptest::collection::vec(step(), 1..6)) {
        let text = JsonPath::parse(&format!("{{{}}}", steps.iter().map(|s| match s {
            Step::Key(k) => format!("['{}']", k.replace('\\', "\\\\").replace('\'', "\\'")),
            Step::Index(i) => format!("[{i}]"),
        }).collect::<String>())).unwrap();
        prop_assert_eq!(text.steps(), &steps[..]);
        prop_assert_eq!(JsonPath::parse(&text.to_string()).unwrap(), text.clone());
        // Build a document holding "found" at exactly that path.
        let mut doc = json!("found");
        for s in steps.iter().rev() {
            doc = match s {
                Step::Key(k) => json!({ k.clone(): doc }),
                Step::Index(i) => {
                    let mut a = vec![json!(null); 5];
                    let at = if *i < 0 { 5 + i } else { *i };
                    a[usize::try_from(at).unwrap()] = doc;
                    serde_json::Value::Array(a)
                }
            };
        }
        let found = text.label_value(&doc);
        prop_assert_eq!(found.as_deref(), Some("found"));
    }
}
