//! `fedraft audit`: incident analysis on a node's data directory, offline (no node needs to
//! run; the directory is opened read-only and left untouched, so a copy taken from a
//! production node is safe to inspect).
//!
//! - `replay --at INDEX|TIME`: clusters, objects and placements as they were then;
//! - `diff --from --to`: what changed between two points;
//! - `explain NS/NAME`: every placement change of the object with its cause;
//! - `export --format jsonl`: the records themselves, one JSON document per line;
//! - `verify`: the hash chain, a replay from the start that must reproduce every archived outcome
//!   and checkpoint, and the node's own state (snapshot + raft log) at the same index. Exit 1 on
//!   any problem.
//!
//! Long runs show a progress bar on stderr when it is a terminal.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use fedraft_apiserver::audit_wire::record_json;
use fedraft_core::audit::time::parse_rfc3339;
use fedraft_core::audit::{Filter, PlacementChange, StateDiff, StateView};
use fedraft_core::model::ObjectKey;
use fedraft_raft::audit::{decode_record, rebuild_offline, AuditLog, LiveState};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::output::{table, Format};

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The node's data directory (or a copy of it).
    #[arg(long, global = true, env = "FEDRAFT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub cmd: AuditCmd,
}

#[derive(Debug, Subcommand)]
pub enum AuditCmd {
    /// The state at a command index or an RFC 3339 time.
    Replay {
        #[arg(long)]
        at: String,
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// What changed between two points (INDEX or RFC 3339 time each).
    Diff {
        #[arg(long)]
        from: String,
        #[arg(long)]
        to: String,
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// Every placement change of NS/NAME, with its cause.
    Explain {
        object: String,
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        to: Option<String>,
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// The archived records as JSON lines.
    Export {
        #[arg(long, value_enum, default_value = "jsonl")]
        format: ExportFormat,
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        to: Option<String>,
    },
    /// Check the hash chain and replay from the start against the node's own state.
    Verify {
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Jsonl,
}

fn progress(total: u64) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} entries ({per_sec}, eta {eta})")
    {
        pb.set_style(style);
    }
    pb
}

/// An index, or the last index applied at or before an RFC 3339 time.
fn point(log: &AuditLog, text: &str, field: &str) -> anyhow::Result<u64> {
    if let Ok(i) = text.parse::<u64>() {
        return Ok(i);
    }
    let Some(ms) = parse_rfc3339(text) else {
        bail!("--{field}: {text:?} is neither an index nor an RFC 3339 time");
    };
    log.index_at_time(ms)?
        .with_context(|| format!("--{field}: the archive starts after {text}"))
}

fn emit<T: Serialize>(
    v: &T,
    output: Format,
    table_text: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    let text = match output {
        Format::Json => serde_json::to_string_pretty(v)? + "\n",
        Format::Yaml => serde_yaml::to_string(v)?,
        Format::Table | Format::Wide => table_text(v),
    };
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(())
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let Some(dir) = args.data_dir else {
        bail!("--data-dir is required (the node's data directory or a copy of it)");
    };
    let log = AuditLog::open_offline(&dir)
        .with_context(|| format!("opening {} read-only", dir.display()))?;
    let last = log.bounds()?.map_or(0, |b| b.1);
    match args.cmd {
        AuditCmd::Replay { at, output } => {
            let index = point(&log, &at, "at")?;
            let pb = progress(index);
            let s = log.state_at_with(index, &mut |i| pb.set_position(i))?;
            pb.finish_and_clear();
            emit(&StateView::of(&s, None), output, state_table)?;
        }
        AuditCmd::Diff { from, to, output } => {
            let (a, b) = (point(&log, &from, "from")?, point(&log, &to, "to")?);
            emit(&log.diff(a, b, None)?, output, diff_table)?;
        }
        AuditCmd::Explain {
            object,
            from,
            to,
            output,
        } => {
            let Some((ns, name)) = object.split_once('/') else {
                bail!("expected NS/NAME, got {object:?}");
            };
            let from = from.map(|f| point(&log, &f, "from")).transpose()?;
            let to = to.map(|t| point(&log, &t, "to")).transpose()?;
            let pb = progress(to.unwrap_or(last));
            let changes = log.explain(&ObjectKey::new(ns, name), from, to, &mut |i| {
                pb.set_position(i)
            })?;
            pb.finish_and_clear();
            emit(&changes, output, |c| explain_table(c))?;
        }
        AuditCmd::Export { format, from, to } => {
            let ExportFormat::Jsonl = format;
            let filter = Filter {
                from: from.map(|f| point(&log, &f, "from")).transpose()?,
                to: to.map(|t| point(&log, &t, "to")).transpose()?,
                ..Filter::default()
            };
            let (lo, hi) = filter.index_range();
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            log.reader().audit_scan(lo, hi, |rec| {
                let r = decode_record(&rec)?;
                let line = serde_json::to_string(&record_json(&r, None))?;
                writeln!(out, "{line}")?;
                Ok::<bool, anyhow::Error>(true)
            })?;
            out.flush()?;
        }
        AuditCmd::Verify { output } => {
            let live = LiveState::of(&rebuild_offline(log.reader())?);
            let pb = progress(last);
            let report = log.verify(Some(live), &mut |i| pb.set_position(i))?;
            pb.finish_and_clear();
            let doc = serde_json::json!({
                "ok": report.ok(),
                "records": report.chain.records,
                "first": report.chain.first,
                "last": report.chain.last,
                "restarts": report.chain.restarts.iter()
                    .map(|(i, why)| format!("{i} ({why:?})")).collect::<Vec<_>>(),
                "replayed": report.replayed,
                "checkpointsChecked": report.checkpoints_checked,
                "replayIndex": report.replay_index,
                "replayHash": report.replay_hash,
                "nodeIndex": report.live.as_ref().map(|l| l.index),
                "nodeHash": report.live.as_ref().map(|l| l.state_hash.clone()),
                "nodeMatched": report.live_matched,
                "problems": report.problems,
            });
            emit(&doc, output, verify_text)?;
            if !report.ok() {
                return Ok(ExitCode::from(1));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn map_text(m: &std::collections::BTreeMap<String, u32>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.iter()
        .map(|(c, n)| format!("{c}={n}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn state_table(v: &StateView) -> String {
    let mut out = format!(
        "State at index {} (log time {}), hash {}\n\nCLUSTERS\n",
        v.index, v.log_time, v.state_hash
    );
    let rows: Vec<Vec<String>> = v
        .clusters
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                format!("{:?}", c.health),
                c.health_since.clone(),
                c.cordoned.to_string(),
                if c.taints.is_empty() {
                    "-".into()
                } else {
                    c.taints.join(",")
                },
            ]
        })
        .collect();
    out += &table(&["NAME", "HEALTH", "SINCE", "CORDONED", "TAINTS"], &rows);
    out += "\nOBJECTS\n";
    let rows: Vec<Vec<String>> = v
        .objects
        .iter()
        .map(|o| {
            vec![
                format!("{}/{}", o.namespace, o.name),
                o.replicas.to_string(),
                map_text(&o.placement),
                o.decision.clone(),
            ]
        })
        .collect();
    out += &table(&["OBJECT", "REPLICAS", "PLACEMENT", "DECISION"], &rows);
    out
}

fn diff_table(d: &StateDiff) -> String {
    let mut out = format!(
        "From index {} ({})\n  to index {} ({})\n",
        d.from_index, d.from_hash, d.to_index, d.to_hash
    );
    if d.is_empty() {
        out += "No changes.\n";
        return out;
    }
    for (kind, items) in [
        ("cluster", &d.clusters),
        ("object", &d.objects),
        ("tenant", &d.tenants),
    ] {
        for it in items {
            out += &format!("{kind} {} {:?}\n", it.key, it.op);
            for f in &it.fields {
                out += &format!("  {}: {} -> {}\n", f.field, f.before, f.after);
            }
            for m in &it.moves {
                out += &format!("  replicas on {}: {} -> {}\n", m.cluster, m.from, m.to);
            }
        }
    }
    out
}

fn explain_table(changes: &[PlacementChange]) -> String {
    if changes.is_empty() {
        return "No placement changes in the archive.\n".into();
    }
    let rows: Vec<Vec<String>> = changes
        .iter()
        .map(|c| {
            vec![
                c.index.to_string(),
                c.time.clone(),
                c.actor.clone(),
                c.command.clone(),
                map_text(&c.after),
                c.explanation.clone(),
            ]
        })
        .collect();
    table(
        &["INDEX", "TIME", "ACTOR", "COMMAND", "PLACEMENT", "WHY"],
        &rows,
    )
}

fn verify_text(d: &serde_json::Value) -> String {
    let s = |k: &str| match &d[k] {
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let mut out = format!(
        "chain:       {} records, {}..{}, restarts {}\nreplay:      {} commands, {} checkpoints checked, index {} hash {}\nnode:        index {} hash {} ({})\n",
        s("records"),
        s("first"),
        s("last"),
        d["restarts"],
        s("replayed"),
        s("checkpointsChecked"),
        s("replayIndex"),
        s("replayHash"),
        s("nodeIndex"),
        s("nodeHash"),
        if d["nodeMatched"] == true { "matches the replay" } else { "NOT matched" },
    );
    match d["problems"].as_array() {
        Some(p) if !p.is_empty() => {
            out += "FAILED:\n";
            for x in p {
                out += &format!("  {}\n", x.as_str().unwrap_or_default());
            }
        }
        _ => out += "OK\n",
    }
    out
}
