//! A full disk under one node of three: node 2's data directory is a small tmpfs the test mounts
//! (tests run as root; where mounting is refused it says `SKIPPED` and passes). A filler file
//! leaves it little room, a write load fills it, and node 2 stops for good at its first failed
//! write (exit code 4, one log line naming the device error) while nodes 1 and 3 keep
//! acknowledging writes. Then the filesystem is grown (`mount -o remount,size=…`, as an operator
//! adding space), node 2 restarts and catches up, every acknowledged write reads back from it,
//! the state hashes agree at equal index and every audit chain verifies (`failpoints::check`).

use std::time::{Duration, Instant};

use fedraft_testkit::tmpfs::Tmpfs;

use super::failpoints::{check, layout, load, wait_leader_is, LIMIT};

/// Node 2 (a follower: node 1 leads, `failpoints::layout`).
const TARGET: usize = 1;
/// Room left on the device once the filler is written: a few hundred writes fill it.
const ROOM: u64 = 384 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_one_node_and_the_other_two_keep_writing() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut c = layout(dir.path(), "diskfull");
    let data = c.nodes[TARGET].data_dir.clone();
    std::fs::create_dir_all(&data).expect("creating the data directory");
    let fs = match Tmpfs::mount(&data, "16m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED disk_full_cluster: mounting a tmpfs was refused ({why})");
            return;
        }
    };
    for i in [1, 2, 0] {
        c.start(i);
    }
    wait_leader_is(&c, 1).await;
    let mut acked = load(&c, "before", 20).await;
    assert_eq!(acked.len(), 20, "writes before the disk fills");

    // Take all but ROOM bytes, so the load below fills the device within seconds.
    let filler = data.join("filler");
    let take = fs.available().saturating_sub(ROOM);
    std::fs::write(&filler, vec![0u8; take as usize]).expect("writing the filler");
    let deadline = Instant::now() + LIMIT;
    let mut round = 0;
    let status = loop {
        acked.extend(load(&c, &format!("fill{round}-"), 40).await);
        round += 1;
        if let Some(status) = c.exited(TARGET) {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "node 2 never met the full disk ({} free); log:\n{}",
            fs.available(),
            c.log_tail(TARGET)
        );
    };
    let log = std::fs::read_to_string(&c.nodes[TARGET].log).unwrap_or_default();
    assert_eq!(status.code(), Some(4), "a failed write stops the node");
    assert!(
        log.contains("node stopped") && log.contains("No space left on device"),
        "one line says why:\n{}",
        c.log_tail(TARGET)
    );
    eprintln!(
        "node 2 stopped on a full disk after {} acknowledged writes",
        acked.len()
    );

    // The other two keep serving writes while node 2 is down.
    let during = load(&c, "during", 40).await;
    assert_eq!(during.len(), 40, "nodes 1 and 3 acknowledge every write");
    acked.extend(during);

    fs.grow("256m");
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.start(TARGET);
    check(&mut c, TARGET, &acked).await;
    // The filler is not part of the node's data.
    let _ = std::fs::remove_file(&filler);
}
