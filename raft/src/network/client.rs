//! Outbound peer calls over one pooled reqwest client: openraft's `RaftNetwork` (append, vote,
//! snapshot chunks) and fedraft's own forwarding calls (propose, read-index, status).
//!
//! Error mapping matters for openraft's retry logic: a refused connection is `Unreachable`
//! (back off), anything else that failed in transit is `Network` (retry), and an error the peer
//! itself returned is `RemoteError`. Appends also carry no more entries than the peer answered
//! in time before (`append_budget`): a larger one is refused with `PayloadTooLarge` before it
//! leaves, which openraft answers with a smaller batch.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError as OrRaftError,
    RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::append_budget::{AppendBudget, InFlight};
use super::tls::PeerTls;
use super::*;
use crate::codec::{self, ProposeReply, ReadIndexReply};
use crate::error::RaftError;
use crate::types::{NodeId, Proposal, TypeConfig};

/// Installs the process-wide rustls provider (ring) once; a second install is not an error.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why a peer call failed in transit.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The request never reached the peer (connection refused, DNS): safe to retry anywhere.
    #[error("peer unreachable: {0}")]
    Unreachable(String),
    /// The request may or may not have been processed (timeout, reset mid-request).
    #[error("peer call failed: {0}")]
    Transport(String),
    /// The peer answered with a non-success HTTP status (401: wrong secret).
    #[error("peer answered HTTP {0}")]
    Status(u16),
    #[error(transparent)]
    Codec(#[from] RaftError),
}

/// A pooled HTTP client that authenticates with the cluster secret (and, with TLS, with this
/// node's certificate).
#[derive(Clone)]
pub struct PeerClient {
    http: reqwest::Client,
    bearer: Arc<str>,
    /// "http" or "https": every peer of a cluster speaks the same one.
    scheme: &'static str,
    /// Advertised peer address -> address actually dialled (a local proxy or relay). Empty in a
    /// plain deployment.
    dial: Arc<BTreeMap<String, String>>,
}

impl PeerClient {
    /// A plain-HTTP peer client.
    pub fn new(secret: &str) -> Result<PeerClient, RaftError> {
        Self::with_tls(secret, None)
    }

