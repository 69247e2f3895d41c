//! The audit archive's retention policy: by age (log time of each entry) and/or by size; the
//! default keeps everything. Retention only ever cuts at a checkpoint (the checkpoint stays and
//! becomes the chain's verified base), so what remains can still be replayed exactly; the kept
//! archive can therefore be up to one checkpoint interval older or larger than the policy says.

use crate::audit::AuditRecord;
use crate::error::StoreError;
use crate::reader::StoreReader;

/// What to keep. `None` in a field means no limit on that dimension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Records whose entry is older than this (in log time) may go.
    pub max_age_ms: Option<u64>,
    /// Keep at most about this many bytes of records (keys and values), newest first.
    pub max_bytes: Option<u64>,
}

impl RetentionPolicy {
    /// Keeps every record forever (the default).
    pub fn keep_everything() -> Self {
        Self::default()
    }

    pub fn keeps_everything(&self) -> bool {
        self.max_age_ms.is_none() && self.max_bytes.is_none()
    }
}

impl StoreReader {
    /// The highest index the policy wants removed, or None when everything may stay.
    /// `timestamp_of` reads a record's log time (the store does not decode entries); a record it
    /// cannot read counts as new, so a damaged record is kept for inspection, never removed.
    pub fn retention_cut(
        &self,
        policy: RetentionPolicy,
        now_ms: u64,
        timestamp_of: impl Fn(&AuditRecord) -> Option<u64>,
    ) -> Result<Option<u64>, StoreError> {
        let mut cut: Option<u64> = None;
        if let Some(age) = policy.max_age_ms {
            let oldest_kept = now_ms.saturating_sub(age);
            self.audit_scan(0, u64::MAX, |rec| match timestamp_of(&rec) {
                Some(t) if t < oldest_kept => {
                    cut = Some(rec.index);
                    Ok::<bool, StoreError>(true)
                }
                _ => Ok(false),
            })?;
        }
        if let Some(max) = policy.max_bytes {
            let mut total = 0u64;
            let mut by_size = None;
            self.audit_scan_rev(0, u64::MAX, |rec| {
                total += 8 + rec.stored_len() as u64;
                if total > max {
                    by_size = Some(rec.index);
                    return Ok::<bool, StoreError>(false);
                }
                Ok(true)
            })?;
            cut = cut.max(by_size);
        }
        Ok(cut)
    }
}
