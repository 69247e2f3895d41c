//! [`FedNode`]: one fedraft raft member. Owns the openraft instance, the state machine's shared
//! state, the peer client and the leader's ticker. Start at [`FedNode::open`], then
//! [`FedNode::propose`] and [`FedNode::read`].
//!
//! Must not: interpret commands (core does), or wait without a bound: every propose and read
//! gives up after `propose_timeout_ms`, with `NoQuorum` when the cluster lacks a working leader
//! and `Timeout` when a leader with its quorum is merely overloaded ([`FedNode::timed_out`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fedraft_core::state::{Applied, State};
use fedraft_store::Store;
use openraft::error::{InitializeError, RaftError as OrRaftError};
use openraft::{BasicNode, ServerState};
use tokio::sync::broadcast;

mod forward;
pub(crate) mod health;
mod read;
mod runtime;
mod ticker;

use crate::batcher::{run_batcher, BatchOutcome, Pending, BATCH_QUEUE_PROPOSALS};
use crate::config::NodeConfig;
use crate::error::{fatal, write_error, RaftError};
use crate::forwarder::{run_forwarder, Forward, ForwardCounters, FORWARD_QUEUE_PROPOSALS};
use crate::log_store::{store_read, LogStore};
use crate::metrics::{NodeMetrics, PositionCollector};
use crate::network::client::{CallError, NetworkFactory, PeerClient};
use crate::state_machine::{SmShared, StateMachine};
use crate::types::{AppliedEntry, NodeId, NodeReport, NodeStatus, Proposal, Raft};
use runtime::RaftRuntime;

/// Actor recorded on the leader's tick entries.
pub const TICK_ACTOR: &str = "fedraft/ticker";
/// Longest pause between retries while a leader is being elected.
const MAX_RETRY_PAUSE_MS: u64 = 100;

/// A handle to the node; cheap to clone.
#[derive(Clone)]
pub struct FedNode {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: NodeConfig,
    raft: Raft,
    sm: Arc<SmShared>,
    client: PeerClient,
    committed: Arc<AtomicU64>,
    /// Proposals to pack into the next raft entry (leader only).
    batcher: tokio::sync::mpsc::Sender<Pending>,
    /// Proposals to send to the leader in the next forwarding call (follower only).
    forwarder: tokio::sync::mpsc::Sender<Forward>,
    forwarded: Arc<ForwardCounters>,
    /// Id + 1 of the leader the last call to which found nothing listening (0: none). A
    /// follower keeps naming a dead leader for up to a lease plus an election timeout; this is
    /// how its bounded waits still tell "no working leader" from "a slow one".
    unreachable_leader: AtomicU64,
    stop: tokio::sync::watch::Sender<bool>,
    metrics: NodeMetrics,
    /// The log store's cache of the newest entries, for its size gauge.
    cached_log: crate::log_store::CachedLog,
    health: health::HealthCache,
    /// Last field, so that it drops last: raft's tasks stop after everything else is gone.
    runtime: RaftRuntime,
}

/// See [`FedNode::forwarding_stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardingStats {
    pub calls: u64,
    pub proposals: u64,
}

/// Who can take a leader-only request right now.
enum Leader {
    Me,
    Other { id: NodeId, addr: String },
    Unknown,
}

/// One attempt's verdict inside a bounded retry loop.
enum Attempt<T> {
    Done(Result<T, RaftError>),
    Retry,
}

