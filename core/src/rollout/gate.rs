//! A rollout's moves: start, the gate between waves, and the commands (pause, resume, abort,
//! undo, promote). Each move changes the record and writes its story line; the state machine
//! calls them in log time with what the members reported, so replaying the same entries makes
//! the same moves.
//!
//! The gate of a wave: every cluster of the wave reports the target revision with a Healthy
//! verdict, continuously for `minSuccessSeconds`, and the next wave starts. A cluster that
//! reports the target Degraded, or that is not healthy when `progressDeadlineSeconds` have
//! passed since the wave started, fails; past `maxFailures` failed clusters the rollout pauses
//! (or rolls back with `autoRollback`). Clusters no longer placed are left out of the gate.
//! Must not: read anything but its arguments.

use super::{Phase, RolloutRecord, Verdict, WorkloadStatuses};

/// What the gate sees of one object: where it is placed, and what its clusters reported.
pub struct Observed<'a> {
    /// Placed clusters, sorted.
    pub placed: &'a [&'a str],
    pub status: Option<&'a WorkloadStatuses>,
}

impl Observed<'_> {
    fn is_placed(&self, cluster: &str) -> bool {
        self.placed.binary_search(&cluster).is_ok()
    }

    fn on_target(&self, cluster: &str, target: u32) -> Option<Verdict> {
        let s = self.status?.get(cluster)?;
        (s.observed.revision == Some(target)).then_some(s.verdict)
    }
}

fn names(cs: &[String]) -> String {
    cs.join(", ")
}

/// Starts rolling `target` out over `waves`; the first wave's clusters move at once.
pub fn start(rec: &mut RolloutRecord, target: u32, waves: Vec<Vec<String>>, index: u64, now: u64) {
    rec.target = target;
    rec.assigned.clear();
    rec.waves = waves;
    rec.failures = 0;
    rec.reason.clear();
    rec.phase = Phase::Progressing;
    let n = rec.waves.len();
    rec.log(
        index,
        now,
        format!(
            "rollout of revision {target} started over {n} wave{} (stable revision {})",
            if n == 1 { "" } else { "s" },
            rec.stable
        ),
    );
    start_wave(rec, 0, index, now);
}

fn start_wave(rec: &mut RolloutRecord, wave: usize, index: u64, now: u64) {
    rec.wave = wave as u32;
    rec.wave_started_ms = now;
    rec.healthy_since_ms = None;
    let Some(clusters) = rec.waves.get(wave).cloned() else {
        complete(rec, index, now, "every wave passed");
        return;
    };
    for c in &clusters {
        rec.assigned.insert(c.clone(), rec.target);
    }
    rec.log(
        index,
        now,
        format!(
            "wave {}/{} started: {} updated to revision {}",
            wave + 1,
            rec.waves.len(),
            names(&clusters),
            rec.target
        ),
    );
}

fn complete(rec: &mut RolloutRecord, index: u64, now: u64, why: &str) {
    rec.stable = rec.target;
    rec.assigned.clear();
    rec.phase = Phase::Complete;
    rec.reason.clear();
    rec.wave = rec.waves.len() as u32;
    rec.healthy_since_ms = None;
    rec.log(
        index,
        now,
        format!("rollout of revision {} complete: {why}", rec.target),
    );
}

