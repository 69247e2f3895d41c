//! Audit benchmark (a plain program, not a test; `cargo bench` builds it in release):
//!
//! `cargo bench -p fedraft-raft --bench audit`
//!
//! Builds an archive of 1,000,000 commands exactly as the state machine writes it (applied to a
//! live `State` with their command indexes, encoded outcome, hash-chained records, a checkpoint
//! every 10,000 commands) over 20 clusters and 200 Divided objects: heartbeats, status reports
//! and ticks, with a cluster failing and recovering every 50,000 commands. Then measures replay
//! throughput from the empty state, verify throughput, and the state at arbitrary indexes.
//! Each phase prints wall time and the process's CPU time (both threads of the replay pipeline).
//!
//! `FEDRAFT_BENCH_AUDIT_ENTRIES=N` shrinks the archive for profiling runs (the goal is stated
//! for the default 1,000,000).

use std::time::Instant;

use fedraft_core::command::{Command, Heartbeat, LogEntry, ObjectStatusReport};
use fedraft_core::model::{ClusterSpec, ObjectSpec};
use fedraft_core::policy::Placement;
use fedraft_core::state::State;
use fedraft_raft::audit::{AuditLog, LiveState};
use fedraft_raft::codec;
use fedraft_store::{AuditInput, Store};

const DEFAULT_ENTRIES: u64 = 1_000_000;
const CHECKPOINT_EVERY: u64 = 10_000;
const CLUSTERS: usize = 20;
const OBJECTS: usize = 200;

fn entries() -> u64 {
    std::env::var("FEDRAFT_BENCH_AUDIT_ENTRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 100_000)
        .unwrap_or(DEFAULT_ENTRIES)
}

/// CPU time this process used so far, all threads (`utime + stime` of /proc/self/stat, in
/// clock ticks of 10 ms): coarse, but the phases last seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, i.e. 11 and 12 after the name.
    f.get(11)
        .zip(f.get(12))
        .map_or(0.0, |(u, s)| (u + s) as f64 / 100.0)
}

fn command(i: u64, t: u64) -> Command {
    let name = |c: usize| format!("dc{c}");
    if (i as usize) <= CLUSTERS {
        let mut s = ClusterSpec::new(name(i as usize - 1), "https://10.0.0.1:6443");
        s.failure_threshold_seconds = 5;
        s.success_threshold_seconds = 5;
        return Command::RegisterCluster(s);
    }
    if (i as usize) <= CLUSTERS + OBJECTS {
        let o = i as usize - CLUSTERS;
        let mut p = Placement::default();
        p.failover.grace_period_seconds = 10;
        return Command::PutObject {
            namespace: format!("ns{}", o % 10),
            name: format!("app{o}"),
            spec: ObjectSpec {
                template: format!(
                    r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"app{o}"}},"spec":{{"replicas":{}}}}}"#,
                    3 + o % 7
                ),
                placement: p,
                overrides: Vec::new(),
            },
            expected_version: None,
        };
    }
    // dc3 goes dark for 30 s of log time in every 50,000-command stretch.
    let dark = (i % 50_000) < 300;
    match i % 10 {
        0 => Command::Tick,
        5 => Command::StatusReports(
            (0..4)
                .map(|k| {
                    let o = ((i / 10) as usize * 4 + k) % OBJECTS + 1;
                    ObjectStatusReport {
                        namespace: format!("ns{}", o % 10),
                        name: format!("app{o}"),
                        cluster: name(o % CLUSTERS),
                        applied: true,
                        ready_replicas: (t % 3) as u32,
                        message: None,
                    }
                })
                .collect(),
        ),
        _ => Command::Heartbeats(
            (0..CLUSTERS)
                .filter(|c| !(dark && *c == 3))
                .map(|c| Heartbeat {
                    cluster: name(c),
                    capacity: None,
                })
                .collect(),
        ),
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), "bench").unwrap();
    let entries = entries();
    let mut live = State::new();
    let t0 = Instant::now();
    let mut batch = Vec::new();
    for i in 1..=entries {
        let t = 1_790_000_000_000 + i * 100;
        let le = LogEntry::new("", "bench", t, command(i, t));
        let applied = live.apply(i, &le);
        batch.push(AuditInput {
            index: i,
            term: 1,
            entry: le.encode(),
            outcome: codec::encode_applied(&applied).unwrap(),
        });
        if i % CHECKPOINT_EVERY == 0 {
            let recs = std::mem::take(&mut batch);
            Store::wait(|d| store.write_audit(recs, d)).unwrap();
            let snap = live.to_snapshot();
            store.write_checkpoint_direct(i, snap).unwrap();
        }
    }
    let build = t0.elapsed();
    println!(
        "built {entries} archived commands in {:.1} s ({:.0} applies+writes/s); {} objects",
        build.as_secs_f64(),
        entries as f64 / build.as_secs_f64(),
        live.object_count()
    );
    let log = AuditLog::new(store.reader());

    let (t0, c0) = (Instant::now(), cpu_seconds());
    let mut s = State::new();
    log.replay_onto(&mut s, entries, &mut |_| {}).unwrap();
    let (replay, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    assert_eq!(s.state_hash_hex(), live.state_hash_hex());
    println!(
        "replay from empty: {entries} entries in {replay:.2} s = {:.0} entries/s (hash equals \
         live); {cpu:.2} CPU-s = {:.0} entries per CPU-s",
        entries as f64 / replay,
        entries as f64 / cpu
    );

    let (t0, c0) = (Instant::now(), cpu_seconds());
    let report = log.verify(Some(LiveState::of(&live)), &mut |_| {}).unwrap();
    let (verify, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.replayed, entries);
    assert!(report.live_matched);
    println!(
        "verify (chain + replay + outcome bytes + {} checkpoints): {verify:.2} s = {:.0} \
         entries/s; {cpu:.2} CPU-s = {:.0} entries per CPU-s",
        report.checkpoints_checked,
        entries as f64 / verify,
        entries as f64 / cpu
    );

    let mut worst = 0f64;
    let mut total = 0f64;
    let points: Vec<u64> = (0..20u64)
        .map(|k| 1 + (k * 104_729 + 9_973) % entries)
        .collect();
    for &at in &points {
        let t0 = Instant::now();
        let st = log.state_at(at).unwrap();
        let took = t0.elapsed().as_secs_f64();
        assert_eq!(st.applied_index(), at);
        worst = worst.max(took);
        total += took;
    }
    println!(
        "state at {} arbitrary indexes (checkpoint every {CHECKPOINT_EVERY}): mean {:.3} s, worst {:.3} s",
        points.len(),
        total / points.len() as f64,
        worst
    );
    assert!(worst <= 1.0, "state at an index took {worst:.3} s");
}
