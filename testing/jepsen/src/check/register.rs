//! The register model and checker: each key is a register of `(value, resource version)` and the history of
//! each key is checked for linearizability on its own (linearizability is compositional, so per-key checks
//! are exact and far cheaper than one search over everything).
//!
//! The model mirrors fedraft's object API: an absent object has version 0; a write produces a version that is
//! a log index, so it is strictly greater than the version it replaced but not otherwise predictable (an `ok`
//! write reports it, an indeterminate one leaves it unknown until a later read or CAS observes it); a CAS with
//! `expected = 0` succeeds only on an absent object, otherwise only when the version equals `expected`.
//! With `version_bumps` the version of an existing object may also grow without a client write (fedraft bumps
//! it when status or placement changes); the value never changes on its own.
//!
//! `fail` operations and indeterminate reads are dropped: they did not happen or constrain nothing. Written
//! values must be unique per key so that a read identifies the write it saw.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use super::wgl::{self, Budget, Entry, Model, Search};
use super::Verdict;
use crate::history::{Call, Op, Outcome, Ret, Value};
use crate::Error;

/// What is known about the object's resource version at a point of the linearization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// Exactly this (with `version_bumps`: at least this).
    Known(u64),
    /// Written by an indeterminate write and not yet observed: some version strictly above this.
    Above(u64),
}

/// The register's state in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegState {
    pub value: Option<Value>,
    pub version: Version,
}

/// A history operation reduced to what the model needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegOp {
    Read {
        value: Option<Value>,
        version: u64,
    },
    /// `new_version` is `None` when the write's outcome (or its version) is unknown.
    Write {
        value: Value,
        new_version: Option<u64>,
    },
    Cas {
        expected: u64,
        value: Value,
        new_version: Option<u64>,
    },
}

/// The sequential specification of one fedraft object used as a register, for one key's history.
#[derive(Debug, Clone, Default)]
pub struct Register {
    /// Allow the version of an existing object to grow between operations without a write.
    pub version_bumps: bool,
    /// Version -> value for every version an `ok` write reported. A version is a log index and names one
    /// entry, so whoever sees that version must see that value. Monotonic versions already imply this; checking
    /// it directly cuts such branches at once instead of one write later.
    reported: HashMap<u64, Value>,
}

impl Register {
    /// The model for one key; `reported` maps the versions `ok` writes reported to the values they wrote.
    pub fn new(version_bumps: bool, reported: HashMap<u64, Value>) -> Self {
        Register {
            version_bumps,
            reported,
        }
    }

    /// The state after seeing version `seen` on an object holding `value`, if the object can be so now.
    fn observe(&self, current: Version, value: Option<Value>, seen: u64) -> Option<Version> {
        if self
            .reported
            .get(&seen)
            .is_some_and(|owner| Some(*owner) != value)
        {
            return None;
        }
        match current {
            Version::Known(x) if seen == x || (self.version_bumps && seen > x) => {
                Some(Version::Known(seen))
            }
            Version::Above(floor) if seen > floor => Some(Version::Known(seen)),
            _ => None,
        }
    }

    /// The version after a write that replaced `current`; `None` if the reported `new` version cannot be.
    fn after_write(&self, current: Version, new: Option<u64>) -> Option<Version> {
        // The lowest version the object can have right now.
        let lowest = match current {
            Version::Known(x) => x,
            Version::Above(floor) => floor + 1,
        };
        match new {
            Some(v) if v > lowest => Some(Version::Known(v)),
            Some(_) => None,
            None => Some(Version::Above(lowest)),
        }
    }
}

impl Model for Register {
    type State = RegState;
    type Op = RegOp;

    fn init(&self) -> RegState {
        RegState {
            value: None,
            version: Version::Known(0),
        }
    }

