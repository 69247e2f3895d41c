//! The audit archive's record format and hash chain. One record per applied entry: index, term,
//! the encoded log entry, the encoded outcome, and a digest chaining it to the record before, so
//! any edit of history is detectable. Records are kept beyond raft log purges.
//!
//! Canonical record bytes (what the digest covers after `prev`):
//! `index u64 BE | term u64 BE | entry_len u32 BE | entry | outcome_len u32 BE | outcome`.
//! Stored value: `prev (32) | digest (32) | canonical record`.

use sha2::{Digest, Sha256};

use crate::error::StoreError;

/// `prev` of the first record ever written on a node that started from an empty log.
pub const GENESIS_DIGEST: [u8; 32] = [0u8; 32];

/// What the state machine hands over for each applied entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditInput {
    pub index: u64,
    pub term: u64,
    /// The encoded log entry; empty for raft-internal entries (blank leader entries and
    /// membership changes), whose effect the outcome bytes describe.
    pub entry: Vec<u8>,
    /// The encoded outcome of applying it.
    pub outcome: Vec<u8>,
}

/// A stored audit record with its place in the hash chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub index: u64,
    pub term: u64,
    pub entry: Vec<u8>,
    pub outcome: Vec<u8>,
    /// Digest of the record before this one ([`GENESIS_DIGEST`] at the start of history, or the
    /// snapshot digest when this node's history restarts after installing a snapshot).
    pub prev: [u8; 32],
    /// `sha256(prev || canonical record bytes)`.
    pub digest: [u8; 32],
}

impl AuditInput {
    fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.entry.len() + self.outcome.len());
        out.extend_from_slice(&self.index.to_be_bytes());
        out.extend_from_slice(&self.term.to_be_bytes());
        // Entries and outcomes are bounded far below 4 GiB by the request size limits.
        out.extend_from_slice(&(self.entry.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.entry);
        out.extend_from_slice(&(self.outcome.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.outcome);
        out
    }

    /// Seals the input into a record chained after `prev`; returns the record and its stored bytes.
    pub(crate) fn seal(self, prev: [u8; 32]) -> (AuditRecord, Vec<u8>) {
        let canonical = self.canonical();
        let digest = chain_digest(&prev, &canonical);
        let mut value = Vec::with_capacity(64 + canonical.len());
        value.extend_from_slice(&prev);
        value.extend_from_slice(&digest);
        value.extend_from_slice(&canonical);
        let rec = AuditRecord {
            index: self.index,
            term: self.term,
            entry: self.entry,
            outcome: self.outcome,
            prev,
            digest,
        };
        (rec, value)
    }
}

fn chain_digest(prev: &[u8; 32], canonical: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(canonical);
    h.finalize().into()
}

/// The digest a node's audit chain restarts from after it installs a snapshot instead of
/// applying the entries it covers: it binds the chain to the exact snapshot bytes.
pub fn snapshot_digest(index: u64, data: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"fedraft-audit-snapshot");
    h.update(index.to_be_bytes());
    h.update(data);
    h.finalize().into()
}

impl AuditRecord {
    /// Bytes of the stored value (header, digests, entry and outcome).
    pub fn stored_len(&self) -> usize {
        64 + 24 + self.entry.len() + self.outcome.len()
    }

    /// Decodes a stored value; any malformed value is corruption.
    pub(crate) fn decode(value: &[u8]) -> Result<AuditRecord, StoreError> {
        let bad = |what: &str| StoreError::Corrupt(format!("audit record: {what}"));
        if value.len() < 64 + 24 {
            return Err(bad("too short"));
        }
        let prev: [u8; 32] = value[0..32].try_into().map_err(|_| bad("prev"))?;
        let digest: [u8; 32] = value[32..64].try_into().map_err(|_| bad("digest"))?;
        let c = &value[64..];
        let u64_at = |at: usize| -> Result<u64, StoreError> {
            let b: [u8; 8] = c
                .get(at..at + 8)
                .ok_or_else(|| bad("truncated"))?
                .try_into()
                .map_err(|_| bad("u64"))?;
            Ok(u64::from_be_bytes(b))
        };
        let u32_at = |at: usize| -> Result<usize, StoreError> {
            let b: [u8; 4] = c
                .get(at..at + 4)
                .ok_or_else(|| bad("truncated"))?
                .try_into()
                .map_err(|_| bad("u32"))?;
            Ok(u32::from_be_bytes(b) as usize)
        };
        let index = u64_at(0)?;
        let term = u64_at(8)?;
        let elen = u32_at(16)?;
        let entry = c
            .get(20..20 + elen)
            .ok_or_else(|| bad("entry length"))?
            .to_vec();
        let olen = u32_at(20 + elen)?;
        let ostart = 24 + elen;
        let outcome = c
            .get(ostart..ostart + olen)
            .ok_or_else(|| bad("outcome length"))?
            .to_vec();
        if ostart + olen != c.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(AuditRecord {
            index,
            term,
            entry,
            outcome,
            prev,
            digest,
        })
    }

    /// True when the stored digest matches the record's content and `prev`.
    pub fn verify(&self) -> bool {
        let input = AuditInput {
            index: self.index,
            term: self.term,
            entry: self.entry.clone(),
            outcome: self.outcome.clone(),
        };
        chain_digest(&self.prev, &input.canonical()) == self.digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_decode_roundtrip_and_verify() {
        let input = AuditInput {
            index: 7,
            term: 2,
            entry: b"e".to_vec(),
            outcome: b"out".to_vec(),
        };
        let (rec, value) = input.seal(GENESIS_DIGEST);
        let back = AuditRecord::decode(&value).unwrap();
        assert_eq!(rec, back);
        assert!(back.verify());
        let mut tampered = back.clone();
        tampered.outcome = b"other".to_vec();
        assert!(!tampered.verify());
        assert!(AuditRecord::decode(&value[..value.len() - 1]).is_err());
    }
}
