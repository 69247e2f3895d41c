//! What a member's live object says of its rollout: the template revision it runs, its
//! generations, replica counts and conditions, read by kind (Deployment, StatefulSet,
//! ReplicaSet, DaemonSet, Job), and for other kinds the result of the rollout's health rule;
//! with it, how many of the workload's pods the member left Pending unschedulable (counted by
//! the probe's pod inventory, `crate::probe`), as core's descheduler reads it.
//! The reporter (`crate::report`) sends these as `WorkloadReports` when they change; a pass
//! gathers them, with the object's status and preserved values, in [`reports_in_place`].
//!
//! Must not: judge health (core's `rollout::verdict` does, from what this reports) or talk to
//! member clusters (it reads objects the watches already hold).

use fedraft_core::rollout::deschedule::unschedulable_condition;
use fedraft_core::rollout::{
    cut_reason, word, HealthRule, JobState, WorkloadCondition, WorkloadObservation,
    HEALTH_RULE_CONDITION, MAX_CONDITIONS, REVISION_ANNOTATION,
};
use serde_json::Value;

use fedraft_core::command::StatusValuesReport;
use fedraft_core::karmada::jsonpath::JsonPath;

use crate::desired::{Prepared, SharedKey};
use crate::live_object::LiveObject;
use crate::plan::{self, at};
use crate::preserve::status_values;
use crate::report::{object_report as report, HeldStatus, HeldWorkload};

/// What a pass reports of one object in place on `cluster` (`live` as the member holds it):
/// its status, its rollout, and the status values it preserves. A health rule or preserved
/// paths may read any field, so only then is the whole object parsed; every other report reads
/// what was summed up when the watch delivered the object.
pub(crate) fn reports_in_place(
    p: &Prepared,
    cluster: &str,
    live: Option<&LiveObject>,
    (rule, paths): (Option<&HealthRule>, Option<&Vec<JsonPath>>),
    unschedulable: u32,
) -> (HeldStatus, Option<HeldWorkload>, Option<StatusValuesReport>) {
    if rule.is_none() && paths.is_none() {
        let ready = live.map_or(0, |l| l.ready_replicas(p.replicas));
        let workload = live
            .and_then(LiveObject::workload)
            .map(|o| report_of(&p.key, o.clone(), unschedulable));
        return (report(&p.key, true, ready, None), workload, None);
    }
    let whole = live.and_then(LiveObject::full);
    let object = whole.as_ref();
    let ready = plan::ready_replicas(&p.id.kind, object, p.replicas);
    (
        report(&p.key, true, ready, None),
        workload_report(&p.key, &p.id.kind, object, rule, unschedulable),
        status_values(&p.key, cluster, object, paths),
    )
}

/// The workload report of an applied object (`live` as the member holds it), when it has one.
pub fn workload_report(
    key: &SharedKey,
    kind: &str,
    live: Option<&Value>,
    rule: Option<&HealthRule>,
    unschedulable: u32,
) -> Option<HeldWorkload> {
    let observed = observe_workload(kind, live?, rule)?;
    Some(report_of(key, observed, unschedulable))
}

/// The workload report of `observed`, with the unschedulable count.
pub fn report_of(
    key: &SharedKey,
    mut observed: WorkloadObservation,
    unschedulable: u32,
) -> HeldWorkload {
    if let Some(c) = unschedulable_condition(unschedulable) {
        // Last, so the workload's own conditions cannot push the count out.
        let mut list = observed.conditions.to_vec();
        list.truncate(MAX_CONDITIONS - 1);
        list.push(c);
        observed.conditions = list.into();
    }
    HeldWorkload {
        key: key.clone(),
        observed,
    }
}

/// Whether `rule` holds on `live`, and the value found (its JSON text unless a string; empty
/// when the path is absent), cut for a condition's reason.
fn check_rule(rule: &HealthRule, live: &Value) -> WorkloadCondition {
    let (status, found) = match live.pointer(&rule.path) {
        None => (false, String::new()),
        Some(Value::String(s)) => (*s == rule.value, s.clone()),
        Some(v) => {
            let text = v.to_string();
            (text == rule.value, text)
        }
    };
    WorkloadCondition {
        type_: HEALTH_RULE_CONDITION.into(),
        status,
        reason: cut_reason(&found),
    }
}

