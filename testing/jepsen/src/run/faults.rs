//! Carries out a nemesis schedule against the running [`Env`]: at each window's start it resolves the
//! target (the leader is asked at that moment), injects the fault, and undoes it at the window's end. It
//! records what was really done (with times on the history's clock) for the plot and the checkers, and
//! `heal_everything` undoes every fault at the end of a run. Which faults happen when is `nemesis`'s job.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;
use tokio::sync::Mutex;

use super::env::Env;
use super::membership;
use crate::nemesis::{Fault, Window};

/// How long one membership step (remove and add, or promote) may take before it counts as failed.
const MEMBERSHIP_LIMIT: Duration = Duration::from_secs(45);

/// A fault as it was applied.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// Nanoseconds since the start of the run (the history's clock).
    pub start_ns: u64,
    pub end_ns: u64,
    /// `kill`, `pause`, `partition`, `member-dark`, `clock`, `membership` or `slow`.
    pub kind: &'static str,
    /// Human-readable: what, on which node or cluster.
    pub what: String,
    /// The 0-based node a node fault hit.
    pub node: Option<usize>,
    /// The member cluster a member-dark fault hit.
    pub cluster: Option<usize>,
    /// The clock offset, for clock faults.
    pub offset_ms: Option<i64>,
    /// An error while injecting or undoing, if any.
    pub error: Option<String>,
}

/// Runs `windows` in order; returns what was applied. Stops early (undoing the current fault) at `stop`.
pub async fn execute(
    env: &Mutex<Env>,
    windows: &[Window],
    start: Instant,
    stop: Instant,
) -> Vec<Applied> {
    let mut applied = Vec::new();
    for w in windows {
        let begin = start + w.start;
        if begin >= stop {
            break;
        }
        tokio::time::sleep_until(begin.into()).await;
        let leader = env.lock().await.leader().await;
        let start_ns = start.elapsed().as_nanos() as u64;
        let mut a = Applied {
            start_ns,
            end_ns: start_ns,
            kind: kind_name(&w.fault),
            what: String::new(),
            node: None,
            cluster: None,
            offset_ms: None,
            error: None,
        };
        let injected = inject(env, &w.fault, leader, &mut a).await;
        if let Err(e) = &injected {
            a.error = Some(format!("{e:#}"));
        }
        tracing::info!(what = %a.what, error = ?a.error, "fault injected");
        tokio::time::sleep_until((start + w.end).min(stop).into()).await;
        if let Err(e) = undo(env, &w.fault, &a).await {
            let note = format!("undo: {e:#}");
            a.error = Some(a.error.map_or(note.clone(), |x| format!("{x}; {note}")));
        }
        a.end_ns = start.elapsed().as_nanos() as u64;
        tracing::info!(what = %a.what, "fault undone");
        applied.push(a);
    }
    applied
}

fn kind_name(f: &Fault) -> &'static str {
    match f {
        Fault::Kill { .. } => "kill",
        Fault::Pause { .. } => "pause",
        Fault::Partition { .. } => "partition",
        Fault::MemberDark { .. } => "member-dark",
        Fault::Clock { .. } => "clock",
        Fault::Replace { .. } => "membership",
        Fault::Slow { .. } => "slow",
    }
}

