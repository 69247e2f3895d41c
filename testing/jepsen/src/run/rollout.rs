//! The rollout workload: one Deployment-like object `jepsen-rollout/web`, Divided over every
//! member cluster by equal weights, with a progressive rollout strategy (one cluster per wave, in
//! name order). A roller puts a new template every few seconds, each one a new revision; a drainer
//! drains one member now and then, uncordons it a few seconds later and asks for the workload to
//! be rescheduled, so it spreads over that member again (fedraft never rebalances on its own) and
//! the next drain has replicas to move. Every request goes into the history (`Roll`, `Drain`,
//! `Uncordon`, `Reschedule`) under the same outcome rules as the other workloads
//! (2xx ok, 409 or never sent fail, anything else indeterminate and a new process).
//!
//! It judges nothing: `run::floor` samples what the members run and `check::floor` judges it.
//! It owns the numbers that promise (the desired replicas, and what each member's own rollout may
//! take away), so the floor is stated where the object is written.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{json, Value};

use super::api::Api;
use super::workload::{classify_write, object_body, Recorder};
use crate::history::{Call, Op};

pub const ROLLOUT_NS: &str = "jepsen-rollout";
pub const ROLLOUT_NAME: &str = "web";
/// The history key of every rollout operation.
pub const ROLLOUT_KEY: &str = "rollout";
/// Desired replicas over all members (two per member when all three take part).
pub const REPLICAS: u32 = 6;
/// Replicas one member's own rolling update may take out of service. Zero: each member surges a
/// new pod before it retires an old one, so a template change on a member never lowers its
/// ready count, and a wave (one member) takes nothing away either.
pub const MAX_UNAVAILABLE: u32 = 0;
/// What the rollout strategy allows unavailable over the whole workload: the waves are one
/// member each, and each member allows [`MAX_UNAVAILABLE`].
pub const ALLOWED_UNAVAILABLE: u32 = MAX_UNAVAILABLE;

/// The object body: the register workload's Deployment with `value`, `REPLICAS` replicas, a
/// surge-first rolling update, and a progressive rollout of one member per wave.
pub fn rollout_body(value: u64, clusters: &[&str]) -> Value {
    let mut body = object_body(ROLLOUT_NAME, value, REPLICAS, clusters);
    body["template"]["spec"]["strategy"] = json!({
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": MAX_UNAVAILABLE, "maxSurge": 1},
    });
    body["rollout"] = json!({
        "type": "Progressive",
        "grouping": "clusterOrder",
        "maxConcurrency": {"count": 1},
        "minSuccessSeconds": 1,
    });
    body
}

/// One recorded request of this workload, sent to a random node.
async fn request(
    api: &Api,
    rec: &Recorder,
    rng: &mut StdRng,
    process: u64,
    call: Call,
    (method, path): (Method, &str),
    body: Option<&Value>,
) -> Op {
    let node = rng.random_range(0..api.nodes());
    let invoke_ns = rec.now_ns();
    let reply = api.call(node, method, path, body, &[]).await;
    Op {
        process,
        key: ROLLOUT_KEY.into(),
        invoke_ns,
        complete_ns: rec.now_ns(),
        call,
        outcome: classify_write(&reply),
    }
}

/// Puts the template carrying a fresh value on a random node; records it.
async fn roll(api: &Api, rec: &Recorder, rng: &mut StdRng, process: u64, clusters: &[&str]) -> Op {
    let value = rec.value();
    let body = rollout_body(value, clusters);
    request(
        api,
        rec,
        rng,
        process,
        Call::Roll { value },
        (
            Method::PUT,
            &format!("/v1/namespaces/{ROLLOUT_NS}/objects/{ROLLOUT_NAME}"),
        ),
        Some(&body),
    )
    .await
}

/// Drains (`drain`) or uncordons one member through a random node; records it.
async fn flag(
    api: &Api,
    rec: &Recorder,
    rng: &mut StdRng,
    process: u64,
    cluster: &str,
    drain: bool,
) -> Op {
    let (call, verb) = if drain {
        (
            Call::Drain {
                cluster: cluster.to_string(),
            },
            "drain",
        )
    } else {
        (
            Call::Uncordon {
                cluster: cluster.to_string(),
            },
            "uncordon",
        )
    };
    request(
        api,
        rec,
        rng,
        process,
        call,
        (Method::POST, &format!("/v1/clusters/{cluster}/{verb}")),
        None,
    )
    .await
}

/// Asks for the workload to be placed afresh through a random node; records it.
async fn reschedule(api: &Api, rec: &Recorder, rng: &mut StdRng, process: u64) -> Op {
    request(
        api,
        rec,
        rng,
        process,
        Call::Reschedule,
        (
            Method::POST,
            &format!("/v1/namespaces/{ROLLOUT_NS}/objects/{ROLLOUT_NAME}/reschedule"),
        ),
        None,
    )
    .await
}

