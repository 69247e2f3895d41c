//! `fedraft demo --once` end to end: the built binary starts three raft nodes, an API server and
//! three simulated clusters, runs the failover scenario, checks every step against the
//! simulators and the replicated state, and must exit 0. With `--data-dir` the three nodes' data
//! directories must be left behind for inspection.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
/// The scenario takes about 15 s when idle; a loaded 2-core machine needs far more slack.
const LIMIT: Duration = Duration::from_secs(150);

#[test]
fn demo_once_passes_every_step_and_keeps_data_dirs() {
    let _slot = fedraft_testkit::heavy_slot();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo-data");
    let mut child = Command::new(BIN)
        .args(["demo", "--once", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = out_reader.join().unwrap();
    let err = err_reader.join().unwrap();
    let status = status.unwrap_or_else(|| {
        panic!("demo did not finish within {LIMIT:?}\nstdout:\n{out}\nstderr:\n{err}")
    });
    assert_eq!(
        status.code(),
        Some(0),
        "demo failed\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert!(!out.contains("FAIL"), "{out}");
    for step in [
        "PASS all three clusters registered and Ready",
        "PASS workload converged",
        "PASS dc2 NotReady",
        "PASS replicas moved off dc2",
        "PASS dc2 Ready again",
    ] {
        assert!(out.contains(step), "missing {step:?} in:\n{out}");
    }
    assert!(out.contains("aggregated ready replicas: 6/6"), "{out}");
    for n in ["node1", "node2", "node3"] {
        let d = data.join(n);
        let entries = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("{} missing: {e}", d.display()))
            .count();
        assert!(entries > 0, "{} is empty", d.display());
    }
}
