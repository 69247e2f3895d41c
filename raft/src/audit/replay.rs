//! Replay: the state at any index (nearest checkpoint at or below it, then the archived
//! commands after it, applied with the indexes the live node used), diffs and explanations
//! built on it, and verification (hash chain, re-applied outcomes byte for byte, checkpoints,
//! and the node's own state at the same index).

use std::collections::{BTreeMap, BTreeSet};

use fedraft_core::audit::{
    diff, explain_step, rollout_steps, PlacementChange, ReadySample, Record, StateDiff,
};
use fedraft_core::command::{EntryDecoder, LogEntry};
use fedraft_core::model::ObjectKey;
use fedraft_core::state::State;
use fedraft_store::{AuditRecordRef, ChainChecker, ChainReport, CheckpointKind};

use super::{decode_entry_with, AuditLog, LiveState};
use crate::codec;
use crate::error::RaftError;

/// Sees every replayed record, its decoded entry and the state right after it.
type RecordVisitor<'a> =
    dyn FnMut(&AuditRecordRef<'_>, &LogEntry, &State) -> Result<(), RaftError> + 'a;

/// A plain replay reports its progress every this many records.
const PROGRESS_EVERY: u64 = 1024;

/// Problems a verification lists before it stops collecting.
const MAX_LISTED: usize = 100;

/// What `verify` found. `ok()` when nothing is wrong.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub chain: ChainReport,
    pub replayed: u64,
    /// Index and state hash where the replay ended.
    pub replay_index: u64,
    pub replay_hash: String,
    /// The node's own state, and whether the replay reproduced it at the same index.
    pub live: Option<LiveState>,
    pub live_matched: bool,
    pub checkpoints_checked: u64,
    /// Everything wrong, one sentence each (chain problems included).
    pub problems: Vec<String>,
}

impl VerifyReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < MAX_LISTED {
            self.problems.push(p);
        }
    }
}

fn codec(e: impl std::fmt::Display) -> RaftError {
    RaftError::Codec(e.to_string())
}

impl AuditLog {
    /// The state a replay of `index` starts from: the nearest checkpoint at or below it, or
    /// the empty state when the archive goes back to the first command.
    fn start_for(&self, index: u64) -> Result<State, RaftError> {
        if let Some(cp) = self.reader.checkpoint_at_or_below(index)? {
            return State::from_snapshot(&cp.state).map_err(codec);
        }
        match self.reader.audit_first()? {
            None | Some(1) => Ok(State::new()),
            Some(first) => Err(RaftError::Invalid(format!(
                "index {index} is before the archive's oldest replayable point ({first})"
            ))),
        }
    }

    /// Applies archived commands after `state`'s index up to `to` (inclusive). `each` sees every
    /// applied record, its entry and the state after it.
    ///
    /// One thread: each record is read in place from RocksDB's buffer and decoded over the
    /// previous entry (`EntryDecoder`), so the loop allocates almost nothing and the entry is
    /// still in this core's cache when `apply` reads it. Decoding on a second thread was
    /// measured slower: the applying thread then pulled every decoded string from the other
    /// core's cache, which cost more than reading and decoding the record itself.
    fn advance(
        &self,
        state: &mut State,
        to: u64,
        mut each: Option<&mut RecordVisitor<'_>>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), RaftError> {
        let from = state.applied_index() + 1;
        let mut decoder = EntryDecoder::new();
        let mut reported = state.applied_index();
        self.reader
            .audit_scan_ref(from, to.saturating_add(1), |rec| {
                if rec.index != state.applied_index() + 1 {
                    self.restart_at(state, rec.index)?;
                }
                let entry = decode_entry_with(&mut decoder, rec.index, rec.entry)?;
                state.apply(rec.index, entry);
                if let Some(f) = each.as_deref_mut() {
                    f(&rec, entry, state)?;
                    progress(rec.index);
                } else if rec.index >= reported + PROGRESS_EVERY {
                    reported = rec.index;
                    progress(rec.index);
                }
                Ok::<bool, RaftError>(true)
            })?;
        if state.applied_index() < to {
            return Err(RaftError::Invalid(format!(
                "the archive ends at {} before index {to}",
                state.applied_index()
            )));
        }
        if each.is_none() && state.applied_index() > reported {
            progress(state.applied_index());
        }
        Ok(())
    }

