//! Crash at every failpoint (store/src/failpoints.rs), process level: three `fedraft server`
//! processes, one of them started with `FAILPOINTS` so that it crashes (or, for a failed fsync,
//! stops) at one seam after some passes, in the middle of a write load. The node is restarted
//! without the failpoint, and then: every acknowledged write reads back, the three nodes' state
//! hashes agree at equal index, and `fedraft audit verify` passes on every data directory.
//!
//! One table, [`CASES`], one test per row. The `fedraft` binary has its failpoints because this
//! crate's dev-dependencies turn the `failpoints` feature on (fedraft/Cargo.toml). CI runs every
//! row with [`DEFAULT_WRITES`] writes; `FEDRAFT_FAILPOINT_WRITES=2000` makes a longer run (the
//! failpoints' pass counts scale with it). `ROBUSTNESS.md` says what each row proves.

use std::time::{Duration, Instant};

use fedraft_testkit::procs::{Cluster, Layout};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
const TOKEN: &str = "failpoint-test-admin-token-0123456789";
/// Writes of one run in CI: enough to pass every seam several times (snapshots every
/// [`SNAPSHOT_EVERY`] entries, checkpoints every [`CHECKPOINT_EVERY`] commands).
const DEFAULT_WRITES: u64 = 160;
/// Concurrent writers: several appends share a WAL sync, as in production.
const WRITERS: u64 = 4;
const SNAPSHOT_EVERY: u64 = 30;
const CHECKPOINT_EVERY: u64 = 30;
pub(crate) const LIMIT: Duration = Duration::from_secs(60);
const NS: &str = "fp";

/// Which node carries the failpoint.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// Node 1, started first with the shortest election timeout: the leader.
    Leader,
    /// Node 2, a follower.
    Follower,
    /// Node 3, killed before the load and restarted with the failpoint after the leader purged
    /// its log: it catches up by installing a snapshot.
    LaggingFollower,
}

/// How the node ends at the failpoint.
#[derive(Clone, Copy, Debug)]
enum End {
    /// `panic`: the process aborts, as if killed at that point.
    Crash,
    /// `return`: the seam's error path; the node stops with exit code 4, naming the seam.
    Stops,
}

struct Case {
    seam: &'static str,
    /// The actions before the last one pass: `{n}*off->` where n = writes / `passes_per`
    /// (at least `min_passes`).
    passes_per: u64,
    min_passes: u64,
    last: &'static str,
    target: Target,
    end: End,
}

const fn case(seam: &'static str, passes_per: u64, min_passes: u64, target: Target) -> Case {
    Case {
        seam,
        passes_per,
        min_passes,
        last: "panic",
        target,
        end: End::Crash,
    }
}

/// Every seam but `executors::member_write` (the executors are off here; a member that does not
/// answer is covered by the executors' own tests and the jepsen member-dark nemesis).
const CASES: [Case; 10] = [
    case("store::wal_sync", 4, 5, Target::Leader),
    Case {
        last: "return(EIO)",
        end: End::Stops,
        ..case("store::wal_sync", 4, 5, Target::Leader)
    },
    case("store::after_wal_sync", 4, 5, Target::Leader),
    case("store::audit_write", 4, 5, Target::Leader),
    case("store::checkpoint_write", u64::MAX, 1, Target::Leader),
    case("store::snapshot_write", u64::MAX, 1, Target::Leader),
    case("store::log_purge", u64::MAX, 1, Target::Leader),
    case(
        "store::snapshot_install",
        u64::MAX,
        0,
        Target::LaggingFollower,
    ),
    case("raft::peer_send", 2, 20, Target::Leader),
    case("raft::peer_receive", 2, 20, Target::Follower),
];

