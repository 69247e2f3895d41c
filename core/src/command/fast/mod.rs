//! A direct reader of the bincode bytes of the entries a log holds by the million: heartbeats,
//! status reports, ticks and the one-name commands. Replaying an archive decodes every entry;
//! through serde each string was a zeroed allocation, a copy and a UTF-8 check behind several
//! layers of visitors, and the entry's vectors and strings were allocated anew for every entry.
//! Here the bytes are read in one pass, and [`EntryDecoder`] writes them into an entry it
//! reuses, so the strings and vectors of earlier entries keep their allocations.
//!
//! Exactness: this reader answers only when serde would accept the same bytes and build the
//! same value (the same varint forms, the same tags, valid UTF-8, no trailing bytes). Anything
//! else, including every other command, makes it decline, and the caller decodes through serde,
//! which also produces the errors. A property test holds the two to the same result on
//! encoded, truncated and damaged entries.
//!
//! Must not: be the only decoder (serde stays the reference), or answer for a layout it does
//! not know (entries newer than `LOG_ENTRY_VERSION` are declined).

use super::{Command, Heartbeat, LogEntry, ObjectStatusReport, LOG_ENTRY_VERSION};
use crate::error::CodecError;
use crate::model::Capacity;
use crate::policy::Resources;

// The envelope and command layouts below are those of `LOG_ENTRY_VERSION` 1 to 17 (versions 2
// to 17 changed what apply checks and accepts, added a replica mode inside object specs and
// appended commands: 6 the rollout commands, 7 `CapacityDetails` and `PutTenantWithExtended`,
// 8 the member commands, 9 `Reachability`, `SetHealthPolicy`, `PutTenantWithQuotas`,
// `PutObjectWithFailBack` and `ExecutorLease`; 10 changed apply only; 11 appended
// `StatusReportsAt` and `PutObjectWithDescheduling` and changed what `WorkloadReports` record
// at apply; 12 widened the peer documents apply accepts; 13 admits namespaces; 14 appended
// `StatusValues` and `ClusterConditions`, reads overflow affinity tiers and statePreservation
// and keeps taint policies; 15 changed how time advances only; 16 and 17 changed apply only;
// this reader decodes none of those commands, and the layouts it reads are unchanged); a new
// version must teach this reader its layout (or make it decline) before it may answer.
const _: () = assert!(LOG_ENTRY_VERSION == 17);

// bincode's varint markers (standard configuration): a value below 251 is one byte, else a
// marker byte and a little-endian integer follow. Larger forms than the value needs are
// accepted, as bincode accepts them.
const U16_MARK: u8 = 251;
const U32_MARK: u8 = 252;
const U64_MARK: u8 = 253;

// Variant indexes of `Command` (declaration order).
const CORDON: u32 = 3;
const UNCORDON: u32 = 4;
const DRAIN: u32 = 5;
const HEARTBEATS: u32 = 11;
const CLUSTER_UNREACHABLE: u32 = 12;
const STATUS_REPORTS: u32 = 13;
const TICK: u32 = 14;

/// Decodes entries one after another into the same entry, so that a loop over many entries
/// allocates almost nothing: the strings and batches of the previous entries are overwritten
/// in place, and a batch of one kind is kept aside while entries of other kinds pass (logs
/// interleave heartbeats, status reports and ticks).
pub struct EntryDecoder {
    entry: LogEntry,
    spares: Spares,
}

impl Default for EntryDecoder {
    fn default() -> Self {
        EntryDecoder {
            entry: LogEntry::new(String::new(), String::new(), 0, Command::Tick),
            spares: Spares::default(),
        }
    }
}

impl EntryDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry `bytes` encode; equal to [`LogEntry::decode`]'s answer, errors included.
    pub fn decode(&mut self, bytes: &[u8]) -> Result<&LogEntry, CodecError> {
        if !decode_into(&mut self.entry, &mut self.spares, bytes) {
            let decoded = LogEntry::decode_serde(bytes)?;
            let old = std::mem::replace(&mut self.entry, decoded);
            self.spares.keep(old.command);
        }
        Ok(&self.entry)
    }
}

/// Batches kept for reuse while the entry holds another kind of command.
#[derive(Default)]
pub(super) struct Spares {
    heartbeats: Vec<Heartbeat>,
    reports: Vec<ObjectStatusReport>,
}

impl Spares {
    fn keep(&mut self, old: Command) {
        match old {
            Command::Heartbeats(v) => self.heartbeats = v,
            Command::StatusReports(v) => self.reports = v,
            _ => {}
        }
    }

    fn replace(&mut self, command: &mut Command, next: Command) {
        let old = std::mem::replace(command, next);
        self.keep(old);
    }
}

/// Decodes `bytes` into `entry`, reusing its allocations and `spares`. False (with `entry`
/// holding anything) when the bytes are not a plain entry of a kind this reader knows: the
/// caller then decodes through serde.
pub(super) fn decode_into(entry: &mut LogEntry, spares: &mut Spares, bytes: &[u8]) -> bool {
    let mut r = Reader { b: bytes };
    read_entry(&mut r, entry, spares).is_some() && r.b.is_empty()
}

