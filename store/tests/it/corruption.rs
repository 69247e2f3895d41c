//! Damaged files in a node's data directory: a node starting on it must refuse (with an error
//! that names the damaged file) or repair what a crash can legitimately leave behind (an
//! incomplete record at the WAL's tail, cut back to the last whole one); it must never serve a
//! state that differs from what was written. One test per kind of file: a table file (where
//! snapshots and checkpoints live once flushed), the WAL's tail, and the WAL's middle. A clean
//! close flushes the log into table files and leaves the WAL empty, so the WAL cases write
//! from a child process (this binary re-run) that exits without closing, as a crash does.

use std::path::{Path, PathBuf};

use fedraft_store::{Store, StoreError};

const CHILD_ENV: &str = "FEDRAFT_STORE_CORRUPTION_CHILD_DIR";

/// Log entries written before the damage; each is synced on its own.
const ENTRIES: u64 = 60;

/// Deterministic, incompressible bytes (so a flipped byte lands in data, not in a few bytes
/// of LZ4 output).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn entry(i: u64) -> Vec<u8> {
    noise(i, 512)
}

/// A closed data directory holding entries 1..=ENTRIES (each synced) and a snapshot flushed to
/// a table file.
fn written(dir: &Path) -> Vec<u8> {
    let s = Store::open(dir, "corrupt").unwrap();
    for i in 1..=ENTRIES {
        s.append_sync(vec![(i, entry(i))]).unwrap();
    }
    let data = noise(999, 256 << 10);
    s.save_built_snapshot(b"meta", &data).unwrap();
    data
}

/// Child mode (only when the env var is set): entries 1..=ENTRIES, each synced, then an exit
/// that closes nothing, so they stay in the WAL only.
#[test]
fn corruption_child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let s = Store::open(&dir, "corrupt").unwrap();
    for i in 1..=ENTRIES {
        s.append_sync(vec![(i, entry(i))]).unwrap();
    }
    std::process::exit(0);
}

/// A data directory whose log entries 1..=ENTRIES are in the WAL alone.
fn written_to_wal(dir: &Path) -> PathBuf {
    let status = crate::child(module_path!(), "corruption_child_writer")
        .env(CHILD_ENV, dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child writer failed: {status:?}");
    fullest_wal(dir)
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = at as usize;
    for b in &mut bytes[at..at + 8] {
        *b ^= 0x5A;
    }
    std::fs::write(path, bytes).unwrap();
}

/// The WAL holding the log entries (the snapshot's flush started a new, empty one).
fn fullest_wal(dir: &Path) -> PathBuf {
    files(dir, "log")
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .expect("a write-ahead log")
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// The log as a restarted node reads it: entries from 1 up to the first hole.
fn log(s: &Store) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
    s.log_range(1, ENTRIES + 1)
}

#[test]
fn a_damaged_table_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = written(dir.path());
    // The clean close flushed the log too: the snapshot, the log and the metadata each have
    // a table file. Damage the middle of every one.
    let tables = files(dir.path(), "sst");
    assert!(tables.len() >= 2, "table files: {tables:?}");
    for t in &tables {
        let len = std::fs::metadata(t).unwrap().len();
        flip(t, len / 2);
    }
    let named = |e: &StoreError| tables.iter().any(|t| e.to_string().contains(&file_name(t)));
    let s = match Store::open(dir.path(), "corrupt") {
        Err(e) => return assert!(named(&e), "refused without naming the file: {e}"),
        Ok(s) => s,
    };
    // Opened: each read of damaged data fails as corruption, naming its file.
    let mut refused = 0;
    match s.snapshot() {
        Err(e) => {
            assert!(matches!(e, StoreError::Corrupt(_)) && named(&e), "{e:?}");
            refused += 1;
        }
        Ok(got) => assert_eq!(
            got.map(|g| g.1),
            Some(snapshot),
            "a damaged snapshot served"
        ),
    }
    match log(&s) {
        Err(e) => {
            assert!(matches!(e, StoreError::Corrupt(_)) && named(&e), "{e:?}");
            refused += 1;
        }
        Ok(got) => {
            for (i, bytes) in &got {
                assert_eq!(bytes, &entry(*i), "entry {i} served damaged");
            }
        }
    }
    assert!(refused > 0, "no read met the damage");
}

#[test]
fn a_torn_wal_tail_is_cut_back_to_the_last_whole_record() {
    let dir = tempfile::tempdir().unwrap();
    let wal = &written_to_wal(dir.path());
    // A crash in the middle of the last record's write: part of it reached the file.
    let len = std::fs::metadata(wal).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(wal).unwrap();
    f.set_len(len - 200).unwrap();
    drop(f);

    let s = Store::open(dir.path(), "corrupt").expect("a torn tail is repaired, not refused");
    let got = log(&s).unwrap();
    assert_eq!(
        got.len() as u64,
        ENTRIES - 1,
        "only the torn record is gone"
    );
    for (i, bytes) in &got {
        assert_eq!(bytes, &entry(*i), "entry {i} reads back as written");
    }
    // The repaired log takes the torn entry again.
    s.append_sync(vec![(ENTRIES, entry(ENTRIES))]).unwrap();
    assert_eq!(log(&s).unwrap().len() as u64, ENTRIES);
}

#[test]
fn a_damaged_record_inside_the_wal_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let wal = &written_to_wal(dir.path());
    let len = std::fs::metadata(wal).unwrap().len();
    flip(wal, len / 2);
    // Recovering up to the damage would silently drop the synced appends after it, which this
    // node acknowledged: refused instead.
    match Store::open(dir.path(), "corrupt") {
        Err(e) => {
            assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
            assert!(
                e.to_string().contains(&file_name(wal)),
                "names the WAL: {e}"
            );
        }
        Ok(s) => panic!(
            "opened on a damaged WAL with {} of {ENTRIES} entries",
            log(&s).map_or(0, |l| l.len())
        ),
    }
}
