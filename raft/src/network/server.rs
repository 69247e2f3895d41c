//! The peer router: axum routes under `/raft/*` that answer other nodes (and the node binary's
//! clients). Every route sits behind the cluster-secret check; a request without the right
//! `authorization: Bearer <secret>` gets 401 before its body is read.
//!
//! Handlers are thin: decode, hand to openraft or the node, encode. Errors a peer must act on
//! travel inside the 200 body (bincode `Result`); HTTP errors mean transport or auth problems.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use sha2::{Digest, Sha256};

use super::secret::constant_time_eq;
use super::*;
use crate::codec::{
    self, PeerRefusal, ProposeBatchReply, ProposeReply, ReadIndexReply, MAX_BODY_BYTES,
};
use crate::node::FedNode;
use crate::types::{NodeId, Proposal, TypeConfig};

impl FedNode {
    /// axum routes under `/raft/*` for the peer listener, authenticated by the cluster secret.
    /// They live with the handlers, over the node: the node itself knows nothing of HTTP serving.
    pub fn peer_router(&self) -> Router {
        router(self.clone())
    }
}

/// Builds the authenticated peer router for `node`.
pub fn router(node: FedNode) -> Router {
    let secret = Sha256::digest(format!("Bearer {}", node.config().cluster_secret).as_bytes());
    let secret: [u8; 32] = secret.into();
    Router::new()
        .route(PATH_APPEND, post(append))
        .route(PATH_VOTE, post(vote))
        .route(PATH_SNAPSHOT, post(snapshot))
        .route(PATH_PROPOSE, post(propose))
        .route(PATH_PROPOSE_BATCH, post(propose_batch))
        .route(PATH_READ_INDEX, post(read_index))
        .route(PATH_STATUS, get(status))
        .route(PATH_HEALTH, get(health))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(secret, require_secret))
        .with_state(node)
}

/// Compares digests of the presented and expected header values, so neither the content nor
/// the length of the secret leaks through timing.
async fn require_secret(State(expected): State<[u8; 32]>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(AUTH_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or(b"");
    let got: [u8; 32] = Sha256::digest(presented).into();
    if !constant_time_eq(&got, &expected) {
        return (StatusCode::UNAUTHORIZED, "missing or wrong cluster secret").into_response();
    }
    // A peer request that fails on this side (store/src/failpoints.rs lists every failpoint).
    fail::fail_point!("raft::peer_receive", |arg| (
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("injected by failpoint raft::peer_receive {arg:?}")
    )
        .into_response());
    next.run(req).await
}

fn bincode_reply<T: serde::Serialize>(v: &T) -> Response {
    match codec::encode(v) {
        Ok(bytes) => (StatusCode::OK, bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn bad_request(e: crate::RaftError) -> Response {
    (StatusCode::BAD_REQUEST, e.to_string()).into_response()
}

async fn append(State(node): State<FedNode>, body: Bytes) -> Response {
    let req: AppendEntriesRequest<TypeConfig> = match codec::decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    bincode_reply(&node.raft().append_entries(req).await)
}

async fn vote(State(node): State<FedNode>, body: Bytes) -> Response {
    let req: VoteRequest<NodeId> = match codec::decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    bincode_reply(&node.raft().vote(req).await)
}

async fn snapshot(State(node): State<FedNode>, body: Bytes) -> Response {
    let req: InstallSnapshotRequest<TypeConfig> = match codec::decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    bincode_reply(&node.raft().install_snapshot(req).await)
}

/// The caller's remaining wait, capped by this node's own propose timeout.
fn caller_timeout(node: &FedNode, headers: &HeaderMap) -> Duration {
    let own = node.config().propose_timeout_ms;
    let ms = headers
        .get(TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(own, |ms| ms.min(own));
    Duration::from_millis(ms)
}

async fn propose(State(node): State<FedNode>, headers: HeaderMap, body: Bytes) -> Response {
    let p: Proposal = match codec::decode(&body) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    let timeout = caller_timeout(&node, &headers);
    let result = if headers.contains_key(FORWARDED_HEADER) {
        node.propose_here(p, timeout).await
    } else {
        node.propose_within(p, timeout).await
    };
    bincode_reply(&propose_reply(result))
}

fn propose_reply(result: Result<fedraft_core::state::Applied, crate::RaftError>) -> ProposeReply {
    match result {
        Ok(applied) => codec::encode_applied(&applied).map_err(PeerRefusal::from),
        Err(e) => Err(PeerRefusal::from(e)),
    }
}

/// A follower's forwarding batch: the proposals enter this leader's batcher in request order and
/// each gets its own answer. A batch that does not decode is refused whole (400), before any of
/// it is proposed.
async fn propose_batch(State(node): State<FedNode>, headers: HeaderMap, body: Bytes) -> Response {
    let proposals: Result<Vec<Proposal>, _> = codec::decode_batch(&body)
        .and_then(|items| items.iter().map(|b| codec::decode(b)).collect());
    let proposals = match proposals {
        Ok(p) => p,
        Err(e) => return bad_request(e),
    };
    let timeout = caller_timeout(&node, &headers);
    let reply: ProposeBatchReply = node
        .propose_many_here(proposals, timeout)
        .await
        .into_iter()
        .map(propose_reply)
        .collect();
    bincode_reply(&reply)
}

async fn read_index(State(node): State<FedNode>, headers: HeaderMap) -> Response {
    let timeout = caller_timeout(&node, &headers);
    let reply: ReadIndexReply = node
        .read_index_here(timeout)
        .await
        .map_err(PeerRefusal::from);
    bincode_reply(&reply)
}

async fn status(State(node): State<FedNode>) -> Json<crate::NodeReport> {
    Json(node.report())
}

/// `?at=INDEX`: also the state hash at that index.
#[derive(serde::Deserialize)]
struct HealthQuery {
    at: Option<u64>,
}

async fn health(
    State(node): State<FedNode>,
    axum::extract::Query(q): axum::extract::Query<HealthQuery>,
) -> Json<crate::NodeHealth> {
    Json(node.health(q.at).await)
}
