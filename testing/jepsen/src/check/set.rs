//! The set checker: for each key, the last successful read of the whole set must contain every acknowledged
//! add (nothing lost), nothing that was never attempted (no phantom), and no add that definitely failed.
//! Indeterminate adds may or may not be present. Without a successful read the verdict is `Unknown`.
//! It judges only `Add` and `ReadAll` operations and never contacts fedraft.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::Verdict;
use crate::history::{Call, Op, Outcome, Ret, Value};

/// The tally for one set key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SetReport {
    pub key: String,
    /// Adds invoked, acknowledged (`ok`), and indeterminate.
    pub attempted: usize,
    pub acknowledged: usize,
    pub indeterminate: usize,
    /// Indeterminate adds the final read shows took effect.
    pub recovered: usize,
    /// Acknowledged adds missing from the final read.
    pub lost: Vec<Value>,
    /// Elements in the final read that no add ever attempted.
    pub phantom: Vec<Value>,
    /// Elements in the final read whose add was reported as definitely failed.
    pub failed_but_present: Vec<Value>,
    /// Size of the final read; `None` when there was no successful read.
    pub final_read: Option<usize>,
}

impl SetReport {
    fn verdict(&self) -> Verdict {
        if !self.lost.is_empty() || !self.phantom.is_empty() || !self.failed_but_present.is_empty()
        {
            Verdict::Invalid {
                description: format!(
                    "set {:?}: lost {:?}, phantom {:?}, failed but present {:?}",
                    self.key, self.lost, self.phantom, self.failed_but_present
                ),
            }
        } else if self.final_read.is_none() {
            Verdict::Unknown {
                reason: format!("set {:?}: no successful final read", self.key),
            }
        } else {
            Verdict::Valid
        }
    }
}

/// Checks every set key in `history` (register operations are ignored). The final read of a key is its
/// successful `ReadAll` invoked last; it should be issued after healing and after every add has completed.
pub fn check_sets(history: &[Op]) -> (Verdict, Vec<SetReport>) {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        if matches!(op.call, Call::Add { .. } | Call::ReadAll) {
            by_key.entry(&op.key).or_default().push(op);
        }
    }
    let reports: Vec<SetReport> = by_key
        .into_iter()
        .map(|(key, ops)| check_one(key, &ops))
        .collect();
    let verdicts: Vec<Verdict> = reports.iter().map(SetReport::verdict).collect();
    (Verdict::combine(&verdicts), reports)
}

fn check_one(key: &str, ops: &[&Op]) -> SetReport {
    let mut ok = BTreeSet::new();
    let mut failed = BTreeSet::new();
    let mut unsure = BTreeSet::new();
    let mut final_read: Option<(u64, &Vec<Value>)> = None;
    for op in ops {
        match (&op.call, &op.outcome) {
            (Call::Add { element }, Outcome::Ok { .. }) => {
                ok.insert(*element);
            }
            (Call::Add { element }, Outcome::Fail { .. }) => {
                failed.insert(*element);
            }
            (Call::Add { element }, Outcome::Info { .. }) => {
                unsure.insert(*element);
            }
            (
                Call::ReadAll,
                Outcome::Ok {
                    ret: Ret::Elements { elements },
                },
            ) if final_read.is_none_or(|(t, _)| op.invoke_ns >= t) => {
                final_read = Some((op.invoke_ns, elements));
            }
            _ => {}
        }
    }
    // An element added more than once counts by its best outcome: one acknowledged add makes it required.
    let unsure: BTreeSet<Value> = unsure.difference(&ok).copied().collect();
    let failed: BTreeSet<Value> = failed
        .difference(&ok)
        .filter(|e| !unsure.contains(e))
        .copied()
        .collect();
    let mut report = SetReport {
        key: key.to_string(),
        attempted: ok.len() + unsure.len() + failed.len(),
        acknowledged: ok.len(),
        indeterminate: unsure.len(),
        ..SetReport::default()
    };
    if let Some((_, elements)) = final_read {
        let read: BTreeSet<Value> = elements.iter().copied().collect();
        report.final_read = Some(read.len());
        report.lost = ok.difference(&read).copied().collect();
        report.recovered = unsure.intersection(&read).count();
        report.failed_but_present = failed.intersection(&read).copied().collect();
        report.phantom = read
            .iter()
            .filter(|&e| !ok.contains(e) && !unsure.contains(e) && !failed.contains(e))
            .copied()
            .collect();
    }
    report
}