    /// A hole in the archive is crossed only where this node installed a snapshot.
    fn restart_at(&self, state: &mut State, index: u64) -> Result<(), RaftError> {
        let base = index - 1;
        match self.reader.checkpoint(base)? {
            Some(cp) if cp.kind == CheckpointKind::Installed && base > state.applied_index() => {
                *state = State::from_snapshot(&cp.state).map_err(codec)?;
                Ok(())
            }
            _ => Err(RaftError::Invalid(format!(
                "audit records {}..{} missing",
                state.applied_index() + 1,
                base
            ))),
        }
    }

    /// Applies the archived commands after `state`'s index up to `to`, from whatever state the
    /// caller holds (e.g. the empty state, to replay the whole archive).
    pub fn replay_onto(
        &self,
        state: &mut State,
        to: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), RaftError> {
        self.advance(state, to, None, progress)
    }

    /// The state right after the command at `index` was applied.
    pub fn state_at(&self, index: u64) -> Result<State, RaftError> {
        let mut s = self.start_for(index)?;
        self.advance(&mut s, index, None, &mut |_| {})?;
        Ok(s)
    }

    /// [`AuditLog::state_at`] with a progress callback (index reached).
    pub fn state_at_with(
        &self,
        index: u64,
        progress: &mut dyn FnMut(u64),
    ) -> Result<State, RaftError> {
        let mut s = self.start_for(index)?;
        self.advance(&mut s, index, None, progress)?;
        Ok(s)
    }

    /// What changed from index `a` to index `b` (`a <= b`).
    pub fn diff(
        &self,
        a: u64,
        b: u64,
        namespaces: Option<&[String]>,
    ) -> Result<StateDiff, RaftError> {
        if a > b {
            return Err(RaftError::Invalid(format!("from {a} is after to {b}")));
        }
        let sa = self.state_at(a)?;
        let mut sb = sa.clone();
        // Continue from `a` unless a checkpoint closer to `b` makes a fresh start cheaper.
        if self
            .reader
            .checkpoint_at_or_below(b)?
            .is_some_and(|c| c.index > a)
        {
            sb = self.state_at(b)?;
        } else {
            self.advance(&mut sb, b, None, &mut |_| {})?;
        }
        Ok(diff(&sa, &sb, namespaces))
    }

