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

/// Last record of the audit chain (index, digest), or where it restarts after a snapshot install.
pub(crate) type AuditHead = Option<(u64, [u8; 32])>;

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
        canonical_pieces(self.index, self.term, &self.entry, &self.outcome, |b| {
            out.extend_from_slice(b)
        });
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

/// Hands `put` a record's canonical bytes, piece by piece: what its digest covers after `prev`,
/// and what its stored value holds after the two digests. The one definition of that layout.
fn canonical_pieces(
    index: u64,
    term: u64,
    entry: &[u8],
    outcome: &[u8],
    mut put: impl FnMut(&[u8]),
) {
    put(&index.to_be_bytes());
    put(&term.to_be_bytes());
    // Entries and outcomes are bounded far below 4 GiB by the request size limits.
    put(&(entry.len() as u32).to_be_bytes());
    put(entry);
    put(&(outcome.len() as u32).to_be_bytes());
    put(outcome);
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
        AuditRecordRef::parse(value).map(|r| r.to_owned())
    }

    /// The same record, borrowed.
    pub fn as_ref(&self) -> AuditRecordRef<'_> {
        AuditRecordRef {
            index: self.index,
            term: self.term,
            entry: &self.entry,
            outcome: &self.outcome,
            prev: self.prev,
            digest: self.digest,
        }
    }

    /// True when the stored digest matches the record's content and `prev`.
    pub fn verify(&self) -> bool {
        self.as_ref().verify()
    }
}

/// A stored record read in place: entry and outcome borrow the storage's buffer, so a scan
/// over millions of records copies nothing it does not need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditRecordRef<'a> {
    pub index: u64,
    pub term: u64,
    pub entry: &'a [u8],
    pub outcome: &'a [u8],
    pub prev: [u8; 32],
    pub digest: [u8; 32],
}

impl<'a> AuditRecordRef<'a> {
    /// Reads a stored value; any malformed value is corruption.
    pub(crate) fn parse(value: &'a [u8]) -> Result<AuditRecordRef<'a>, StoreError> {
        let bad = |what: &str| StoreError::Corrupt(format!("audit record: {what}"));
        let array = |at: usize| -> Result<[u8; 32], StoreError> {
            value
                .get(at..at + 32)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("too short"))
        };
        if value.len() < 64 + 24 {
            return Err(bad("too short"));
        }
        let prev = array(0)?;
        let digest = array(32)?;
        let c = &value[64..];
        let u64_at = |at: usize| -> Result<u64, StoreError> {
            let b: [u8; 8] = c
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("truncated"))?;
            Ok(u64::from_be_bytes(b))
        };
        let u32_at = |at: usize| -> Result<usize, StoreError> {
            let b: [u8; 4] = c
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("truncated"))?;
            Ok(u32::from_be_bytes(b) as usize)
        };
        let index = u64_at(0)?;
        let term = u64_at(8)?;
        let elen = u32_at(16)?;
        let entry = c.get(20..20 + elen).ok_or_else(|| bad("entry length"))?;
        let olen = u32_at(20 + elen)?;
        let ostart = 24 + elen;
        let outcome = c
            .get(ostart..ostart + olen)
            .ok_or_else(|| bad("outcome length"))?;
        if ostart + olen != c.len() {
            return Err(bad("trailing bytes"));
        }
        Ok(AuditRecordRef {
            index,
            term,
            entry,
            outcome,
            prev,
            digest,
        })
    }

    /// An owned copy.
    pub fn to_owned(&self) -> AuditRecord {
        AuditRecord {
            index: self.index,
            term: self.term,
            entry: self.entry.to_vec(),
            outcome: self.outcome.to_vec(),
            prev: self.prev,
            digest: self.digest,
        }
    }

    /// True when the stored digest matches the record's content and `prev`. Hashes the
    /// canonical bytes piece by piece (the same digest as over their concatenation).
    pub fn verify(&self) -> bool {
        let mut h = Sha256::new();
        h.update(self.prev);
        canonical_pieces(self.index, self.term, self.entry, self.outcome, |b| {
            h.update(b)
        });
        <[u8; 32]>::from(h.finalize()) == self.digest
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
        let borrowed = AuditRecordRef::parse(&value).unwrap();
        assert_eq!(borrowed, back.as_ref());
        assert_eq!(borrowed.to_owned(), back);
        assert!(borrowed.verify());
        let mut relinked = borrowed;
        relinked.prev[0] ^= 1;
        assert!(!relinked.verify());
        assert!(AuditRecord::decode(&value[..value.len() - 1]).is_err());
    }
}