    fn step(&self, s: &RegState, op: &RegOp) -> Option<RegState> {
        match *op {
            RegOp::Read { value, version } => {
                if value != s.value {
                    return None;
                }
                let version = match value {
                    // An absent object has version 0 and nothing bumps it.
                    None => (version == 0).then_some(Version::Known(0))?,
                    Some(_) => self.observe(s.version, value, version)?,
                };
                Some(RegState { value, version })
            }
            RegOp::Write { value, new_version } => Some(RegState {
                value: Some(value),
                version: self.after_write(s.version, new_version)?,
            }),
            RegOp::Cas {
                expected,
                value,
                new_version,
            } => {
                let matched = match (expected, s.value) {
                    (0, None) => Version::Known(0),
                    (0, Some(_)) | (_, None) => return None,
                    (e, Some(_)) => self.observe(s.version, s.value, e)?,
                };
                Some(RegState {
                    value: Some(value),
                    version: self.after_write(matched, new_version)?,
                })
            }
        }
    }
}

/// Limits for one register check.
#[derive(Debug, Clone, Copy)]
pub struct RegisterCheck {
    /// See [`Register::version_bumps`]; fedraft objects whose status changes need it.
    pub version_bumps: bool,
    /// Search steps per key before answering `Unknown`.
    pub max_steps_per_key: u64,
    /// Wall-clock limit for all keys together.
    pub time_limit: Duration,
    /// Drop indeterminate writes that provably cannot matter (see `prune_unobserved`). On by default; off
    /// only to cross-check the pruning.
    pub prune: bool,
}

impl Default for RegisterCheck {
    fn default() -> Self {
        // 5M steps is a few seconds and a few hundred MB of memo at worst on this class of machine.
        RegisterCheck {
            version_bumps: false,
            max_steps_per_key: 5_000_000,
            time_limit: Duration::from_secs(60),
            prune: true,
        }
    }
}

/// The verdict for one key.
#[derive(Debug, Clone)]
pub struct KeyVerdict {
    pub key: String,
    /// Operations checked (after dropping `fail` and indeterminate reads).
    pub ops: usize,
    pub verdict: Verdict,
}

/// Checks every register key in `history` (set operations are ignored). The overall verdict is `Invalid` if
/// any key is, else `Unknown` if any key is, else `Valid`.
pub fn check_registers(
    history: &[Op],
    limits: &RegisterCheck,
) -> Result<(Verdict, Vec<KeyVerdict>), Error> {
    let deadline = Instant::now() + limits.time_limit;
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        if matches!(op.call, Call::Read | Call::Write { .. } | Call::Cas { .. }) {
            by_key.entry(&op.key).or_default().push(op);
        }
    }
    let mut verdicts = Vec::with_capacity(by_key.len());
    for (key, ops) in by_key {
        let (entries, sources) = to_entries(key, &ops)?;
        let (entries, sources) = if limits.prune {
            prune_unobserved(entries, sources)
        } else {
            (entries, sources)
        };
        let model = Register::new(limits.version_bumps, reported_versions(&entries));
        let budget = Budget {
            max_steps: limits.max_steps_per_key,
            deadline: Some(deadline),
        };
        let verdict = match wgl::search(&model, &entries, budget) {
            Search::Linearizable { .. } => Verdict::Valid,
            Search::Unknown { steps, reason } => Verdict::Unknown {
                reason: format!("key {key:?}: {reason} after {steps} steps"),
            },
            Search::NotLinearizable(stuck) => Verdict::Invalid {
                description: describe(key, &stuck, &sources),
            },
        };
        tracing::debug!(key, ops = entries.len(), ?verdict, "register key checked");
        verdicts.push(KeyVerdict {
            key: key.to_string(),
            ops: entries.len(),
            verdict,
        });
    }
    Ok((
        Verdict::combine(verdicts.iter().map(|k| &k.verdict)),
        verdicts,
    ))
}

