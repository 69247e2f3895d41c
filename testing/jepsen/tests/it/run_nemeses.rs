//! End-to-end fault runs: `fedraft-jepsen run` against real `fedraft server` processes and simulated member
//! clusters, one short run per nemesis, each asserting that every checker passed (exit 0, every verdict file
//! valid, a history and a plot written). The runs are serialised (one cluster at a time on a small machine);
//! together they take about three minutes. Long runs are in the README.
//!
//! `clock_leap_forward_regression` keeps the seed with which the clock nemesis found that a leader whose wall
//! clock leaps forward dragged log time ahead and declared every member cluster NotReady.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// One run at a time, whatever the test harness's thread count.
static SERIAL: Mutex<()> = Mutex::new(());

/// Builds the node and simulator binaries once and copies them (with the harness) into a private
/// directory, so a concurrent build of the shared target directory cannot swap them mid-run.
fn binaries() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "-p",
                "fedraft",
                "--bin",
                "fedraft",
                "-p",
                "fedraft-kubesim",
                "--bin",
                "fedraft-kubesim",
            ])
            .status()
            .expect("running cargo build");
        assert!(
            status.success(),
            "building fedraft and fedraft-kubesim failed"
        );
        let harness = PathBuf::from(env!("CARGO_BIN_EXE_fedraft-jepsen"));
        let target = harness.parent().unwrap().to_path_buf();
        remove_stale_copies();
        let dir = std::env::temp_dir().join(format!("fedraft-jepsen-bins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["fedraft", "fedraft-kubesim"] {
            std::fs::copy(target.join(name), dir.join(name)).unwrap();
        }
        std::fs::copy(&harness, dir.join("fedraft-jepsen")).unwrap();
        dir
    })
}

/// Copies left by earlier runs whose process is gone (a test binary cannot clean up at exit):
/// about 600 MB each.
fn remove_stale_copies() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("fedraft-jepsen-bins-"))
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn verdict_of(out: &Path, checker: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join(format!("verdict-{checker}.json")))
        .unwrap_or_else(|e| panic!("verdict-{checker}.json: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Runs one nemesis and asserts every checker passed; returns the applied faults.
pub(crate) fn run(
    nemesis: &str,
    workload: &str,
    seconds: u64,
    seed: u64,
    extra: &[&str],
) -> Vec<serde_json::Value> {
    let bins = binaries();
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::Builder::new()
        .prefix(&format!("jepsen-{nemesis}-"))
        .tempdir()
        .unwrap();
    let output = Command::new(bins.join("fedraft-jepsen"))
        .args(["run", "--workload", workload, "--nemesis", nemesis])
        .args([
            "--time-limit",
            &seconds.to_string(),
            "--seed",
            &seed.to_string(),
        ])
        .arg("--out")
        .arg(out.path())
        .args(extra)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running fedraft-jepsen");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let keep = out.keep();
    assert!(
        output.status.success(),
        "{nemesis} run failed ({:?}); results kept in {}\nstdout: {stdout}\nstderr: {stderr}",
        output.status,
        keep.display()
    );
    assert!(stdout.starts_with("PASS "), "{stdout}");
    let mut checkers = vec!["convergence", "agreement", "clock"];
    if workload == "rollout" {
        checkers.push("floor");
    } else {
        if workload != "set" {
            checkers.push("linearizable");
        }
        if workload != "register" {
            checkers.push("set");
        }
    }
    if nemesis == "slow" {
        checkers.push("leadership");
    }
    for c in checkers {
        assert_eq!(
            verdict_of(&keep, c)["verdict"],
            "valid",
            "{c} in {}",
            keep.display()
        );
    }
    let history = std::fs::read_to_string(keep.join("history.jsonl")).unwrap();
    // The rollout workload puts a template every few seconds and drains now and then.
    let least = if workload == "rollout" { 5 } else { 20 };
    assert!(
        history.lines().count() > least,
        "too few operations recorded"
    );
    if workload == "rollout" {
        let floor = verdict_of(&keep, "floor");
        assert_eq!(floor["floor"], 6, "{floor:#}");
        assert!(floor["judged"].as_u64().unwrap() > 0, "{floor:#}");
        assert!(floor["rolloutSteps"].as_u64().unwrap() > 0, "{floor:#}");
    }
    let schedule: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(keep.join("schedule.json")).unwrap())
            .unwrap();
    assert!(
        !schedule["applied"].as_array().unwrap().is_empty(),
        "no fault was applied"
    );
    let svg = std::fs::read_to_string(keep.join("latency.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains(nemesis.split('-').next().unwrap()));
    let _ = std::fs::remove_dir_all(&keep);
    schedule["applied"].as_array().unwrap().clone()
}

#[test]
fn kill() {
    run("kill", "all", 20, 2, &[]);
}

#[test]
fn pause() {
    run("pause", "all", 20, 3, &[]);
}

#[test]
fn partition() {
    run("partition", "all", 20, 2, &[]);
}

/// Seed 18: the leader is replaced under load (removed from the voters, wiped, back under id 4 as a
/// learner, promoted), then the leader of that moment is killed. Every checker must pass (a run ends with
/// three voters, or its heal reports an error and fails it).
#[test]
fn membership() {
    let applied = run("membership", "all", 24, 18, &[]);
    let kinds: Vec<&str> = applied.iter().filter_map(|a| a["kind"].as_str()).collect();
    assert_eq!(kinds, ["membership", "kill"], "{applied:#?}");
    assert!(
        applied[0]["error"].is_null() && applied[0]["what"].as_str().unwrap().contains("by id 4"),
        "the replacement did not go through: {applied:#?}"
    );
}

/// Slow links (50-200 ms more each way on every peer link): every checker passes, and the terms the
/// nodes report change at most `SLOW_MAX_TERM_CHANGES` (1) times.
#[test]
fn slow() {
    let applied = run("slow", "all", 20, 2, &[]);
    assert!(
        applied
            .iter()
            .all(|a| a["kind"] == "slow" && a["error"].is_null()),
        "{applied:#?}"
    );
}

#[test]
fn member_dark() {
    // One dark window past the failure threshold (8 s here) and the failover grace, then recovery.
    run("member-dark", "all", 24, 5, &["--failure-threshold-s", "8"]);
}

#[test]
fn clock() {
    // Backward steps of up to a minute are harmless; forward leaps are bounded to the tolerance (see the
    // ignored regression below for what larger leaps do today).
    run(
        "clock",
        "all",
        20,
        4,
        &[
            "--max-clock-shift-s",
            "60",
            "--max-clock-leap-s",
            "1",
            "--clock-tolerance-ms",
            "2000",
        ],
    );
}

/// The clock nemesis with seed 1 leaps the leader's (node3's) wall clock 65 s forward at about 10 s; log time
/// follows it (65 s ahead of real time) and every member cluster is declared NotReady at about 14 s although
/// none went dark. The leader's stamps are now bounded by its monotonic clock (`raft/src/batcher.rs`), so
/// log time absorbs the leap gradually and no cluster may turn NotReady.
#[test]
fn clock_leap_forward_regression() {
    run("clock", "all", 30, 1, &["--max-clock-leap-s", "120"]);
}
