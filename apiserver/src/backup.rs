//! The backup file format, shared by the API (which writes it) and `fedraft restore` (which
//! reads it): a magic line, one JSON header line, then core's snapshot bytes.
//!
//! ```text
//! fedraft-backup v1\n
//! {"clusterId":"fedraft","appliedIndex":42,"stateHash":"<hex>","logTimeMs":..., "snapshotBytes":N,"snapshotSha256":"<hex>"}\n
//! <N bytes: State::to_snapshot()>
//! ```
//!
//! The snapshot is taken at one applied index (a consistent cut of the replicated state); the
//! header's `stateHash` is `State::state_hash` of exactly those bytes, so a restore can prove it
//! rebuilt the same state. Must not: carry raft membership or node addresses (a restore seeds a
//! new cluster with its own), or anything outside core's snapshot.

use fedraft_core::state::State;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// First line of every backup file.
pub const MAGIC: &[u8] = b"fedraft-backup v1\n";
/// The header line is small; a longer one means the file is not a backup.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// What a backup says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupHeader {
    /// The cluster the backup was taken from (informational: a restore may use another id).
    pub cluster_id: String,
    /// Core's applied index (resource version of the last command) in the snapshot.
    pub applied_index: u64,
    /// Hex SHA-256 of the replicated state (`State::state_hash`).
    pub state_hash: String,
    /// Log time of the snapshot.
    pub log_time_ms: u64,
    /// Length of the snapshot that follows the header.
    pub snapshot_bytes: u64,
    /// Hex SHA-256 of the snapshot bytes (catches truncation and bit rot).
    pub snapshot_sha256: String,
}

/// Why a backup file was refused.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("not a fedraft backup (missing the `fedraft-backup v1` line)")]
    NotABackup,
    #[error("backup header: {0}")]
    Header(String),
    #[error("backup is truncated or padded: header says {expected} snapshot bytes, found {found}")]
    Length { expected: u64, found: u64 },
    #[error("backup snapshot checksum mismatch: the file is damaged")]
    Checksum,
    #[error("backup snapshot does not decode: {0}")]
    Snapshot(String),
    #[error("restored state hash {found} differs from the backup's {expected}")]
    StateHash { expected: String, found: String },
}

/// The header and snapshot of `state`, taken at its current applied index.
pub fn capture(cluster_id: &str, state: &State) -> (BackupHeader, Vec<u8>) {
    let snapshot = state.to_snapshot();
    let header = BackupHeader {
        cluster_id: cluster_id.to_string(),
        applied_index: state.applied_index(),
        state_hash: state.state_hash_hex(),
        log_time_ms: state.log_time_ms(),
        snapshot_bytes: snapshot.len() as u64,
        snapshot_sha256: hex::encode(Sha256::digest(&snapshot)),
    };
    (header, snapshot)
}

/// The magic and header lines that precede the snapshot in the file.
pub fn encode_prefix(h: &BackupHeader) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    // A struct of strings and integers always serializes.
    out.extend_from_slice(&serde_json::to_vec(h).unwrap_or_default());
    out.push(b'\n');
    out
}

/// Parses and checks a whole backup file; returns the header, the decoded state and the raw
/// snapshot bytes. The state's hash must equal the header's.
pub fn decode(bytes: &[u8]) -> Result<(BackupHeader, State, Vec<u8>), BackupError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(BackupError::NotABackup)?;
    let nl = rest
        .iter()
        .take(MAX_HEADER_BYTES)
        .position(|b| *b == b'\n')
        .ok_or_else(|| BackupError::Header("no header line".into()))?;
    let header: BackupHeader =
        serde_json::from_slice(&rest[..nl]).map_err(|e| BackupError::Header(e.to_string()))?;
    let snapshot = &rest[nl + 1..];
    if snapshot.len() as u64 != header.snapshot_bytes {
        return Err(BackupError::Length {
            expected: header.snapshot_bytes,
            found: snapshot.len() as u64,
        });
    }
    if hex::encode(Sha256::digest(snapshot)) != header.snapshot_sha256 {
        return Err(BackupError::Checksum);
    }
    let state = State::from_snapshot(snapshot).map_err(|e| BackupError::Snapshot(e.to_string()))?;
    let found = state.state_hash_hex();
    if found != header.state_hash {
        return Err(BackupError::StateHash {
            expected: header.state_hash.clone(),
            found,
        });
    }
    Ok((header, state, snapshot.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let state = State::new();
        let (h, snap) = capture("c1", &state);
        let mut file = encode_prefix(&h);
        file.extend_from_slice(&snap);
        let (h2, s2, raw) = decode(&file).unwrap();
        assert_eq!(h2, h);
        assert_eq!(s2.state_hash_hex(), state.state_hash_hex());
        assert_eq!(raw, snap);

        assert!(matches!(decode(b"hello"), Err(BackupError::NotABackup)));
        let truncated = &file[..file.len() - 1];
        assert!(matches!(decode(truncated), Err(BackupError::Length { .. })));
        let mut flipped = file.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        assert!(matches!(decode(&flipped), Err(BackupError::Checksum)));
    }
}
