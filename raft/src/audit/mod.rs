//! The audit archive as the rest of fedraft reads it: decoded records, paged queries, the state
//! at any index or time, diffs, explanations and verification. Works online over the running
//! node's store (`FedNode::audit`) and offline over a copy of a data directory opened read-only
//! ([`AuditLog::open_offline`]), with the same code.
//!
//! Owns: decoding archived bytes (`LogEntry`, `Applied`), driving core's `State::apply` over
//! them (`replay.rs`), rebuilding what a stopped node would hold from its snapshot and raft log
//! (`live.rs`), and the checkpoint/retention options the state machine follows. Must not:
//! interpret commands (core's `audit` module explains and diffs) or write to the store.

mod live;
mod replay;

use std::path::Path;

use fedraft_core::audit::{Filter, Record};
use fedraft_core::command::{EntryDecoder, LogEntry};
use fedraft_store::{AuditRecord, RetentionPolicy, StoreError, StoreReader};

use crate::codec;
use crate::error::RaftError;

pub use live::{rebuild_offline, LiveState};
pub use replay::{ObjectHistory, VerifyReport};

/// Default distance between state checkpoints, in commands. At ~2.5 µs per replayed command a
/// state at any index is at most ~25 ms of replay beyond its checkpoint; a checkpoint of a
/// 10,000-object state is a few MB, i.e. well under 1 % of the archive it covers.
pub const DEFAULT_CHECKPOINT_EVERY_COMMANDS: u64 = 10_000;

/// Checkpoint bytes a command may cost, amortized. A checkpoint costs in proportion to the state
/// (encoding it, then RocksDB copying, compressing and writing it): at a fixed interval, a
/// 100,000-object state under write load spent about a third of the cluster's busy CPU on
/// checkpoints (`perf` during `fedraft bench put` at 64 clients). So the interval after a
/// checkpoint of S bytes is S / this many commands, never below `checkpoint_every_commands`;
/// 256 keeps checkpoints under half of what the archive itself grows by per command.
pub const CHECKPOINT_BYTES_PER_COMMAND: u64 = 256;

/// The interval stretches at most this many times `checkpoint_every_commands`, which bounds the
/// replay a state at any index needs (100,000 commands by default: a fraction of a second).
pub const MAX_CHECKPOINT_STRETCH: u64 = 10;

/// Commands from a checkpoint of `checkpoint_bytes` to the next one.
pub fn checkpoint_interval(every: u64, checkpoint_bytes: usize) -> u64 {
    let by_size = checkpoint_bytes as u64 / CHECKPOINT_BYTES_PER_COMMAND;
    by_size.clamp(every, every.saturating_mul(MAX_CHECKPOINT_STRETCH))
}

/// Most records one page of a query returns.
pub const MAX_PAGE_RECORDS: usize = 1_000;

/// How the state machine keeps the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditOptions {
    /// Write a state checkpoint every this many commands (0 = never); a large state stretches
    /// the interval ([`checkpoint_interval`]).
    pub checkpoint_every_commands: u64,
    /// This node's checkpoints go this many commands past multiples of
    /// `checkpoint_every_commands` (taken modulo it). A node sets it from its id
    /// ([`AuditOptions::staggered_for`]): a checkpoint's image, encode and flush hold up or
    /// compete with the node's writes, and nodes that all checkpointed at the same command
    /// stalled the whole cluster at once, where one follower's stall alone is hidden by the
    /// other's answers.
    pub checkpoint_offset: u64,
    /// What to keep (default: everything). Applied after each checkpoint, in log time.
    pub retention: RetentionPolicy,
}

/// Distinct checkpoint offsets: nodes 1, 2 and 3 of a typical cluster checkpoint a quarter of
/// the interval apart.
const STAGGER_SLOTS: u64 = 4;

impl AuditOptions {
    /// These options with the checkpoint offset of node `node_id`.
    pub fn staggered_for(self, node_id: u64) -> AuditOptions {
        let slot = node_id % STAGGER_SLOTS;
        AuditOptions {
            checkpoint_offset: self.checkpoint_every_commands / STAGGER_SLOTS * slot,
            ..self
        }
    }
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            checkpoint_every_commands: DEFAULT_CHECKPOINT_EVERY_COMMANDS,
            checkpoint_offset: 0,
            retention: RetentionPolicy::keep_everything(),
        }
    }
}

/// Listing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    #[default]
    OldestFirst,
    NewestFirst,
}

/// One page of a query; `next` resumes after the last record returned.
#[derive(Debug, Clone)]
pub struct Page {
    pub records: Vec<Record>,
    pub next: Option<u64>,
}

/// Decodes one archived record.
pub fn decode_record(r: &AuditRecord) -> Result<Record, RaftError> {
    Ok(Record {
        index: r.index,
        term: r.term,
        entry: decode_entry(r)?,
        applied: codec::decode_applied(&r.outcome)?,
    })
}

