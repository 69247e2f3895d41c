//! The direct reader against serde, the reference: same value on every entry it answers for,
//! a decline (so serde's result, errors included) on everything else.

use proptest::prelude::*;

use super::{decode_into, Spares};
use crate::command::{
    Command, EntryDecoder, Heartbeat, LogEntry, ObjectStatusReport, LOG_ENTRY_VERSION,
};
use crate::error::CodecError;
use crate::model::Capacity;
use crate::policy::Resources;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9.-]{0,12}",
        1 => "[a-zé€ -]{0,6}",
        // Long enough for a two-byte varint length.
        1 => "[a-z]{251,300}",
    ]
}

fn wide_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..251,
        251u64..65_536,
        65_536u64..(1 << 32),
        any::<u64>()
    ]
}

fn resources() -> impl Strategy<Value = Resources> {
    (wide_u64(), wide_u64(), wide_u64()).prop_map(|(cpu_millis, memory_bytes, pods)| Resources {
        cpu_millis,
        memory_bytes,
        pods,
    })
}

fn heartbeat() -> impl Strategy<Value = Heartbeat> {
    (text(), proptest::option::of((resources(), resources()))).prop_map(|(cluster, cap)| {
        Heartbeat {
            cluster,
            capacity: cap.map(|(allocatable, available)| Capacity {
                allocatable,
                available,
            }),
        }
    })
}

fn report() -> impl Strategy<Value = ObjectStatusReport> {
    (
        text(),
        text(),
        text(),
        any::<bool>(),
        any::<u32>(),
        proptest::option::of(text()),
    )
        .prop_map(
            |(namespace, name, cluster, applied, ready_replicas, message)| ObjectStatusReport {
                namespace,
                name,
                cluster,
                applied,
                ready_replicas,
                message,
            },
        )
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        4 => proptest::collection::vec(heartbeat(), 0..8).prop_map(Command::Heartbeats),
        3 => proptest::collection::vec(report(), 0..6).prop_map(Command::StatusReports),
        2 => Just(Command::Tick),
        1 => text().prop_map(|name| Command::Cordon { name }),
        1 => text().prop_map(|name| Command::Uncordon { name }),
        1 => text().prop_map(|name| Command::Drain { name }),
        1 => text().prop_map(|cluster| Command::ClusterUnreachable { cluster }),
        // Kinds the reader declines: serde decodes them.
        1 => (text(), text()).prop_map(|(namespace, name)| Command::RevokePlacement { namespace, name }),
        1 => (text(), proptest::option::of(wide_u64())).prop_map(|(name, expected_version)| {
            Command::DeleteTenant { name, expected_version }
        }),
    ]
}

fn entry() -> impl Strategy<Value = LogEntry> {
    (
        0..=LOG_ENTRY_VERSION + 1,
        text(),
        text(),
        wide_u64(),
        command(),
    )
        .prop_map(
            |(version, request_id, actor, timestamp_ms, command)| LogEntry {
                version,
                request_id,
                actor,
                timestamp_ms,
                command,
            },
        )
}

/// How a byte string is damaged.
#[derive(Debug, Clone)]
enum Damage {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, u8),
    Append(u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        any::<usize>().prop_map(Damage::Truncate),
        (any::<usize>(), 1..=255u8).prop_map(|(at, x)| Damage::Flip(at, x)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Damage::Insert(at, b)),
        any::<u8>().prop_map(Damage::Append),
    ]
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
    match *d {
        Damage::Truncate(i) => bytes.truncate(at(i, bytes.len())),
        Damage::Flip(i, x) => {
            if !bytes.is_empty() {
                let i = at(i, bytes.len());
                bytes[i] ^= x;
            }
        }
        Damage::Insert(i, b) => bytes.insert(at(i, bytes.len() + 1), b),
        Damage::Append(b) => bytes.push(b),
    }
}

/// What both decoders must agree on: the value, or the error.
fn reference(bytes: &[u8]) -> Result<LogEntry, CodecError> {
    LogEntry::decode_serde(bytes)
}

