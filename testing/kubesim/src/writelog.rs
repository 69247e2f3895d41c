//! The write log: every client write that changed stored state, in the order the store took
//! them, with the wall-clock time and the owner token the request carried (the
//! `fedraft.io/owner` annotation in its body). Tests read it to prove that no member cluster
//! ever had writes from two fedraft owners interleaved: once a newer token wrote, an older one
//! never writes again.
//!
//! Bounded: at most [`MAX_WRITE_RECORDS`] records are kept (the oldest go first) and the count
//! of dropped ones is reported, so a checker can tell a complete log from a cut one.
//!
//! Must not: decide anything, or read the store (the request alone says who wrote).

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most records kept: a few MB at worst, far above what one test writes.
pub const MAX_WRITE_RECORDS: usize = 20_000;

/// The annotation fedraft's executors stamp on what they write (`node@index`).
pub const OWNER_ANNOTATION: &str = "fedraft.io/owner";

/// One write that changed stored state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteRecord {
    /// Wall-clock milliseconds since the epoch when the store took the write.
    pub at_ms: u64,
    /// The verb, as `stats::Verb` names it ("apply", "delete", ...).
    pub verb: String,
    /// `plural/namespace/name` ("" for the namespace of a cluster-scoped kind).
    pub object: String,
    /// The owner token in the request body, if any (deletes carry none).
    pub owner: Option<String>,
}

/// The records and how many were dropped for room.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteLogSnapshot {
    pub records: Vec<WriteRecord>,
    pub dropped: u64,
}

#[derive(Default)]
pub struct WriteLog {
    /// The records kept, oldest first, and how many were dropped.
    ring: Mutex<(VecDeque<WriteRecord>, u64)>,
}

impl WriteLog {
    /// Records one write whose request body was `body`.
    pub fn record(&self, verb: &str, object: String, body: &[u8]) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let record = WriteRecord {
            at_ms,
            verb: verb.to_string(),
            object,
            owner: owner_of(body),
        };
        let mut g = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if g.0.len() == MAX_WRITE_RECORDS {
            g.0.pop_front();
            g.1 += 1;
        }
        g.0.push_back(record);
    }

    pub fn snapshot(&self) -> WriteLogSnapshot {
        let g = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        WriteLogSnapshot {
            records: g.0.iter().cloned().collect(),
            dropped: g.1,
        }
    }
}

/// The owner annotation of a JSON request body (YAML bodies and bodies without one: None).
fn owner_of(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    v.pointer("/metadata/annotations")?
        .get(OWNER_ANNOTATION)?
        .as_str()
        .map(str::to_string)
}

/// The first pair of writes to one object, in log order, where an older owner token wrote
/// after a newer one had (tokens compare by their `@index`); None when the log is clean.
pub fn interleaved(records: &[WriteRecord]) -> Option<(WriteRecord, WriteRecord)> {
    let index = |t: &str| t.rsplit_once('@').and_then(|(_, i)| i.parse::<u64>().ok());
    let mut newest: Option<(u64, &WriteRecord)> = None;
    for r in records {
        let Some(i) = r.owner.as_deref().and_then(index) else {
            continue;
        };
        match newest {
            Some((n, first)) if i < n => return Some((first.clone(), r.clone())),
            Some((n, _)) if i == n => {}
            _ => newest = Some((i, r)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(owner: Option<&str>) -> WriteRecord {
        WriteRecord {
            at_ms: 0,
            verb: "apply".into(),
            object: "deployments/a/b".into(),
            owner: owner.map(str::to_string),
        }
    }

    #[test]
    fn an_older_token_after_a_newer_one_is_caught() {
        let clean = [rec(Some("node1@5")), rec(None), rec(Some("node2@9"))];
        assert_eq!(interleaved(&clean), None);
        let bad = [
            rec(Some("node1@5")),
            rec(Some("node2@9")),
            rec(Some("node1@5")),
        ];
        let (newer, older) = interleaved(&bad).unwrap();
        assert_eq!(newer.owner.as_deref(), Some("node2@9"));
        assert_eq!(older.owner.as_deref(), Some("node1@5"));
    }

    #[test]
    fn the_log_keeps_the_owner_of_json_bodies_and_counts_what_it_drops() {
        let log = WriteLog::default();
        let body = br#"{"metadata":{"annotations":{"fedraft.io/owner":"node3@7"}}}"#;
        log.record("apply", "deployments/a/b".into(), body);
        log.record("delete", "deployments/a/b".into(), b"");
        let s = log.snapshot();
        assert_eq!(s.records[0].owner.as_deref(), Some("node3@7"));
        assert_eq!(s.records[1].owner, None);
        assert_eq!(s.dropped, 0);
    }
}
