//! Crash safety with real processes: three `fedraft-raft-node` processes on loopback, a
//! concurrent write burst, SIGKILL of a follower and then the leader mid-burst, restarts on the
//! same data dirs. Afterwards every acknowledged write is present on all nodes, nodes agree
//! byte for byte, and retried request ids were applied exactly once.

use fedraft_testkit::net::free_port;
use std::collections::BTreeMap;
use std::process::{Child, Command as Proc, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fedraft_core::command::Command;
use fedraft_core::model::ClusterSpec;
use fedraft_core::state::Outcome;
use fedraft_raft::{NodeReport, PeerClient, Proposal, RaftError};
use fedraft_testkit::eventually;

const SECRET: &str = "crash-secret";

/// The node process, `examples/fedraft-raft-node.rs`: `cargo test -p fedraft-raft` builds the
/// crate's examples beside its tests (`target/<profile>/examples/`, next to `deps/`).
fn node_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let bin = profile_dir
        .join("examples")
        .join(format!("fedraft-raft-node{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p fedraft-raft --examples`",
        bin.display()
    );
    bin
}

struct Procs {
    addrs: BTreeMap<u64, String>,
    children: BTreeMap<u64, Child>,
    root: tempfile::TempDir,
}

impl Procs {
    fn peers_arg(&self) -> String {
        self.addrs
            .iter()
            .map(|(id, a)| format!("{id}={a}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, id: u64) {
        let dir = self.root.path().join(format!("n{id}"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.path().join(format!("n{id}.log")))
            .unwrap();
        let mut cmd = Proc::new(node_bin());
        cmd.args([
            "--id",
            &id.to_string(),
            "--data-dir",
            dir.to_str().unwrap(),
            "--peer-listen",
            &self.addrs[&id],
        ])
        .args([
            "--peers",
            &self.peers_arg(),
            "--secret",
            SECRET,
            "--cluster-id",
            "crash-test",
        ])
        .args([
            "--heartbeat-ms",
            "150",
            "--election-min-ms",
            "800",
            "--election-max-ms",
            "1600",
        ])
        .args(["--propose-timeout-ms", "4000"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log);
        if id == 1 {
            cmd.arg("--bootstrap");
        }
        self.children.insert(id, cmd.spawn().unwrap());
    }

    fn kill(&mut self, id: u64) {
        if let Some(mut c) = self.children.remove(&id) {
            // SIGKILL: no shutdown path runs, exactly like a power cut for the process.
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, mut c) in std::mem::take(&mut self.children) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn register(request_id: &str, name: &str) -> Proposal {
    Proposal {
        request_id: request_id.into(),
        actor: "crash-client".into(),
        command: Command::RegisterCluster(ClusterSpec::new(
            name,
            format!("https://{name}.example:6443"),
        )),
    }
}

async fn reports(client: &PeerClient, addrs: &BTreeMap<u64, String>) -> BTreeMap<u64, NodeReport> {
    let mut out = BTreeMap::new();
    for (id, a) in addrs {
        if let Ok(r) = client.status(a, Duration::from_secs(2)).await {
            out.insert(*id, r);
        }
    }
    out
}

async fn leader_of(client: &PeerClient, addrs: &BTreeMap<u64, String>) -> u64 {
    eventually(Duration::from_secs(60), "a leader", || async {
        let r = reports(client, addrs).await;
        r.values().find(|r| r.status.is_leader).map(|r| r.status.id)
    })
    .await
}

/// Sends one write until it is acknowledged (trying each node in turn) or `give_up` passes.
/// Returns the applied index and outcome when acknowledged.
async fn write_until_acked(
    client: &PeerClient,
    addrs: &[String],
    p: &Proposal,
    give_up: Instant,
    start_at: usize,
) -> Option<(u64, Outcome, Option<u64>)> {
    let mut i = start_at;
    while Instant::now() < give_up {
        let addr = &addrs[i % addrs.len()];
        match client.propose(addr, p, Duration::from_secs(4), false).await {
            Ok(Ok(a)) => return Some((a.index, a.outcome, a.duplicate_of)),
            Ok(Err(RaftError::NoQuorum { .. })) | Ok(Err(_)) | Err(_) => {
                i += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill_of_follower_and_leader() {
    let mut procs = Procs {
        addrs: BTreeMap::new(),
        children: BTreeMap::new(),
        root: tempfile::tempdir().unwrap(),
    };
    for id in 1..=3 {
        procs.addrs.insert(id, format!("127.0.0.1:{}", free_port()));
    }
    for id in 1..=3 {
        procs.spawn(id);
    }
    let client = PeerClient::new(SECRET).unwrap();
    let addrs = procs.addrs.clone();
    let addr_list: Vec<String> = addrs.values().cloned().collect();
    leader_of(&client, &addrs).await;

    // The burst: 16 writers, each retrying its current request id until acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..16usize {
        let (client, addrs, stop) = (client.clone(), addr_list.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (rid, name) = (format!("req-{w}-{n}"), format!("w{w}-{n}"));
                let p = register(&rid, &name);
                let give_up = Instant::now() + Duration::from_secs(60);
                if let Some((index, outcome, dup)) =
                    write_until_acked(&client, &addrs, &p, give_up, w + n as usize).await
                {
                    // A retry of a request whose first attempt was applied but not acknowledged
                    // answers as a duplicate: the write lives at the first index.
                    acked.push((rid, name, dup.unwrap_or(index), outcome));
                }
                n += 1;
            }
            acked
        }));
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = leader_of(&client, &addrs).await;
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    procs.kill(follower);
    tokio::time::sleep(Duration::from_secs(1)).await;
    procs.kill(leader);
    // One node left: no quorum, writers keep retrying their request ids.
    tokio::time::sleep(Duration::from_secs(1)).await;
    procs.spawn(follower);
    tokio::time::sleep(Duration::from_secs(3)).await;
    procs.spawn(leader);
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(
        acked.len() > 20,
        "the burst made progress: {} writes",
        acked.len()
    );

    // Every acknowledged write was applied exactly once, as a fresh registration.
    for (rid, _, index, outcome) in &acked {
        assert!(
            matches!(outcome, Outcome::Accepted { .. }),
            "{rid} at {index}: {outcome:?} (applied twice?)"
        );
    }
    // All three nodes converge to the same state.
    let converged = eventually(
        Duration::from_secs(60),
        "identical state on 3 nodes",
        || async {
            let r = reports(&client, &addrs).await;
            let first = r.values().next()?;
            (r.len() == 3
                && r.values().all(|x| {
                    x.state_hash == first.state_hash
                        && x.state_applied_index == first.state_applied_index
                }))
            .then(|| first.clone())
        },
    )
    .await;
    let max_acked = acked.iter().map(|a| a.2).max().unwrap();
    assert!(converged.state_applied_index >= max_acked);

    // Present on every node: the same request id answers as a duplicate of the first index, and a
    // new request for the same name is refused because the cluster exists. Asked through each
    // node in turn (followers forward, the leader's answer reflects the replicated state).
    let give_up = Instant::now() + Duration::from_secs(120);
    for (k, (rid, name, index, outcome)) in acked.iter().enumerate() {
        let retry = write_until_acked(&client, &addr_list, &register(rid, name), give_up, k)
            .await
            .unwrap();
        assert_eq!(
            retry.2,
            Some(*index),
            "{rid}: applied once, at its first index"
        );
        assert_eq!(&retry.1, outcome);
        if k % 10 == 0 {
            let fresh = write_until_acked(
                &client,
                &addr_list,
                &register(&format!("{rid}-fresh"), name),
                give_up,
                k,
            )
            .await
            .unwrap();
            assert!(
                matches!(fresh.1, Outcome::Rejected(_)),
                "{name} must already exist"
            );
        }
    }
    let final_reports = eventually(Duration::from_secs(60), "final convergence", || async {
        let r = reports(&client, &addrs).await;
        let first = r.values().next()?;
        (r.len() == 3 && r.values().all(|x| x.state_hash == first.state_hash)).then_some(r)
    })
    .await;
    eprintln!(
        "acknowledged {} writes; final applied index {:?}",
        acked.len(),
        final_reports
            .values()
            .map(|r| r.state_applied_index)
            .collect::<Vec<_>>()
    );
}
