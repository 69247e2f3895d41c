//! How far a workload's rollout has come: replicas of the new generation updated one per
//! `rolloutStepMs` (a slow rollout, when that fault is set), and images set as never ready
//! (`neverReadyImages`) whose new pods never turn ready, so the old pods keep serving until the
//! Deployment's `progressDeadlineSeconds` marks it ProgressDeadlineExceeded. Pure arithmetic
//! over what the controller passes in; with neither fault set, every replica is updated at once
//! and the packing alone decides readiness, as before. Must not: read the store or the clock.

use std::time::Duration;

use serde_json::Value;

/// Where one workload's rollout stands at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    pub updated: i64,
    /// Ready pods, before capacity caps them.
    pub ready: i64,
    pub deadline_exceeded: bool,
    /// How long until these numbers change by themselves, if they will.
    pub next_change: Option<Duration>,
}

/// What the controller knows of one workload at this tick.
pub(crate) struct Rollout {
    pub desired: i64,
    /// Ready pods of the previous generation when this one was first seen.
    pub old_ready: i64,
    /// Time since the generation's status fell due.
    pub elapsed: Duration,
    pub step: Duration,
    pub never_ready: bool,
    pub deadline: Duration,
    pub statefulset: bool,
}

pub(crate) fn progress(r: &Rollout) -> Progress {
    let d = r.desired;
    if r.never_ready {
        // Kubernetes' defaults: a Deployment surges 25% (rounded up) new pods and keeps all but
        // 25% (rounded down) of the old ones; a StatefulSet replaces one pod at a time.
        let (updated, unavailable) = if r.statefulset {
            (d.min(1), d.min(1))
        } else {
            (d.min((d + 3) / 4), d / 4)
        };
        let exceeded = !r.statefulset && r.elapsed > r.deadline;
        return Progress {
            updated,
            ready: r.old_ready.min(d - unavailable).max(0),
            deadline_exceeded: exceeded,
            next_change: (!exceeded && !r.statefulset)
                .then(|| r.deadline - r.elapsed + Duration::from_millis(1)),
        };
    }
    let updated = if r.step.is_zero() {
        d
    } else {
        let done = r.elapsed.as_millis() / r.step.as_millis().max(1);
        d.min(i64::try_from(done).unwrap_or(i64::MAX))
    };
    let step_ms = r.step.as_millis().max(1);
    let next_change = (updated < d).then(|| {
        let into = r.elapsed.as_millis() % step_ms;
        Duration::from_millis(u64::try_from(step_ms - into).unwrap_or(u64::MAX))
    });
    Progress {
        updated,
        // New pods turn ready as they are updated; old ones serve until replaced.
        ready: updated.max(r.old_ready.min(d)),
        deadline_exceeded: false,
        next_change,
    }
}

/// Whether any container of the workload's pod template runs one of `images`.
pub(crate) fn uses_any(workload: &Value, images: &[String]) -> bool {
    if images.is_empty() {
        return false;
    }
    workload
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .any(|i| images.iter().any(|bad| bad == i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(elapsed_ms: u64, never_ready: bool) -> Progress {
        progress(&Rollout {
            desired: 4,
            old_ready: 4,
            elapsed: Duration::from_millis(elapsed_ms),
            step: Duration::from_millis(100),
            never_ready,
            deadline: Duration::from_secs(2),
            statefulset: false,
        })
    }

    #[test]
    fn slow_and_stuck_rollouts() {
        assert_eq!((at(0, false).updated, at(0, false).ready), (0, 4));
        assert_eq!(at(250, false).updated, 2);
        assert_eq!(at(250, false).next_change, Some(Duration::from_millis(50)));
        assert_eq!(
            (at(400, false).updated, at(400, false).next_change),
            (4, None)
        );
        let stuck = at(1000, true);
        assert_eq!(
            (stuck.updated, stuck.ready, stuck.deadline_exceeded),
            (1, 3, false)
        );
        assert!(at(2001, true).deadline_exceeded);
        let instant = progress(&Rollout {
            desired: 3,
            old_ready: 0,
            elapsed: Duration::ZERO,
            step: Duration::ZERO,
            never_ready: false,
            deadline: Duration::from_secs(600),
            statefulset: false,
        });
        assert_eq!(
            (instant.updated, instant.ready, instant.next_change),
            (3, 3, None)
        );
        let w = serde_json::json!({"spec": {"template": {"spec": {"containers": [
            {"image": "app:1"}, {"image": "app:bad"}]}}}});
        assert!(uses_any(&w, &["app:bad".to_string()]));
        assert!(!uses_any(&w, &["app:2".to_string()]));
    }
}
