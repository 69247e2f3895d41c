//! State checkpoints of the audit archive: the encoded state machine every K commands (and at
//! every snapshot installed from the leader), so "state at N" is the nearest checkpoint at or
//! below N plus a short replay. They live in the snapshot column family under their own key
//! prefix, so adding them changed no column family and no on-disk format version.
//!
//! Stored value: `b'C' | kind u8 | audit_digest (32) | state bytes`. `audit_digest` is where the
//! hash chain stands after the checkpoint's index: the digest of the record at that index, or,
//! for a snapshot installed from the leader, `snapshot_digest(index, state)`. A chain may restart
//! from a checkpoint (after an install, or after retention removed older records): the next
//! record's `prev` must equal this digest.

use crate::audit::snapshot_digest;
use crate::error::StoreError;

/// Key prefix of checkpoints inside the snapshot column family (sorts before "data"/"meta").
pub(crate) const CHECKPOINT_PREFIX: &[u8] = b"checkpoint/";

const MAGIC: u8 = b'C';

/// How a checkpoint came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointKind {
    /// Taken by this node every K applied commands; the record at its index exists (until
    /// retention removes it) and carries `audit_digest`.
    Periodic,
    /// A snapshot this node installed from the leader instead of applying the entries it
    /// covers: the chain restarts here.
    Installed,
}

/// One stored checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The command sequence position (resource version) the state is at.
    pub index: u64,
    pub kind: CheckpointKind,
    pub audit_digest: [u8; 32],
    /// The state machine's snapshot encoding (opaque here).
    pub state: Vec<u8>,
}

pub(crate) fn checkpoint_key(index: u64) -> Vec<u8> {
    let mut k = CHECKPOINT_PREFIX.to_vec();
    k.extend_from_slice(&index.to_be_bytes());
    k
}

pub(crate) fn checkpoint_index(key: &[u8]) -> Option<u64> {
    let rest = key.strip_prefix(CHECKPOINT_PREFIX)?;
    Some(u64::from_be_bytes(rest.try_into().ok()?))
}

impl Checkpoint {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(34 + self.state.len());
        v.push(MAGIC);
        v.push(match self.kind {
            CheckpointKind::Periodic => 0,
            CheckpointKind::Installed => 1,
        });
        v.extend_from_slice(&self.audit_digest);
        v.extend_from_slice(&self.state);
        v
    }

    pub(crate) fn decode(index: u64, v: &[u8]) -> Result<Checkpoint, StoreError> {
        let bad = |m: &str| StoreError::Corrupt(format!("checkpoint {index}: {m}"));
        if v.len() < 34 || v[0] != MAGIC {
            return Err(bad("malformed header"));
        }
        let kind = match v[1] {
            0 => CheckpointKind::Periodic,
            1 => CheckpointKind::Installed,
            k => return Err(bad(&format!("unknown kind {k}"))),
        };
        let audit_digest: [u8; 32] = v[2..34].try_into().map_err(|_| bad("digest"))?;
        Ok(Checkpoint {
            index,
            kind,
            audit_digest,
            state: v[34..].to_vec(),
        })
    }

    /// For an installed checkpoint, whether its digest really binds its state bytes.
    pub fn self_consistent(&self) -> bool {
        match self.kind {
            CheckpointKind::Periodic => true,
            CheckpointKind::Installed => {
                snapshot_digest(self.index, &self.state) == self.audit_digest
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_key_order() {
        let c = Checkpoint {
            index: 42,
            kind: CheckpointKind::Installed,
            audit_digest: snapshot_digest(42, b"state"),
            state: b"state".to_vec(),
        };
        assert_eq!(Checkpoint::decode(42, &c.encode()).unwrap(), c);
        assert!(c.self_consistent());
        assert!(checkpoint_key(1) < checkpoint_key(256));
        assert!(checkpoint_key(u64::MAX).as_slice() < b"data".as_slice());
        assert_eq!(checkpoint_index(&checkpoint_key(77)), Some(77));
        assert!(Checkpoint::decode(1, b"xx").is_err());
    }
}