fn decode_entry(r: &AuditRecord) -> Result<LogEntry, RaftError> {
    LogEntry::decode(&r.entry).map_err(|e| entry_error(r.index, e))
}

/// Decodes a record's entry with `decoder`, which reuses the allocations of the entries before.
fn decode_entry_with<'d>(
    decoder: &'d mut EntryDecoder,
    index: u64,
    bytes: &[u8],
) -> Result<&'d LogEntry, RaftError> {
    decoder.decode(bytes).map_err(|e| entry_error(index, e))
}

fn entry_error(index: u64, e: fedraft_core::error::CodecError) -> RaftError {
    RaftError::Codec(format!("audit record {index}: {e}"))
}

/// A reader of one node's archive.
#[derive(Clone)]
pub struct AuditLog {
    reader: StoreReader,
}

impl AuditLog {
    pub fn new(reader: StoreReader) -> AuditLog {
        AuditLog { reader }
    }

    /// Opens a (copy of a) data directory read-only; the node must not need to run.
    pub fn open_offline(path: impl AsRef<Path>) -> Result<AuditLog, RaftError> {
        Ok(AuditLog::new(StoreReader::open_read_only(path)?))
    }

    pub fn reader(&self) -> &StoreReader {
        &self.reader
    }

    /// (first, last) record indexes kept.
    pub fn bounds(&self) -> Result<Option<(u64, u64)>, RaftError> {
        let first = self.reader.audit_first()?;
        let mut last = None;
        self.reader.audit_scan_rev(0, u64::MAX, |r| {
            last = Some(r.index);
            Ok::<bool, StoreError>(false)
        })?;
        Ok(first.zip(last))
    }

    /// Records matching `filter`, at most `limit` (capped at [`MAX_PAGE_RECORDS`]), resuming
    /// strictly after `after` in the chosen order.
    pub fn query(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
        after: Option<u64>,
    ) -> Result<Page, RaftError> {
        self.query_within(filter, order, limit, after, usize::MAX)
    }

    /// [`AuditLog::query`] that reads at most `scan_budget` records (at least one): a filter
    /// that rarely matches then answers a partial page, possibly empty, whose `next` resumes
    /// after the last record read, instead of reading the whole archive in one request.
    pub fn query_within(
        &self,
        filter: &Filter,
        order: Order,
        limit: usize,
        after: Option<u64>,
        scan_budget: usize,
    ) -> Result<Page, RaftError> {
        let limit = limit.clamp(1, MAX_PAGE_RECORDS);
        let mut budget = scan_budget.max(1);
        let (mut lo, mut hi) = filter.index_range();
        match (order, after) {
            (Order::OldestFirst, Some(a)) => lo = lo.max(a.saturating_add(1)),
            (Order::NewestFirst, Some(a)) => hi = hi.min(a),
            _ => {}
        }
        let mut records = Vec::new();
        let mut more = false;
        let mut last_read = None;
        let mut spent = false;
        let mut visit = |rec: AuditRecord| -> Result<bool, RaftError> {
            if budget == 0 {
                spent = true;
                return Ok(false);
            }
            budget -= 1;
            let r = decode_record(&rec)?;
            if filter.matches(&r) {
                if records.len() == limit {
                    more = true;
                    return Ok(false);
                }
                records.push(r);
            }
            last_read = Some(rec.index);
            Ok(true)
        };
        match order {
            Order::OldestFirst => self.reader.audit_scan(lo, hi, &mut visit)?,
            Order::NewestFirst => self.reader.audit_scan_rev(lo, hi, &mut visit)?,
        }
        let next = if more {
            records.last().map(|r| r.index)
        } else if spent {
            last_read
        } else {
            None
        };
        Ok(Page { records, next })
    }

    /// The index of the last command applied at or before log time `ms` (entry timestamps never
    /// go backwards, so a binary search over the archive finds it). None if the archive starts
    /// later.
    pub fn index_at_time(&self, ms: u64) -> Result<Option<u64>, RaftError> {
        let Some((first, last)) = self.bounds()? else {
            return Ok(None);
        };
        let ts = |i: u64| -> Result<Option<(u64, u64)>, RaftError> {
            // The first record at or after `i` (holes exist after a snapshot install).
            let mut found = None;
            self.reader.audit_scan(i, u64::MAX, |r| {
                found = Some(r);
                Ok::<bool, StoreError>(false)
            })?;
            found
                .map(|r| decode_entry(&r).map(|e| (r.index, e.timestamp_ms)))
                .transpose()
        };
        match ts(first)? {
            Some((_, t)) if t > ms => return Ok(None),
            None => return Ok(None),
            _ => {}
        }
        let (mut lo, mut hi) = (first, last);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match ts(mid)? {
                Some((i, t)) if t <= ms => lo = i.max(mid),
                _ => hi = mid - 1,
            }
        }
        Ok(Some(lo))
    }
}