    /// A peer client that speaks HTTPS with `tls` (mutual TLS against the cluster CA) when given.
    pub fn with_tls(secret: &str, tls: Option<&PeerTls>) -> Result<PeerClient, RaftError> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .tcp_nodelay(true);
        let scheme = match tls {
            Some(t) => {
                builder = builder
                    .tls_backend_preconfigured((*t.client).clone())
                    .https_only(true);
                "https"
            }
            None => "http",
        };
        let http = builder
            .build()
            .map_err(|e| RaftError::Invalid(format!("http client: {e}")))?;
        Ok(PeerClient {
            http,
            bearer: format!("Bearer {secret}").into(),
            scheme,
            dial: Arc::default(),
        })
    }

    /// Dials `to` whenever a call targets the advertised address `from` (membership addresses
    /// are shared by all nodes; this table is this node's own route to them).
    pub fn with_dial(mut self, dial: BTreeMap<String, String>) -> PeerClient {
        self.dial = Arc::new(dial);
        self
    }

    fn route<'a>(&'a self, addr: &'a str) -> &'a str {
        self.dial.get(addr).map_or(addr, String::as_str)
    }

    /// POSTs raw bytes to `{scheme}://{addr}{path}` and returns the response body.
    pub async fn post(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        timeout: Duration,
        extra: &[(&str, String)],
    ) -> Result<Vec<u8>, CallError> {
        // A peer that cannot be reached (store/src/failpoints.rs lists every failpoint).
        fail::fail_point!("raft::peer_send", |arg| Err(CallError::Unreachable(
            format!("{addr}{path}: injected by failpoint raft::peer_send {arg:?}")
        )));
        let mut req = self
            .http
            .post(format!("{}://{}{path}", self.scheme, self.route(addr)))
            .header(AUTH_HEADER, &*self.bearer)
            .header("content-type", "application/octet-stream")
            .timeout(timeout)
            .body(body);
        for (k, v) in extra {
            req = req.header(*k, v);
        }
        let resp = req.send().await.map_err(classify)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(CallError::Status(status.as_u16()));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))?;
        Ok(bytes.to_vec())
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        req: &Req,
        timeout: Duration,
        extra: &[(&str, String)],
    ) -> Result<Resp, CallError> {
        let body = codec::encode(req)?;
        let bytes = self.post(addr, path, body, timeout, extra).await?;
        Ok(codec::decode(&bytes)?)
    }

    /// Asks `addr` to commit a proposal. `forwarded`: the receiver must not forward it again.
    pub async fn propose(
        &self,
        addr: &str,
        p: &Proposal,
        timeout: Duration,
        forwarded: bool,
    ) -> Result<Result<fedraft_core::state::Applied, RaftError>, CallError> {
        let mut extra = vec![(TIMEOUT_HEADER, timeout.as_millis().to_string())];
        if forwarded {
            extra.push((FORWARDED_HEADER, "1".to_string()));
        }
        // The HTTP deadline is a little longer than the leader's, so its NoQuorum answer arrives.
        let reply: ProposeReply = self
            .call(
                addr,
                PATH_PROPOSE,
                p,
                timeout + Duration::from_millis(500),
                &extra,
            )
            .await?;
        Ok(match reply {
            Ok(bytes) => codec::decode_applied(&bytes),
            Err(refusal) => Err(refusal.into()),
        })
    }

    /// Asks the leader at `addr` to commit several proposals (each encoded with
    /// [`codec::encode`]) in one call; the answer has one result per proposal, in order. The
    /// receiver never forwards them again.
    pub async fn propose_batch(
        &self,
        addr: &str,
        encoded: &[Vec<u8>],
        timeout: Duration,
    ) -> Result<Vec<Result<fedraft_core::state::Applied, RaftError>>, CallError> {
        let extra = [(TIMEOUT_HEADER, timeout.as_millis().to_string())];
        let body = codec::encode_batch(encoded)?;
        // As for single proposals: a little longer than the leader's wait, so its answer arrives.
        let bytes = self
            .post(
                addr,
                PATH_PROPOSE_BATCH,
                body,
                timeout + Duration::from_millis(500),
                &extra,
            )
            .await?;
        let reply: codec::ProposeBatchReply = codec::decode(&bytes)?;
        if reply.len() != encoded.len() {
            return Err(CallError::Codec(RaftError::Codec(format!(
                "{} answers for {} proposals",
                reply.len(),
                encoded.len()
            ))));
        }
        Ok(reply
            .into_iter()
            .map(|r| match r {
                Ok(bytes) => codec::decode_applied(&bytes),
                Err(refusal) => Err(refusal.into()),
            })
            .collect())
    }

    /// Asks the leader at `addr` for a read index.
    pub async fn read_index(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> Result<Result<u64, RaftError>, CallError> {
        let extra = [(TIMEOUT_HEADER, timeout.as_millis().to_string())];
        let reply: ReadIndexReply = self
            .call(
                addr,
                PATH_READ_INDEX,
                &(),
                timeout + Duration::from_millis(500),
                &extra,
            )
            .await?;
        Ok(reply.map_err(RaftError::from))
    }

    /// Fetches a node's status report (JSON) from its peer router.
    pub async fn status(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> Result<crate::NodeReport, CallError> {
        let resp = self
            .http
            .get(format!(
                "{}://{}{PATH_STATUS}",
                self.scheme,
                self.route(addr)
            ))
            .header(AUTH_HEADER, &*self.bearer)
            .timeout(timeout)
            .send()
            .await
            .map_err(classify)?;
        if !resp.status().is_success() {
            return Err(CallError::Status(resp.status().as_u16()));
        }
        resp.json()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))
    }
}

impl PeerClient {
    /// Fetches a node's health (JSON) from its peer router, with the state hash at `at` when
    /// given.
    pub async fn health(
        &self,
        addr: &str,
        at: Option<u64>,
        timeout: Duration,
    ) -> Result<crate::NodeHealth, CallError> {
        let query = at.map_or_else(String::new, |i| format!("?at={i}"));
        let resp = self
            .http
            .get(format!(
                "{}://{}{PATH_HEALTH}{query}",
                self.scheme,
                self.route(addr)
            ))
            .header(AUTH_HEADER, &*self.bearer)
            .timeout(timeout)
            .send()
            .await
            .map_err(classify)?;
        if !resp.status().is_success() {
            return Err(CallError::Status(resp.status().as_u16()));
        }
        resp.json()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))
    }
}

fn classify(e: reqwest::Error) -> CallError {
    if e.is_connect() {
        CallError::Unreachable(with_causes(&e))
    } else {
        CallError::Transport(with_causes(&e))
    }
}

/// The error and its causes: reqwest's own message ("error sending request for url") names
/// neither a timeout nor a reset, and the log must tell them apart.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// Builds a connection handle per target for openraft.
pub struct NetworkFactory {
    client: PeerClient,
    /// Per target, kept across the handles openraft builds for it (one per leadership).
    budgets: HashMap<NodeId, Arc<AppendBudget>>,
}