impl FedNode {
    /// Opens the data directory, restores the state machine and starts raft. The node serves
    /// nothing until the caller mounts [`FedNode::peer_router`] on `advertise_peer_addr`.
    pub async fn open(cfg: NodeConfig) -> Result<FedNode, RaftError> {
        let raft_config = Arc::new(cfg.openraft_config()?);
        let (dir, cluster) = (cfg.data_dir.clone(), cfg.cluster_id.clone());
        let store = store_read(move || Store::open(&dir, &cluster)).await?;
        let committed = Arc::new(AtomicU64::new(0));
        let metrics = NodeMetrics::default();
        let audit = cfg.audit.staggered_for(cfg.node_id);
        let sm = StateMachine::open_measured(store.clone(), audit, metrics.images()).await?;
        let shared = sm.shared();
        let log_store = LogStore::new(store, committed.clone()).bounded_by(shared.saved_snapshot());
        let cached_log = log_store.cached();
        let client = || -> Result<PeerClient, RaftError> {
            Ok(
                PeerClient::with_tls(&cfg.cluster_secret, cfg.peer_tls.as_ref())?
                    .with_dial(cfg.peer_dial.clone()),
            )
        };
        // A pooled connection is driven by the runtime that opened it. Raft's replication and
        // forwarding get a client of their own, so their connections are opened, and driven, on
        // the raft runtime and never by the busy main one.
        let (client, raft_client) = (client()?, client()?);
        // openraft spawns its tasks where it is created: on the raft runtime (`runtime.rs`).
        let runtime = RaftRuntime::start(cfg.node_id)?;
        let network = NetworkFactory::new(raft_client.clone());
        let node_id = cfg.node_id;
        let raft = runtime
            .spawn(async move { Raft::new(node_id, raft_config, network, log_store, sm).await })
            .await
            .map_err(|e| RaftError::Fatal(format!("starting raft: {e}")))?
            .map_err(fatal)?;
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let (batcher, batch_rx) = tokio::sync::mpsc::channel(BATCH_QUEUE_PROPOSALS);
        runtime.spawn(run_batcher(
            raft.clone(),
            shared.clone(),
            batch_rx,
            metrics.clone(),
        ));
        let (forwarder, forward_rx) = tokio::sync::mpsc::channel(FORWARD_QUEUE_PROPOSALS);
        let forwarded = Arc::new(ForwardCounters::default());
        runtime.spawn(run_forwarder(
            raft_client,
            forward_rx,
            forwarded.clone(),
            metrics.clone(),
        ));
        let inner = Arc::new(Inner {
            cfg,
            raft,
            sm: shared,
            client,
            committed,
            batcher,
            forwarder,
            forwarded,
            unreachable_leader: AtomicU64::new(0),
            stop,
            metrics,
            cached_log,
            health: health::HealthCache::default(),
            runtime,
        });
        inner
            .runtime
            .spawn(ticker::run_ticker(Arc::downgrade(&inner), stop_rx));
        tracing::info!(node_id = inner.cfg.node_id, addr = %inner.cfg.advertise_peer_addr, "raft node started");
        Ok(FedNode { inner })
    }

    pub fn config(&self) -> &NodeConfig {
        &self.inner.cfg
    }

