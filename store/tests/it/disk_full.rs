//! A data directory on a small filesystem that fills up: the store stops accepting appends with
//! an error that says the device is full (and, like any failed write, accepts nothing after
//! it), every append acknowledged before is kept, and once space returns the directory opens
//! again and takes appends. The filesystem is a 64 MiB tmpfs mounted by the test (tests run as
//! root); where mounting is refused the test says so and skips.

use fedraft_store::{Store, StoreError};
use fedraft_testkit::tmpfs::Tmpfs;

/// Bytes per append: the filesystem fills after about a thousand of them.
const ENTRY_BYTES: usize = 64 << 10;
/// More appends than 64 MiB can hold, so the loop always meets the full disk.
const MAX_APPENDS: u64 = 4_000;

fn entry(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..ENTRY_BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_full_disk_stops_appends_and_loses_nothing_acknowledged() {
    let root = tempfile::tempdir().unwrap();
    let fs = match Tmpfs::mount(root.path(), "64m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED disk_full: mounting a tmpfs was refused ({why})");
            return;
        }
    };
    let dir = root.path().join("data");
    let s = Store::open(&dir, "full").unwrap();
    let mut acked = 0u64;
    let mut failure = None;
    for i in 1..=MAX_APPENDS {
        match s.append_sync(vec![(i, entry(i))]) {
            Ok(()) => acked = i,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let failure = failure.expect("64 MiB filled up");
    eprintln!("disk full after {acked} appends: {failure}");
    assert!(acked > 100, "appends went through until the disk filled");
    assert!(
        failure.to_string().contains("No space left on device"),
        "the error says the device is full: {failure}"
    );
    // Like any failed write, it stops the store: nothing more is accepted, even with room.
    assert!(s.failure().is_some());
    fs.grow("256m");
    assert!(matches!(
        s.append_sync(vec![(acked + 1, entry(acked + 1))]),
        Err(StoreError::Stopped { .. })
    ));
    drop(s);

    // Space is back: a restart recovers every acknowledged append and takes new ones.
    let s = Store::open(&dir, "full").expect("reopening once space returns");
    let log = s.log_range(1, acked + 1).unwrap();
    assert_eq!(log.len() as u64, acked, "acknowledged appends kept");
    for (i, bytes) in &log {
        assert!(*bytes == entry(*i), "entry {i} reads back as written");
    }
    let next = log.last().map_or(1, |(i, _)| i + 1);
    s.append_sync(vec![(next, entry(next))]).unwrap();
    drop(s);
    drop(fs);
}