    /// Every placement change of `key` with `from <= index <= to`, each with its cause, and
    /// every step of its rollouts in the same range.
    pub fn explain(
        &self,
        key: &ObjectKey,
        from: Option<u64>,
        to: Option<u64>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Vec<PlacementChange>, RaftError> {
        Ok(self.history(key, from, to, progress)?.changes)
    }

    /// [`AuditLog::explain`] and, from the same replay, the object's desired and ready replicas
    /// over the range (a sample where either changed, the first at `from`).
    pub fn history(
        &self,
        key: &ObjectKey,
        from: Option<u64>,
        to: Option<u64>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<ObjectHistory, RaftError> {
        let Some((first, last)) = self.bounds()? else {
            return Ok(ObjectHistory::default());
        };
        let from = from.unwrap_or(first).max(first);
        let to = to.unwrap_or(last).min(last);
        let mut state = self.start_for(from.saturating_sub(1))?;
        if state.applied_index() + 1 < from {
            self.advance(&mut state, from - 1, None, progress)?;
        }
        let mut before: Option<BTreeMap<String, u32>> = state
            .object(&key.namespace, &key.name)
            .map(|o| o.placement_map());
        let wanted = key.to_string();
        let mut changes = Vec::new();
        let mut readiness: Vec<ReadySample> =
            ReadySample::of(&state, key, state.applied_index(), state.log_time_ms())
                .into_iter()
                .collect();
        let mut each =
            |rec: &AuditRecordRef<'_>, entry: &LogEntry, after: &State| -> Result<(), RaftError> {
                if let Some(r) = ReadySample::of(after, key, rec.index, entry.timestamp_ms) {
                    if r.differs(readiness.last()) {
                        readiness.push(r);
                    }
                }
                let now = after
                    .object(&key.namespace, &key.name)
                    .map(|o| o.placement_map());
                let stepped = after
                    .rollout(&key.namespace, &key.name)
                    .and_then(|r| r.events.last())
                    .is_some_and(|e| e.index == rec.index);
                if now != before || stepped {
                    let r = Record {
                        index: rec.index,
                        term: rec.term,
                        entry: entry.clone(),
                        applied: codec::decode_applied(rec.outcome)?,
                    };
                    if now != before {
                        debug_assert!(r.objects().contains(&wanted) || now.is_none());
                        if let Some(c) = explain_step(before.as_ref(), after, &r, key) {
                            changes.push(c);
                        }
                        before = now;
                    }
                    changes.extend(rollout_steps(after, &r, key));
                }
                Ok(())
            };
        self.advance(&mut state, to, Some(&mut each), progress)?;
        Ok(ObjectHistory { changes, readiness })
    }

    /// Replays the whole archive: the hash chain must hold, every re-applied command must give
    /// the archived outcome byte for byte, every checkpoint must equal the replayed state, and
    /// the replay must reach `live` (the node's own state) with the same hash.
    pub fn verify(
        &self,
        live: Option<LiveState>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<VerifyReport, RaftError> {
        let mut report = VerifyReport {
            live: live.clone(),
            ..VerifyReport::default()
        };
        let mut checker = ChainChecker::new(&self.reader)?;
        let checkpoints: BTreeSet<u64> = self.reader.checkpoint_indexes()?.into_iter().collect();
        let mut state: Option<State> = None;
        let mut decoder = EntryDecoder::new();
        self.reader.audit_scan_ref(0, u64::MAX, |rec| {
            checker.feed_ref(&rec)?;
            let contiguous = state
                .as_ref()
                .is_some_and(|s| s.applied_index() + 1 == rec.index);
            if !contiguous {
                // Start, or restart after an installed snapshot, from the checkpoint just
                // below; the chain checker has judged whether that restart is legitimate.
                let base = rec.index - 1;
                state = match (base, self.reader.checkpoint(base)?) {
                    (_, Some(cp)) => Some(State::from_snapshot(&cp.state).map_err(codec)?),
                    (0, None) => Some(State::new()),
                    (_, None) => {
                        report.problem(format!("cannot replay from {}: no state there", rec.index));
                        None
                    }
                };
            }
            let Some(s) = state.as_mut() else {
                return Ok(true);
            };
            let entry = decode_entry_with(&mut decoder, rec.index, rec.entry)?;
            let applied = s.apply(rec.index, entry);
            report.replayed += 1;
            if codec::encode_applied(&applied)? != rec.outcome {
                report.problem(format!(
                    "record {}: replayed outcome differs from the archived one",
                    rec.index
                ));
            }
            if checkpoints.contains(&rec.index) {
                if let Some(cp) = self.reader.checkpoint(rec.index)? {
                    report.checkpoints_checked += 1;
                    let at = State::from_snapshot(&cp.state).map_err(codec)?;
                    if at.state_hash() != s.state_hash() {
                        report.problem(format!(
                            "checkpoint {}: state differs from the replay",
                            rec.index
                        ));
                    }
                }
            }
            if let Some(l) = &live {
                if l.index == rec.index {
                    report.live_matched = s.state_hash_hex() == l.state_hash;
                    if !report.live_matched {
                        report.problem(format!(
                            "state hash at {} differs from the node's ({} vs {})",
                            l.index,
                            s.state_hash_hex(),
                            l.state_hash
                        ));
                    }
                }
            }
            progress(rec.index);
            Ok::<bool, RaftError>(true)
        })?;
        // This node's last act may have been to install a snapshot (a restart behind a leader
        // that had purged its log, with nothing applied since): the replay continues from it.
        if let Some(cp) = checker.trailing_install()? {
            let s = State::from_snapshot(&cp.state).map_err(codec)?;
            if let Some(l) = live.as_ref().filter(|l| l.index == cp.index) {
                report.live_matched = s.state_hash_hex() == l.state_hash;
                if !report.live_matched {
                    report.problem(format!(
                        "state hash at {} differs from the node's ({} vs {})",
                        l.index,
                        s.state_hash_hex(),
                        l.state_hash
                    ));
                }
            }
            state = Some(s);
        }
        report.chain = checker.finish();
        for p in report.chain.problems.clone() {
            report.problem(p.to_string());
        }
        if let Some(s) = &state {
            report.replay_index = s.applied_index();
            report.replay_hash = s.state_hash_hex();
        }
        if let Some(l) = &live {
            if report.replay_index < l.index {
                report.problem(format!(
                    "the archive ends at {} but the node applied commands up to {}: records \
                     missing at the end",
                    report.replay_index, l.index
                ));
            }
        }
        Ok(report)
    }
}

/// What [`AuditLog::history`] found for one object over a range of the log.
#[derive(Debug, Clone, Default)]
pub struct ObjectHistory {
    pub changes: Vec<PlacementChange>,
    pub readiness: Vec<ReadySample>,
}
