//! `fedraft rollout status|pause|resume|abort|undo|promote NS/NAME`: an object's rollout as the
//! API reports it (`GET /v1/namespaces/NS/objects/NAME/rollout`) and the moves on it; and
//! `fedraft reschedule NS/NAME`, the other move an operator makes on one object.
//!
//! `status -w` follows the watch of the object's namespace and redraws a progress bar (clusters
//! healthy on the target revision out of those placed) whenever the object changes, until the
//! rollout completes (exit 0) or stops paused, aborted or rolled back (exit 1). Presentation
//! only: every decision is core's, read back from the API.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use crate::client::{split_object, Client};
use crate::output::Format;

#[derive(Debug, Subcommand)]
pub enum RolloutCmd {
    /// Where the rollout stands: phase, waves, per-cluster revision and health, its story.
    Status {
        /// The object, NS/NAME.
        object: String,
        /// Follow the rollout until it completes or stops, with a progress bar.
        #[arg(short = 'w', long)]
        watch: bool,
        /// table or json (yaml prints json as well).
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// Stop at the current wave.
    Pause {
        /// The object, NS/NAME.
        object: String,
    },
    /// Continue a paused rollout at its wave (fresh deadline and failure budget).
    Resume {
        /// The object, NS/NAME.
        object: String,
    },
    /// Stop for good where it is (updated clusters keep the new revision).
    Abort {
        /// The object, NS/NAME.
        object: String,
    },
    /// Roll the updated clusters back to the previous revision.
    Undo {
        /// The object, NS/NAME.
        object: String,
    },
    /// Skip the remaining gates: every cluster gets the new revision now.
    Promote {
        /// The object, NS/NAME.
        object: String,
    },
}

pub async fn run(c: &Client, cmd: RolloutCmd) -> anyhow::Result<ExitCode> {
    let (action, object) = match cmd {
        RolloutCmd::Status {
            object,
            watch,
            output,
        } => return status(c, &object, watch, output).await,
        RolloutCmd::Pause { object } => ("pause", object),
        RolloutCmd::Resume { object } => ("resume", object),
        RolloutCmd::Abort { object } => ("abort", object),
        RolloutCmd::Undo { object } => ("undo", object),
        RolloutCmd::Promote { object } => ("promote", object),
    };
    let (ns, name) = split_object(&object)?;
    let path = format!("/v1/namespaces/{ns}/objects/{name}/rollout/{action}");
    let v = c.write(reqwest::Method::POST, &path, None, None).await?;
    let r = &v["rollout"];
    println!(
        "rollout {ns}/{name}: {action} done, now {} (revision {} of {})",
        r["phase"].as_str().unwrap_or("?"),
        r["targetRevision"],
        r["stableRevision"]
    );
    Ok(ExitCode::SUCCESS)
}

/// `fedraft reschedule NS/NAME`: `POST .../reschedule`, then the placement it left.
pub async fn reschedule(c: &Client, object: &str) -> anyhow::Result<ExitCode> {
    let (ns, name) = split_object(object)?;
    let path = format!("/v1/namespaces/{ns}/objects/{name}/reschedule");
    let v = c.write(reqwest::Method::POST, &path, None, None).await?;
    let placed: Vec<String> = v["status"]["placement"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(cluster, replicas)| format!("{cluster}={replicas}"))
        .collect();
    let placed = if placed.is_empty() {
        "nowhere".to_string()
    } else {
        placed.join(",")
    };
    println!(
        "{ns}/{name} rescheduled at {}: placed on {placed}",
        v["resourceVersion"]
    );
    Ok(ExitCode::SUCCESS)
}

/// Clusters healthy on the target revision, and clusters placed.
fn counts(doc: &Value) -> (usize, usize) {
    let target = &doc["rollout"]["targetRevision"];
    let clusters = doc["clusters"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let done = clusters
        .iter()
        .filter(|c| c["workload"]["revision"] == *target && c["workload"]["verdict"] == "Healthy")
        .count();
    (done, clusters.len())
}

/// One line: `[#####-----] 1/3 clusters healthy on revision 2 · wave 2/3 · Progressing`.
pub fn progress_line(doc: &Value) -> String {
    const WIDTH: usize = 20;
    let (done, total) = counts(doc);
    let filled = (done * WIDTH).checked_div(total).unwrap_or(0);
    let r = &doc["rollout"];
    let waves = r["waves"].as_array().map_or(0, Vec::len);
    let wave = r["wave"].as_u64().unwrap_or(0) as usize;
    let mut line = format!(
        "[{}{}] {done}/{total} clusters healthy on revision {} · wave {}/{waves} · {}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        r["targetRevision"],
        (wave + 1).min(waves.max(1)),
        r["phase"].as_str().unwrap_or("?"),
    );
    if let Some(reason) = r["reason"].as_str().filter(|s| !s.is_empty()) {
        line.push_str(&format!(" ({reason})"));
    }
    line
}

fn table(doc: &Value) -> String {
    let mut out = String::new();
    let r = &doc["rollout"];
    if r.is_null() {
        out.push_str("no rollout strategy (put the object with `rollout:` to record one)\n");
    } else {
        out.push_str(&format!("{}\n\n", progress_line(doc)));
    }
    out.push_str(&format!(
        "{:<16} {:>8} {:>8} {:>10} {:>7} {:>5} {:>9} {}\n",
        "CLUSTER", "WANTS", "RUNS", "GENERATION", "UPDATED", "READY", "AVAILABLE", "VERDICT"
    ));
    for c in doc["clusters"].as_array().into_iter().flatten() {
        let w = &c["workload"];
        let n = |v: &Value| v.as_u64().map_or("-".to_string(), |n| n.to_string());
        let generation = format!("{}/{}", n(&w["observedGeneration"]), n(&w["generation"]));
        out.push_str(&format!(
            "{:<16} {:>8} {:>8} {:>10} {:>7} {:>5} {:>9} {}\n",
            c["cluster"].as_str().unwrap_or("?"),
            n(&c["desiredRevision"]),
            n(&w["revision"]),
            generation,
            n(&w["updatedReplicas"]),
            n(&w["readyReplicas"]),
            n(&w["availableReplicas"]),
            w["verdict"].as_str().unwrap_or("Unknown"),
        ));
    }
    if !doc["failBack"].is_null() {
        out.push_str(&failback_lines(doc));
    }
    out.push_str(&descheduling_lines(doc));
    for e in r["events"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  #{:<8} {}  {}\n",
            e["index"],
            crate::timefmt::Times::Absolute.show(e["timeMs"].as_u64().unwrap_or(0)),
            e["message"].as_str().unwrap_or("")
        ));
    }
    out
}

