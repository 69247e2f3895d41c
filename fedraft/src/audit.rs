//! `fedraft audit`: incident analysis on a node's data directory, offline (no node needs to
//! run; the directory is opened read-only and left untouched, so a copy taken from a
//! production node is safe to inspect).
//!
//! - `replay [--at INDEX|TIME]`: clusters, objects and placements as they were then (default:
//!   the archive's last index);
//! - `diff --from --to`: what changed between two points;
//! - `explain NS/NAME`: every placement change of the object with its cause;
//! - `export --format jsonl`: the records themselves, one JSON document per line;
//! - `verify`: the hash chain, a replay from the start that must reproduce every archived outcome
//!   and checkpoint, and the node's own state (snapshot + raft log) at the same index. Exit 1 on
//!   any problem.
//!
//! Long runs show a progress bar on stderr when it is a terminal. Tables show times as ages
//! (replay: against the replayed point's log time; explain: against this machine's clock) and
//! as RFC 3339 with `-o wide`; JSON and YAML are the API's shapes (`audit_wire`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use fedraft_apiserver::audit_wire::{record_json, ChangeJson, DiffJson, StateJson};
use fedraft_core::audit::{FieldKind, Filter, PlacementChange, StateDiff, StateView};
use fedraft_core::model::ObjectKey;
use fedraft_raft::audit::{decode_record, rebuild_offline, AuditLog, LiveState};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::output::{table, Format};
use crate::timefmt::{parse_rfc3339, rfc3339, Times};

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
    /// The state at a command index or an RFC 3339 time (default: now, the last index).
    Replay {
        /// INDEX, or an RFC 3339 time (the last index applied at or before it).
        #[arg(long)]
        at: Option<String>,
        /// table (times as ages at that point), wide (RFC 3339), json or yaml.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// What changed between two points (INDEX or RFC 3339 time each).
    Diff {
        /// The earlier point: INDEX or RFC 3339 time.
        #[arg(long)]
        from: String,
        /// The later point: INDEX or RFC 3339 time.
        #[arg(long)]
        to: String,
        /// table, wide, json or yaml.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// Every placement change of NS/NAME, with its cause.
    Explain {
        /// The object, as NAMESPACE/NAME.
        object: String,
        /// Start here: INDEX or RFC 3339 time (default: the archive's start).
        #[arg(long)]
        from: Option<String>,
        /// End here: INDEX or RFC 3339 time (default: its end).
        #[arg(long)]
        to: Option<String>,
        /// table (times as ages), wide (RFC 3339), json or yaml.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// The archived records as JSON lines.
    Export {
        /// The only format: one JSON record per line.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: ExportFormat,
        /// Start here: INDEX or RFC 3339 time.
        #[arg(long)]
        from: Option<String>,
        /// End here: INDEX or RFC 3339 time.
        #[arg(long)]
        to: Option<String>,
        /// Only the records of this actor: its exact name in the log, or a principal's name
        /// (`NAME` selects `user:NAME` and `tenant:T/NAME` too).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Check the hash chain and replay from the start against the node's own state.
    Verify {
        /// table, json or yaml.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One JSON document per line.
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

/// `doc` (the JSON shape) as JSON or YAML, or `table_text` for the table formats.
fn emit<T: Serialize>(
    doc: &T,
    output: Format,
    table_text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let text = match output {
        Format::Json => serde_json::to_string_pretty(doc)? + "\n",
        Format::Yaml => serde_yaml::to_string(doc)?,
        Format::Table | Format::Wide => table_text(),
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
            let index = match at {
                Some(at) => point(&log, &at, "at")?,
                None => last,
            };
            let pb = progress(index);
            let s = log.state_at_with(index, &mut |i| pb.set_position(i))?;
            pb.finish_and_clear();
            let view = StateView::of(&s, None);
            let times = match output {
                Format::Wide => Times::Absolute,
                _ => Times::Age {
                    now_ms: view.log_time_ms,
                },
            };
            emit(&StateJson::of(&view), output, || state_table(&view, times))?;
        }
        AuditCmd::Diff { from, to, output } => {
            let (a, b) = (point(&log, &from, "from")?, point(&log, &to, "to")?);
            let d = log.diff(a, b, None)?;
            emit(&DiffJson::of(&d), output, || diff_table(&d))?;
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
            let doc: Vec<ChangeJson> = changes.iter().map(ChangeJson::of).collect();
            let times = Times::of(output == Format::Wide);
            emit(&doc, output, || explain_table(&changes, times))?;
        }
        AuditCmd::Export {
            format,
            from,
            to,
            actor,
        } => {
            let ExportFormat::Jsonl = format;
            let filter = Filter {
                from: from.map(|f| point(&log, &f, "from")).transpose()?,
                to: to.map(|t| point(&log, &t, "to")).transpose()?,
                actor,
                ..Filter::default()
            };
            let (lo, hi) = filter.index_range();
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            log.reader().audit_scan(lo, hi, |rec| {
                let r = decode_record(&rec)?;
                if !filter.matches(&r) {
                    return Ok(true);
                }
                let line = serde_json::to_string(&record_json(&r, None, None))?;
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
            emit(&doc, output, || verify_text(&doc))?;
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

fn state_table(v: &StateView, times: Times) -> String {
    let mut out = format!(
        "State at index {} (log time {}), hash {}\n\nCLUSTERS\n",
        v.index,
        rfc3339(v.log_time_ms),
        v.state_hash
    );
    let rows: Vec<Vec<String>> = v
        .clusters
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                format!("{:?}", c.health),
                times.show(c.health_since_ms),
                c.cordoned.to_string(),
                if c.taints.is_empty() {
                    "-".into()
                } else {
                    c.taints.join(",")
                },
                c.condition.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    out += &table(
        &["NAME", "HEALTH", "SINCE", "CORDONED", "TAINTS", "WHY"],
        &rows,
    );
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
                let text = |v: &str| match f.kind {
                    FieldKind::Text => v.to_string(),
                    FieldKind::EpochMs => v.parse().map_or_else(|_| v.to_string(), rfc3339),
                };
                out += &format!("  {}: {} -> {}\n", f.field, text(&f.before), text(&f.after));
            }
            for m in &it.moves {
                out += &format!("  replicas on {}: {} -> {}\n", m.cluster, m.from, m.to);
            }
        }
    }
    out
}

fn explain_table(changes: &[PlacementChange], times: Times) -> String {
    if changes.is_empty() {
        return "No placement changes or rollout steps in the archive.\n".into();
    }
    let rows: Vec<Vec<String>> = changes
        .iter()
        .map(|c| {
            vec![
                c.index.to_string(),
                times.show(c.time_ms),
                c.actor.clone(),
                c.command.clone(),
                map_text(&c.after),
                c.explanation.clone(),
            ]
        })
        .collect();
    let when = if times == Times::Absolute {
        "TIME"
    } else {
        "AGE"
    };
    table(
        &["INDEX", when, "ACTOR", "COMMAND", "PLACEMENT", "WHY"],
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