fn read_entry(r: &mut Reader<'_>, e: &mut LogEntry, spares: &mut Spares) -> Option<()> {
    let version = r.u16()?;
    if version > LOG_ENTRY_VERSION {
        return None;
    }
    e.version = version;
    r.string_into(&mut e.request_id)?;
    r.string_into(&mut e.actor)?;
    e.timestamp_ms = r.u64()?;
    match r.u32()? {
        HEARTBEATS => {
            if !matches!(e.command, Command::Heartbeats(_)) {
                let batch = std::mem::take(&mut spares.heartbeats);
                spares.replace(&mut e.command, Command::Heartbeats(batch));
            }
            let Command::Heartbeats(batch) = &mut e.command else {
                return None;
            };
            r.seq_into(batch, empty_heartbeat, |r, hb| {
                r.string_into(&mut hb.cluster)?;
                hb.capacity = match r.tag()? {
                    false => None,
                    true => Some(Capacity {
                        allocatable: r.resources()?,
                        available: r.resources()?,
                    }),
                };
                Some(())
            })
        }
        STATUS_REPORTS => {
            if !matches!(e.command, Command::StatusReports(_)) {
                let batch = std::mem::take(&mut spares.reports);
                spares.replace(&mut e.command, Command::StatusReports(batch));
            }
            let Command::StatusReports(batch) = &mut e.command else {
                return None;
            };
            r.seq_into(batch, empty_report, |r, s| {
                r.string_into(&mut s.namespace)?;
                r.string_into(&mut s.name)?;
                r.string_into(&mut s.cluster)?;
                s.applied = r.bool()?;
                s.ready_replicas = r.u32()?;
                match r.tag()? {
                    false => s.message = None,
                    true => r.string_into(s.message.get_or_insert_with(String::new))?,
                }
                Some(())
            })
        }
        TICK => {
            spares.replace(&mut e.command, Command::Tick);
            Some(())
        }
        v @ (CORDON | UNCORDON | DRAIN | CLUSTER_UNREACHABLE) => {
            let name = r.str()?.to_owned();
            let next = match v {
                CORDON => Command::Cordon { name },
                UNCORDON => Command::Uncordon { name },
                DRAIN => Command::Drain { name },
                _ => Command::ClusterUnreachable { cluster: name },
            };
            spares.replace(&mut e.command, next);
            Some(())
        }
        _ => None,
    }
}

fn empty_heartbeat() -> Heartbeat {
    Heartbeat {
        cluster: String::new(),
        capacity: None,
    }
}

fn empty_report() -> ObjectStatusReport {
    ObjectStatusReport {
        namespace: String::new(),
        name: String::new(),
        cluster: String::new(),
        applied: false,
        ready_replicas: 0,
        message: None,
    }
}

/// The bytes not read yet.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.b.len() {
            return None;
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.b.split_first()?;
        self.b = rest;
        Some(first)
    }

    fn le<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// A varint of at most `max_mark`'s width.
    fn varint(&mut self, max_mark: u8) -> Option<u64> {
        match self.byte()? {
            b if b < U16_MARK => Some(u64::from(b)),
            U16_MARK => self.le::<2>().map(|b| u64::from(u16::from_le_bytes(b))),
            U32_MARK if max_mark >= U32_MARK => {
                self.le::<4>().map(|b| u64::from(u32::from_le_bytes(b)))
            }
            U64_MARK if max_mark >= U64_MARK => self.le::<8>().map(u64::from_le_bytes),
            _ => None,
        }
    }

    fn u16(&mut self) -> Option<u16> {
        self.varint(U16_MARK).and_then(|v| u16::try_from(v).ok())
    }

    fn u32(&mut self) -> Option<u32> {
        self.varint(U32_MARK).and_then(|v| u32::try_from(v).ok())
    }

    fn u64(&mut self) -> Option<u64> {
        self.varint(U64_MARK)
    }

    /// A length: a u64 varint that must fit in the bytes left (a longer claim is malformed,
    /// and serde reports it).
    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.u64()?)
            .ok()
            .filter(|n| *n <= self.b.len())
    }

    /// bool and Option tags: exactly 0 or 1.
    fn tag(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    fn bool(&mut self) -> Option<bool> {
        self.tag()
    }

    fn str(&mut self) -> Option<&'a str> {
        let n = self.len()?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    /// Overwrites `s` in place: its allocation is kept when large enough.
    fn string_into(&mut self, s: &mut String) -> Option<()> {
        let v = self.str()?;
        s.clear();
        s.push_str(v);
        Some(())
    }

    fn resources(&mut self) -> Option<Resources> {
        Some(Resources {
            cpu_millis: self.u64()?,
            memory_bytes: self.u64()?,
            pods: self.u64()?,
        })
    }

    /// A sequence read over the elements `v` already holds, so their allocations are reused.
    fn seq_into<T>(
        &mut self,
        v: &mut Vec<T>,
        empty: fn() -> T,
        mut each: impl FnMut(&mut Self, &mut T) -> Option<()>,
    ) -> Option<()> {
        // Every element takes at least one byte, so a count above the bytes left is malformed.
        let n = self.len()?;
        v.truncate(n);
        for item in v.iter_mut() {
            each(self, item)?;
        }
        while v.len() < n {
            let mut item = empty();
            each(self, &mut item)?;
            v.push(item);
        }
        Some(())
    }
}

#[cfg(test)]
mod tests;
