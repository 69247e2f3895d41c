//! `/v1/admin/health-policy`: the failover brake's settings (`fedraft_core::health`), where
//! the brake holds failover now, and the latest stall of the log (failure thresholds count
//! from its end).
//!
//! GET shows both to any principal allowed to read clusters; PUT replaces the policy, admins
//! only, through the log (`SetHealthPolicy`), where core checks the actor and the values again
//! at apply. Must not: decide health or the brake itself (core does, in log time).

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use fedraft_core::command::Command;
use fedraft_core::health::{Brake, HealthPolicy, LogStall};
use serde_json::{json, Value};

use super::common::{allow, read, resource_version, submit, ReadParams, Q};
use crate::auth::{Access, Principal, Role};
use crate::body::decode_body;
use crate::error::ApiError;
use crate::App;

/// What GET adds to the policy: read-only, dropped from a PUT body.
struct Observed {
    brake: Brake,
    stall: Option<LogStall>,
}

fn policy_json(at: u64, policy: &HealthPolicy, observed: Option<&Observed>) -> Value {
    let mut doc = serde_json::to_value(policy).unwrap_or(Value::Null);
    doc["kind"] = json!("HealthPolicy");
    doc["resourceVersion"] = json!(at);
    if let Some(o) = observed {
        doc["brake"] = serde_json::to_value(&o.brake).unwrap_or(Value::Null);
        doc["lastLogStall"] = serde_json::to_value(o.stall).unwrap_or(Value::Null);
    }
    doc
}

pub async fn get_policy(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ReadParams>,
) -> Result<Json<Value>, ApiError> {
    allow(&app, &p, Access::ReadClusters)?;
    let (at, policy, observed) = read(&app, q.stale, |s| {
        let h = s.health();
        let observed = Observed {
            brake: h.brake.clone(),
            stall: h.stall,
        };
        (s.applied_index(), h.policy.clone(), observed)
    })
    .await?;
    Ok(Json(policy_json(at, &policy, Some(&observed))))
}

pub async fn put_policy(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    if p.role != Role::Admin {
        return Err(ApiError::forbidden(format!(
            "{} may not set the health policy",
            p.name
        )));
    }
    let mut doc = decode_body::<Value>(&headers, body, app.cfg.body_limit_bytes).await?;
    // What GET returns may be sent back as it is: its read-only parts are dropped.
    if let Some(m) = doc.as_object_mut() {
        m.remove("kind");
        m.remove("resourceVersion");
        m.remove("brake");
        m.remove("lastLogStall");
    }
    let policy: HealthPolicy = serde_json::from_value(doc)
        .map_err(|e| ApiError::invalid("body", format!("not a health policy: {e}")))?;
    check_fields(&policy)?;
    let applied = submit(&app, &p, &headers, Command::SetHealthPolicy(policy.clone())).await?;
    Ok(Json(policy_json(resource_version(&applied), &policy, None)))
}

/// The policy's values, each refused with the field it is in (core checks them again at
/// apply, with one message for all).
fn check_fields(p: &HealthPolicy) -> Result<(), ApiError> {
    let percent = |field: &str, v: u32| match v {
        0..=100 => Ok(()),
        _ => Err(ApiError::invalid(
            field,
            format!("{v} is not a percentage (0 to 100; 0 turns it off)"),
        )),
    };
    percent("fleetPercent", p.fleet_percent)?;
    percent("regionPercent", p.region_percent)?;
    if !(1..=86_400).contains(&p.window_seconds) {
        return Err(ApiError::invalid(
            "windowSeconds",
            format!("{} is outside 1 to 86400 seconds", p.window_seconds),
        ));
    }
    p.check().map_err(|e| ApiError::invalid("regionLabel", e))
}