/// Evaluates the current wave's gate (repeatedly: a wave may pass and the next one start in one
/// step). Returns whether the record changed.
pub fn step(rec: &mut RolloutRecord, obs: &Observed<'_>, index: u64, now: u64) -> bool {
    // Every move writes a story line; the gate's clock is the only silent change.
    let mark = |r: &RolloutRecord| (r.events.len(), r.events.last().cloned(), r.healthy_since_ms);
    let before = mark(rec);
    // Bounded by the number of waves: each pass either returns or moves to the next wave.
    for _ in 0..=rec.waves.len() {
        if rec.phase != Phase::Progressing {
            break;
        }
        let wave = rec.wave as usize;
        let Some(clusters) = rec.waves.get(wave) else {
            complete(rec, index, now, "every wave passed");
            break;
        };
        let mut waiting = Vec::new();
        let mut degraded = Vec::new();
        for c in clusters.iter().filter(|c| obs.is_placed(c)) {
            match obs.on_target(c, rec.target) {
                Some(Verdict::Healthy) => {}
                Some(Verdict::Degraded) => degraded.push(c.clone()),
                _ => waiting.push(c.clone()),
            }
        }
        let deadline_ms = rec.strategy.progress_deadline_seconds * 1000;
        let overdue = now.saturating_sub(rec.wave_started_ms) > deadline_ms;
        if waiting.is_empty() && degraded.is_empty() {
            let since = *rec.healthy_since_ms.get_or_insert(now);
            if now.saturating_sub(since) < rec.strategy.min_success_seconds * 1000 {
                break;
            }
            rec.log(
                index,
                now,
                format!(
                    "wave {}/{} passed its gate: healthy on revision {} for {} s",
                    wave + 1,
                    rec.waves.len(),
                    rec.target,
                    now.saturating_sub(since) / 1000
                ),
            );
            start_wave(rec, wave + 1, index, now);
            continue;
        }
        rec.healthy_since_ms = None;
        let over =
            |extra: usize| rec.failures as usize + extra > rec.strategy.max_failures as usize;
        if !overdue && !over(degraded.len()) {
            break;
        }
        let failed: Vec<String> = if overdue {
            degraded.iter().chain(&waiting).cloned().collect()
        } else {
            degraded
        };
        rec.failures += failed.len() as u32;
        let why = format!(
            "wave {}/{} failed on {} ({}); {} failed of {} tolerated",
            wave + 1,
            rec.waves.len(),
            names(&failed),
            if overdue {
                format!(
                    "not healthy on revision {} within {} s",
                    rec.target, rec.strategy.progress_deadline_seconds
                )
            } else {
                format!("degraded on revision {}", rec.target)
            },
            rec.failures,
            rec.strategy.max_failures
        );
        if rec.failures > rec.strategy.max_failures {
            if rec.strategy.auto_rollback {
                rec.log(index, now, why.clone());
                // Every automatic rollback has a revision to go to: the stable one.
                rollback(rec, index, now, &why);
            } else {
                pause(rec, index, now, &why);
            }
            break;
        }
        rec.log(index, now, why);
        start_wave(rec, wave + 1, index, now);
    }
    mark(rec) != before
}

/// Stops at the current wave; `reason` says why (a user or the failed gate).
pub fn pause(rec: &mut RolloutRecord, index: u64, now: u64, reason: &str) {
    rec.phase = Phase::Paused;
    rec.reason = reason.to_string();
    rec.healthy_since_ms = None;
    rec.log(index, now, format!("paused: {reason}"));
}

/// Continues the current wave with a fresh deadline and a fresh failure budget.
pub fn resume(rec: &mut RolloutRecord, actor: &str, index: u64, now: u64) {
    rec.phase = Phase::Progressing;
    rec.reason.clear();
    rec.failures = 0;
    rec.wave_started_ms = now;
    rec.healthy_since_ms = None;
    rec.log(
        index,
        now,
        format!("resumed by {actor} at wave {}", rec.wave + 1),
    );
}

/// Stops for good where it is: updated clusters keep the target, the rest the stable revision.
pub fn abort(rec: &mut RolloutRecord, actor: &str, index: u64, now: u64) {
    rec.phase = Phase::Aborted;
    rec.reason = format!("aborted by {actor}");
    rec.healthy_since_ms = None;
    rec.log(
        index,
        now,
        format!(
            "aborted by {actor} at wave {}: {} stay on revision {}",
            rec.wave + 1,
            if rec.assigned.is_empty() {
                "no clusters".to_string()
            } else {
                rec.assigned.keys().cloned().collect::<Vec<_>>().join(", ")
            },
            rec.target
        ),
    );
}

/// Every wave at once: the remaining gates are skipped.
pub fn promote(rec: &mut RolloutRecord, actor: &str, index: u64, now: u64) {
    let why = format!("promoted by {actor} at wave {}", rec.wave + 1);
    complete(rec, index, now, &why);
}

/// The revision `undo` goes back to: before the target while a rollout is under way or was
/// stopped, before the stable one once it completed or was rolled back already.
pub fn undo_target(rec: &RolloutRecord) -> Option<u32> {
    match rec.phase {
        Phase::Progressing | Phase::Paused | Phase::Aborted if rec.stable != rec.target => {
            Some(rec.stable)
        }
        _ => rec.previous(rec.stable).map(|r| r.number),
    }
}

/// Every cluster back to `undo_target`'s revision (callers check there is one).
pub fn rollback(rec: &mut RolloutRecord, index: u64, now: u64, reason: &str) {
    let Some(back) = undo_target(rec) else {
        return;
    };
    let updated: Vec<String> = rec
        .assigned
        .iter()
        .filter(|(_, r)| **r != back)
        .map(|(c, _)| c.clone())
        .collect();
    rec.stable = back;
    rec.target = back;
    rec.assigned.clear();
    rec.phase = Phase::RolledBack;
    rec.reason = reason.to_string();
    rec.healthy_since_ms = None;
    let who = if updated.is_empty() {
        "every cluster".to_string()
    } else {
        updated.join(", ")
    };
    rec.log(
        index,
        now,
        format!("rolled back to revision {back} ({who}): {reason}"),
    );
}
