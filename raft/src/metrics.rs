//! What a raft node measures: proposals and the commands packed per raft entry (leader), the
//! forwarding batches (follower), checkpoint and snapshot encoding (time and size), and at scrape
//! time the node's raft position (term, leader, last log, committed and applied index, and the
//! apply lag between the two) and the size of the log's in-memory cache.
//!
//! Every labelled series is created once, here, so recording is an atomic add or a histogram
//! observation on a pre-built child: no allocation and no shared lock on the write path. The
//! binary's registry receives it all through [`FedNode::register_metrics`](crate::FedNode::register_metrics).
//!
//! Must not: hold the node alive (the scrape-time collector reads openraft's metrics channel, the
//! committed index and a weak handle on the log cache, not the node), or know about HTTP.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, ServerState};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::types::NodeId;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

/// Where a proposal ended at the leader's batcher.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ProposalOutcome {
    Applied,
    /// Leadership moved before the entry was appended; the proposer retries elsewhere.
    NotLeader,
    Failed,
}

/// What encoding an image of the state was for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ImageKind {
    /// An audit checkpoint, written to the store with retention after it.
    Checkpoint,
    /// A raft snapshot's data, handed back to openraft.
    Snapshot,
}

/// The node's measurements. Cheap to clone: every clone records into the same series.
#[derive(Debug, Clone)]
pub struct NodeMetrics {
    proposals: Family<OutcomeLabel, Counter>,
    applied: Counter,
    not_leader: Counter,
    failed: Counter,
    entry_commands: Histogram,
    forward_proposals: Histogram,
    forward_calls: Family<ResultLabel, Counter>,
    forward_ok: Counter,
    forward_failed: Counter,
    images: ImageMetrics,
}

/// Checkpoint and snapshot encoding, kept apart because the checkpoint thread records them.
#[derive(Debug, Clone)]
pub(crate) struct ImageMetrics {
    seconds: Family<KindLabel, Histogram>,
    bytes: Family<KindLabel, Histogram>,
    checkpoint: (Histogram, Histogram),
    snapshot: (Histogram, Histogram),
}

/// 1 .. 256 in powers of two: the batcher packs at most 256 commands per entry and a forwarding
/// call carries at most 256 proposals.
fn batch_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 9))
}

impl Default for NodeMetrics {
    fn default() -> Self {
        let proposals = Family::<OutcomeLabel, Counter>::default();
        let outcome = |outcome| proposals.get_or_create_owned(&OutcomeLabel { outcome });
        let (applied, not_leader, failed) =
            (outcome("applied"), outcome("not_leader"), outcome("failed"));
        let forward_calls = Family::<ResultLabel, Counter>::default();
        let result = |result| forward_calls.get_or_create_owned(&ResultLabel { result });
        let (forward_ok, forward_failed) = (result("ok"), result("error"));
        NodeMetrics {
            proposals,
            applied,
            not_leader,
            failed,
            entry_commands: batch_buckets(),
            forward_proposals: batch_buckets(),
            forward_calls,
            forward_ok,
            forward_failed,
            images: ImageMetrics::default(),
        }
    }
}

impl NodeMetrics {
    /// One raft entry proposed by the leader's batcher, carrying `commands` commands.
    pub(crate) fn entry_proposed(&self, commands: usize) {
        self.entry_commands.observe(commands as f64);
    }

    /// `n` proposals of one entry ended with `outcome`.
    pub(crate) fn proposals(&self, outcome: ProposalOutcome, n: usize) {
        let c = match outcome {
            ProposalOutcome::Applied => &self.applied,
            ProposalOutcome::NotLeader => &self.not_leader,
            ProposalOutcome::Failed => &self.failed,
        };
        c.inc_by(n as u64);
    }

    /// One forwarding call to the leader sent `proposals` proposals.
    pub(crate) fn forward_sent(&self, proposals: usize) {
        self.forward_proposals.observe(proposals as f64);
    }

    /// How a forwarding call ended (transport-wise; the leader's verdicts travel inside).
    pub(crate) fn forward_done(&self, ok: bool) {
        if ok {
            self.forward_ok.inc();
        } else {
            self.forward_failed.inc();
        }
    }

    pub(crate) fn images(&self) -> ImageMetrics {
        self.images.clone()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "fedraft_raft_proposals",
            "Proposals handled by this node's leader batcher, by outcome",
            self.proposals.clone(),
        );
        registry.register(
            "fedraft_raft_entry_commands",
            "Commands packed into one raft entry by the leader",
            self.entry_commands.clone(),
        );
        registry.register(
            "fedraft_raft_forward_batch_proposals",
            "Proposals carried by one forwarding call from this follower to the leader",
            self.forward_proposals.clone(),
        );
        registry.register(
            "fedraft_raft_forward_calls",
            "Forwarding calls from this follower to the leader, by transport result",
            self.forward_calls.clone(),
        );
        self.images.register(registry);
    }
}

