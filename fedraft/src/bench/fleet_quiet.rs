//! Before a fault phase of `fedraft bench fleet` reads where every replica is, the fleet must
//! be quiet: the previous phase's work (re-placements queued by a recovered region, objects
//! that want the clusters back) finished. Otherwise a move that was already under way is
//! counted as one the fault caused. Also: naming the replicas a phase saw move, with the
//! decision that moved them, so a nonzero count can be looked into.
//!
//! Must not: change anything in fedraft or the fleet; fail the bench when the fleet does not
//! settle (the phase then runs and says so).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::fleet_gauges::gauge;
use super::fleet_work::{left_healthy, FedApi, Placed};

/// How long a phase waits for the previous phase's moves to finish before it starts anyway.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);

/// How long the replica sums must stay the same to count as quiet.
const STABLE_FOR: Duration = Duration::from_secs(3);

/// How often the wait looks.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// Moved objects a phase names when it counts any.
const NAMED_MOVES: usize = 5;

/// Objects queued for re-placement in the node's applied state (None if unreadable).
async fn reschedules_queued(api: &FedApi) -> Option<f64> {
    let r = api.http.get(format!("{}/metrics", api.base)).send().await;
    gauge(&r.ok()?.text().await.ok()?, "fedraft_reschedules_queued")
}

/// Replicas placed per cluster (None if unreadable).
async fn replica_sums(api: &FedApi) -> Option<Value> {
    let (_, body) = api.get("/v1/placement/clusters?stale=true").await.ok()?;
    body.get("replicas").cloned()
}

/// Waits until nothing is queued for re-placement and the replicas per cluster have not
/// changed for `STABLE_FOR`, at most `SETTLE_LIMIT`. Returns the seconds it took, or None
/// (said under `phase`) when the fleet was still moving at the limit.
pub async fn settle(api: &FedApi, phase: &str) -> Option<f64> {
    let started = Instant::now();
    let mut last: Option<(Value, Instant)> = None;
    while started.elapsed() < SETTLE_LIMIT {
        let queued = reschedules_queued(api).await;
        let sums = replica_sums(api).await;
        match (queued, sums) {
            (Some(0.0), Some(sums)) => match &last {
                Some((was, since)) if *was == sums => {
                    if since.elapsed() >= STABLE_FOR {
                        return Some(started.elapsed().as_secs_f64());
                    }
                }
                _ => last = Some((sums, Instant::now())),
            },
            _ => last = None,
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    println!("{phase}: the fleet still moved after {SETTLE_LIMIT:?}; starting anyway");
    None
}

/// Up to `max` objects whose replicas left a cluster outside `dark` between the two views:
/// (id, "{before} -> {after}").
pub fn moved<'a>(
    before: &'a BTreeMap<String, Placed>,
    after: &BTreeMap<String, Placed>,
    dark: &BTreeSet<String>,
    max: usize,
) -> Vec<(&'a str, String)> {
    before
        .iter()
        .filter_map(|(id, b)| {
            let a = after.get(id)?;
            (left_healthy(b, a, dark) > 0).then(|| {
                (
                    id.as_str(),
                    format!("{:?} -> {:?}", b.placement, a.placement),
                )
            })
        })
        .take(max)
        .collect()
}

/// Prints, under `phase`, the objects [`moved`] names, each with the decision fedraft
/// recorded for it now.
pub async fn print_moved(
    api: &FedApi,
    phase: &str,
    before: &BTreeMap<String, Placed>,
    after: &BTreeMap<String, Placed>,
    dark: &BTreeSet<String>,
) {
    for (id, change) in moved(before, after, dark, NAMED_MOVES) {
        let (ns, name) = id.split_once('/').unwrap_or(("", id));
        let why = match api
            .get(&format!("/v1/namespaces/{ns}/objects/{name}?stale=true"))
            .await
        {
            Ok((_, o)) => format!(
                "decided at {}: {}",
                o.pointer("/status/lastDecision/decidedIndex")
                    .unwrap_or(&Value::Null),
                o.pointer("/status/lastDecision/summary")
                    .and_then(Value::as_str)
                    .unwrap_or("(no summary)")
            ),
            Err(e) => format!("unreadable: {e}"),
        };
        println!("{phase}: {id} {change}; {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(desired: Option<u64>, placement: &[(&str, u64)]) -> Placed {
        Placed {
            kind: "Deployment".into(),
            placement: placement.iter().map(|(c, r)| (c.to_string(), *r)).collect(),
            desired,
            converged: true,
            short: false,
        }
    }

    #[test]
    fn moved_names_replicas_that_left_clusters_outside_the_dark_ones() {
        let dark: BTreeSet<String> = ["d1".to_string()].into();
        let before: BTreeMap<String, Placed> = [
            ("ns/a".to_string(), placed(Some(2), &[("d1", 1), ("h1", 1)])),
            ("ns/b".to_string(), placed(Some(2), &[("h1", 2)])),
            ("ns/c".to_string(), placed(Some(2), &[("h2", 2)])),
            ("ns/d".to_string(), placed(None, &[("h2", 0)])),
        ]
        .into();
        let after: BTreeMap<String, Placed> = [
            // Left the dark cluster only: not counted.
            ("ns/a".to_string(), placed(Some(2), &[("h1", 2)])),
            ("ns/b".to_string(), placed(Some(2), &[("h1", 1), ("h3", 1)])),
            ("ns/c".to_string(), placed(Some(2), &[("h3", 2)])),
            // Not a workload: no replicas to count.
            ("ns/d".to_string(), placed(None, &[("h3", 0)])),
        ]
        .into();
        let all = moved(&before, &after, &dark, 10);
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].0, "ns/b", "{all:?}");
        assert_eq!(all[1].0, "ns/c", "{all:?}");
        assert_eq!(moved(&before, &after, &dark, 1).len(), 1);
    }
}
