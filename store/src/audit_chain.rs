//! Verification of the audit archive's hash chain, fed one record at a time in index order so a
//! caller that replays the archive checks the chain in the same pass.
//!
//! A record is sound when its digest covers its content and its `prev` links it to what came
//! before: the record at `index - 1`, the genesis digest at index 1, or a checkpoint at
//! `index - 1` from which the chain legitimately restarts: a snapshot installed from the leader
//! (its digest binds its state bytes) or the base retention left (the oldest kept checkpoint).
//! Anything else (a changed byte, a removed record, a forged restart) is a [`ChainProblem`].
//! A snapshot installed after the last record ends the chain legitimately
//! ([`ChainChecker::trailing_install`]). Truncation at the end leaves a sound chain; callers
//! detect it by comparing the head with the node's applied state (`fedraft_raft::audit`).

use std::collections::BTreeSet;
use std::fmt;

use crate::audit::{AuditRecord, AuditRecordRef, GENESIS_DIGEST};
use crate::audit_checkpoint::{Checkpoint, CheckpointKind};
use crate::error::StoreError;
use crate::reader::StoreReader;

/// Something wrong with the archive; each names the index where it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainProblem {
    /// The record's digest does not match its content: it was edited.
    Tampered { index: u64 },
    /// `prev` does not equal the digest of the record before it.
    BrokenLink { index: u64 },
    /// Records are missing before `index` with no legitimate restart point.
    Missing { after: Option<u64>, index: u64 },
    /// A checkpoint disagrees with the chain (wrong digest, or unbound state bytes).
    BadCheckpoint { index: u64, why: String },
}

impl fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainProblem::Tampered { index } => {
                write!(f, "record {index}: digest does not match its content")
            }
            ChainProblem::BrokenLink { index } => write!(
                f,
                "record {index}: does not chain to record {}",
                index.saturating_sub(1)
            ),
            ChainProblem::Missing { after, index } => match after {
                Some(a) => write!(f, "records {}..{} missing", a + 1, index - 1),
                None => write!(f, "records before {index} missing"),
            },
            ChainProblem::BadCheckpoint { index, why } => write!(f, "checkpoint {index}: {why}"),
        }
    }
}

/// Why the chain restarted at an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    Genesis,
    Installed,
    Retention,
}

/// What a complete walk found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainReport {
    pub records: u64,
    pub first: Option<u64>,
    pub last: Option<u64>,
    /// (checkpoint index the chain restarted from, why), in order.
    pub restarts: Vec<(u64, Restart)>,
    pub problems: Vec<ChainProblem>,
}

/// Checks records fed in ascending index order.
pub struct ChainChecker {
    reader: StoreReader,
    retained_from: Option<u64>,
    checkpoints: BTreeSet<u64>,
    last: Option<(u64, [u8; 32])>,
    report: ChainReport,
}

/// Problems kept in a report; a badly damaged archive would otherwise list every record.
const MAX_PROBLEMS: usize = 100;

impl ChainChecker {
    pub fn new(reader: &StoreReader) -> Result<ChainChecker, StoreError> {
        Ok(ChainChecker {
            retained_from: reader.audit_retained_from()?,
            checkpoints: reader.checkpoint_indexes()?.into_iter().collect(),
            reader: reader.clone(),
            last: None,
            report: ChainReport::default(),
        })
    }

    fn problem(&mut self, p: ChainProblem) {
        if self.report.problems.len() < MAX_PROBLEMS {
            self.report.problems.push(p);
        }
    }

    pub fn feed(&mut self, rec: &AuditRecord) -> Result<(), StoreError> {
        self.feed_ref(&rec.as_ref())
    }