/// What a live object's status says of its rollout, for the kinds whose status fedraft reads
/// (Deployment, StatefulSet, ReplicaSet, DaemonSet, Job) and for any object carrying a rollout
/// revision; None for the rest (their `applied` flag is all there is). `rule` is the object's
/// health rule for kinds fedraft does not read; its result is reported as one more condition.
pub fn observe_workload(
    kind: &str,
    live: &Value,
    rule: Option<&HealthRule>,
) -> Option<WorkloadObservation> {
    let revision = at(live, "/metadata/annotations")
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<u32>().ok());
    let workload = matches!(
        kind,
        "Deployment" | "StatefulSet" | "ReplicaSet" | "DaemonSet" | "Job"
    );
    if !workload && revision.is_none() {
        return None;
    }
    let int = |p: &str| at(live, p).and_then(Value::as_i64).unwrap_or(0);
    let count = |p: &str| u32::try_from(int(p).max(0)).unwrap_or(u32::MAX);
    let spec_replicas = |p: &str| {
        at(live, p)
            .and_then(Value::as_i64)
            .map_or(1, |n| u32::try_from(n.max(0)).unwrap_or(u32::MAX))
    };
    let conditions: Vec<WorkloadCondition> = at(live, "/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_CONDITIONS)
        .map(|c| WorkloadCondition {
            type_: word(c["type"].as_str().unwrap_or_default()),
            status: c["status"] == "True",
            reason: word(c["reason"].as_str().unwrap_or_default()),
        })
        .collect();
    let mut conditions = conditions;
    if let Some(rule) = rule.filter(|_| !workload) {
        // Last, so a status full of its own conditions cannot push the rule's result out.
        conditions.truncate(MAX_CONDITIONS - 1);
        conditions.push(check_rule(rule, live));
    }
    let holds = |t: &str| conditions.iter().any(|c| c.type_ == t && c.status);
    let (replicas, updated, ready, available, job) = match kind {
        "DaemonSet" => (
            count("/status/desiredNumberScheduled"),
            count("/status/updatedNumberScheduled"),
            count("/status/numberReady"),
            count("/status/numberAvailable"),
            JobState::None,
        ),
        "Job" => {
            let state = if holds("Complete") {
                JobState::Complete
            } else if holds("Failed") {
                JobState::Failed
            } else {
                JobState::Running
            };
            (
                spec_replicas("/spec/completions"),
                count("/status/succeeded"),
                count("/status/ready"),
                count("/status/active"),
                state,
            )
        }
        "Deployment" | "StatefulSet" | "ReplicaSet" => (
            spec_replicas("/spec/replicas"),
            count("/status/updatedReplicas"),
            count("/status/readyReplicas"),
            count("/status/availableReplicas"),
            JobState::None,
        ),
        _ => (0, 0, 0, 0, JobState::None),
    };
    Some(WorkloadObservation {
        kind: word(kind),
        revision,
        generation: int("/metadata/generation"),
        observed_generation: int("/status/observedGeneration"),
        replicas,
        updated,
        ready,
        available,
        conditions: conditions.into(),
        job,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_observations_by_kind() {
        let d = serde_json::json!({
            "metadata": {"generation": 3, "annotations": {REVISION_ANNOTATION: "2"}},
            "spec": {"replicas": 4},
            "status": {"observedGeneration": 2, "updatedReplicas": 1, "readyReplicas": 4,
                "availableReplicas": 4, "conditions": [
                    {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]},
        });
        let o = observe_workload("Deployment", &d, None).unwrap();
        assert_eq!(o.revision, Some(2));
        assert_eq!((o.generation, o.observed_generation), (3, 2));
        assert_eq!((o.replicas, o.updated, o.ready, o.available), (4, 1, 4, 4));
        assert_eq!(o.conditions[0].reason, "ReplicaSetUpdated");
        let job = serde_json::json!({"status": {"conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}});
        assert_eq!(
            observe_workload("Job", &job, None).unwrap().job,
            JobState::Failed
        );
        assert!(observe_workload("ConfigMap", &serde_json::json!({}), None).is_none());
        // A kind fedraft does not read, under a rollout with a health rule.
        let rule = HealthRule {
            path: "/status/phase".into(),
            value: "Ready".into(),
        };
        let cert = |phase: Value| {
            serde_json::json!({"metadata": {"annotations": {REVISION_ANNOTATION: "1"}},
                "status": {"phase": phase}})
        };
        let o = observe_workload("Certificate", &cert("Issuing".into()), Some(&rule)).unwrap();
        let c = o.conditions.last().unwrap();
        assert_eq!((&*c.type_, c.status), (HEALTH_RULE_CONDITION, false));
        assert_eq!(c.reason, "Issuing");
        let o = observe_workload("Certificate", &cert("Ready".into()), Some(&rule)).unwrap();
        assert!(o.conditions.last().unwrap().status);
        let numeric = HealthRule {
            path: "/status/phase".into(),
            value: "3".into(),
        };
        let o = observe_workload("Certificate", &cert(3.into()), Some(&numeric)).unwrap();
        assert!(o.conditions.last().unwrap().status);
        let o = observe_workload("Certificate", &cert(Value::Null), Some(&rule)).unwrap();
        assert!(!o.conditions.last().unwrap().status);
        // Pods left Pending unschedulable ride along as the last condition, after at most
        // seven of the workload's own.
        let key = std::sync::Arc::new(fedraft_core::model::ObjectKey::new("ns", "web"));
        let r = workload_report(&key, "Deployment", Some(&d), None, 2).unwrap();
        assert_eq!(
            fedraft_core::rollout::deschedule::unschedulable(&r.observed),
            2
        );
        let r = workload_report(&key, "Deployment", Some(&d), None, 0).unwrap();
        assert_eq!(r.observed.conditions.len(), 1);
        // Deployments keep their own reading: the rule is not applied to them.
        let o = observe_workload("Deployment", &d, Some(&rule)).unwrap();
        assert!(o
            .conditions
            .iter()
            .all(|c| c.type_ != HEALTH_RULE_CONDITION));
    }
}