/// Turns one key's operations into search entries, keeping the source operation of each for reports.
fn to_entries<'a>(key: &str, ops: &[&'a Op]) -> Result<(Vec<Entry<RegOp>>, Vec<&'a Op>), Error> {
    let mut written = HashSet::new();
    let mut entries = Vec::new();
    let mut sources = Vec::new();
    for &op in ops {
        if let Call::Write { value } | Call::Cas { value, .. } = op.call {
            if !written.insert(value) {
                return Err(Error::InvalidHistory(format!(
                    "key {key:?}: value {value} written twice"
                )));
            }
        }
        let mismatch =
            || Error::InvalidHistory(format!("key {key:?}: result does not match call in {op:?}"));
        let (reg_op, complete_ns) = match (&op.call, &op.outcome) {
            (_, Outcome::Fail { .. }) | (Call::Read, Outcome::Info { .. }) => continue,
            (
                Call::Read,
                Outcome::Ok {
                    ret: Ret::Read { value, version },
                },
            ) => (
                RegOp::Read {
                    value: *value,
                    version: *version,
                },
                Some(op.complete_ns),
            ),
            (
                Call::Write { value },
                Outcome::Ok {
                    ret: Ret::Written { version },
                },
            ) => (
                RegOp::Write {
                    value: *value,
                    new_version: *version,
                },
                Some(op.complete_ns),
            ),
            (Call::Write { value }, Outcome::Info { .. }) => (
                RegOp::Write {
                    value: *value,
                    new_version: None,
                },
                None,
            ),
            (
                Call::Cas { expected, value },
                Outcome::Ok {
                    ret: Ret::Written { version },
                },
            ) => (
                RegOp::Cas {
                    expected: *expected,
                    value: *value,
                    new_version: *version,
                },
                Some(op.complete_ns),
            ),
            (Call::Cas { expected, value }, Outcome::Info { .. }) => (
                RegOp::Cas {
                    expected: *expected,
                    value: *value,
                    new_version: None,
                },
                None,
            ),
            _ => return Err(mismatch()),
        };
        entries.push(Entry {
            op: reg_op,
            invoke_ns: op.invoke_ns,
            complete_ns,
        });
        sources.push(op);
    }
    Ok((entries, sources))
}

fn reported_versions(entries: &[Entry<RegOp>]) -> HashMap<u64, Value> {
    entries
        .iter()
        .filter_map(|e| match e.op {
            RegOp::Write {
                value,
                new_version: Some(v),
            }
            | RegOp::Cas {
                value,
                new_version: Some(v),
                ..
            } => Some((v, value)),
            RegOp::Read { .. } | RegOp::Write { .. } | RegOp::Cas { .. } => None,
        })
        .collect()
}

/// Drops indeterminate writes that cannot matter; this is what keeps crash-heavy histories tractable, since
/// each pending indeterminate write otherwise doubles the configurations to explore.
///
/// An indeterminate write or CAS `w` whose value no read returned is removed when every CAS in the key expects
/// version 0, a version an `ok` write reported, or a version some `ok` read returned. Why that changes no
/// verdict: in a linearization using `w`, the next operation to touch the object cannot be a read (it would
/// return `w`'s value), nor a CAS (it would expect `w`'s own version, yet a version another write reported or
/// a read saw with another value is held by that other state, and versions only grow), so it is a write or
/// nothing, and a write only gets freer when `w` is left out (the version before it is lower).
fn prune_unobserved(
    entries: Vec<Entry<RegOp>>,
    sources: Vec<&Op>,
) -> (Vec<Entry<RegOp>>, Vec<&Op>) {
    let mut explained: HashSet<u64> = reported_versions(&entries).into_keys().collect();
    explained.insert(0);
    let mut read_values = HashSet::new();
    for e in &entries {
        if let RegOp::Read { value, version } = e.op {
            read_values.insert(value);
            explained.insert(version);
        }
    }
    let all_explained = entries
        .iter()
        .all(|e| !matches!(e.op, RegOp::Cas { expected, .. } if !explained.contains(&expected)));
    if !all_explained {
        return (entries, sources);
    }
    entries
        .into_iter()
        .zip(sources)
        .filter(|(e, _)| match e.op {
            RegOp::Write { value, .. } | RegOp::Cas { value, .. } => {
                e.complete_ns.is_some() || read_values.contains(&Some(value))
            }
            RegOp::Read { .. } => true,
        })
        .unzip()
}