impl NetworkFactory {
    pub fn new(client: PeerClient) -> Self {
        NetworkFactory {
            client,
            budgets: HashMap::new(),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerConn;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerConn {
        let budget = self
            .budgets
            .entry(target)
            .or_insert_with(|| Arc::new(AppendBudget::new(crate::config::MAX_PAYLOAD_ENTRIES)));
        PeerConn {
            client: self.client.clone(),
            target,
            addr: node.addr.clone(),
            budget: budget.clone(),
        }
    }
}

/// openraft's view of one peer.
pub struct PeerConn {
    client: PeerClient,
    target: NodeId,
    addr: String,
    budget: Arc<AppendBudget>,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, BasicNode, OrRaftError<NodeId, E>>>;

impl PeerConn {
    async fn rpc<Req, Resp, E>(
        &self,
        path: &str,
        req: &Req,
        timeout: Duration,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let reply: Result<Resp, OrRaftError<NodeId, E>> = self
            .client
            .call(&self.addr, path, req, timeout, &[])
            .await
            .map_err(|e| match e {
                CallError::Unreachable(_) | CallError::Status(_) => {
                    RPCError::Unreachable(Unreachable::new(&e))
                }
                other => RPCError::Network(NetworkError::new(&other)),
            })?;
        reply.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerConn {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let entries = rpc.entries.len() as u64;
        if let Err(limit) = self.budget.admit(entries) {
            tracing::debug!(
                peer = self.target,
                entries,
                limit,
                "append over the peer's budget; asking for fewer entries"
            );
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(limit),
            ));
        }
        let flight = InFlight::new(&self.budget, entries);
        // A link whose transfer time grows with the batch (store/src/failpoints.rs): the wait
        // counts against openraft's timeout, as a slow transfer would.
        #[cfg(feature = "failpoints")]
        if let Some(Some(ms)) = fail::eval("raft::append_entry", |arg| {
            arg.and_then(|a| a.parse::<u64>().ok())
        }) {
            tokio::time::sleep(Duration::from_millis(ms.saturating_mul(entries))).await;
        }
        let reply = self.rpc(PATH_APPEND, &rpc, option.hard_ttl()).await;
        match &reply {
            // Cut off or reset in transit: maybe too much to answer in time.
            Err(RPCError::Network(_)) => drop(flight),
            // A peer that is down is not slow: it starts with full batches when it is back.
            Err(RPCError::Unreachable(_)) => flight.not_about_size(),
            _ => flight.answered(),
        }
        reply
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.rpc(PATH_SNAPSHOT, &rpc, option.hard_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        self.rpc(PATH_VOTE, &rpc, option.hard_ttl()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

    fn append_of(entries: u64) -> AppendEntriesRequest<TypeConfig> {
        let log_id = |i| LogId::new(CommittedLeaderId::new(1, 1), i);
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries: (1..=entries)
                .map(|i| Entry {
                    log_id: log_id(i),
                    payload: EntryPayload::Blank,
                })
                .collect(),
        }
    }

    #[tokio::test]
    async fn a_peer_that_does_not_answer_a_batch_in_time_is_sent_smaller_ones() {
        // Accepts connections and never answers: every append is cut off by its timeout.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                open.push(conn);
            }
        });
        let mut factory = NetworkFactory::new(PeerClient::new("secret").unwrap());
        let node = BasicNode { addr };
        let mut conn = factory.new_client(2, &node).await;
        let ttl = Duration::from_millis(100);
        // Cut off by the call's own deadline (openraft's timeout, the same, drops it instead).
        let cut = conn
            .append_entries(append_of(40), RPCOption::new(ttl))
            .await;
        assert!(matches!(cut, Err(RPCError::Network(_))), "{cut:?}");
        assert_eq!(conn.budget.limit(), Some(20));
        // A call dropped before its answer counts the same.
        let mut third = factory.new_client(4, &node).await;
        let dropped = tokio::time::timeout(
            ttl / 2,
            third.append_entries(append_of(10), RPCOption::new(ttl)),
        );
        assert!(dropped.await.is_err(), "nobody answers");
        assert_eq!(third.budget.limit(), Some(5));
        // A later handle to the same peer keeps what was learnt, and refuses without sending.
        let mut again = factory.new_client(2, &node).await;
        match again
            .append_entries(append_of(40), RPCOption::new(ttl))
            .await
        {
            Err(RPCError::PayloadTooLarge(p)) => assert_eq!(p.entries_hint(), 20),
            other => panic!("expected PayloadTooLarge, got {other:?}"),
        }
        // Heartbeats still go out (and fail in transit here, which limits nothing).
        let beat = again
            .append_entries(append_of(0), RPCOption::new(ttl))
            .await;
        assert!(matches!(beat, Err(RPCError::Network(_))), "{beat:?}");
        assert_eq!(again.budget.limit(), Some(20));
        // Another peer is not limited by this one's slowness.
        let other = factory.new_client(3, &node).await;
        assert_eq!(other.budget.limit(), None);
        held.abort();
        // A peer that refuses connections is down, not slow: its budget stays whole.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let down = BasicNode {
            addr: closed.local_addr().unwrap().to_string(),
        };
        drop(closed);
        let mut conn = factory.new_client(5, &down).await;
        let refused = conn
            .append_entries(append_of(40), RPCOption::new(ttl))
            .await;
        assert!(
            matches!(refused, Err(RPCError::Unreachable(_))),
            "{refused:?}"
        );
        assert_eq!(conn.budget.limit(), None);
    }
}