impl Default for ImageMetrics {
    fn default() -> Self {
        // 10 ms .. 164 s to encode and write; 64 KiB .. 16 GiB encoded.
        let seconds = Family::<KindLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.01, 2.0, 15))) as fn() -> Histogram,
        );
        let bytes = Family::<KindLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(65536.0, 4.0, 10))) as fn() -> Histogram,
        );
        let pair = |kind| {
            let l = KindLabel { kind };
            (
                seconds.get_or_create_owned(&l),
                bytes.get_or_create_owned(&l),
            )
        };
        let (checkpoint, snapshot) = (pair("checkpoint"), pair("snapshot"));
        ImageMetrics {
            seconds,
            bytes,
            checkpoint,
            snapshot,
        }
    }
}

impl ImageMetrics {
    /// An image of the state was encoded (and, for a checkpoint, written) in `took`, `bytes`
    /// long.
    pub(crate) fn encoded(&self, kind: ImageKind, took: Duration, bytes: usize) {
        let (s, b) = match kind {
            ImageKind::Checkpoint => &self.checkpoint,
            ImageKind::Snapshot => &self.snapshot,
        };
        s.observe(took.as_secs_f64());
        b.observe(bytes as f64);
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "fedraft_raft_image_seconds",
            "Time to encode an image of the state (and write it, for a checkpoint), by kind",
            self.seconds.clone(),
        );
        registry.register(
            "fedraft_raft_image_bytes",
            "Encoded size of an image of the state, by kind (checkpoint or snapshot)",
            self.bytes.clone(),
        );
    }
}

type RaftMetricsRx = tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, BasicNode>>;

/// The node's raft position, read from openraft's metrics channel when scraped.
pub(crate) struct PositionCollector {
    pub raft: RaftMetricsRx,
    /// The committed index as the log store last saved it.
    pub committed: Arc<AtomicU64>,
    pub cached_log: crate::log_store::CachedLog,
}

impl std::fmt::Debug for PositionCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PositionCollector").finish_non_exhaustive()
    }
}

impl Collector for PositionCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Copied out first: the channel's read lock must not be held while encoding.
        let (term, leader, is_leader, last_log, applied) = {
            let m = self.raft.borrow();
            (
                m.current_term,
                m.current_leader,
                m.state == ServerState::Leader,
                m.last_log_index.unwrap_or(0),
                m.last_applied.map(|l| l.index).unwrap_or(0),
            )
        };
        let committed = self.committed.load(Ordering::Relaxed);
        let gauges: [(&str, &str, u64); 9] = [
            ("fedraft_raft_term", "Current raft term", term),
            (
                "fedraft_raft_is_leader",
                "1 when this node is the leader",
                u64::from(is_leader),
            ),
            (
                "fedraft_raft_has_leader",
                "1 when this node knows a leader",
                u64::from(leader.is_some()),
            ),
            (
                "fedraft_raft_leader_id",
                "Id of the leader this node knows, 0 when it knows none",
                leader.unwrap_or(0),
            ),
            (
                "fedraft_raft_last_log_index",
                "Highest log index in this node's log",
                last_log,
            ),
            (
                "fedraft_raft_commit_index",
                "Highest log index known committed",
                committed,
            ),
            (
                "fedraft_raft_applied_index",
                "Highest log index applied to the state",
                applied,
            ),
            (
                "fedraft_raft_apply_lag",
                "Committed entries not yet applied (commit index - applied index)",
                committed.saturating_sub(applied),
            ),
            (
                "fedraft_raft_log_cache_bytes",
                "Memory the newest log entries held decoded take, estimated from their encoded size (bounded by a budget)",
                self.cached_log.memory_estimate(),
            ),
        ];
        for (name, help, value) in gauges {
            fedraft_store::encode_gauge(&mut encoder, name, help, value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, r).unwrap();
        out
    }

    #[test]
    fn every_series_exists_before_anything_is_recorded_and_records_into_its_child() {
        let m = NodeMetrics::default();
        let mut r = Registry::default();
        m.register(&mut r);
        let before = text(&r);
        for series in [
            "fedraft_raft_proposals_total{outcome=\"applied\"} 0",
            "fedraft_raft_proposals_total{outcome=\"not_leader\"} 0",
            "fedraft_raft_forward_calls_total{result=\"error\"} 0",
            "fedraft_raft_image_seconds_count{kind=\"checkpoint\"} 0",
            "fedraft_raft_image_bytes_count{kind=\"snapshot\"} 0",
        ] {
            assert!(before.contains(series), "{series} missing:\n{before}");
        }
        m.proposals(ProposalOutcome::Applied, 3);
        m.entry_proposed(3);
        m.forward_sent(2);
        m.forward_done(false);
        m.images()
            .encoded(ImageKind::Checkpoint, Duration::from_millis(30), 100_000);
        let after = text(&r);
        for series in [
            "fedraft_raft_proposals_total{outcome=\"applied\"} 3",
            "fedraft_raft_entry_commands_bucket{le=\"4\"} 1",
            "fedraft_raft_forward_batch_proposals_sum 2",
            "fedraft_raft_forward_calls_total{result=\"error\"} 1",
            "fedraft_raft_image_seconds_count{kind=\"checkpoint\"} 1",
            "fedraft_raft_image_bytes_sum{kind=\"checkpoint\"} 100000",
        ] {
            assert!(after.contains(series), "{series} missing:\n{after}");
        }
    }
}