fn writes() -> u64 {
    std::env::var("FEDRAFT_FAILPOINT_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_WRITES)
}

impl Case {
    fn failpoints(&self, writes: u64) -> String {
        let n = (writes / self.passes_per.max(1)).max(self.min_passes);
        if n == 0 {
            format!("{}={}", self.seam, self.last)
        } else {
            format!("{}={n}*off->{}", self.seam, self.last)
        }
    }
}

pub(crate) fn layout(root: &std::path::Path, name: &str) -> Cluster {
    let mut l = Layout::new(BIN, TOKEN);
    l.raft = vec![
        "tick_interval_ms = 3600000".into(),
        "heartbeat_interval_ms = 100".into(),
        format!("snapshot_every_entries = {SNAPSHOT_EVERY}"),
        "max_in_snapshot_log_to_keep = 5".into(),
    ];
    let c = Cluster::layout(root, name, &l);
    for n in &c.nodes {
        // Only node 1 bootstraps the cluster (the others have no [peers] table and learn the
        // membership from it), so it stands first and leads. [raft] is the last table of the
        // file: the election timeouts appended still belong to it; the others' are long enough
        // that they do not compete with node 1 on a loaded machine.
        let (min, max) = if n.id == 1 { (400, 700) } else { (1500, 2500) };
        let mut text = std::fs::read_to_string(&n.config).expect("reading a node config");
        if n.id != 1 {
            let start = text.find("[peers]\n").expect("a [peers] table");
            let end = text[start..]
                .find("[executors]")
                .expect("an [executors] table")
                + start;
            text.replace_range(start..end, "");
        }
        text.push_str(&format!(
            "election_timeout_min_ms = {min}\nelection_timeout_max_ms = {max}\n\
             [audit]\ncheckpoint_every_commands = {CHECKPOINT_EVERY}\n"
        ));
        std::fs::write(&n.config, text).expect("writing a node config");
    }
    c
}

/// PUTs object `name`, trying the nodes in turn from `first` until one acknowledges it or the
/// deadline passes (same idempotency key every time: a client retrying across a leader change).
pub(crate) async fn put(c: &Cluster, first: usize, name: &str, deadline: Instant) -> bool {
    let body = serde_json::json!({"template": {"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name}, "spec": {"replicas": 1}}});
    let mut attempt = 0;
    while Instant::now() < deadline {
        let i = (first + attempt) % c.nodes.len();
        attempt += 1;
        let r = c
            .req(
                i,
                reqwest::Method::PUT,
                &format!("/v1/namespaces/{NS}/objects/{name}"),
            )
            .header("Idempotency-Key", format!("fp-{name}"))
            .json(&body)
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => return true,
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    false
}

/// `count` writes from [`WRITERS`] concurrent writers; answers the acknowledged names.
pub(crate) async fn load(c: &Cluster, prefix: &str, count: u64) -> Vec<String> {
    let deadline = Instant::now() + LIMIT;
    let writers = (0..WRITERS).map(|w| async move {
        let mut acked = Vec::new();
        for k in (w..count).step_by(WRITERS as usize) {
            let name = format!("{prefix}{k}");
            if put(c, k as usize, &name, deadline).await {
                acked.push(name);
            }
        }
        acked
    });
    futures::future::join_all(writers)
        .await
        .into_iter()
        .flatten()
        .collect()
}

pub(crate) async fn wait_leader_is(c: &Cluster, id: u64) {
    let leader = c.wait_agreed_leader(LIMIT).await;
    assert_eq!(
        leader, id,
        "node {id} should lead (shortest election timeout)"
    );
}

/// Waits for node `i` to end; answers its exit status.
async fn wait_exit(c: &mut Cluster, i: usize, seam: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(status) = c.exited(i) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "node {} never reached failpoint {seam}; log:\n{}",
            c.nodes[i].id,
            c.log_tail(i)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every node's `(stateIndex, stateHash)`, once all of them answer.
async fn states(c: &Cluster) -> Option<Vec<(u64, String)>> {
    let mut out = Vec::new();
    for i in 0..c.nodes.len() {
        let v: Value = c.get(i, "/v1/system/state").await?;
        out.push((
            v["stateIndex"].as_u64()?,
            v["stateHash"].as_str()?.to_string(),
        ));
    }
    Some(out)
}

/// After the crash and restart: acknowledged writes read back, state hashes agree at equal
/// index, the audit chains verify.
pub(crate) async fn check(c: &mut Cluster, restarted: usize, acked: &[String]) {
    c.wait_all_ready(LIMIT).await;
    // One more write through the restarted node: it takes part in the cluster again.
    assert!(
        put(c, restarted, "after-restart", Instant::now() + LIMIT).await,
        "a write after the restart"
    );
    for name in acked {
        let got = c
            .get(restarted, &format!("/v1/namespaces/{NS}/objects/{name}"))
            .await;
        assert!(got.is_some(), "acknowledged write {name} lost");
    }
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(s) = states(c).await {
            if s.iter().all(|(i, _)| *i == s[0].0) {
                assert!(
                    s.iter().all(|(_, h)| *h == s[0].1),
                    "state hashes differ at index {}: {s:?}",
                    s[0].0
                );
                break;
            }
        }
        assert!(Instant::now() < deadline, "nodes never reached one index");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..c.nodes.len() {
        c.stop(i);
    }
    for i in 0..c.nodes.len() {
        let dir = c.nodes[i].data_dir.display().to_string();
        let (code, out, err) = c.cli(i, &["audit", "--data-dir", &dir, "verify"], &[]);
        assert_eq!(code, 0, "audit verify of node {}:\n{out}\n{err}", i + 1);
    }
}

async fn crash_at(seam: &str, end_with: &str) {
    let case = CASES
        .iter()
        .find(|k| k.seam == seam && k.last.starts_with(end_with))
        .expect("a case in the table");
    let writes = writes();
    let fp = case.failpoints(writes);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut c = layout(
        dir.path(),
        &format!("{}-{end_with}", seam.replace("::", "-")),
    );
    let env = [("FAILPOINTS", fp.as_str())];
    let (target, acked) = match case.target {
        Target::Leader | Target::Follower => {
            let target = match case.target {
                Target::Leader => 0,
                _ => 1,
            };
            // Node 1 last: the others answer its first election.
            for i in [1, 2, 0] {
                if i == target {
                    c.start_with_env(i, &env);
                } else {
                    c.start(i);
                }
            }
            wait_leader_is(&c, 1).await;
            (target, load(&c, "w", writes).await)
        }
        Target::LaggingFollower => {
            for i in [1, 2, 0] {
                c.start(i);
            }
            wait_leader_is(&c, 1).await;
            c.kill(2);
            let acked = load(&c, "w", writes).await;
            c.start_with_env(2, &env);
            (2, acked)
        }
    };
    let status = wait_exit(&mut c, target, seam).await;
    let log = std::fs::read_to_string(&c.nodes[target].log).unwrap_or_default();
    assert!(
        log.contains(seam),
        "the log names {seam}:\n{}",
        c.log_tail(target)
    );
    match case.end {
        End::Crash => assert!(status.code().is_none(), "aborted, got {status:?}"),
        End::Stops => {
            assert_eq!(status.code(), Some(4), "exit code of a failed fsync");
            assert!(log.contains("node stopped"), "{}", c.log_tail(target));
        }
    }
    eprintln!(
        "failpoint {fp}: node{} ended {status:?}; {} of {writes} writes acknowledged",
        target + 1,
        acked.len()
    );
    assert!(!acked.is_empty(), "no write was acknowledged");
    c.start(target);
    check(&mut c, target, &acked).await;
}

#[test]
fn the_table_covers_every_failpoint_but_the_executors() {
    let mut covered: Vec<&str> = CASES.iter().map(|k| k.seam).collect();
    covered.push("executors::member_write");
    // Changes what a node reports, not what it stores: the console's alarm test covers it.
    covered.push("raft::health_hash");
    // Slows a link down, never ends a node: `a_slow_follower_catches_up_from_the_log`.
    covered.push("raft::append_entry");
    for name in fedraft_raft::failpoints::ALL {
        assert!(covered.contains(&name), "{name} has no case");
    }
    assert!(
        fedraft_raft::failpoints::enabled(),
        "tests build failpoints"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_wal_sync() {
    crash_at("store::wal_sync", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_wal_sync_stops_the_node() {
    crash_at("store::wal_sync", "return").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_wal_sync() {
    crash_at("store::after_wal_sync", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_audit_write() {
    crash_at("store::audit_write", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_checkpoint_write() {
    crash_at("store::checkpoint_write", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_snapshot_write() {
    crash_at("store::snapshot_write", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_log_purge() {
    crash_at("store::log_purge", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_snapshot_install() {
    crash_at("store::snapshot_install", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_peer_send() {
    crash_at("raft::peer_send", "panic").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_peer_receive() {
    crash_at("raft::peer_receive", "panic").await
}

/// Every node's WAL fsync sleeps this long, and every peer RPC leaves this late.
const SLOW_FSYNC_MS: u64 = 40;
const SLOW_SEND_MS: u64 = 30;
/// The bound on leadership changes while the disk and the network are slow: at most one term
/// after the first leader's. Heartbeats every 100 ms arrive 30 ms late, well inside the followers'
/// 1.5-2.5 s election timeouts, so an election would mean the delays starve the leader's
/// heartbeats behind its slow appends; one is allowed for a scheduling stall of the loaded
/// machine, more is flapping.
const MAX_TERM_CHANGES: usize = 1;

/// Slow disk and slow network on all three nodes at once (`store::wal_sync=sleep(40)`,
/// `raft::peer_send=sleep(30)`): writes slow down (each writer's writes wait at least one slow
/// fsync each) but stay correct (every one acknowledged, every acknowledged write reads back,
/// state hashes agree, audit chains verify), and the terms every node reports, sampled every
/// 100 ms through the load, change at most [`MAX_TERM_CHANGES`] times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_disk_and_network_stay_correct_without_flapping() {
    let writes = writes();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut c = layout(dir.path(), "slow");
    let fp =
        format!("store::wal_sync=sleep({SLOW_FSYNC_MS});raft::peer_send=sleep({SLOW_SEND_MS})");
    let env = [("FAILPOINTS", fp.as_str())];
    for i in [1, 2, 0] {
        c.start_with_env(i, &env);
    }
    wait_leader_is(&c, 1).await;
    let done = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let work = async {
        let acked = load(&c, "s", writes).await;
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        acked
    };
    let sample = async {
        let mut terms = std::collections::BTreeSet::new();
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            for i in 0..c.nodes.len() {
                if let Some(t) = c.get(i, "/readyz").await.and_then(|v| v["term"].as_u64()) {
                    terms.insert(t);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        terms
    };
    let (acked, terms) = tokio::join!(work, sample);
    let took = started.elapsed();
    eprintln!(
        "slow disk and network: {} of {writes} writes acknowledged in {took:?}; terms seen {terms:?}",
        acked.len()
    );
    assert_eq!(acked.len() as u64, writes, "every write is acknowledged");
    let floor = Duration::from_millis(writes / WRITERS * SLOW_FSYNC_MS);
    assert!(
        took >= floor,
        "the slow fsync took effect: {took:?} < {floor:?}"
    );
    assert!(
        !terms.is_empty() && terms.len() <= MAX_TERM_CHANGES + 1,
        "leadership flapped: terms {terms:?}"
    );
    check(&mut c, 0, &acked).await;
}

/// What the leader's link spends per entry it sends in
/// [`a_slow_follower_catches_up_from_the_log`]: a batch of the backlog takes far beyond the
/// heartbeat interval (100 ms) the leader waits for an answer, while a batch of 16 fits.
const SLOW_ENTRY_MS: u64 = 5;
/// Writes made while the follower is down: a backlog of more than one batch that fits.
const BACKLOG_WRITES: u64 = 400;

/// A follower restarted behind a backlog, reached over a link whose transfer time grows with the
/// batch (`raft::append_entry=return(5)` on the leader): the leader must send it batches that
/// arrive in time, or it never catches up. The log is kept (no snapshot in the run), so it
/// catches up from the log; then its state hash equals the others' and it serves a write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_follower_catches_up_from_the_log() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut c = layout(dir.path(), "slow-follower");
    for n in &c.nodes {
        let text = std::fs::read_to_string(&n.config).expect("reading a node config");
        let text = text
            .replace(
                &format!("snapshot_every_entries = {SNAPSHOT_EVERY}"),
                "snapshot_every_entries = 1000000",
            )
            .replace(
                "max_in_snapshot_log_to_keep = 5",
                "max_in_snapshot_log_to_keep = 1000000",
            );
        std::fs::write(&n.config, text).expect("writing a node config");
    }
    let fp = format!("raft::append_entry=return({SLOW_ENTRY_MS})");
    c.start(1);
    c.start(2);
    c.start_with_env(0, &[("FAILPOINTS", fp.as_str())]);
    wait_leader_is(&c, 1).await;
    c.kill(2);
    let acked = load(&c, "b", BACKLOG_WRITES).await;
    assert_eq!(
        acked.len() as u64,
        BACKLOG_WRITES,
        "every write is acknowledged"
    );
    c.start(2);
    let started = Instant::now();
    let deadline = started + LIMIT;
    loop {
        if let Some(s) = states(&c).await {
            if s[2].0 == s[0].0 && s[0].0 == s[1].0 {
                assert_eq!(s[2].1, s[0].1, "state hashes differ at index {}", s[0].0);
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the slow follower never caught up: {:?}\n{}",
            states(&c).await,
            c.log_tail(2)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "slow follower ({SLOW_ENTRY_MS} ms per entry sent) caught up with {BACKLOG_WRITES} writes in {:?}",
        started.elapsed()
    );
    check(&mut c, 2, &acked).await;
}
