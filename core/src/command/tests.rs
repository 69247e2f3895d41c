//! The envelope's encoding: a round trip, a newer version as a typed error, and malformed
//! bytes refused rather than trusted.

use super::*;

#[test]
fn entry_round_trips() {
    let e = LogEntry::new("r1", "alice", 42, Command::Cordon { name: "dc1".into() });
    assert_eq!(LogEntry::decode(&e.encode()).unwrap(), e);
}

#[test]
fn newer_version_is_a_typed_error() {
    let mut e = LogEntry::new("r1", "alice", 42, Command::Tick);
    e.version = LOG_ENTRY_VERSION + 1;
    assert_eq!(
        LogEntry::decode(&e.encode()),
        Err(CodecError::UnsupportedVersion {
            found: LOG_ENTRY_VERSION + 1,
            supported: LOG_ENTRY_VERSION
        })
    );
}

#[test]
fn garbage_and_trailing_bytes_are_refused() {
    assert!(matches!(
        LogEntry::decode(&[1, 0xff, 0xff]),
        Err(CodecError::Decode(_))
    ));
    let mut bytes = LogEntry::new("", "a", 1, Command::Tick).encode();
    bytes.push(0);
    assert_eq!(
        LogEntry::decode(&bytes),
        Err(CodecError::TrailingBytes { trailing: 1 })
    );
    // A request id whose length prefix claims 2^62 bytes: refused, not an abort.
    let mut huge = vec![1, 0, 253];
    huge.extend_from_slice(&(1u64 << 62).to_le_bytes());
    assert!(matches!(
        LogEntry::decode(&huge),
        Err(CodecError::Decode(_))
    ));
}
