//! The descheduler's policy and arithmetic: how long replicas may stay Pending because a member
//! could not schedule them before a Divided object's share there shrinks, and by how much.
//!
//! Executors count, per workload and cluster, the pods the member left Pending with
//! `PodScheduled=False` (reason `Unschedulable`) and report the count as the
//! [`UNSCHEDULABLE_CONDITION`] condition of the workload's observation, as health rules report
//! theirs: the report's layout stays that of older entries, and a member's own conditions
//! cannot carry a `fedraft.io/` type. Karmada's descheduler does the same for Divided workloads:
//! replicas a member cannot place are taken off it and scheduled elsewhere.
//!
//! Plain data, its input checks and pure decisions only; the state machine keeps the per-object
//! records, the timers and the estimates (`state/handlers/deschedule.rs`). Must not: read
//! clocks or the state.

use serde::{Deserialize, Serialize};

use super::{WorkloadCondition, WorkloadObservation};
use crate::error::FieldError;

/// The condition an executor reports when some of a workload's pods are Pending unschedulable:
/// status true, the reason the count in decimal.
pub const UNSCHEDULABLE_CONDITION: &str = "fedraft.io/PodsUnschedulable";

/// Longest wait accepted: one day, the bound of every rollout wait. Longer than that, replicas
/// that cannot start are better moved by hand.
pub const MAX_PENDING_SECONDS: u64 = 86_400;

/// How long a cluster stays held to the replicas it could run after the descheduler shrank its
/// share, unless its capacity report grows first: half an hour, longer than a node pool
/// usually takes to scale up, so a cluster that will not grow is not offered the same replicas
/// again at every report (the ping-pong the hold exists to prevent).
pub const ESTIMATE_KEPT_MS: u64 = 30 * 60 * 1000;

/// Whether replicas stuck Pending on a cluster are re-placed elsewhere.
///
/// JSON: `{"pendingSeconds": 120}`; 0 turns the descheduler off for the object (the default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Descheduling {
    /// Log time replicas may stay Pending unschedulable on a cluster before they move.
    pub pending_seconds: u64,
}

impl Descheduling {
    /// Input checks that need no state; `at` is the field path of the policy.
    pub fn validate(&self, at: &str) -> Result<(), FieldError> {
        if self.pending_seconds > MAX_PENDING_SECONDS {
            return Err(FieldError::new(
                format!("{at}.pendingSeconds"),
                format!(
                    "{} exceeds {MAX_PENDING_SECONDS} seconds",
                    self.pending_seconds
                ),
            ));
        }
        Ok(())
    }

    pub fn is_off(&self) -> bool {
        self.pending_seconds == 0
    }

    /// The wait in milliseconds of log time, None when off.
    pub fn pending_ms(&self) -> Option<u64> {
        (!self.is_off()).then(|| self.pending_seconds.saturating_mul(1000))
    }

    /// How `explain` and the CLI name it.
    pub fn describe(&self) -> String {
        match self.pending_ms() {
            None => "off".to_string(),
            Some(_) => format!("after {}s Pending", self.pending_seconds),
        }
    }
}

/// The condition reporting `n` unschedulable pods (None for none: nothing is reported).
pub fn unschedulable_condition(n: u32) -> Option<WorkloadCondition> {
    (n > 0).then(|| WorkloadCondition {
        type_: UNSCHEDULABLE_CONDITION.into(),
        status: true,
        reason: n.to_string().into(),
    })
}

/// The unschedulable pods an observation reports (0 when it says nothing, or nonsense).
pub fn unschedulable(o: &WorkloadObservation) -> u32 {
    o.conditions
        .iter()
        .find(|c| c.type_ == UNSCHEDULABLE_CONDITION && c.status)
        .and_then(|c| c.reason.parse::<u32>().ok())
        .unwrap_or(0)
}

/// The share a cluster keeps when `stuck` of its `share` replicas cannot be scheduled there:
/// the share less the stuck ones, never below the replicas that are ready (they run; moving
/// them would only break what works) and never above the share.
pub fn held_share(share: u32, ready: u32, stuck: u32) -> u32 {
    share.saturating_sub(stuck).max(ready.min(share))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn held_share_never_below_ready_nor_above_share() {
        assert_eq!(held_share(6, 2, 4), 2);
        assert_eq!(held_share(6, 4, 4), 4, "ready replicas stay");
        assert_eq!(held_share(6, 0, 9), 0);
        assert_eq!(held_share(3, 5, 1), 3, "never above the share");
        for share in 0..8 {
            for ready in 0..10 {
                for stuck in 0..10 {
                    let h = held_share(share, ready, stuck);
                    assert!(h <= share);
                    assert!(h >= ready.min(share));
                    assert!(h + stuck >= share || h == ready.min(share));
                }
            }
        }
    }

    #[test]
    fn the_condition_round_trips_and_nonsense_counts_nothing() {
        let mut o = WorkloadObservation {
            kind: "Deployment".into(),
            revision: None,
            generation: 1,
            observed_generation: 1,
            replicas: 4,
            updated: 4,
            ready: 1,
            available: 1,
            conditions: Arc::new([]),
            job: Default::default(),
        };
        assert_eq!(unschedulable(&o), 0);
        let mut c = unschedulable_condition(3).unwrap();
        o.conditions = Arc::new([c.clone()]);
        assert_eq!(unschedulable(&o), 3);
        c.reason = "many".into();
        o.conditions = Arc::new([c]);
        assert_eq!(unschedulable(&o), 0);
        assert!(unschedulable_condition(0).is_none());
    }

    #[test]
    fn validation_names_the_field() {
        let e = Descheduling {
            pending_seconds: MAX_PENDING_SECONDS + 1,
        }
        .validate("descheduling")
        .unwrap_err();
        assert_eq!(e.field, "descheduling.pendingSeconds");
        assert!(Descheduling::default().validate("d").is_ok());
        assert!(Descheduling::default().pending_ms().is_none());
        let on = Descheduling {
            pending_seconds: 30,
        };
        assert_eq!(on.pending_ms(), Some(30_000));
    }
}
