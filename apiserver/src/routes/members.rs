//! `/v1/admin/members`: raft membership for the add-a-node and replace-a-node runbooks. Admins
//! only. Read the membership anywhere; add a learner or set the voters on the leader (elsewhere
//! the answer is 503 naming the leader, because a membership change must not be forwarded
//! blindly while the caller cannot see its outcome).
//!
//! Adding a learner waits until it has caught up; setting the voters removes every member not
//! listed. Must not: touch replicated fedraft state (only raft's membership changes).

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{Principal, Role};
use crate::body::decode_body;
use crate::error::ApiError;
use crate::App;

/// A membership change needs at least this many voters (fedraft runs one per data center).
const MIN_VOTERS: usize = 1;

fn admin_only(p: &Principal) -> Result<(), ApiError> {
    if p.role == Role::Admin {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "{} may not change cluster membership",
            p.name
        )))
    }
}

fn members_json(app: &App) -> serde_json::Value {
    let st = app.node.status();
    let m = app.node.raft().metrics();
    let m = m.borrow();
    let addrs: BTreeMap<u64, String> = m
        .membership_config
        .membership()
        .nodes()
        .map(|(id, n)| (*id, n.addr.clone()))
        .collect();
    json!({
        "leaderId": st.leader_id,
        "voters": st.voters,
        "learners": st.learners,
        "peerAddrs": addrs,
    })
}

pub async fn list(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
) -> Result<Json<serde_json::Value>, ApiError> {
    admin_only(&p)?;
    Ok(Json(members_json(&app)))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddLearner {
    id: u64,
    peer_addr: String,
}

pub async fn add(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<serde_json::Value>, ApiError> {
    admin_only(&p)?;
    let req: AddLearner = decode_body(&headers, body, app.cfg.body_limit_bytes).await?;
    if req.id == 0 {
        return Err(ApiError::invalid("id", "node ids start at 1"));
    }
    if req.peer_addr.is_empty() || !req.peer_addr.contains(':') {
        return Err(ApiError::invalid("peerAddr", "expected HOST:PORT"));
    }
    let st = app.node.status();
    if st.voters.contains(&req.id) {
        return Err(ApiError::Conflict {
            message: format!("node {} is already a voter", req.id),
            expected: None,
            found: None,
        });
    }
    tracing::info!(actor = %p.name, id = req.id, addr = %req.peer_addr, "adding learner");
    app.node
        .add_learner(req.id, req.peer_addr)
        .await
        .map_err(|e| ApiError::from_raft(&e))?;
    Ok(Json(members_json(&app)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetVoters {
    voters: BTreeSet<u64>,
}

pub async fn set_voters(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<serde_json::Value>, ApiError> {
    admin_only(&p)?;
    let req: SetVoters = decode_body(&headers, body, app.cfg.body_limit_bytes).await?;
    if req.voters.len() < MIN_VOTERS {
        return Err(ApiError::invalid(
            "voters",
            "at least one voter is required",
        ));
    }
    let st = app.node.status();
    if let Some(unknown) = req
        .voters
        .iter()
        .find(|v| !st.voters.contains(*v) && !st.learners.contains(*v))
    {
        return Err(ApiError::invalid(
            "voters",
            format!("node {unknown} is not a member: add it as a learner first"),
        ));
    }
    tracing::info!(actor = %p.name, voters = ?req.voters, "changing voters");
    app.node
        .change_membership(req.voters)
        .await
        .map_err(|e| ApiError::from_raft(&e))?;
    Ok(Json(members_json(&app)))
}
