//! `/v1/status` (this node's raft position and the state hash) and `/v1/admin/backup` (an
//! online, consistent snapshot of the replicated state in the `backup` file format).
//!
//! Both read linearizable state by default, so the hash and the backup include every write
//! acknowledged before the request. Status is for admins and operators; backup for admins only
//! (it holds every cluster's credentials). Must not: change state.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;

use super::common::{allow, read, ReadParams, Q};
use crate::auth::{Access, Principal, Role};
use crate::backup;
use crate::error::ApiError;
use crate::App;

/// The backup body is sent in pieces of this size, so no single write holds the whole state twice.
const BACKUP_CHUNK_BYTES: usize = 1 << 20;
/// Response headers that repeat the backup's identity for clients that do not parse the file.
pub const STATE_HASH_HEADER: &str = "x-fedraft-state-hash";
pub const APPLIED_INDEX_HEADER: &str = "x-fedraft-applied-index";

pub async fn status(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ReadParams>,
) -> Result<Json<serde_json::Value>, ApiError> {
    allow(&app, &p, Access::ReadClusters)?;
    let (hash, applied, log_time) = read(&app, q.stale, |s| {
        (s.state_hash_hex(), s.applied_index(), s.log_time_ms())
    })
    .await?;
    let st = app.node.status();
    // On the leader: each member's highest log index known to match the leader's, so a console
    // can show every node's lag from one node. Absent (null) on followers.
    let replication = app
        .node
        .raft()
        .metrics()
        .borrow()
        .replication
        .as_ref()
        .map(|r| {
            r.iter()
                .map(|(id, log)| (id.to_string(), log.map(|l| l.index)))
                .collect::<std::collections::BTreeMap<_, _>>()
        });
    Ok(Json(json!({
        "nodeId": st.id,
        "clusterId": app.node.config().cluster_id,
        "term": st.term,
        "leaderId": st.leader_id,
        "isLeader": st.is_leader,
        "voters": st.voters,
        "learners": st.learners,
        "commitIndex": st.commit_index,
        "raftAppliedIndex": st.applied_index,
        "appliedIndex": applied,
        "stateHash": hash,
        "logTimeMs": log_time,
        "lastLogIndex": st.last_log_index,
        "replication": replication,
    })))
}

pub async fn backup(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
    Q(q): Q<ReadParams>,
) -> Result<Response, ApiError> {
    if p.role != Role::Admin {
        return Err(ApiError::forbidden(format!(
            "{} may not take backups",
            p.name
        )));
    }
    let cluster_id = app.node.config().cluster_id.clone();
    // The snapshot is encoded under the state's read lock, which briefly holds back apply: the
    // price of a cut that is consistent at one applied index.
    let (h, snapshot) = read(&app, q.stale, move |s| backup::capture(&cluster_id, s)).await?;
    tracing::info!(
        actor = %p.name,
        applied_index = h.applied_index,
        bytes = h.snapshot_bytes,
        "backup taken"
    );
    let prefix = backup::encode_prefix(&h);
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = std::iter::once(Ok(prefix.into()))
        .chain(
            snapshot
                .chunks(BACKUP_CHUNK_BYTES)
                .map(|c| Ok(bytes::Bytes::copy_from_slice(c))),
        )
        .collect();
    let mut resp = (
        StatusCode::OK,
        Body::from_stream(futures::stream::iter(chunks)),
    )
        .into_response();
    let hdrs = resp.headers_mut();
    hdrs.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&h.state_hash) {
        hdrs.insert(STATE_HASH_HEADER, v);
    }
    hdrs.insert(APPLIED_INDEX_HEADER, HeaderValue::from(h.applied_index));
    Ok(resp)
}