/// The fail-back section of a rollout document (`failBack`): the object's choice, each cluster
/// it failed over from with since when it is Ready and when the object fails back to it, and
/// the last fail-back. Times are absolute: a due time lies ahead.
pub fn failback_lines(doc: &Value) -> String {
    let fb = &doc["failBack"];
    let at = |v: &Value| {
        v.as_u64().map_or("-".to_string(), |ms| {
            crate::timefmt::Times::Absolute.show(ms)
        })
    };
    let policy = match &fb["policy"] {
        Value::String(s) => s.clone(),
        v => match v["afterRecoveryHeld"].as_u64() {
            Some(n) => format!("after recovery held {n}s"),
            None => "never".to_string(),
        },
    };
    let mut out = format!("Fail-back: {policy}\n");
    for p in fb["pending"].as_array().into_iter().flatten() {
        let cluster = p["cluster"].as_str().unwrap_or("?");
        match p["readySinceMs"].as_u64() {
            Some(_) => out.push_str(&format!(
                "  pending {cluster}: Ready since {}, fails back at {}\n",
                at(&p["readySinceMs"]),
                at(&p["dueAtMs"])
            )),
            None => out.push_str(&format!(
                "  pending {cluster}: fails back once it has been Ready for the hold\n"
            )),
        }
    }
    let last = &fb["last"];
    if !last.is_null() {
        let to: Vec<&str> = last["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["cluster"].as_str())
            .collect();
        out.push_str(&format!(
            "  last: entry #{} back to {} (held {}s)\n",
            last["index"],
            to.join(","),
            last["heldSeconds"]
        ));
    }
    out
}

/// The descheduling section of a rollout document (`descheduling`), empty when it has nothing
/// to say: per cluster the replicas Pending unschedulable and since when (and when they move,
/// with the policy on), the clusters held to what they could run, and the last descheduling.
pub fn descheduling_lines(doc: &Value) -> String {
    let d = &doc["descheduling"];
    let at = |v: &Value| {
        v.as_u64().map_or("-".to_string(), |ms| {
            crate::timefmt::Times::Absolute.show(ms)
        })
    };
    let none = |k: &str| d[k].as_array().is_none_or(Vec::is_empty);
    let seconds = d["policy"]["pendingSeconds"].as_u64().unwrap_or(0);
    if d.is_null() || (seconds == 0 && none("pending") && none("held") && d["last"].is_null()) {
        return String::new();
    }
    let mut out = if seconds == 0 {
        "Descheduling: off\n".to_string()
    } else {
        format!("Descheduling: after {seconds}s Pending\n")
    };
    for p in d["pending"].as_array().into_iter().flatten() {
        let cluster = p["cluster"].as_str().unwrap_or("?");
        out.push_str(&format!(
            "  {cluster}: {} replicas Pending (unschedulable) since {}",
            p["replicas"],
            at(&p["sinceMs"])
        ));
        if p["dueAtMs"].is_u64() {
            out.push_str(&format!(", moved at {}", at(&p["dueAtMs"])));
        }
        out.push('\n');
    }
    for h in d["held"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}: held to {} replicas until {} or until its capacity grows\n",
            h["cluster"].as_str().unwrap_or("?"),
            h["replicas"],
            at(&h["untilMs"])
        ));
    }
    let last = &d["last"];
    if !last.is_null() {
        let moved: Vec<String> = last["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{} {} -> {}",
                    c["cluster"].as_str().unwrap_or("?"),
                    c["from"],
                    c["to"]
                )
            })
            .collect();
        out.push_str(&format!(
            "  last: entry #{} {}\n",
            last["index"],
            moved.join(", ")
        ));
    }
    out
}

