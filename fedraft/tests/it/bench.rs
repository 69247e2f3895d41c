//! `fedraft bench put`, bounded: a tiny run against a three-node fedraft it starts itself (and
//! etcd, when the machine has it) measures real puts A/B interleaved and leaves no process and no
//! directory behind; Ctrl-C mid-run cleans up the same way. The figures of a real run come from
//! the command in README.md, not from here.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");

fn etcd_installed() -> bool {
    Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The bench directory and the PIDs of started processes, from the bench's own output.
fn started(out: &str) -> (PathBuf, Vec<u32>) {
    let dir = out
        .lines()
        .find_map(|l| l.strip_prefix("bench directory: "))
        .expect("the bench names its directory");
    let pids = out
        .lines()
        .filter(|l| l.starts_with("started "))
        .filter_map(|l| l.rsplit("(pid ").next()?.trim_end_matches(')').parse().ok())
        .collect();
    (PathBuf::from(dir), pids)
}

fn assert_cleaned_up(out: &str, processes: usize) {
    let (dir, pids) = started(out);
    assert_eq!(pids.len(), processes, "{out}");
    assert!(!dir.exists(), "{} was left behind", dir.display());
    for pid in pids {
        assert!(
            !PathBuf::from(format!("/proc/{pid}")).exists(),
            "process {pid} outlived the bench"
        );
    }
}

/// The table row of `target` at `clients`: (puts/s, server CPU µs per put, errors).
fn row(out: &str, target: &str, clients: usize) -> (f64, f64, u64) {
    let line = out
        .lines()
        .find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 9 && f[0] == target && f[1] == clients.to_string()
        })
        .unwrap_or_else(|| panic!("no row for {target} at {clients}:\n{out}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    (
        f[2].replace(',', "").parse().unwrap(),
        f[7].parse().unwrap(),
        f[8].parse().unwrap(),
    )
}

#[test]
fn bench_put_measures_both_targets_interleaved_and_leaves_nothing_behind() {
    let _slot = fedraft_testkit::heavy_slot();
    let with_etcd = etcd_installed();
    let mut cmd = Command::new(BIN);
    cmd.args(["bench", "put", "--clients", "1,4", "--rounds", "2"])
        .args([
            "--round-secs",
            "1",
            "--warmup-secs",
            "0.2",
            "--key-space",
            "500",
        ]);
    if !with_etcd {
        eprintln!("etcd is not installed: fedraft alone");
        cmd.arg("--no-etcd");
    }
    let done = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&done.stdout).to_string();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{out}\n{err}");
    eprintln!("{out}");
    for clients in [1, 4] {
        let (rate, cpu, errors) = row(&out, "fedraft", clients);
        assert!(rate > 0.0, "fedraft at {clients}: {rate}");
        // The servers the bench started did work for every put: some CPU time per put.
        assert!(cpu > 0.0, "fedraft CPU per put at {clients}: {cpu}");
        assert_eq!(errors, 0, "fedraft at {clients}");
        if with_etcd {
            let (rate, cpu, errors) = row(&out, "etcd", clients);
            assert!(rate > 0.0 && cpu > 0.0 && errors == 0, "etcd at {clients}");
            assert!(out.contains(&format!("ratio fedraft/etcd at {clients:>2} clients")));
            assert!(out.contains(&format!("server CPU per put at {clients:>2} clients")));
        }
    }
    if with_etcd {
        // A/B interleaved: round 1 fedraft then etcd, round 2 etcd then fedraft.
        let order: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("clients=1 ") && l.contains(" round "))
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(order, ["fedraft", "etcd", "etcd", "fedraft"], "{out}");
    }
    assert_cleaned_up(&out, if with_etcd { 6 } else { 3 });
}

#[test]
fn ctrl_c_mid_run_stops_every_started_process_and_removes_the_directory() {
    let _slot = fedraft_testkit::heavy_slot();
    let mut child = Command::new(BIN)
        .args([
            "bench",
            "put",
            "--no-etcd",
            "--clients",
            "2",
            "--rounds",
            "1",
        ])
        .args(["--round-secs", "120", "--warmup-secs", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let mut out = String::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("the load never started:\n{out}"));
        out.push_str(&line);
        out.push('\n');
        if line.starts_with("load:") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap();
    reader.join().unwrap();
    out.extend(rx.try_iter().map(|l| l + "\n"));
    assert_eq!(code.code(), Some(130), "{out}");
    assert_cleaned_up(&out, 3);
}
