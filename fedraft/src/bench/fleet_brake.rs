//! The mass-failure phase of `fedraft bench fleet`: with every cluster Ready again, a share of
//! the fleet (default 60 %) goes dark at once. The failover brake should engage, hold every
//! replica where it is for longer than the grace period, and release once the clusters are
//! back. Measured: time to engage, replicas moved while it held (any cluster, dark or not),
//! time to release after the fault clears.
//!
//! Must not: change the health policy (the bench runs the server's default), or leave a fault
//! in place when it returns without an error.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::json;

use super::fleet_quiet as quiet;
use super::fleet_work::{self as work, FedApi, Members};

/// What the phase measured.
#[derive(Debug, Default, Clone)]
pub struct BrakeFigures {
    /// Clusters darkened at once, and the fleet's size.
    pub dark: u64,
    pub total: u64,
    /// Seconds from the fault until the brake held the fleet.
    pub engaged_s: f64,
    /// Dark clusters reported NotReady when the hold ended.
    pub not_ready: u64,
    /// Seconds the bench kept the fault on after the brake engaged (grace + 10 s).
    pub held_s: f64,
    /// Replicas that left any cluster between the fault and the end of the hold.
    pub moved: u64,
    /// Seconds from clearing the fault until the brake released and every cluster was Ready.
    pub released_s: f64,
    /// Seconds the fleet took to settle before the fault (None: still moving at the limit).
    pub settled_s: Option<f64>,
}

async fn brake_engaged(api: &FedApi) -> anyhow::Result<bool> {
    let (_, doc) = api.get("/v1/admin/health-policy?stale=true").await?;
    Ok(doc.pointer("/brake/fleet").is_some_and(|f| !f.is_null()))
}

async fn all_ready(api: &FedApi) -> bool {
    work::cluster_health(api)
        .await
        .is_ok_and(|h| h.values().all(|s| s == "Ready"))
}

/// Runs the phase: `percent` of the clusters (the first by name, so whole regions first) dark
/// at once, held for `grace` + 10 s after the brake engages, then cleared.
pub async fn run(
    api: &FedApi,
    http: &reqwest::Client,
    admin: &str,
    members: &Members,
    percent: u32,
    grace: Duration,
) -> anyhow::Result<BrakeFigures> {
    work::clear_faults(http, admin).await?;
    work::wait_until(
        Duration::from_secs(300),
        "every cluster Ready again",
        || async { all_ready(api).await.then_some(()) },
    )
    .await?;
    work::wait_until(
        Duration::from_secs(300),
        "no brake before the fault",
        || async { brake_engaged(api).await.is_ok_and(|e| !e).then_some(()) },
    )
    .await?;

    // The previous phase's recovered region may still be taking replicas back; those moves
    // are not the brake's to hold.
    let settled_s = quiet::settle(api, "brake").await;

    let total = members.clusters.len();
    let count = (total * percent as usize).div_ceil(100);
    let dark: BTreeSet<String> = members.clusters.keys().take(count).cloned().collect();
    let before = work::read_all(api).await?;
    let names: Vec<&String> = dark.iter().collect();
    let dark_body =
        json!({"select": {"names": names}, "fault": {"kind": "dark", "mode": "refuse"}});
    work::set_fault(http, admin, &dark_body).await?;
    let t = Instant::now();
    let engaged = work::wait_until(Duration::from_secs(120), "the brake engaged", || async {
        brake_engaged(api).await.unwrap_or(false).then_some(())
    })
    .await;
    let mut fig = BrakeFigures {
        dark: count as u64,
        total: total as u64,
        engaged_s: t.elapsed().as_secs_f64(),
        settled_s,
        ..BrakeFigures::default()
    };
    if let Err(e) = engaged {
        work::clear_faults(http, admin).await?;
        return Err(e);
    }
    let hold = Instant::now();
    tokio::time::sleep(grace + Duration::from_secs(10)).await;
    fig.held_s = hold.elapsed().as_secs_f64();
    let after = work::read_all(api).await?;
    let health = work::cluster_health(api).await.unwrap_or_default();
    fig.not_ready = dark
        .iter()
        .filter(|c| health.get(*c).is_some_and(|s| s != "Ready"))
        .count() as u64;
    fig.moved = work::moved_from_healthy(&before, &after, &BTreeSet::new());
    if fig.moved > 0 {
        quiet::print_moved(
            api,
            "brake: moved while held",
            &before,
            &after,
            &BTreeSet::new(),
        )
        .await;
    }

    work::clear_faults(http, admin).await?;
    let t = Instant::now();
    work::wait_until(Duration::from_secs(300), "the brake released", || async {
        (brake_engaged(api).await.is_ok_and(|e| !e) && all_ready(api).await).then_some(())
    })
    .await?;
    fig.released_s = t.elapsed().as_secs_f64();
    Ok(fig)
}