/// Exit status of a rollout that stopped moving, or None while it moves.
fn finished(doc: &Value) -> Option<ExitCode> {
    match doc["rollout"]["phase"].as_str() {
        Some("Complete") => {
            let (done, total) = counts(doc);
            (done == total).then_some(ExitCode::SUCCESS)
        }
        Some("Paused" | "Aborted" | "RolledBack") => Some(ExitCode::from(1)),
        None => Some(ExitCode::SUCCESS),
        _ => None,
    }
}

async fn status(c: &Client, object: &str, watch: bool, output: Format) -> anyhow::Result<ExitCode> {
    use futures::StreamExt;
    let (ns, name) = split_object(object)?;
    let path = format!("/v1/namespaces/{ns}/objects/{name}/rollout");
    let doc = c.get_json(&path).await?;
    if !watch {
        match output {
            Format::Json | Format::Yaml => println!("{}", serde_json::to_string_pretty(&doc)?),
            _ => print!("{}", table(&doc)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut last = progress_line(&doc);
    println!("{last}");
    if let Some(code) = finished(&doc) {
        return Ok(code);
    }
    let key = format!("{ns}/{name}");
    let resp = c
        .open_stream(&format!(
            "/v1/watch?kind=FederatedObject&namespace={ns}&resourceVersion={}",
            doc["resourceVersion"]
        ))
        .await?;
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk.map_err(|e| c.unreachable(e))?);
        let mut touched = false;
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let ev: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            let obj = &ev["object"];
            let this = format!(
                "{}/{}",
                obj["namespace"].as_str().unwrap_or(""),
                obj["name"].as_str().unwrap_or("")
            );
            touched |= this == key || ev["type"] == "ERROR";
        }
        if !touched {
            continue;
        }
        let doc = c.get_json(&path).await?;
        let line = progress_line(&doc);
        if line != last {
            println!("{line}");
            last = line;
        }
        if let Some(code) = finished(&doc) {
            return Ok(code);
        }
    }
    Ok(ExitCode::from(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_bar_counts_healthy_clusters_on_the_target() {
        let doc = serde_json::json!({
            "rollout": {"targetRevision": 2, "phase": "Paused", "reason": "wave 2/3 failed on b",
                        "waves": [["a"], ["b"], ["c"]], "wave": 1},
            "clusters": [
                {"cluster": "a", "workload": {"revision": 2, "verdict": "Healthy"}},
                {"cluster": "b", "workload": {"revision": 2, "verdict": "Progressing"}},
                {"cluster": "c", "workload": {"revision": 1, "verdict": "Healthy"}},
            ],
        });
        let line = progress_line(&doc);
        assert!(line.starts_with("[######--------------] 1/3"), "{line}");
        assert!(
            line.contains("wave 2/3 · Paused (wave 2/3 failed on b)"),
            "{line}"
        );
        assert_eq!(finished(&doc), Some(ExitCode::from(1)));
        assert!(table(&doc).contains("Progressing"));
    }

    #[test]
    fn fail_back_shows_the_choice_and_what_is_pending() {
        let doc = serde_json::json!({
            "failBack": {
                "policy": {"afterRecoveryHeld": 30},
                "pending": [
                    {"cluster": "dc2", "readySinceMs": 1_000, "dueAtMs": 31_000},
                    {"cluster": "dc3", "readySinceMs": null, "dueAtMs": null},
                ],
                "last": {"index": 42, "clusters": [{"cluster": "dc1", "readySinceMs": 0}],
                         "heldSeconds": 30},
            },
            "clusters": [],
        });
        let text = failback_lines(&doc);
        assert!(
            text.starts_with("Fail-back: after recovery held 30s\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "pending dc2: Ready since 1970-01-01T00:00:01Z, fails back at 1970-01-01T00:00:31Z"
            ),
            "{text}"
        );
        assert!(text.contains("pending dc3: fails back once"), "{text}");
        assert!(
            text.contains("last: entry #42 back to dc1 (held 30s)"),
            "{text}"
        );
        assert!(table(&doc).contains("Fail-back: after recovery held 30s"));
        let never = serde_json::json!({"failBack": {"policy": "never", "pending": []}});
        assert_eq!(failback_lines(&never), "Fail-back: never\n");
    }

    #[test]
    fn descheduling_shows_pending_replicas_and_holds() {
        let doc = serde_json::json!({
            "descheduling": {
                "policy": {"pendingSeconds": 60},
                "pending": [{"cluster": "dc2", "replicas": 2, "sinceMs": 1_000, "dueAtMs": 61_000}],
                "held": [{"cluster": "dc3", "replicas": 1, "sinceMs": 0, "untilMs": 1_800_000}],
                "last": {"index": 7, "clusters": [{"cluster": "dc3", "from": 3, "to": 1}]},
            },
            "clusters": [],
        });
        let text = descheduling_lines(&doc);
        assert!(
            text.starts_with("Descheduling: after 60s Pending\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "dc2: 2 replicas Pending (unschedulable) since 1970-01-01T00:00:01Z, moved at 1970-01-01T00:01:01Z"
            ),
            "{text}"
        );
        assert!(text.contains("dc3: held to 1 replicas until"), "{text}");
        assert!(text.contains("last: entry #7 dc3 3 -> 1"), "{text}");
        assert!(table(&doc).contains("Descheduling: after 60s"));
        let quiet = serde_json::json!({"descheduling": {"policy": {"pendingSeconds": 0},
            "pending": [], "held": [], "last": null}});
        assert_eq!(descheduling_lines(&quiet), "");
        let reported = serde_json::json!({"descheduling": {"policy": {"pendingSeconds": 0},
            "pending": [{"cluster": "a", "replicas": 1, "sinceMs": 0, "dueAtMs": null}]}});
        assert!(descheduling_lines(&reported).starts_with("Descheduling: off\n  a: 1 replicas"));
    }
}
