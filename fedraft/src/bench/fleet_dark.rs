//! The dark-region phase of `fedraft bench fleet`: the first region's clusters refuse every
//! connection. Measured: time until fedraft holds all of them NotReady, time until every
//! workload that had replicas there has all its replicas elsewhere, and how many replicas left a
//! healthy cluster meanwhile (should be none).
//!
//! The wait looks at the replicas placed on the dark clusters (`GET /v1/placement/clusters`)
//! every 250 ms and reads every object only to confirm: a full read of a large fleet takes
//! seconds and loads the leader whose re-placement it times.
//!
//! While it waits for the re-placement it prints where it stands every 30 s (workloads still on
//! the dark region, workloads short of their replicas, replicas moved off healthy clusters,
//! other clusters NotReady), and a wait that runs out returns that breakdown with the figures
//! measured so far instead of failing the run: the report keeps them, and the phases after it
//! still run.
//!
//! Must not: clear the fault (the brake phase starts by clearing every fault, and the bench's
//! end stops the fleet host).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::json;

use super::fleet_quiet as quiet;
use super::fleet_report::Dark;
use super::fleet_work::{self as work, FedApi, Placed};

/// How often the re-placement wait says where it stands.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// How often the re-placement wait looks at the replicas placed on the dark clusters.
const POLL_EVERY: Duration = Duration::from_millis(250);

/// What the phase found.
pub struct DarkOutcome {
    pub figures: Dark,
    /// Why the re-placement was not reached, with the breakdown at the end of the wait.
    pub stuck: Option<String>,
}

/// Where the re-placement stands.
#[derive(Debug, Default, PartialEq)]
struct Progress {
    /// Affected workloads that still have replicas placed on a dark cluster.
    on_dark: usize,
    /// Affected workloads whose placed replicas do not add up to the desired count.
    short: usize,
    /// Replicas that left a healthy cluster since the fault.
    moved_from_healthy: u64,
    /// A few of the workloads not yet re-placed: "ns/name desired D placed {c: r, ..}".
    examples: Vec<String>,
}

impl Progress {
    fn of(
        affected: &[&String],
        before: &BTreeMap<String, Placed>,
        now: &BTreeMap<String, Placed>,
        dark: &BTreeSet<String>,
    ) -> Progress {
        let mut p = Progress {
            moved_from_healthy: work::moved_from_healthy(before, now, dark),
            ..Progress::default()
        };
        for id in affected {
            let Some(o) = now.get(*id) else {
                continue;
            };
            let on_dark = o.placement.keys().any(|c| dark.contains(c));
            let short = o.desired != Some(o.placement.values().sum());
            p.on_dark += usize::from(on_dark);
            p.short += usize::from(short);
            if (on_dark || short) && p.examples.len() < 3 {
                p.examples.push(format!(
                    "{id} desired {} placed {:?}",
                    o.desired.unwrap_or(0),
                    o.placement
                ));
            }
        }
        p
    }

    fn done(&self) -> bool {
        self.on_dark == 0 && self.short == 0
    }

    fn describe(&self, affected: usize, not_ready_elsewhere: Option<usize>) -> String {
        let elsewhere = not_ready_elsewhere.map_or("unknown".to_string(), |n| n.to_string());
        format!(
            "{} of {affected} workloads still on the dark region, {} short of their replicas, \
             {} replicas moved off healthy clusters, {elsewhere} clusters outside the region NotReady; \
             e.g. {}",
            self.on_dark,
            self.short,
            self.moved_from_healthy,
            self.examples.join("; ")
        )
    }
}

/// Clusters outside `dark` that fedraft does not hold Ready.
async fn not_ready_elsewhere(api: &FedApi, dark: &BTreeSet<String>) -> Option<usize> {
    let health = work::cluster_health(api).await.ok()?;
    Some(
        health
            .iter()
            .filter(|(c, h)| !dark.contains(*c) && h.as_str() != "Ready")
            .count(),
    )
}

/// Replicas fedraft has placed on the `dark` clusters, summed (None if unreadable): one pass
/// over the state on the server and a short answer, where reading every object is neither.
async fn dark_replicas(api: &FedApi, dark: &BTreeSet<String>) -> Option<u64> {
    let (_, body) = api.get("/v1/placement/clusters?stale=true").await.ok()?;
    let replicas = body.get("replicas")?.as_object()?;
    Some(
        replicas
            .iter()
            .filter(|(c, _)| dark.contains(*c))
            .filter_map(|(_, n)| n.as_u64())
            .sum(),
    )
}

