//! Typed JSON views of a federated object, serialized straight to bytes.
//!
//! A PUT's answer and every watch event show an object. Building that document as a
//! `serde_json::Value` parsed the template again each time (a tree of small allocations per
//! object). The stored template is already JSON that core parsed and checked at apply time, so a
//! view embeds it as a raw value: it is scanned for validity, never rebuilt. Keys come out in the
//! order `object_json` has always produced (sorted), so documents read the same as before.
//!
//! Must not: expose anything `wire::object_json` does not (the two are one shape; `object_json`
//! is this view turned into a `Value`).

use fedraft_core::model::{FederatedObject, PlacedCluster};
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// A federated object as the API shows it (without the scheduler's current reasoning, which only
/// a GET of one object adds).
#[derive(Debug, Clone, Copy)]
pub struct ObjectView<'a>(pub &'a FederatedObject);

impl Serialize for ObjectView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = self.0;
        let mut m = s.serialize_struct("FederatedObject", 8)?;
        m.serialize_field("kind", "FederatedObject")?;
        m.serialize_field("name", &o.name)?;
        m.serialize_field("namespace", &o.namespace)?;
        m.serialize_field("overrides", &o.spec.overrides)?;
        m.serialize_field("placement", &o.spec.placement)?;
        m.serialize_field("resourceVersion", &o.resource_version)?;
        m.serialize_field("status", &StatusView(o))?;
        m.serialize_field("template", &Template(&o.spec.template))?;
        m.end()
    }
}

/// The template text as JSON. Core accepts only templates that parse, so the fallback (the text
/// as a string, as `object_json` always did) is for a state written by some older, laxer code.
struct Template<'a>(&'a str);

impl Serialize for Template<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match serde_json::from_str::<&RawValue>(self.0) {
            Ok(raw) => raw.serialize(s),
            Err(_) => s.serialize_str(self.0),
        }
    }
}

struct StatusView<'a>(&'a FederatedObject);

impl Serialize for StatusView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = self.0;
        let st = &o.status;
        let mut m = s.serialize_struct("ObjectStatus", 7)?;
        m.serialize_field("clusters", &Clusters(&st.clusters))?;
        m.serialize_field("conditions", &Conditions(o))?;
        m.serialize_field("desiredReplicas", &o.template_info.replicas)?;
        m.serialize_field("lastDecision", &LastDecision(o))?;
        m.serialize_field("placement", &Placement(&st.clusters))?;
        m.serialize_field("readyReplicas", &st.ready_replicas)?;
        m.serialize_field("shortfall", &st.shortfall.as_deref().map(Shortfall))?;
        m.end()
    }
}

/// `cluster -> {applied, message, readyReplicas, replicas, reportedMs}`; core keeps the list
/// sorted by cluster name, so it serializes as a sorted map without building one.
struct Clusters<'a>(&'a [PlacedCluster]);

impl Serialize for Clusters<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for c in self.0 {
            m.serialize_entry(&c.cluster, &PlacedView(c))?;
        }
        m.end()
    }
}

struct PlacedView<'a>(&'a PlacedCluster);

impl Serialize for PlacedView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut m = s.serialize_struct("PlacedCluster", 5)?;
        m.serialize_field("applied", &c.applied)?;
        m.serialize_field("message", &c.message)?;
        m.serialize_field("readyReplicas", &c.ready_replicas)?;
        m.serialize_field("replicas", &c.replicas)?;
        m.serialize_field("reportedMs", &c.reported_ms)?;
        m.end()
    }
}

/// `cluster -> replicas`.
struct Placement<'a>(&'a [PlacedCluster]);

impl Serialize for Placement<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|c| (&c.cluster, c.replicas)))
    }
}

struct Conditions<'a>(&'a FederatedObject);

impl Serialize for Conditions<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.conditions().iter().map(|c| {
            // `{message, status: "True"|"False", type}`, as Kubernetes conditions read.
            let status = if c.status { "True" } else { "False" };
            ConditionView {
                message: &c.message,
                status,
                type_: c.type_,
            }
        }))
    }
}

#[derive(Serialize)]
struct ConditionView<'a> {
    message: &'a str,
    status: &'static str,
    #[serde(rename = "type")]
    type_: fedraft_core::model::ConditionType,
}

/// `{decidedIndex, summary}`: the stored summary of the last decision.
struct LastDecision<'a>(&'a FederatedObject);

impl Serialize for LastDecision<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = &self.0.status;
        let mut m = s.serialize_struct("LastDecision", 2)?;
        m.serialize_field("decidedIndex", &st.decided_index)?;
        m.serialize_field("summary", &st.decision_summary)?;
        m.end()
    }
}

struct Shortfall<'a>(&'a fedraft_core::model::ShortfallStatus);