/// Records `op`; returns the process to use next (a new one after an indeterminate outcome).
fn push(rec: &Recorder, op: Op, process: u64) -> u64 {
    let indeterminate = op.outcome.is_indeterminate();
    let ok = matches!(op.outcome, crate::history::Outcome::Ok { .. });
    tracing::debug!(call = ?op.call, ok, "rollout workload");
    rec.push(op);
    if indeterminate {
        rec.process()
    } else {
        process
    }
}

/// Puts the object (retrying until a put is ok, so the run has a workload to judge), then a new
/// template every 3-6 s until `deadline` or the budget is spent.
pub async fn roller(
    seed: u64,
    api: Api,
    rec: Arc<Recorder>,
    deadline: Instant,
    clusters: Vec<&'static str>,
) {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(900));
    let mut process = rec.process();
    let mut created = false;
    while Instant::now() < deadline && rec.spend() {
        let op = roll(&api, &rec, &mut rng, process, &clusters).await;
        created |= matches!(op.outcome, crate::history::Outcome::Ok { .. });
        process = push(&rec, op, process);
        let pause = if created {
            Duration::from_millis(rng.random_range(3000..6000))
        } else {
            Duration::from_millis(300)
        };
        tokio::time::sleep_until(tokio::time::Instant::from_std(
            (Instant::now() + pause).min(deadline),
        ))
        .await;
    }
}

/// Drains one member every so often (after 3-6 s), and uncordons it 4-8 s later, then asks for a
/// reschedule; at most one member is drained at a time, and one whose uncordon did not go
/// through is uncordoned first.
pub async fn drainer(
    seed: u64,
    api: Api,
    rec: Arc<Recorder>,
    deadline: Instant,
    clusters: Vec<&'static str>,
) {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(901));
    let mut process = rec.process();
    let mut drained: Option<&str> = None;
    let sleep = |ms: u64| {
        tokio::time::sleep_until(tokio::time::Instant::from_std(
            (Instant::now() + Duration::from_millis(ms)).min(deadline),
        ))
    };
    loop {
        sleep(rng.random_range(3000..6000)).await;
        if Instant::now() >= deadline || !rec.spend() {
            return;
        }
        let cluster = match drained {
            Some(c) => c,
            None => {
                let c = clusters[rng.random_range(0..clusters.len())];
                let op = flag(&api, &rec, &mut rng, process, c, true).await;
                process = push(&rec, op, process);
                // Even a drain that failed or whose outcome is unknown is undone below.
                drained = Some(c);
                sleep(rng.random_range(4000..8000)).await;
                if Instant::now() >= deadline || !rec.spend() {
                    return;
                }
                c
            }
        };
        let op = flag(&api, &rec, &mut rng, process, cluster, false).await;
        let uncordoned = matches!(op.outcome, crate::history::Outcome::Ok { .. });
        process = push(&rec, op, process);
        if uncordoned {
            drained = None;
            if !rec.spend() {
                return;
            }
            let op = reschedule(&api, &rec, &mut rng, process).await;
            process = push(&rec, op, process);
        }
    }
}

/// After healing: uncordons every member (a drain may have been left in place by the deadline)
/// and reschedules the workload over all of them, each request retried until it is ok or
/// `limit` passes. Recorded like the rest.
pub async fn uncordon_all(api: &Api, rec: &Recorder, clusters: &[&str], limit: Duration) {
    let deadline = Instant::now() + limit;
    let mut rng = StdRng::seed_from_u64(0);
    let mut process = rec.process();
    for c in clusters {
        loop {
            let op = flag(api, rec, &mut rng, process, c, false).await;
            let ok = matches!(op.outcome, crate::history::Outcome::Ok { .. });
            process = push(rec, op, process);
            if ok || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    loop {
        let op = reschedule(api, rec, &mut rng, process).await;
        let ok = matches!(op.outcome, crate::history::Outcome::Ok { .. });
        process = push(rec, op, process);
        if ok || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_carries_the_strategy_the_floor_relies_on() {
        let b = rollout_body(7, &["dc1", "dc2", "dc3"]);
        assert_eq!(b["rollout"]["type"], "Progressive");
        assert_eq!(b["rollout"]["maxConcurrency"]["count"], 1);
        assert_eq!(
            b["template"]["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
            0
        );
        assert_eq!(b["template"]["spec"]["replicas"], REPLICAS);
        assert_eq!(b["placement"]["replicas"]["mode"], "Divided");
        assert_eq!(super::super::workload::object_value(&b), Some(7));
    }
}
