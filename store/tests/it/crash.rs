//! SIGKILL during a stream of appends: every append whose `durable` callback fired before the
//! kill is present after reopening. The child is this test binary re-run in child mode.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fedraft_store::Store;

const CHILD_ENV: &str = "FEDRAFT_STORE_CRASH_CHILD_DIR";

/// Child mode (only when the env var is set): append forever, printing each durable index.
#[test]
fn crash_child_appender() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let s = Store::open(&dir, "crash").unwrap();
    let mut next = 1u64;
    loop {
        // 50 appends in flight, then wait for the last: group commit batches them.
        let (tx, rx) = crossbeam_channel::bounded(1);
        for k in 0..50 {
            let i = next + k;
            let tx = tx.clone();
            s.append(
                vec![(i, vec![(i % 251) as u8; 256])],
                Box::new(|r| r.unwrap()),
                Box::new(move |r| {
                    r.unwrap();
                    println!("durable {i}");
                    if k == 49 {
                        tx.send(()).unwrap();
                    }
                }),
            );
        }
        rx.recv().unwrap();
        next += 50;
    }
}

#[test]
fn sigkill_keeps_every_durable_append() {
    let dir = tempfile::tempdir().unwrap();
    // The child runs only the appender; inside the `it` binary its name carries this module's path.
    let mut child = crate::child(module_path!(), "crash_child_appender")
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut max = 0u64;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest's "test name ... " prefix may share the first line.
            if let Some(n) = line
                .rsplit_once("durable ")
                .and_then(|(_, n)| n.trim().parse::<u64>().ok())
            {
                assert_eq!(n, max + 1, "durable callbacks fire in order");
                max = n;
            }
        }
        max
    });
    // Let it run, then kill it mid-stream.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let acked = reader.join().unwrap();
    assert!(acked >= 50, "child made progress: {acked}");
    let s = Store::open(dir.path(), "crash").unwrap();
    let log = s.log_range(1, acked + 1).unwrap();
    assert_eq!(
        log.len() as u64,
        acked,
        "every durable append survived SIGKILL"
    );
    assert!(log
        .iter()
        .all(|(i, v)| v.len() == 256 && v[0] == (*i % 251) as u8));
}
