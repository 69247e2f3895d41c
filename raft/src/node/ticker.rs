//! The leader's ticks: `Command::Tick` proposed on a timer so log time advances on a quiet
//! fleet, and sooner while re-placements wait in the state's queue.
//!
//! Must not: propose anything but ticks, or tick from a node that does not lead.

use std::sync::Weak;
use std::time::Duration;

use fedraft_core::command::Command;

use super::{FedNode, Inner, Leader, TICK_ACTOR};
use crate::types::Proposal;

/// How often the leader looks at the state's reschedule queue between regular ticks. Each entry
/// re-places a bounded number of queued objects (`RESCHEDULE_OBJECTS_PER_ENTRY`); at one tick a
/// second, a region of a thousand-cluster fleet going dark left thousands of workloads queued for
/// seconds after their grace period ended. An entry's re-placements take a few milliseconds of
/// the apply thread, so the pace is set by commits, not by apply.
const BACKLOG_TICK: Duration = Duration::from_millis(20);

/// Ticks proposed and not yet applied, at most. A backlog tick re-places what is queued when it
/// applies, so with several in flight the queue drains at the pace entries commit (the log
/// batches them) rather than one commit round trip (a few hundred milliseconds on a loaded
/// leader) per bounded batch. Regular ticks count too: a leader whose commits stall does not
/// pile them up.
const TICKS_IN_FLIGHT: usize = 16;

/// While this node leads, proposes `Command::Tick` every `tick_interval_ms` so log time (and
/// with it health deadlines and failover timers) advances even when no one writes; and, while
/// re-placements are queued, every [`BACKLOG_TICK`] (up to [`TICKS_IN_FLIGHT`] at once), so the
/// queue drains at the rate its per-entry bound allows. A queue that a tick did not shorten
/// (re-placements that queue others as fast) waits for the regular ticks until one shortens it:
/// an idle fleet never writes twenty entries a second.
pub(super) async fn run_ticker(node: Weak<Inner>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let period = match node.upgrade() {
        Some(n) => Duration::from_millis(n.cfg.tick_interval_ms.max(1)),
        None => return,
    };
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stalled = false;
    // Each answers (queued when it was sent, queued once it applied), or None if not committed.
    let mut in_flight: tokio::task::JoinSet<Option<(usize, usize)>> = tokio::task::JoinSet::new();
    loop {
        let regular = tokio::select! {
            _ = interval.tick() => true,
            _ = tokio::time::sleep(BACKLOG_TICK.min(period)) => false,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                // Judged after every tick, regular ones too: a queue that grows while it drains
                // (a region's clusters turning NotReady one by one) resumes as soon as a tick
                // shortens it.
                // A tick sent to an empty queue that found one (timers fired in its entry)
                // shortened nothing it could have: only a queue it failed to shorten stalls.
                if let Ok(Some((before, after))) = done {
                    stalled = before > 0 && after >= before;
                }
                continue;
            }
            _ = stop.changed() => return,
        };
        let Some(inner) = node.upgrade() else { return };
        let n = FedNode { inner };
        if !matches!(n.leader(), Leader::Me) {
            continue;
        }
        let queued = n.read_stale(|s| s.pending_reschedules());
        if queued == 0 {
            stalled = false;
        }
        if in_flight.len() >= TICKS_IN_FLIGHT || (!regular && (queued == 0 || stalled)) {
            continue;
        }
        in_flight.spawn(async move {
            let tick = Proposal {
                request_id: String::new(),
                actor: TICK_ACTOR.into(),
                command: Command::Tick,
            };
            match n.propose_here(tick, period).await {
                Ok(_) => Some((queued, n.read_stale(|s| s.pending_reschedules()))),
                Err(e) => {
                    tracing::debug!(error = %e, "tick not committed");
                    None
                }
            }
        });
    }
}