async fn inject(
    env: &Mutex<Env>,
    fault: &Fault,
    leader: Option<usize>,
    a: &mut Applied,
) -> Result<()> {
    let mut env = env.lock().await;
    let role = |n: usize| if Some(n) == leader { " (leader)" } else { "" };
    match fault {
        Fault::Kill { target } => {
            let n = target.resolve(leader);
            a.node = Some(n);
            a.what = format!("kill -9 node{}{}", n + 1, role(n));
            env.kill_node(n);
        }
        Fault::Pause { target } => {
            let n = target.resolve(leader);
            a.node = Some(n);
            a.what = format!("SIGSTOP node{}{}", n + 1, role(n));
            env.pause_node(n)?;
        }
        Fault::Partition { partition } => {
            let links = partition.cut_links(env.nodes.len(), leader);
            a.what = format!(
                "partition {partition:?} (leader node{}): cut {links:?}",
                leader.map_or(0, |l| l + 1)
            );
            env.mesh.cut_links(&links)?;
        }
        Fault::MemberDark { cluster } => {
            a.cluster = Some(*cluster);
            a.what = format!("member cluster {} dark", env.sims[*cluster].name);
            env.set_dark(*cluster, true).await?;
        }
        Fault::Clock { target, offset_ms } => {
            let n = target.resolve(leader);
            a.node = Some(n);
            a.offset_ms = Some(*offset_ms);
            a.what = format!("clock of node{}{} {:+} ms", n + 1, role(n), offset_ms);
            env.set_clock(n, offset_ms / 1000)?;
        }
        Fault::Replace { target } => {
            let n = target.resolve(leader);
            a.node = Some(n);
            let old = env.nodes[n].id;
            a.what = format!("replace node{}{} (id {old})", n + 1, role(n));
            let (_, new) = membership::replace(&mut env, n, MEMBERSHIP_LIMIT).await?;
            a.what = format!("{} by id {new}, a learner until promoted", a.what);
        }
        Fault::Slow { delay_ms } => {
            a.what = format!("every peer link {delay_ms} ms slower each way");
            env.mesh.set_delay_all(Duration::from_millis(*delay_ms));
        }
    }
    Ok(())
}

async fn undo(env: &Mutex<Env>, fault: &Fault, a: &Applied) -> Result<()> {
    let mut env = env.lock().await;
    match fault {
        Fault::Kill { .. } => {
            if let Some(n) = a.node {
                env.start_node(n)?;
            }
        }
        Fault::Pause { .. } => {
            if let Some(n) = a.node {
                env.resume_node(n)?;
            }
        }
        Fault::Partition { .. } => env.mesh.heal_all(),
        Fault::MemberDark { cluster } => env.set_dark(*cluster, false).await?,
        Fault::Clock { .. } => {
            if let Some(n) = a.node {
                env.set_clock(n, 0)?;
            }
        }
        Fault::Replace { .. } => {
            membership::restore(&env, MEMBERSHIP_LIMIT).await?;
        }
        Fault::Slow { .. } => env.mesh.set_delay_all(Duration::ZERO),
    }
    Ok(())
}

/// Undoes everything any fault may have left: restarts dead nodes, resumes paused ones, heals links, lights
/// every member cluster, resets clocks and makes every node a voter again. Errors are collected, not fatal.
pub async fn heal_everything(env: &Mutex<Env>) -> Vec<String> {
    let mut env = env.lock().await;
    let mut errors = Vec::new();
    env.mesh.heal_all();
    env.mesh.set_delay_all(Duration::ZERO);
    for i in 0..env.nodes.len() {
        if let Err(e) = env.resume_node(i) {
            errors.push(format!("resume node{}: {e:#}", i + 1));
        }
        if let Err(e) = env.start_node(i) {
            errors.push(format!("start node{}: {e:#}", i + 1));
        }
        if env.nodes[i].clock_file.is_some() {
            if let Err(e) = env.set_clock(i, 0) {
                errors.push(format!("clock node{}: {e:#}", i + 1));
            }
        }
    }
    for c in 0..env.sims.len() {
        if let Err(e) = env.set_dark(c, false).await {
            errors.push(format!("light {}: {e:#}", env.sims[c].name));
        }
    }
    if env.membership_changed() {
        // A promotion that failed in its window is retried here; the run then ends with three voters.
        if let Err(e) = membership::restore(&env, Duration::from_secs(90)).await {
            errors.push(format!("membership: {e:#}"));
        }
    }
    // Give a restarted node a moment before callers start polling it.
    drop(env);
    tokio::time::sleep(Duration::from_millis(200)).await;
    errors
}
