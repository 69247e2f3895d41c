//! `fedraft schedule -f SCENARIO`: runs core's scheduler offline, without a server.
//!
//! A scenario is a multi-document YAML/JSON file: `Cluster` documents (name, labels, taints,
//! `cordoned`, `health` Ready|NotReady|Unknown with `healthSinceMs`, reported `available`
//! resources, and the object's `currentReplicas` there), exactly one `FederatedObject`
//! (template, placement) and optionally one `Scenario` document with `nowMs` (log time, default 0).
//! The output is the decision record: a readable summary, or JSON with `-o json`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use fedraft_core::policy::{Placement, Resources, Taint};
use fedraft_core::render;
use fedraft_core::scheduler::{self, ClusterView, HealthView, ScheduleRequest};
use serde::Deserialize;
use serde_json::Value;

use crate::output::{self, Format};
use crate::timefmt::Times;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClusterDoc {
    #[allow(dead_code)]
    kind: String,
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    taints: Vec<Taint>,
    #[serde(default)]
    cordoned: bool,
    #[serde(default = "ready")]
    health: String,
    #[serde(default)]
    health_since_ms: u64,
    #[serde(default)]
    available: Option<Resources>,
    #[serde(default)]
    current_replicas: u32,
    #[serde(default)]
    api_endpoint: Option<String>,
}

fn ready() -> String {
    "Ready".into()
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ObjectDoc {
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: Option<String>,
    template: Value,
    #[serde(default)]
    placement: Placement,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScenarioDoc {
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    now_ms: u64,
}

/// The decision for a scenario, as JSON (decision record plus summary and reasons as text).
pub fn evaluate(docs: &[Value]) -> anyhow::Result<Value> {
    let mut clusters = Vec::new();
    let mut object = None;
    let mut now_ms = 0;
    for (i, d) in docs.iter().enumerate() {
        let n = i + 1;
        match d.get("kind").and_then(Value::as_str) {
            Some("Cluster") => clusters.push(
                serde_json::from_value::<ClusterDoc>(d.clone())
                    .with_context(|| format!("document {n} (Cluster)"))?,
            ),
            Some("FederatedObject") => {
                if object.is_some() {
                    bail!("document {n}: a scenario holds exactly one FederatedObject");
                }
                object = Some(
                    serde_json::from_value::<ObjectDoc>(d.clone())
                        .with_context(|| format!("document {n} (FederatedObject)"))?,
                );
            }
            Some("Scenario") => {
                now_ms = serde_json::from_value::<ScenarioDoc>(d.clone())
                    .with_context(|| format!("document {n} (Scenario)"))?
                    .now_ms
            }
            Some(other) => {
                bail!("document {n}: unknown kind {other:?} (Cluster, FederatedObject or Scenario)")
            }
            None => bail!("document {n}: missing kind"),
        }
    }
    let Some(obj) = object else {
        bail!("the scenario has no FederatedObject")
    };
    if clusters.is_empty() {
        bail!("the scenario has no Cluster documents");
    }
    obj.placement
        .validate("placement")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut names = BTreeSet::new();
    for c in &clusters {
        if !names.insert(c.name.clone()) {
            bail!("cluster {} appears twice", c.name);
        }
    }
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    let views: Vec<ClusterView<'_>> = clusters
        .iter()
        .map(|c| {
            let _ = &c.api_endpoint;
            let health = match c.health.as_str() {
                "Ready" => Ok(HealthView::Ready),
                "NotReady" => Ok(HealthView::NotReady {
                    since_ms: c.health_since_ms,
                }),
                "Unknown" => Ok(HealthView::Unknown {
                    since_ms: c.health_since_ms,
                }),
                other => Err(anyhow::anyhow!(
                    "cluster {}: health {other:?} is not Ready, NotReady or Unknown",
                    c.name
                )),
            }?;
            Ok(ClusterView {
                name: &c.name,
                labels: &c.labels,
                taints: &c.taints,
                cordoned: c.cordoned,
                health,
                available: c.available,
                extended: None,
                held_to: None,
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let current: BTreeMap<String, u32> = clusters
        .iter()
        .filter(|c| c.current_replicas > 0)
        .map(|c| (c.name.clone(), c.current_replicas))
        .collect();
    let per_replica = render::try_template_requests(&obj.template)
        .map_err(|e| anyhow::anyhow!("template: {e}"))?;
    let object_key = format!(
        "{}/{}",
        obj.namespace.as_deref().unwrap_or("default"),
        obj.name.as_deref().unwrap_or("")
    );
    // As a put would store it: an omitted replica mode decided by the template's kind.
    let placement = fedraft_core::policy::Placement {
        replicas: obj
            .placement
            .replicas
            .resolved(render::carries_replicas(&obj.template)),
        ..obj.placement.clone()
    };
    let req = ScheduleRequest {
        object_key: &object_key,
        placement: &placement,
        total_replicas: render::template_replicas(&obj.template),
        per_replica,
        per_replica_extended: &fedraft_core::policy::NO_EXTENDED,
        clusters: &views,
        current: &current,
        allowed: None,
        peers: None,
        overflow: None,
        now_ms,
        steady_spread: true,
    };
    let decision = scheduler::schedule(&req);
    let mut v = fedraft_apiserver::wire::decision_json(&decision);
    if let Some(m) = v.as_object_mut() {
        m.insert(
            "namespace".into(),
            obj.namespace
                .clone()
                .map(Value::String)
                .unwrap_or(Value::Null),
        );
        m.insert(
            "name".into(),
            obj.name.clone().map(Value::String).unwrap_or(Value::Null),
        );
        m.insert("totalReplicas".into(), req.total_replicas.into());
    }
    Ok(v)
}

/// The scenario's log time (`Scenario.nowMs`, default 0): ages in the text output are
/// measured from it, not from this machine's clock.
fn scenario_now_ms(docs: &[Value]) -> u64 {
    docs.iter()
        .filter(|d| d.get("kind").and_then(Value::as_str) == Some("Scenario"))
        .filter_map(|d| d.get("nowMs").and_then(Value::as_u64))
        .next_back()
        .unwrap_or(0)
}

pub fn run(file: &Path, format: Format) -> anyhow::Result<ExitCode> {
    let docs = crate::apply::read_docs(file)?;
    let v = evaluate(&docs)?;
    let times = match format {
        Format::Wide => Times::Absolute,
        _ => Times::Age {
            now_ms: scenario_now_ms(&docs),
        },
    };
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&v)?),
        Format::Yaml => print!("{}", serde_yaml::to_string(&v)?),
        Format::Table | Format::Wide => print!("{}", output::describe_decision(&v, "", times)),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divided_by_static_weights_offline() {
        let docs = crate::apply::parse_docs(
            r#"
kind: Cluster
name: dc1
---
kind: Cluster
name: dc2
cordoned: true
---
kind: Cluster
name: dc3
---
kind: FederatedObject
namespace: web
name: api
template: {apiVersion: apps/v1, kind: Deployment, metadata: {name: api}, spec: {replicas: 4}}
placement:
  replicas:
    mode: Divided
"#,
        )
        .unwrap();
        let v = evaluate(&docs).unwrap();
        let placement = v["placement"].as_object().unwrap();
        let total: u64 = placement.values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(total, 4);
        assert!(!placement.contains_key("dc2"), "{v}");
        assert_eq!(v["dropped"][0]["cluster"], "dc2");
    }
}
