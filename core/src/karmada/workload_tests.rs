//! `placement.workloadAffinity`, read since log entry version 13 (`WORKLOAD_AFFINITY_SINCE`):
//! each term alone and both, the refusals of malformed documents, and the older entries'
//! refusal kept as it was.

use super::tests::{propagation, refusal, refusal_at};
use super::*;

fn policy(workload: &str) -> String {
    format!(
        "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {{name: p, namespace: default}}\nspec:\n  resourceSelectors: [{{apiVersion: apps/v1, kind: Deployment}}]\n  placement:\n    clusterAffinity: {{clusterNames: [member1, member2, member3]}}\n    workloadAffinity: {workload}\n"
    )
}

const FIELD: &str = "spec.placement.workloadAffinity";

#[test]
fn each_term_alone_and_both_are_read() {
    let both = propagation(&policy(
        "{affinity: {groupByLabelKey: app.stack}, antiAffinity: {groupByLabelKey: example.com/instance}}",
    ));
    assert_eq!(
        both.workload_affinity,
        Some(WorkloadAffinity {
            affinity: Some("app.stack".into()),
            anti_affinity: Some("example.com/instance".into()),
        })
    );
    // The rest of the placement is read as without it.
    assert_eq!(both.placement.clusters.as_ref().map(Vec::len), Some(3));
    let with = propagation(&policy("{affinity: {groupByLabelKey: app.group}}"));
    assert_eq!(
        with.workload_affinity,
        Some(WorkloadAffinity {
            affinity: Some("app.group".into()),
            anti_affinity: None,
        })
    );
    let apart = propagation(&policy("{antiAffinity: {groupByLabelKey: pipeline.id}}"));
    assert_eq!(
        apart.workload_affinity,
        Some(WorkloadAffinity {
            affinity: None,
            anti_affinity: Some("pipeline.id".into()),
        })
    );
    let none = policy("{}").replace("    workloadAffinity: {}\n", "");
    assert_eq!(propagation(&none).workload_affinity, None);
}

#[test]
fn older_entries_are_refused_it_as_they_were() {
    let doc = policy("{affinity: {groupByLabelKey: app.group}}");
    let e = refusal_at(&doc, WORKLOAD_AFFINITY_SINCE - 1);
    assert_eq!(e.field, FIELD);
    assert!(e.message.contains("not supported"), "{}", e.message);
    // Before the second widening it was a field the placement did not know.
    let e = refusal_at(&doc, PEER_WIDENED_SINCE - 1);
    assert_eq!(e.field, FIELD);
    assert!(e.message.contains("unknown field"), "{}", e.message);
}

#[test]
fn malformed_documents_are_refused_naming_the_field() {
    let e = refusal(&policy("{}"));
    assert_eq!(e.field, FIELD);
    assert!(e.message.contains("affinity"), "{}", e.message);
    let e = refusal(&policy("null"));
    assert_eq!(e.field, FIELD);
    for (term, field) in [("affinity", "affinity"), ("antiAffinity", "antiAffinity")] {
        let want = format!("{FIELD}.{field}.groupByLabelKey");
        let missing = refusal(&policy(&format!("{{{term}: {{}}}}")));
        assert_eq!(missing.field, want);
        assert!(missing.message.contains("required"), "{}", missing.message);
        let empty = refusal(&policy(&format!("{{{term}: {{groupByLabelKey: ''}}}}")));
        assert_eq!(empty.field, want);
        let invalid = refusal(&policy(&format!(
            "{{{term}: {{groupByLabelKey: 'not a key'}}}}"
        )));
        assert_eq!(invalid.field, want);
        assert!(invalid.message.contains("label key"), "{}", invalid.message);
        let slash = refusal(&policy(&format!("{{{term}: {{groupByLabelKey: /app}}}}")));
        assert_eq!(slash.field, want);
    }
    // Unknown fields, in the document or a term, are refused as everywhere else.
    let e = refusal(&policy(
        "{affinity: {groupByLabelKey: app}, preferred: true}",
    ));
    assert_eq!(e.field, format!("{FIELD}.preferred"));
    assert!(e.message.contains("unknown field"), "{}", e.message);
    let e = refusal(&policy(
        "{antiAffinity: {groupByLabelKey: app, topologyKey: zone}}",
    ));
    assert_eq!(e.field, format!("{FIELD}.antiAffinity.topologyKey"));
    assert!(e.message.contains("unknown field"), "{}", e.message);
    let e = refusal(&policy("{affinity: {groupByLabelKey: 7}}"));
    assert_eq!(e.field, format!("{FIELD}.affinity.groupByLabelKey"));
    // Beside placement it is still misplaced.
    let beside = policy("{affinity: {groupByLabelKey: app}}")
        .replace("    workloadAffinity:", "  workloadAffinity:");
    assert_eq!(refusal(&beside).field, "spec.workloadAffinity");
}
