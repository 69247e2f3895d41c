//! `fedraft-jepsen campaign`: many seeded, bounded runs one after another, rotating workloads and
//! nemeses, summarised into one Markdown report (runs, operations, faults, verdicts, and every
//! failing seed with the command that replays it). The summary is rewritten after each run, so
//! an interrupted campaign still leaves what it found.
//!
//! Owns the rotation and the summary. Must not change what a run does or checks: each run is
//! [`run::run`](crate::run::run) with the campaign's seed, workload and nemesis.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::ValueEnum;

use crate::run::{self, NemesisChoice, RunConfig, WorkloadChoice};

/// Workloads in rotation order.
pub const WORKLOADS: [WorkloadChoice; 2] = [WorkloadChoice::Register, WorkloadChoice::Set];

/// Nemeses in rotation order; the clock nemeses need libfaketime and are left out without it.
pub const NEMESES: [NemesisChoice; 7] = [
    NemesisChoice::Kill,
    NemesisChoice::Pause,
    NemesisChoice::Partition,
    NemesisChoice::MemberDark,
    NemesisChoice::Clock,
    NemesisChoice::Membership,
    NemesisChoice::All,
];

/// What a campaign runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub runs: u64,
    /// Run `i` uses seed `first_seed + i`.
    pub first_seed: u64,
    /// The nemeses in rotation (see [`NEMESES`]).
    pub nemeses: Vec<NemesisChoice>,
    /// Added to each run's time limit as its backstop (setup, healing, checks).
    pub backstop_extra: Duration,
}

/// How one run ended.
#[derive(Debug, Clone)]
pub enum Ending {
    Pass,
    /// Names of the checkers that did not pass, with what they said.
    Fail(Vec<String>),
    /// The run could not be carried out (setup, backstop).
    Error(String),
}

/// One line of the summary.
#[derive(Debug, Clone)]
pub struct Row {
    pub index: u64,
    pub seed: u64,
    pub workload: WorkloadChoice,
    pub nemesis: NemesisChoice,
    pub operations: u64,
    pub faults: u64,
    pub seconds: u64,
    pub ending: Ending,
}

/// The workload and nemesis of run `i`: every nemesis with one workload, then with the next.
pub fn rotation(i: u64, nemeses: &[NemesisChoice]) -> (WorkloadChoice, NemesisChoice) {
    let n = nemeses.len().max(1) as u64;
    let nemesis = nemeses
        .get((i % n) as usize)
        .copied()
        .unwrap_or(NemesisChoice::None);
    let workload = WORKLOADS[((i / n) % WORKLOADS.len() as u64) as usize];
    (workload, nemesis)
}

