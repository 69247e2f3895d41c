//! Column family names and key encodings. Log and audit keys are big-endian u64 so RocksDB's
//! byte order equals index order and range scans/deletes work on index ranges.

pub const CF_LOG: &str = "log";
pub const CF_META: &str = "meta";
pub const CF_SNAPSHOT: &str = "snapshot";
pub const CF_AUDIT: &str = "audit";
pub const ALL_CFS: [&str; 4] = [CF_LOG, CF_META, CF_SNAPSHOT, CF_AUDIT];

pub const META_FORMAT_VERSION: &[u8] = b"format_version";
pub const META_CLUSTER_ID: &[u8] = b"cluster_id";
pub const META_VOTE: &[u8] = b"vote";
pub const META_COMMITTED: &[u8] = b"committed";
pub const META_LAST_PURGED: &[u8] = b"last_purged";
/// Where the audit chain restarts after a snapshot install: index (8 bytes BE) + digest.
pub const META_AUDIT_BASE: &[u8] = b"audit_base";
/// Where the audit chain is cut by retention: records at or below it were removed and the
/// checkpoint at it is the chain's base.
pub const META_AUDIT_RETAINED: &[u8] = b"audit_retained_from";

pub const SNAPSHOT_META: &[u8] = b"meta";
pub const SNAPSHOT_DATA: &[u8] = b"data";

pub fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

pub fn decode_index(key: &[u8]) -> Option<u64> {
    let arr: [u8; 8] = key.try_into().ok()?;
    Some(u64::from_be_bytes(arr))
}