/// A human-readable counterexample: the tail of a longest linearizable prefix, the state it left, and the
/// operation that completed without any possible place to take effect.
fn describe(key: &str, stuck: &wgl::Stuck<RegState>, sources: &[&Op]) -> String {
    const TAIL_OPS: usize = 6;
    let show = |i: usize| {
        let o = sources[i];
        format!(
            "process {} {:?} -> {} [{}..{} ns]",
            o.process,
            o.call,
            outcome_text(&o.outcome),
            o.invoke_ns,
            if o.outcome.is_indeterminate() {
                "?".to_string()
            } else {
                o.complete_ns.to_string()
            }
        )
    };
    let skip = stuck.prefix.len().saturating_sub(TAIL_OPS);
    let tail: Vec<String> = stuck.prefix[skip..]
        .iter()
        .map(|&i| format!("  {}", show(i)))
        .collect();
    format!(
        "key {key:?} is not linearizable. A longest linearizable prefix has {} ops{}{}\nleaving the register at \
         {:?}; then this op completed but cannot take effect in any order consistent with real time:\n  {}",
        stuck.prefix.len(),
        if skip > 0 { format!(" (last {TAIL_OPS} shown)") } else { String::new() },
        if tail.is_empty() { String::new() } else { format!(":\n{}", tail.join("\n")) },
        stuck.state,
        show(stuck.blocked),
    )
}

fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Ok { ret } => format!("ok {ret:?}"),
        Outcome::Fail { error } => format!("fail ({error})"),
        Outcome::Info { error } => format!("info ({error})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(value: Option<Value>, version: Version) -> RegState {
        RegState { value, version }
    }

    #[test]
    fn model_steps() {
        let strict = Register::default();
        let bumps = Register {
            version_bumps: true,
            ..Register::default()
        };
        let s0 = strict.init();
        let create = RegOp::Cas {
            expected: 0,
            value: 1,
            new_version: Some(4),
        };
        let s1 = strict.step(&s0, &create).unwrap();
        assert_eq!(s1, st(Some(1), Version::Known(4)));
        // A second create and a CAS on a stale version both fail.
        assert_eq!(strict.step(&s1, &create), None);
        assert_eq!(
            strict.step(
                &s1,
                &RegOp::Cas {
                    expected: 3,
                    value: 2,
                    new_version: Some(9)
                }
            ),
            None
        );
        // A write must move the version forward.
        assert_eq!(
            strict.step(
                &s1,
                &RegOp::Write {
                    value: 2,
                    new_version: Some(4)
                }
            ),
            None
        );
        // Reads: exact in strict mode, at-least with bumps.
        let later_read = RegOp::Read {
            value: Some(1),
            version: 7,
        };
        assert_eq!(strict.step(&s1, &later_read), None);
        assert_eq!(
            bumps.step(&s1, &later_read),
            Some(st(Some(1), Version::Known(7)))
        );
        // An unknown version is bound by the first observation above its floor.
        let s2 = strict
            .step(
                &s1,
                &RegOp::Write {
                    value: 3,
                    new_version: None,
                },
            )
            .unwrap();
        assert_eq!(s2, st(Some(3), Version::Above(4)));
        assert_eq!(
            strict.step(
                &s2,
                &RegOp::Read {
                    value: Some(3),
                    version: 4
                }
            ),
            None
        );
        assert_eq!(
            strict.step(
                &s2,
                &RegOp::Read {
                    value: Some(3),
                    version: 5
                }
            ),
            Some(st(Some(3), Version::Known(5)))
        );
        assert_eq!(
            strict.step(
                &s2,
                &RegOp::Cas {
                    expected: 8,
                    value: 6,
                    new_version: Some(9)
                }
            ),
            Some(st(Some(6), Version::Known(9)))
        );
        // An absent object reads as version 0 only.
        assert!(strict
            .step(
                &s0,
                &RegOp::Read {
                    value: None,
                    version: 0
                }
            )
            .is_some());
        assert!(bumps
            .step(
                &s0,
                &RegOp::Read {
                    value: None,
                    version: 3
                }
            )
            .is_none());
    }
}