/// Through a decoder that decoded `earlier` first (whatever became of those).
fn reusing(earlier: &[LogEntry], bytes: &[u8]) -> Result<LogEntry, CodecError> {
    let mut d = EntryDecoder::new();
    for e in earlier {
        let _ = d.decode(&e.encode());
    }
    d.decode(bytes).cloned()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn decodes_as_serde_does(e in entry(), prev in proptest::collection::vec(entry(), 0..3)) {
        let bytes = e.encode();
        let want = reference(&bytes);
        if e.version <= LOG_ENTRY_VERSION {
            prop_assert_eq!(&want, &Ok(e.clone()));
        }
        prop_assert_eq!(LogEntry::decode(&bytes), want.clone());
        // After entries of any shape: nothing of them may remain.
        prop_assert_eq!(reusing(&prev, &bytes), want);
    }

    #[test]
    fn damaged_bytes_decode_as_serde_does(
        e in entry(),
        prev in proptest::collection::vec(entry(), 0..3),
        damages in proptest::collection::vec(damage(), 1..3),
    ) {
        let mut bytes = e.encode();
        for d in &damages {
            apply(&mut bytes, d);
        }
        let want = reference(&bytes);
        prop_assert_eq!(LogEntry::decode(&bytes), want.clone());
        prop_assert_eq!(reusing(&prev, &bytes), want);
    }
}

fn sample(command: Command) -> LogEntry {
    LogEntry::new("req-1", "executor:dc1", 1_790_000_000_123, command)
}

#[test]
fn the_frequent_kinds_take_the_direct_path() {
    let hb = |c: &str| Heartbeat {
        cluster: c.into(),
        capacity: None,
    };
    let frequent = [
        sample(Command::Heartbeats(
            (0..300).map(|i| hb(&format!("dc{i}"))).collect(),
        )),
        sample(Command::StatusReports(vec![ObjectStatusReport {
            namespace: "ns".into(),
            name: "app".into(),
            cluster: "dc1".into(),
            applied: true,
            ready_replicas: 3,
            message: Some("ok".into()),
        }])),
        sample(Command::Tick),
        sample(Command::Drain { name: "dc2".into() }),
    ];
    let mut into = sample(Command::Tick);
    let mut spares = Spares::default();
    for e in frequent.iter().chain(frequent.iter().rev()) {
        assert!(
            decode_into(&mut into, &mut spares, &e.encode()),
            "{}",
            e.command.kind()
        );
        assert_eq!(&into, e);
    }
    let declined = sample(Command::RevokePlacement {
        namespace: "ns".into(),
        name: "app".into(),
    });
    assert!(!decode_into(&mut into, &mut spares, &declined.encode()));
    assert_eq!(LogEntry::decode(&declined.encode()), Ok(declined));
}

#[test]
fn wider_varint_forms_than_needed_are_read_as_bincode_reads_them() {
    // version 1 as a u16 form, empty request id, actor "a" with its length as a u32 form,
    // timestamp 7 as a u64 form, Tick (variant 14) as a u32 form.
    let mut bytes = vec![251, 1, 0, 0, 252, 1, 0, 0, 0, b'a', 253];
    bytes.extend_from_slice(&7u64.to_le_bytes());
    bytes.extend_from_slice(&[252, 14, 0, 0, 0]);
    let mut want = LogEntry::new("", "a", 7, Command::Tick);
    want.version = 1;
    assert_eq!(reference(&bytes), Ok(want.clone()));
    let mut into = sample(Command::Tick);
    let mut spares = Spares::default();
    assert!(decode_into(&mut into, &mut spares, &bytes));
    assert_eq!(into, want);
    // A u64 form where bincode allows at most a u32 one (the variant index): refused by both.
    let mut bad = vec![1, 0, 0, 0, 253];
    bad.extend_from_slice(&14u64.to_le_bytes());
    assert!(reference(&bad).is_err());
    assert!(!decode_into(&mut into, &mut spares, &bad));
}