impl Serialize for Shortfall<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("Shortfall", 2)?;
        m.serialize_field("message", &self.0.message)?;
        m.serialize_field("replicas", &self.0.replicas)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::command::{Command, LogEntry};
    use fedraft_core::model::ObjectSpec;
    use fedraft_core::state::State;

    fn state_with_object(template: &str) -> State {
        let mut state = State::new();
        let put = Command::PutObject {
            namespace: "team".into(),
            name: "web".into(),
            spec: ObjectSpec {
                template: template.into(),
                placement: Default::default(),
                overrides: Vec::new(),
            },
            expected_version: None,
        };
        state.apply(1, &LogEntry::new("r1", "alice", 1_000, put));
        state
    }

    #[test]
    fn the_view_is_the_document_a_value_would_have_been() {
        let template = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}"#;
        let state = state_with_object(template);
        let o = state.object("team", "web").unwrap();
        let text = serde_json::to_string(&ObjectView(o)).unwrap();
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["kind"], "FederatedObject");
        assert_eq!(doc["namespace"], "team");
        assert_eq!(doc["name"], "web");
        assert_eq!(doc["resourceVersion"], 1);
        assert_eq!(
            doc["template"],
            serde_json::from_str::<serde_json::Value>(template).unwrap()
        );
        assert_eq!(doc["status"]["desiredReplicas"], 3);
        assert_eq!(doc["status"]["conditions"][0]["type"], "Scheduled");
        assert_eq!(doc["status"]["conditions"].as_array().unwrap().len(), 3);
        assert!(doc["status"]["lastDecision"]["summary"].is_string());
        // The template is embedded as written, not re-encoded: its bytes appear verbatim.
        assert!(text.contains(template), "{text}");
        // The same document the API rendered through `serde_json::Value` before the view.
        assert_eq!(doc, value_rendering(o));
        assert_eq!(doc, crate::wire::object_json(o, None));
    }

    /// How the API built an object's document before views existed (kept as the reference).
    fn value_rendering(o: &FederatedObject) -> serde_json::Value {
        use serde_json::{json, Value};
        use std::collections::BTreeMap;
        let template: Value = serde_json::from_str(&o.spec.template).unwrap();
        let placement: BTreeMap<&str, u32> = o
            .status
            .clusters
            .iter()
            .map(|c| (&*c.cluster, c.replicas))
            .collect();
        let clusters: BTreeMap<&str, Value> = o
            .status
            .clusters
            .iter()
            .map(|c| {
                let v = json!({"replicas": c.replicas, "applied": c.applied,
                    "readyReplicas": c.ready_replicas, "message": c.message, "reportedMs": c.reported_ms});
                (&*c.cluster, v)
            })
            .collect();
        let conditions: Vec<Value> = o
            .conditions()
            .iter()
            .map(|c| {
                json!({"type": serde_json::to_value(c.type_).unwrap(),
                    "status": if c.status { "True" } else { "False" }, "message": c.message})
            })
            .collect();
        json!({
            "kind": "FederatedObject",
            "namespace": o.namespace,
            "name": o.name,
            "template": template,
            "placement": serde_json::to_value(&o.spec.placement).unwrap(),
            "overrides": serde_json::to_value(&o.spec.overrides).unwrap(),
            "resourceVersion": o.resource_version,
            "status": {
                "placement": placement,
                "clusters": clusters,
                "readyReplicas": o.status.ready_replicas,
                "desiredReplicas": o.template_info.replicas,
                "shortfall": o.status.shortfall.as_ref().map(|s| json!({"replicas": s.replicas, "message": s.message})),
                "conditions": conditions,
                "lastDecision": {"summary": o.status.decision_summary, "decidedIndex": o.status.decided_index},
            },
        })
    }

    #[test]
    fn placed_clusters_become_sorted_maps() {
        let mut o = state_with_object(
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"}}"#,
        )
        .object("team", "web")
        .unwrap()
        .clone();
        let placed = |name: &str, replicas| PlacedCluster {
            cluster: name.into(),
            replicas,
            applied: replicas > 1,
            ready_replicas: 1,
            message: None,
            reported_ms: Some(5),
        };
        o.status.clusters = vec![placed("dc1", 2), placed("dc2", 1)].into();
        let doc = serde_json::to_value(ObjectView(&o)).unwrap();
        assert_eq!(
            doc["status"]["placement"],
            serde_json::json!({"dc1": 2, "dc2": 1})
        );
        assert_eq!(doc["status"]["clusters"]["dc1"]["applied"], true);
        assert_eq!(doc["status"]["clusters"]["dc2"]["reportedMs"], 5);
        assert_eq!(
            doc["status"]["conditions"][2]["message"],
            "not yet applied on dc2"
        );
        assert_eq!(doc, value_rendering(&o));
        o.status.shortfall = Some(Box::new(fedraft_core::model::ShortfallStatus {
            replicas: 2,
            message: "no capacity".into(),
        }));
        assert_eq!(
            serde_json::to_value(ObjectView(&o)).unwrap(),
            value_rendering(&o)
        );
    }
}
