//! One slot for the tests that start a whole federation (three `fedraft server` processes, or
//! the demo, or the benchmark's clusters) inside one test binary.
//!
//! Every crate's integration tests are one binary, and libtest runs its tests on parallel
//! threads. Two or three process-level federations at once on a two-core machine starve each
//! other's heartbeats and probes, and the timing-sensitive assertions (exactly one write per
//! handover, failover within its grace period) then fail for reasons that are not fedraft's.
//! Holding this slot runs such tests one after the other while the light tests still run beside
//! them. Must not: be held by a test that starts nothing heavy.

use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// How long a test waits for the slot before it fails naming the holder. Heavy tests run one
/// after the other, so a test may legitimately queue behind all the others: about fifteen
/// federations in the `fedraft` binary at one to two minutes each on a loaded two-core machine
/// is 15-30 min; past that, the holder is stuck, not slow.
pub const SLOT_WAIT_LIMIT: Duration = Duration::from_secs(30 * 60);

/// Who holds the slot: the thread (libtest runs each test on its own thread, named after the
/// test) and that name, for the messages below.
struct Holder {
    thread: ThreadId,
    name: String,
}

static HOLDER: Mutex<Option<Holder>> = Mutex::new(None);
static FREED: Condvar = Condvar::new();

/// The slot, held until dropped.
pub struct HeavySlot(());

/// Waits until no other heavy test of this binary runs, then holds the slot. A test that
/// panicked while holding it has released it on unwind, so a poisoned lock is taken as is.
///
/// Panics at once if this thread already holds the slot: the slot is not reentrant, and a
/// second take would wait on itself forever (a test that takes the slot and then lays out a
/// process cluster, which takes it too, hung that way). Panics after [`SLOT_WAIT_LIMIT`],
/// naming the holder, if another test never lets go.
pub fn heavy_slot() -> HeavySlot {
    let me = std::thread::current();
    let my_name = me.name().unwrap_or("an unnamed thread").to_string();
    let deadline = Instant::now() + SLOT_WAIT_LIMIT;
    let mut holder = HOLDER.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        match holder.as_ref() {
            None => break,
            Some(h) if h.thread == me.id() => panic!(
                "{my_name} takes the heavy slot a second time: it already holds it and would \
                 wait on itself forever (process clusters from `Cluster::layout` take the slot \
                 themselves; drop the test's own)"
            ),
            Some(h) => {
                let now = Instant::now();
                assert!(
                    now < deadline,
                    "{my_name} waited {SLOT_WAIT_LIMIT:?} for the heavy slot, still held by {}",
                    h.name
                );
                holder = FREED
                    .wait_timeout(holder, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
    *holder = Some(Holder {
        thread: me.id(),
        name: my_name,
    });
    HeavySlot(())
}

impl Drop for HeavySlot {
    fn drop(&mut self) {
        *HOLDER.lock().unwrap_or_else(|e| e.into_inner()) = None;
        FREED.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "a second time")]
    fn a_second_take_on_the_same_thread_fails_instead_of_waiting_forever() {
        let _first = heavy_slot();
        let _second = heavy_slot();
    }
}
