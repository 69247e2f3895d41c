//! The first failure of a write the node does off its apply path (audit records, checkpoints):
//! recorded where it happens, reported by the next apply, which then stops the node. Later
//! failures add nothing: the first is the cause.

use std::sync::{Mutex, MutexGuard};

#[derive(Debug, Default)]
pub(crate) struct FirstFailure(Mutex<Option<String>>);

impl FirstFailure {
    pub fn record(&self, why: String) {
        let mut g = self.slot();
        if g.is_none() {
            tracing::error!(%why, "a write off the apply path failed; the node stops applying");
            *g = Some(why);
        }
    }

    pub fn get(&self) -> Option<String> {
        self.slot().clone()
    }

    /// A holder that panicked left at most a recorded failure behind: keep using it.
    fn slot(&self) -> MutexGuard<'_, Option<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