    /// [`ChainChecker::feed`] for a record read in place.
    pub fn feed_ref(&mut self, rec: &AuditRecordRef<'_>) -> Result<(), StoreError> {
        let r = &mut self.report;
        r.records += 1;
        r.first.get_or_insert(rec.index);
        r.last = Some(rec.index);
        if !rec.verify() {
            self.problem(ChainProblem::Tampered { index: rec.index });
        }
        match self.last {
            Some((i, d)) if rec.index == i + 1 => {
                if rec.prev != d {
                    self.problem(ChainProblem::BrokenLink { index: rec.index });
                }
            }
            after => self.restart(after.map(|(i, _)| i), rec)?,
        }
        if self.checkpoints.contains(&rec.index) {
            if let Some(cp) = self.reader.checkpoint(rec.index)? {
                if cp.kind == CheckpointKind::Periodic && cp.audit_digest != rec.digest {
                    self.problem(ChainProblem::BadCheckpoint {
                        index: rec.index,
                        why: "digest differs from the record at its index".into(),
                    });
                }
            }
        }
        self.last = Some((rec.index, rec.digest));
        Ok(())
    }

    /// The first record, or one after a gap: legitimate only from genesis or a checkpoint the
    /// chain may restart from.
    fn restart(&mut self, after: Option<u64>, rec: &AuditRecordRef<'_>) -> Result<(), StoreError> {
        if rec.index == 1 && after.is_none() && rec.prev == GENESIS_DIGEST {
            self.report.restarts.push((0, Restart::Genesis));
            return Ok(());
        }
        let base = rec.index - 1;
        if let Some(cp) = self.reader.checkpoint(base)? {
            let linked = cp.audit_digest == rec.prev;
            let why = match cp.kind {
                CheckpointKind::Installed if linked && cp.self_consistent() => {
                    Some(Restart::Installed)
                }
                CheckpointKind::Installed if linked => {
                    self.problem(ChainProblem::BadCheckpoint {
                        index: base,
                        why: "installed state does not match its digest".into(),
                    });
                    return Ok(());
                }
                // Only the oldest kept record may follow a retention base.
                CheckpointKind::Periodic
                    if linked && after.is_none() && self.retained_from == Some(base) =>
                {
                    Some(Restart::Retention)
                }
                _ => None,
            };
            if let Some(why) = why {
                self.report.restarts.push((base, why));
                return Ok(());
            }
        }
        self.problem(ChainProblem::Missing {
            after,
            index: rec.index,
        });
        Ok(())
    }

    /// A snapshot installed from the leader after the last record fed (or with no record at
    /// all), when this node has applied nothing since: no record links to it yet, but the
    /// chain restarts there as it would if one did. It is the archive's legitimate end when it
    /// binds its state bytes and is the restart point the store keeps (its latest install); a
    /// later installed checkpoint that is neither is a problem. Call after the last `feed`;
    /// answers the checkpoint a replay continues from.
    pub fn trailing_install(&mut self) -> Result<Option<Checkpoint>, StoreError> {
        let last = self.last.map_or(0, |(i, _)| i);
        let Some(&at) = self.checkpoints.range(last.saturating_add(1)..).next_back() else {
            return Ok(None);
        };
        let Some(cp) = self.reader.checkpoint(at)? else {
            return Ok(None);
        };
        if cp.kind != CheckpointKind::Installed {
            return Ok(None);
        }
        let why = if !cp.self_consistent() {
            "installed state does not match its digest"
        } else if self.reader.audit_head()? != Some((at, cp.audit_digest)) {
            "not the restart point the store keeps"
        } else {
            self.report.restarts.push((at, Restart::Installed));
            return Ok(Some(cp));
        };
        self.problem(ChainProblem::BadCheckpoint {
            index: at,
            why: why.into(),
        });
        Ok(None)
    }

    pub fn finish(self) -> ChainReport {
        self.report
    }
}

impl StoreReader {
    /// Walks the whole archive once and checks the chain (no replay).
    pub fn verify_chain(&self, mut progress: impl FnMut(u64)) -> Result<ChainReport, StoreError> {
        let mut checker = ChainChecker::new(self)?;
        self.audit_scan_ref(0, u64::MAX, |rec| {
            checker.feed_ref(&rec)?;
            progress(rec.index);
            Ok::<bool, StoreError>(true)
        })?;
        checker.trailing_install()?;
        Ok(checker.finish())
    }
}