fn cli_name<T: ValueEnum>(v: T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// Runs the plan; `base` gives everything but seed, workload, nemesis and output directory (a
/// subdirectory of `base.out` per run). Writes `base.out/summary.md` after every run.
pub async fn campaign(base: &RunConfig, plan: &Plan) -> std::io::Result<Vec<Row>> {
    std::fs::create_dir_all(&base.out)?;
    let mut rows = Vec::new();
    for i in 0..plan.runs {
        let seed = plan.first_seed.wrapping_add(i);
        let (workload, nemesis) = rotation(i, &plan.nemeses);
        let cfg = RunConfig {
            seed,
            workload,
            nemesis,
            out: base.out.join(format!("run-{i:03}-seed-{seed}")),
            ..base.clone()
        };
        let started = Instant::now();
        let backstop = cfg.time_limit + plan.backstop_extra;
        let (ending, operations, faults) = match tokio::time::timeout(backstop, run::run(cfg)).await
        {
            Ok(Ok(r)) if r.pass => (Ending::Pass, r.operations, r.faults),
            Ok(Ok(r)) => {
                let failed = r
                    .verdicts
                    .iter()
                    .filter(|(_, v)| !v.is_valid())
                    .map(|(k, v)| format!("{k}: {v:?}"))
                    .collect();
                (Ending::Fail(failed), r.operations, r.faults)
            }
            Ok(Err(e)) => (Ending::Error(format!("{e:#}")), 0, 0),
            Err(_) => (
                Ending::Error(format!("exceeded its {backstop:?} backstop")),
                0,
                0,
            ),
        };
        let row = Row {
            index: i,
            seed,
            workload,
            nemesis,
            operations,
            faults,
            seconds: started.elapsed().as_secs(),
            ending,
        };
        tracing::info!(run = i, seed, ?workload, ?nemesis, ending = ?row.ending, "campaign run done");
        rows.push(row);
        std::fs::write(base.out.join("summary.md"), markdown(base, plan, &rows))?;
    }
    Ok(rows)
}

/// The command that replays run `r` alone.
pub fn replay_command(base: &RunConfig, r: &Row, out: &Path) -> String {
    format!(
        "fedraft-jepsen run --workload {} --nemesis {} --time-limit {} --workers {} --seed {} --out {}",
        cli_name(r.workload),
        cli_name(r.nemesis),
        base.time_limit.as_secs(),
        base.workers,
        r.seed,
        out.display()
    )
}

/// The campaign's summary as Markdown.
pub fn markdown(base: &RunConfig, plan: &Plan, rows: &[Row]) -> String {
    let passed = rows
        .iter()
        .filter(|r| matches!(r.ending, Ending::Pass))
        .count();
    let failed: Vec<&Row> = rows
        .iter()
        .filter(|r| !matches!(r.ending, Ending::Pass))
        .collect();
    let ops: u64 = rows.iter().map(|r| r.operations).sum();
    let faults: u64 = rows.iter().map(|r| r.faults).sum();
    let secs: u64 = rows.iter().map(|r| r.seconds).sum();
    let nemeses: Vec<String> = plan.nemeses.iter().map(|n| cli_name(*n)).collect();
    let mut s = String::new();
    let _ = writeln!(s, "# fedraft-jepsen campaign\n");
    let _ = writeln!(
        s,
        "{} of {} planned runs done: {passed} passed, {} did not. {ops} operations, {faults} faults \
         injected, {secs} s in all. Seeds {}.., {} s of workload and faults per run, {} workers per \
         workload; nemeses in rotation: {}.\n",
        rows.len(),
        plan.runs,
        failed.len(),
        plan.first_seed,
        base.time_limit.as_secs(),
        base.workers,
        nemeses.join(", ")
    );
    if failed.is_empty() {
        let _ = writeln!(s, "No run failed.\n");
    } else {
        let _ = writeln!(s, "## Failing seeds\n");
        for r in &failed {
            let why = match &r.ending {
                Ending::Fail(v) => v.join("; "),
                Ending::Error(e) => format!("not carried out: {e}"),
                Ending::Pass => String::new(),
            };
            let out = PathBuf::from(format!("replay-{}", r.seed));
            let _ = writeln!(
                s,
                "- run {} (seed {}): {}\n  `{}`",
                r.index,
                r.seed,
                why.replace('\n', " "),
                replay_command(base, r, &out)
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Runs\n");
    let _ = writeln!(
        s,
        "| run | seed | workload | nemesis | operations | faults | seconds | verdict |"
    );
    let _ = writeln!(s, "| ---: | ---: | --- | --- | ---: | ---: | ---: | --- |");
    for r in rows {
        let verdict = match &r.ending {
            Ending::Pass => "pass",
            Ending::Fail(_) => "FAIL",
            Ending::Error(_) => "ERROR",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {verdict} |",
            r.index,
            r.seed,
            cli_name(r.workload),
            cli_name(r.nemesis),
            r.operations,
            r.faults,
            r.seconds
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_pairs_every_nemesis_with_every_workload() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..14 {
            let (w, n) = rotation(i, &NEMESES);
            seen.insert((cli_name(w), cli_name(n)));
        }
        assert_eq!(seen.len(), 14);
        assert_eq!(
            rotation(0, &NEMESES),
            (WorkloadChoice::Register, NemesisChoice::Kill)
        );
        assert_eq!(
            rotation(7, &NEMESES),
            (WorkloadChoice::Set, NemesisChoice::Kill)
        );
    }
}