    /// The openraft handle, for the peer router and advanced callers.
    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// Registers this node's measurements, its store's, and its raft position (read when
    /// scraped) into the binary's registry.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.inner.metrics.register(registry);
        self.inner.sm.store.register_metrics(registry);
        registry.register_collector(Box::new(PositionCollector {
            raft: self.inner.raft.metrics(),
            committed: self.inner.committed.clone(),
            cached_log: self.inner.cached_log.clone(),
        }));
    }

    /// Initialises a new cluster with these voters (id -> advertised peer addr). A node that is
    /// already initialised (restart, or another member bootstrapped first) returns Ok.
    pub async fn bootstrap(&self, members: BTreeMap<NodeId, String>) -> Result<(), RaftError> {
        let nodes: BTreeMap<NodeId, BasicNode> = members
            .into_iter()
            .map(|(id, a)| (id, BasicNode::new(a)))
            .collect();
        match self.inner.raft.initialize(nodes).await {
            Ok(()) => Ok(()),
            Err(OrRaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(OrRaftError::APIError(e)) => Err(RaftError::Invalid(e.to_string())),
            Err(OrRaftError::Fatal(f)) => Err(fatal(f)),
        }
    }

    /// Membership changes wait up to this long: a learner may need a whole snapshot first.
    fn membership_timeout(&self) -> Duration {
        Duration::from_millis(self.inner.cfg.propose_timeout_ms.saturating_mul(6))
    }

    /// Adds a non-voting member and waits until it has caught up. Leader only.
    pub async fn add_learner(&self, id: NodeId, addr: String) -> Result<(), RaftError> {
        let started = Instant::now();
        let fut = self.inner.raft.add_learner(id, BasicNode::new(addr), true);
        match tokio::time::timeout(self.membership_timeout(), fut).await {
            Err(_) => Err(self.timed_out(started)),
            Ok(r) => r.map(|_| ()).map_err(write_error),
        }
    }

    /// Replaces the voter set (members not in it are removed). Leader only.
    pub async fn change_membership(&self, voters: BTreeSet<NodeId>) -> Result<(), RaftError> {
        let started = Instant::now();
        let fut = self.inner.raft.change_membership(voters, false);
        match tokio::time::timeout(self.membership_timeout(), fut).await {
            Err(_) => Err(self.timed_out(started)),
            Ok(r) => r.map(|_| ()).map_err(write_error),
        }
    }

    /// Commits and applies a command, forwarding to the leader when called on a follower. The
    /// leader stamps `timestamp_ms`. A request id seen again within core's retention window
    /// returns the first outcome (`Applied::duplicate_of`) instead of applying twice.
    pub async fn propose(&self, p: Proposal) -> Result<Applied, RaftError> {
        self.propose_within(p, Duration::from_millis(self.inner.cfg.propose_timeout_ms))
            .await
    }

    /// [`FedNode::propose`] with an explicit bound.
    pub async fn propose_within(
        &self,
        p: Proposal,
        timeout: Duration,
    ) -> Result<Applied, RaftError> {
        let p = &p;
        self.retry_until(Instant::now(), timeout, |remaining, started| async move {
            match self.leader() {
                Leader::Me => self.try_propose_local(p, remaining, started).await,
                Leader::Other { id, addr } => {
                    self.try_forward(id, &addr, p, remaining, started).await
                }
                Leader::Unknown => Attempt::Retry,
            }
        })
        .await
    }

    /// Leader-only propose for requests another node forwarded: never forwards again.
    pub(crate) async fn propose_here(
        &self,
        p: Proposal,
        timeout: Duration,
    ) -> Result<Applied, RaftError> {
        let p = &p;
        self.retry_until(Instant::now(), timeout, |remaining, started| async move {
            match self.leader() {
                Leader::Me => self.try_propose_local(p, remaining, started).await,
                Leader::Other { id, addr } => Attempt::Done(Err(RaftError::NotLeader {
                    leader_id: Some(id),
                    leader_addr: Some(addr),
                })),
                // Mid-election: wait for it to settle rather than bounce the caller.
                Leader::Unknown => Attempt::Retry,
            }
        })
        .await
    }

    /// Calls `attempt` with the time left (and `started`) until it is done, pausing between
    /// tries with a doubling backoff; [`FedNode::timed_out`] once `timeout`, counted from
    /// `started`, has run out. Every bounded wait for a leader goes through here.
    async fn retry_until<T, F, Fut>(
        &self,
        started: Instant,
        timeout: Duration,
        mut attempt: F,
    ) -> Result<T, RaftError>
    where
        F: FnMut(Duration, Instant) -> Fut,
        Fut: std::future::Future<Output = Attempt<T>>,
    {
        let deadline = started + timeout;
        let mut pause = Duration::from_millis(10);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(self.timed_out(started));
            }
            if let Attempt::Done(r) = attempt(remaining, started).await {
                return r;
            }
            pause = self.pause(pause, deadline).await;
        }
    }

    async fn pause(&self, pause: Duration, deadline: Instant) -> Duration {
        let remaining = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(pause.min(remaining)).await;
        (pause * 2).min(Duration::from_millis(MAX_RETRY_PAUSE_MS))
    }

    async fn try_propose_local(
        &self,
        p: &Proposal,
        remaining: Duration,
        started: Instant,
    ) -> Attempt<Applied> {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let pending = Pending {
            proposal: p.clone(),
            reply,
        };
        let queued = async {
            self.inner.batcher.send(pending).await.ok()?;
            rx.await.ok()
        };
        match tokio::time::timeout(remaining, queued).await {
            Err(_) => Attempt::Done(Err(self.timed_out(started))),
            Ok(None) => Attempt::Done(Err(RaftError::Shutdown)),
            Ok(Some(BatchOutcome::Applied(a))) => Attempt::Done(Ok(a)),
            Ok(Some(BatchOutcome::NotLeader)) => Attempt::Retry,
            Ok(Some(BatchOutcome::Failed(e))) => Attempt::Done(Err(e)),
        }
    }

    async fn try_forward(
        &self,
        leader: NodeId,
        addr: &str,
        p: &Proposal,
        remaining: Duration,
        started: Instant,
    ) -> Attempt<Applied> {
        let result = self.forward(addr, p, remaining).await;
        self.note_leader_call(leader, &result);
        match result {
            Ok(Ok(applied)) => Attempt::Done(Ok(applied)),
            Ok(Err(RaftError::NotLeader { .. })) | Ok(Err(RaftError::Shutdown)) => Attempt::Retry,
            Ok(Err(e)) => Attempt::Done(Err(e)),
            // Never delivered: safe to retry whatever the request id.
            Err(CallError::Unreachable(_)) => Attempt::Retry,
            Err(e) => {
                if started.elapsed() >= Duration::from_millis(self.inner.cfg.propose_timeout_ms) {
                    Attempt::Done(Err(self.timed_out(started)))
                } else if p.request_id.is_empty() {
                    // Maybe applied, and nothing would stop a second copy: report, do not retry.
                    Attempt::Done(Err(RaftError::Forward(e.to_string())))
                } else {
                    // Core dedupes by request id, so a retry cannot apply it twice.
                    Attempt::Retry
                }
            }
        }
    }

    /// The error for a bounded wait that ran out. `NoQuorum` only when the cluster really lacks
    /// a working leader: this node knows none, or it leads but a majority has not acknowledged
    /// it within one maximal election timeout (openraft's `millis_since_quorum_ack`, refreshed on
    /// every heartbeat tick). Otherwise a leader with its quorum exists and is just slow: `Timeout`.
    ///
    /// A follower that still names a leader says `Timeout`, unless its last call to that leader
    /// found nothing listening: if the leader had lost its majority, a forwarded call would have
    /// brought back the leader's own `NoQuorum`, and a follower cut off from its leader stands
    /// for election (after a lease and an election timeout), which clears the leader it knows.
    pub(crate) fn timed_out(&self, started: Instant) -> RaftError {
        let waited_ms = started.elapsed().as_millis() as u64;
        if self.quorum_lost() {
            RaftError::NoQuorum { waited_ms }
        } else {
            RaftError::Timeout { waited_ms }
        }
    }

    fn quorum_lost(&self) -> bool {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        match m.state {
            ServerState::Leader => m
                .millis_since_quorum_ack
                .is_none_or(|ms| ms > self.inner.cfg.election_timeout_max_ms),
            _ => match self.leader_of(&m) {
                Leader::Other { id, .. } => {
                    self.inner.unreachable_leader.load(Ordering::Relaxed) == id.wrapping_add(1)
                }
                _ => true,
            },
        }
    }

    /// Remembers whether the leader `id` could be reached at all by the last call to it.
    fn note_leader_call<T>(&self, id: NodeId, result: &Result<T, CallError>) {
        let marker = id.wrapping_add(1);
        match result {
            Err(CallError::Unreachable(_)) => self
                .inner
                .unreachable_leader
                .store(marker, Ordering::Relaxed),
            Err(_) => {}
            Ok(_) => {
                let _ = self.inner.unreachable_leader.compare_exchange(
                    marker,
                    0,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
    }

    fn leader(&self) -> Leader {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        self.leader_of(&m)
    }

    fn leader_of(&self, m: &openraft::RaftMetrics<NodeId, BasicNode>) -> Leader {
        match m.current_leader {
            Some(id) if id == self.inner.cfg.node_id => {
                if m.state == ServerState::Leader {
                    Leader::Me
                } else {
                    Leader::Unknown
                }
            }
            Some(id) => match m.membership_config.membership().get_node(&id) {
                Some(n) => Leader::Other {
                    id,
                    addr: n.addr.clone(),
                },
                None => Leader::Unknown,
            },
            None => Leader::Unknown,
        }
    }

    /// Reads local state without confirming leadership: may be behind the cluster.
    pub fn read_stale<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.inner.sm.read().state)
    }

    /// Every applied normal entry, in order. After a snapshot install the next entry's index
    /// jumps; a receiver that lags more than `SUBSCRIBER_BUFFER_ENTRIES` gets `Lagged`.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<AppliedEntry>> {
        self.inner.sm.events.subscribe()
    }

    pub fn status(&self) -> NodeStatus {
        let m = self.inner.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
        let leader_peer_addr = m
            .current_leader
            .and_then(|l| membership.get_node(&l).map(|n| n.addr.clone()));
        NodeStatus {
            id: m.id,
            term: m.current_term,
            leader_id: m.current_leader,
            leader_peer_addr,
            is_leader: m.state == ServerState::Leader,
            last_log_index: m.last_log_index.unwrap_or(0),
            commit_index: self.inner.committed.load(Ordering::Relaxed),
            applied_index: m.last_applied.map(|l| l.index).unwrap_or(0),
            voters,
            learners,
        }
    }

    /// How many forwarding calls this node made to a leader and how many proposals they
    /// carried, since it started (their ratio is the mean forwarding batch).
    pub fn forwarding_stats(&self) -> ForwardingStats {
        ForwardingStats {
            calls: self.inner.forwarded.calls.load(Ordering::Relaxed),
            proposals: self.inner.forwarded.proposals.load(Ordering::Relaxed),
        }
    }

    /// `status()` plus the state fingerprint.
    pub fn report(&self) -> NodeReport {
        let status = self.status();
        let g = self.inner.sm.read();
        NodeReport {
            status,
            state_hash: g.state.state_hash_hex(),
            state_applied_index: g.state.applied_index(),
            log_time_ms: g.state.log_time_ms(),
        }
    }

    /// This node's audit archive (read side), over the open store, once it holds the records
    /// of every command applied when this is called (they are written a moment after the
    /// commands are applied): a client that wrote and then reads the archive sees its write.
    pub async fn audit(&self) -> crate::audit::AuditLog {
        self.inner.sm.archive_caught_up().await;
        crate::audit::AuditLog::new(self.inner.sm.store.reader())
    }

    /// The applied state's fingerprint at a moment its audit record is written, for verifying
    /// the archive against the live node. Waits (briefly, bounded) for the archive to catch up
    /// with apply; returns the latest fingerprint if it never does.
    pub async fn live_state(&self) -> crate::audit::LiveState {
        let wait = Duration::from_millis(self.inner.cfg.propose_timeout_ms);
        let archived = &self.inner.sm.archived;
        let live = crate::audit::LiveState::of(&self.inner.sm.read().state);
        // Ends early if archiving failed; then the record is not there either.
        let _ = tokio::time::timeout(wait, archived.reached(live.index)).await;
        if archived.index() >= live.index {
            return live;
        }
        crate::audit::LiveState::of(&self.inner.sm.read().state)
    }

    /// Resolves when this node cannot go on, with the reason naming the failed seam: raft
    /// stopped on a fatal error (a failed log write or WAL sync reaches it through the flush
    /// callback), the store stopped after a failed write or sync, or a write off the apply path
    /// (an audit record, a checkpoint) failed. The caller should stop the process at once, without
    /// flushing anything: a restart recovers from what was synced. Also resolves if raft shut
    /// down, so await it only while the node is meant to run.
    pub async fn failed(&self) -> String {
        let mut metrics = self.inner.raft.metrics();
        // The store and the apply path record their failures without a notification; a short
        // poll bounds how long a node runs on past one.
        let mut poll = tokio::time::interval(Duration::from_millis(200));
        loop {
            if let Some(e) = self.inner.sm.store.failure() {
                return e.to_string();
            }
            if let Some(why) = self.inner.sm.failure() {
                return why;
            }
            if let Err(fatal) = &metrics.borrow().running_state {
                return format!("raft stopped: {fatal}");
            }
            tokio::select! {
                changed = metrics.changed() => {
                    if changed.is_err() {
                        return "raft shut down".into();
                    }
                }
                _ = poll.tick() => {}
            }
        }
    }

    /// Stops the ticker and raft. The data directory closes when the last handle is dropped.
    pub async fn shutdown(&self) -> Result<(), RaftError> {
        let _ = self.inner.stop.send(true);
        let stopped = self
            .inner
            .raft
            .shutdown()
            .await
            .map_err(|e| RaftError::Fatal(e.to_string()));
        // Checkpoints due for what was applied are written before the node counts as stopped.
        self.flush_checkpoints().await;
        stopped
    }

    /// Waits until the audit checkpoints due for every command applied so far are written
    /// (they are encoded off the apply path, a moment after the commands).
    pub async fn flush_checkpoints(&self) {
        self.inner.sm.flush_checkpoints().await
    }
}