/// Runs the phase on `region` (its clusters `names`); the re-placement may take `limit`.
pub async fn run(
    api: &FedApi,
    http: &reqwest::Client,
    admin: &str,
    region: &str,
    names: &[String],
    limit: Duration,
) -> anyhow::Result<DarkOutcome> {
    let dark: BTreeSet<String> = names.iter().cloned().collect();
    // The steady phase's last writes may still be placing; their moves are not the fault's.
    quiet::settle(api, &format!("region {region}")).await;
    let before = work::read_all(api).await?;
    let body =
        json!({"select": {"regions": [region]}, "fault": {"kind": "dark", "mode": "refuse"}});
    work::set_fault(http, admin, &body).await?;
    let t = Instant::now();
    work::wait_until(
        Duration::from_secs(300),
        "the dark region NotReady",
        || async {
            let h = work::cluster_health(api).await.ok()?;
            dark.iter()
                .all(|c| h.get(c).is_some_and(|s| s != "Ready"))
                .then_some(())
        },
    )
    .await?;
    let mut figures = Dark {
        not_ready_s: t.elapsed().as_secs_f64(),
        replaced_s: f64::NAN,
        ..Dark::default()
    };
    // Printed now: the re-placement below may not come, and this figure is one all the same.
    println!(
        "region {region} dark: NotReady after {:.1} s; waiting for re-placement",
        figures.not_ready_s
    );
    let affected: Vec<&String> = before
        .iter()
        .filter(|(_, p)| p.desired.is_some() && p.placement.keys().any(|c| dark.contains(c)))
        .map(|(id, _)| id)
        .collect();
    figures.affected = affected.len() as u64;

    let deadline = Instant::now() + limit;
    let mut next_report = Instant::now() + PROGRESS_EVERY;
    let mut last = None;
    loop {
        // The cheap look first: reading all objects takes seconds at 100,000 and loads the
        // leader it measures, so the full read only confirms what the replica sums suggest.
        let cleared = dark_replicas(api, &dark).await.is_none_or(|n| n == 0);
        let looked = Instant::now();
        let due = Instant::now() >= next_report;
        if cleared || due {
            if let Ok(now) = work::read_all(api).await {
                let p = Progress::of(&affected, &before, &now, &dark);
                if p.done() {
                    // Placement and shortfall change in one decision, so the objects were
                    // re-placed when the sums said so, not only when the slow read came back.
                    let at = if cleared { looked } else { Instant::now() };
                    figures.replaced_s = at.duration_since(t).as_secs_f64();
                    figures.moved_from_healthy = p.moved_from_healthy;
                    if p.moved_from_healthy > 0 {
                        let phase = format!("region {region} dark: moved off a healthy cluster");
                        quiet::print_moved(api, &phase, &before, &now, &dark).await;
                    }
                    return Ok(DarkOutcome {
                        figures,
                        stuck: None,
                    });
                }
                if due {
                    next_report += PROGRESS_EVERY;
                    let elsewhere = not_ready_elsewhere(api, &dark).await;
                    println!(
                        "region {region} dark, {:.0} s: {}",
                        t.elapsed().as_secs_f64(),
                        p.describe(affected.len(), elsewhere)
                    );
                }
                last = Some(p);
            }
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    let elsewhere = not_ready_elsewhere(api, &dark).await;
    let stuck = match last {
        Some(p) => {
            figures.moved_from_healthy = p.moved_from_healthy;
            format!(
                "region {region} dark: every replica re-placed not within {limit:?}: {}",
                p.describe(affected.len(), elsewhere)
            )
        }
        None => format!("region {region} dark: fedraft's objects unreadable for {limit:?}"),
    };
    Ok(DarkOutcome {
        figures,
        stuck: Some(stuck),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(desired: u64, placement: &[(&str, u64)]) -> Placed {
        Placed {
            kind: "Deployment".into(),
            placement: placement.iter().map(|(c, r)| (c.to_string(), *r)).collect(),
            desired: Some(desired),
            converged: true,
            short: false,
        }
    }

    #[test]
    fn progress_counts_what_is_left_and_what_left_healthy_clusters() {
        let dark: BTreeSet<String> = ["d1".to_string()].into();
        let before: BTreeMap<String, Placed> = [
            ("ns/a".to_string(), placed(2, &[("d1", 1), ("h1", 1)])),
            ("ns/b".to_string(), placed(4, &[("d1", 2), ("h2", 2)])),
            ("ns/c".to_string(), placed(2, &[("h1", 2)])),
        ]
        .into();
        let ids: Vec<String> = vec!["ns/a".into(), "ns/b".into()];
        let affected: Vec<&String> = ids.iter().collect();
        // a re-placed; b still on d1; c (unaffected) lost a replica on a healthy cluster.
        let now: BTreeMap<String, Placed> = [
            ("ns/a".to_string(), placed(2, &[("h1", 2)])),
            ("ns/b".to_string(), placed(4, &[("d1", 2), ("h2", 2)])),
            ("ns/c".to_string(), placed(2, &[("h1", 1), ("h3", 1)])),
        ]
        .into();
        let p = Progress::of(&affected, &before, &now, &dark);
        assert_eq!((p.on_dark, p.short, p.moved_from_healthy), (1, 0, 1));
        assert!(!p.done());
        assert_eq!(p.examples.len(), 1);
        assert!(
            p.examples[0].starts_with("ns/b desired 4"),
            "{:?}",
            p.examples
        );
        assert!(p.describe(2, Some(0)).contains("1 of 2 workloads"));

        // Off the dark region but a replica short: not done either.
        let now: BTreeMap<String, Placed> = [
            ("ns/a".to_string(), placed(2, &[("h1", 2)])),
            ("ns/b".to_string(), placed(4, &[("h2", 3)])),
        ]
        .into();
        let p = Progress::of(&affected, &before, &now, &dark);
        assert_eq!((p.on_dark, p.short), (0, 1));
        let now: BTreeMap<String, Placed> = [
            ("ns/a".to_string(), placed(2, &[("h1", 2)])),
            ("ns/b".to_string(), placed(4, &[("h2", 4)])),
        ]
        .into();
        assert!(Progress::of(&affected, &before, &now, &dark).done());
    }
}
