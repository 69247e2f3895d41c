//! The recorded history: one [`Op`] per client operation, with its process, key, invocation and completion
//! times and outcome, stored as JSON lines. This module only models and (de)serialises histories; it does not
//! talk to fedraft or judge anything (see `check`).
//!
//! Outcomes follow Jepsen: `ok` happened exactly once, `fail` definitely did not happen, `info` is
//! indeterminate (a timeout, a dropped connection, a leader change mid-request): it may take effect at any time
//! after its invocation, or never. A process that saw `info` must not issue another operation under the same
//! process id, because its previous one may still be in flight.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::Error;

/// A register value or a set element. Register workloads must write each value at most once per key, so a
/// read names the write it observed.
pub type Value = u64;

/// What the client asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "snake_case")]
pub enum Call {
    /// Register: read the current value and resource version.
    Read,
    /// Register: unconditional write.
    Write { value: Value },
    /// Register: write only if the object's resource version equals `expected` (0 means "must not exist yet",
    /// as fedraft's API defines it).
    Cas { expected: u64, value: Value },
    /// Set: add one unique element.
    Add { element: Value },
    /// Set: read every element (the final read is the one the set checker judges).
    ReadAll,
    /// Rollout: put the workload's template carrying `value`, which makes it a new revision.
    Roll { value: Value },
    /// Rollout: drain a member cluster (its replicas move elsewhere, make-before-break).
    Drain { cluster: String },
    /// Rollout: make a drained member cluster schedulable again.
    Uncordon { cluster: String },
    /// Rollout: ask for the workload to be placed afresh (spread again over uncordoned members).
    Reschedule,
}

/// What an `ok` operation returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ret {
    /// A register read: `value` is `None` when the object does not exist (its version is then 0).
    Read { value: Option<Value>, version: u64 },
    /// A register write or CAS: the resource version the write produced, when the API reported it.
    Written { version: Option<u64> },
    /// A set add.
    Added,
    /// A set read.
    Elements { elements: Vec<Value> },
}

/// How the operation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Outcome {
    /// Took effect once; `ret` is what the server answered.
    Ok { ret: Ret },
    /// Definitely did not take effect (e.g. a version conflict).
    Fail { error: String },
    /// Indeterminate: may take effect at any time after invocation, or never.
    Info { error: String },
}

impl Outcome {
    /// True for `info`.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, Outcome::Info { .. })
    }
}

/// One client operation, invocation to completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The logical client process. Operations of one process never overlap.
    pub process: u64,
    /// The register or set this operation touched; checkers judge each key on its own.
    pub key: String,
    /// Invocation time, nanoseconds since the start of the run (one monotonic clock for the whole history).
    pub invoke_ns: u64,
    /// When the client saw the outcome (for `info`: when it gave up). Checkers treat an `info` operation as
    /// never completing; this time is kept for latency plots.
    pub complete_ns: u64,
    /// The request.
    pub call: Call,
    /// The result.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Writes `ops` as JSON lines, one operation per line.
pub fn write_jsonl<W: Write>(mut out: W, ops: &[Op]) -> Result<(), Error> {
    for op in ops {
        serde_json::to_writer(&mut out, op).map_err(Error::HistoryEncode)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Reads a JSON-lines history; blank lines are skipped. Line numbers in errors start at 1.
pub fn read_jsonl<R: BufRead>(input: R) -> Result<Vec<Op>, Error> {
    let mut ops = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let op = serde_json::from_str(&line).map_err(|source| Error::HistoryParse {
            line: i + 1,
            source,
        })?;
        ops.push(op);
    }
    Ok(ops)
}

/// Checks the shape every checker relies on: completion not before invocation, and no two overlapping
/// operations from one process.
pub fn validate(ops: &[Op]) -> Result<(), Error> {
    let mut by_process: std::collections::BTreeMap<u64, Vec<&Op>> = Default::default();
    for op in ops {
        if op.complete_ns < op.invoke_ns {
            return Err(Error::InvalidHistory(format!(
                "process {} on {:?}: completes at {} ns before its invocation at {} ns",
                op.process, op.key, op.complete_ns, op.invoke_ns
            )));
        }
        by_process.entry(op.process).or_default().push(op);
    }
    for (process, mut list) in by_process {
        list.sort_by_key(|o| o.invoke_ns);
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            // An indeterminate operation may still be in flight, so nothing may follow it on that process.
            if a.outcome.is_indeterminate() || b.invoke_ns < a.complete_ns {
                return Err(Error::InvalidHistory(format!(
                    "process {process}: operation invoked at {} ns overlaps or follows an indeterminate one \
                     invoked at {} ns",
                    b.invoke_ns, a.invoke_ns
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_round_trip_keeps_every_field() {
        let ops = vec![
            Op {
                process: 1,
                key: "a".into(),
                invoke_ns: 5,
                complete_ns: 9,
                call: Call::Cas {
                    expected: 3,
                    value: 7,
                },
                outcome: Outcome::Ok {
                    ret: Ret::Written { version: Some(12) },
                },
            },
            Op {
                process: 2,
                key: "s".into(),
                invoke_ns: 6,
                complete_ns: 60,
                call: Call::Add { element: 4 },
                outcome: Outcome::Info {
                    error: "timeout".into(),
                },
            },
            Op {
                process: 3,
                key: "a".into(),
                invoke_ns: 7,
                complete_ns: 8,
                call: Call::Read,
                outcome: Outcome::Ok {
                    ret: Ret::Read {
                        value: None,
                        version: 0,
                    },
                },
            },
        ];
        let mut buf = Vec::new();
        write_jsonl(&mut buf, &ops).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().next().unwrap().contains(r#""type":"ok""#));
        assert_eq!(read_jsonl(&buf[..]).unwrap(), ops);
    }

    #[test]
    fn parse_error_names_the_line() {
        let input = "\n{\"bad\": 1}\n";
        match read_jsonl(input.as_bytes()) {
            Err(Error::HistoryParse { line, .. }) => assert_eq!(line, 2),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn validate_rejects_overlap_within_a_process() {
        let mk = |inv, comp| Op {
            process: 1,
            key: "k".into(),
            invoke_ns: inv,
            complete_ns: comp,
            call: Call::Read,
            outcome: Outcome::Ok {
                ret: Ret::Read {
                    value: None,
                    version: 0,
                },
            },
        };
        assert!(validate(&[mk(0, 10), mk(10, 20)]).is_ok());
        assert!(validate(&[mk(0, 10), mk(5, 20)]).is_err());
        assert!(validate(&[mk(10, 5)]).is_err());
    }
}
