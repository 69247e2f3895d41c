//! A placement's fail-back choice: what happens to replicas that failed over away from a
//! cluster once that cluster is Ready again (issue 26).
//!
//! `Never` is what fedraft always did: replicas stay where failover put them until a policy
//! change, a `rebalance: true` division or `fedraft reschedule NS/NAME` moves them.
//! `AfterRecoveryHeld(N)` re-places the object from scratch once a cluster it failed over from
//! has been Ready for N seconds of log time, with the same make-before-break hold as any move
//! (`state/handlers/handover.rs`). Karmada has no equivalent knob (its scheduler keeps replicas
//! where failover put them), so a Karmada policy means `Never`.
//!
//! Plain data and its input checks only; the state machine keeps the per-object records and
//! the timers (`state/handlers/failback.rs`). Must not: read clocks or the state.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// Longest recovery hold accepted: one week, the same bound as a failover grace period.
pub const MAX_RECOVERY_HELD_SECONDS: u64 = 7 * 24 * 3600;

/// Whether replicas move back to a cluster they failed over from.
///
/// JSON: `"never"` or `{"afterRecoveryHeld": 300}` (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FailBack {
    /// Replicas stay where failover put them.
    #[default]
    Never,
    /// Once a cluster the object failed over from has been Ready this many seconds (log
    /// time), the object is re-placed from scratch, make-before-break.
    AfterRecoveryHeld(u64),
}

impl FailBack {
    /// Input checks that need no state; `at` is the field path of the choice.
    pub fn validate(&self, at: &str) -> Result<(), FieldError> {
        if let FailBack::AfterRecoveryHeld(s) = self {
            if *s > MAX_RECOVERY_HELD_SECONDS {
                return Err(FieldError::new(
                    format!("{at}.afterRecoveryHeld"),
                    format!("{s} exceeds {MAX_RECOVERY_HELD_SECONDS} seconds"),
                ));
            }
        }
        Ok(())
    }

    /// The hold in milliseconds of log time, None for `Never`.
    pub fn held_ms(&self) -> Option<u64> {
        match self {
            FailBack::Never => None,
            FailBack::AfterRecoveryHeld(s) => Some(s.saturating_mul(1000)),
        }
    }

    /// How `explain` and the CLI name it.
    pub fn describe(&self) -> String {
        match self {
            FailBack::Never => "never".to_string(),
            FailBack::AfterRecoveryHeld(s) => format!("after recovery held {s}s"),
        }
    }
}
