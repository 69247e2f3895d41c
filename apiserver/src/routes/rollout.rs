//! `/v1/namespaces/{ns}/objects/{name}/rollout`: an object's rollout and what its clusters
//! report, and the moves on it (`POST .../rollout/{pause|resume|abort|undo|promote}`).
//!
//! GET answers from state (linearizable unless `?stale=true`): the strategy, the phase and its
//! reason, the waves, per placed cluster the revision it should run and the workload status it
//! reported (revision, generations, replica counts, conditions, verdict), the rollout's
//! story, the replicas kept on clusters the object is leaving (`handover`), and the fail-back
//! choice with any fail-back pending (cluster, Ready since, due at), and the descheduling policy
//! with the replicas each cluster left Pending unschedulable (since, due at) and the clusters
//! held to what they could run. A move is proposed as one
//! `Command::Rollout`; core checks it again against the rollout as it is when the entry applies
//! (a pause of a completed rollout is 422, naming `action`). Must not: decide anything about
//! the rollout itself.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use fedraft_core::command::{Command, RolloutAction};
use fedraft_core::state::State as CoreState;
use serde_json::{json, Value};

use super::common::{allow, read, resource_version, submit, ReadParams, P, Q};
use super::objects::as_actor;
use crate::auth::{Access, Principal};
use crate::error::ApiError;
use crate::wire::{valid_label, valid_object_ref};
use crate::App;

/// The rollout document of one object, None when the object does not exist.
pub fn rollout_json(s: &CoreState, ns: &str, name: &str) -> Option<Value> {
    let obj = s.object(ns, name)?;
    let rec = s.rollout(ns, name);
    let status = s.workload_status(ns, name);
    let clusters: Vec<Value> = obj
        .status
        .clusters
        .iter()
        .map(|p| {
            let w = status.and_then(|m| m.get(&*p.cluster));
            json!({
                "cluster": p.cluster,
                "replicas": p.replicas,
                "desiredRevision": rec.map(|r| r.revision_for(&p.cluster)),
                "applied": p.applied,
                "readyReplicas": p.ready_replicas,
                "workload": w.map(|w| json!({
                    "revision": w.observed.revision,
                    "generation": w.observed.generation,
                    "observedGeneration": w.observed.observed_generation,
                    "replicas": w.observed.replicas,
                    "updatedReplicas": w.observed.updated,
                    "readyReplicas": w.observed.ready,
                    "availableReplicas": w.observed.available,
                    "conditions": w.observed.conditions,
                    "job": format!("{:?}", w.observed.job),
                    "verdict": format!("{:?}", w.verdict),
                    "verdictSinceMs": w.verdict_since_ms,
                })),
            })
        })
        .collect();
    let rollout = rec.map(|r| {
        json!({
            "strategy": r.strategy,
            "phase": format!("{:?}", r.phase),
            "reason": r.reason,
            "stableRevision": r.stable,
            "targetRevision": r.target,
            "revisions": r.revisions.iter().map(|v| json!({"revision": v.number, "index": v.index})).collect::<Vec<_>>(),
            "waves": r.waves,
            "wave": r.wave,
            "waveStartedMs": r.wave_started_ms,
            "healthySinceMs": r.healthy_since_ms,
            "failures": r.failures,
            "events": r.events,
        })
    });
    // Replicas kept on clusters the object is leaving until the new placement is ready.
    let handover = s
        .handover(&obj.key())
        .map(|h| json!({"held": h.held, "sinceMs": h.since_ms, "deadlineMs": h.deadline_ms}));
    // The fail-back choice, the clusters failed over from (each with when it fails back, once
    // it is Ready again), and the last fail-back.
    let key = obj.key();
    let failback = json!({
        "policy": s.failback(&key),
        "away": s.failback_away(&key),
        "pending": s.failback_pending(&key),
        "last": s.failback_last(&key).map(|f| json!({
            "index": f.index,
            "clusters": f.clusters.iter().map(|(c, since)| json!({"cluster": c, "readySinceMs": since})).collect::<Vec<_>>(),
            "heldSeconds": f.held_seconds,
        })),
    });
    Some(json!({
        "kind": "Rollout",
        "namespace": ns,
        "name": name,
        "resourceVersion": obj.resource_version,
        "rollout": rollout,
        "handover": handover,
        "failBack": failback,
        "descheduling": descheduling_json(s, &key),
        "clusters": clusters,
    }))
}

/// The descheduling policy, per placed cluster the replicas Pending unschedulable (since when,
/// and when they move if the policy is on and the object divides its replicas), the clusters
/// held to what they could run, and the last descheduling.
fn descheduling_json(s: &CoreState, key: &fedraft_core::model::ObjectKey) -> Value {
    let pending: Vec<Value> = s
        .stuck(key)
        .into_iter()
        .flatten()
        .map(|(cluster, st)| {
            json!({
                "cluster": cluster,
                "replicas": st.replicas,
                "sinceMs": st.since_ms,
                "dueAtMs": s.deschedule_due(key, cluster),
            })
        })
        .collect();
    let held: Vec<Value> = s
        .held(key)
        .into_iter()
        .flatten()
        .map(|(cluster, e)| {
            json!({
                "cluster": cluster,
                "replicas": e.replicas,
                "sinceMs": e.since_ms,
                "untilMs": e.until_ms,
            })
        })
        .collect();
    json!({
        "policy": s.descheduling(key),
        "pending": pending,
        "held": held,
        "last": s.deschedule_last(key),
    })
}

pub async fn get(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name)): P<(String, String)>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    valid_label(&ns, "namespace")?;
    valid_object_ref(&name, "name")?;
    allow(&app, &p, Access::ReadNamespace(&ns))?;
    let (n, m) = (ns.clone(), name.clone());
    read(&app, q.stale, move |s| rollout_json(s, &n, &m))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("object", format!("{ns}/{name}")))
}

pub async fn act(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    P((ns, name, action)): P<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    valid_label(&ns, "namespace")?;
    valid_object_ref(&name, "name")?;
    allow(&app, &p, Access::WriteNamespace(&ns))?;
    let action = match action.as_str() {
        "pause" => RolloutAction::Pause,
        "resume" => RolloutAction::Resume,
        "abort" => RolloutAction::Abort,
        "undo" => RolloutAction::Undo,
        "promote" => RolloutAction::Promote,
        other => {
            return Err(ApiError::invalid(
                "action",
                format!("{other:?} is none of pause, resume, abort, undo, promote"),
            ))
        }
    };
    let command = Command::Rollout {
        namespace: ns.clone(),
        name: name.clone(),
        action,
    };
    let applied = submit(&app, &as_actor(&p), &headers, command).await?;
    let rv = resource_version(&applied);
    let (n, m) = (ns.clone(), name.clone());
    let mut doc = app
        .node
        .read_stale(move |s| rollout_json(s, &n, &m))
        .unwrap_or_else(|| json!({"kind": "Rollout", "namespace": ns, "name": name}));
    doc["resourceVersion"] = json!(rv);
    Ok((StatusCode::OK, Json(doc)).into_response())
}
