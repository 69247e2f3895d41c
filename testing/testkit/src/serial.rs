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

static TAKEN: Mutex<bool> = Mutex::new(false);
static FREED: Condvar = Condvar::new();

/// The slot, held until dropped.
pub struct HeavySlot(());

/// Waits until no other heavy test of this binary runs, then holds the slot. A test that
/// panicked while holding it has released it on unwind, so a poisoned lock is taken as is.
pub fn heavy_slot() -> HeavySlot {
    let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
    while *taken {
        taken = FREED.wait(taken).unwrap_or_else(|e| e.into_inner());
    }
    *taken = true;
    HeavySlot(())
}

impl Drop for HeavySlot {
    fn drop(&mut self) {
        *TAKEN.lock().unwrap_or_else(|e| e.into_inner()) = false;
        FREED.notify_one();
    }
}
