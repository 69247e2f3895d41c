//! `fedraft bench fleet`: three fedraft nodes (executors on) and a fleet of simulated member
//! clusters in one `fedraft bench fleet-host` process (fedraft-kubesim's fleet host), all on
//! this machine. Phases, in order:
//!
//! 1. register every cluster and wait until all are Ready;
//! 2. converge: write M objects (`fleet_work` mix) with closed-loop clients, then wait until
//!    fedraft reports every object applied and ready everywhere it placed it; then compare each
//!    member's managed objects with fedraft's placement (differences are an error);
//! 3. distribution latency (`fleet_steady`): ConfigMaps at a steady rate, each placed on one of
//!    ten watched clusters; latency = the member's watch event minus the API's acknowledgement;
//! 4. a region goes dark (`fleet_dark`, refused connections): time until fedraft marks all its
//!    clusters NotReady, until every workload that had replicas there has them elsewhere, and
//!    how many replicas left a healthy cluster (should be none); members compared again. A
//!    re-placement that does not come is an error of the report, and the run goes on;
//! 5. the brake (`fleet_brake`): most of the fleet dark at once holds every replica in place;
//! 6. one more object: every fault cleared and the fleet converged and settled again, half as
//!    many objects again (`--more-objects`) are written and converge; each node's held memory
//!    before and after, both settled, gives what one more object costs.
//!
//! Throughout, API write latencies (every PUT) and reads (one GET of an object every 100 ms)
//! are kept per phase, and the CPU time and RSS of every process are sampled at phase ends.
//!
//! Must not: signal any process it did not start, or report a figure without its errors.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures::StreamExt;
use serde_json::Value;
use tokio::process::Command;

pub use super::fleet_args::FleetArgs;
use super::fleet_args::Samples;
use super::fleet_gauges;
use super::fleet_report::{Phase, Report};
use super::fleet_work::{self as work, FedApi, Members, Placed};
use super::procs::{self, Procs};
use super::Via;

/// `fedraft bench fleet-host`: the simulated clusters of a fleet run, in their own process.
#[derive(Debug, clap::Args)]
pub struct FleetHostArgs {
    #[arg(long)]
    pub clusters: u32,
    #[arg(long)]
    pub regions: u32,
    #[arg(long)]
    pub admin_listen: std::net::SocketAddr,
    #[arg(long, default_value_t = 3)]
    pub nodes: u32,
}

/// Runs the fleet host until killed.
pub async fn host(a: FleetHostArgs) -> anyhow::Result<std::process::ExitCode> {
    use fedraft_kubesim::{Fleet, FleetConfig, SimConfig};
    let defaults = FleetConfig::default();
    let fleet = Fleet::start(FleetConfig {
        clusters: a.clusters,
        regions: a.regions,
        admin_listen: Some(a.admin_listen),
        template: SimConfig {
            nodes: a.nodes,
            status_delay: Duration::from_millis(200),
            ..defaults.template.clone()
        },
        ..defaults
    })
    .await
    .context("starting the fleet")?;
    println!("fleet {}", fleet.admin_url().unwrap_or_default());
    super::interrupted().await;
    drop(fleet);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Attempts after the first for one write of the register and convergence phases.
const WRITE_RETRIES: u32 = 10;

pub(super) type Shared = Arc<Mutex<Samples>>;

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads one object every 100 ms until dropped.
async fn read_load(api: FedApi, objects: u64, into: Shared) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut i = 0u64;
    loop {
        tick.tick().await;
        i = (i + 7919) % objects.max(1);
        let (ns, name) = work::object_id(i);
        match api
            .get(&format!("/v1/namespaces/{ns}/objects/{name}"))
            .await
        {
            Ok((took, _)) => lock(&into).reads.push(took),
            // Not written yet early in the convergence phase: a 404 is a read all the same.
            Err(e) if e.to_string().contains("404") => {}
            Err(e) => {
                // Rare, and each one is an error of the run: say which call and why.
                eprintln!("read failed: {e:#}");
                lock(&into).errors += 1;
            }
        }
    }
}

pub async fn run(args: FleetArgs) -> anyhow::Result<std::process::ExitCode> {
    if args.clusters < args.regions * 2 || args.regions < 3 || args.objects == 0 {
        bail!("needs --regions >= 3, at least 2 clusters per region, and some --objects");
    }
    let mut procs = Procs::new(args.keep)?;
    println!("bench directory: {}", procs.path().display());
    let outcome = tokio::select! {
        r = measure(&args, &mut procs) => r.map(Some),
        _ = super::interrupted() => Ok(None),
    };
    procs.stop().await;
    match outcome? {
        Some(report) => {
            let ok = report.errors.is_empty();
            if let Some(path) = &args.json {
                std::fs::write(path, serde_json::to_vec_pretty(&report.to_json())?)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("wrote {}", path.display());
            }
            if let Some(path) = &args.svg {
                std::fs::write(path, super::fleet_plot::svg(&report))
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("wrote {}", path.display());
            }
            Ok(if ok {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            })
        }
        None => {
            eprintln!("interrupted");
            Ok(std::process::ExitCode::from(130))
        }
    }
}

async fn measure(args: &FleetArgs, procs: &mut Procs) -> anyhow::Result<Report> {
    let bin = match &args.fedraft_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("locating the fedraft binary")?,
    };
    let mut rep = Report::new(args);
    let http = procs::discovery_client()?;

    // The fleet first: fedraft's executors should find their clusters serving.
    let admin_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let admin = format!("http://127.0.0.1:{admin_port}");
    let mut cmd = Command::new(&bin);
    cmd.args(["bench", "fleet-host"])
        .args(["--clusters", &args.clusters.to_string()])
        .args(["--regions", &args.regions.to_string()])
        .args(["--nodes", &args.nodes.to_string()])
        .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")]);
    let started = Instant::now();
    procs.spawn("kubesim-fleet", cmd).await?;
    let fleet_list = loop {
        procs.check_alive()?;
        if let Ok(r) = http.get(format!("{admin}/_fleet/clusters")).send().await {
            if let Ok(v) = r.json::<Value>().await {
                break v;
            }
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("the fleet host did not come up within 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let members = Members::from_fleet(&fleet_list)?;
    rep.note(format!(
        "fleet of {} clusters up in {:.1} s",
        members.clusters.len(),
        started.elapsed().as_secs_f64()
    ));

    // Five probes per failure threshold: a cluster turns NotReady within about a threshold of
    // going dark, and a thousand clusters cost a probe every few milliseconds, not a thousand a
    // second, when the threshold is long.
    let probe_ms = (args.failure_secs * 1000 / 5).max(1000);
    let mut executors = format!(
        "probe_interval_ms = {probe_ms}\nprobe_timeout_ms = 2000\ncapacity_interval_ms = 10000\n\
         resync_period_ms = 120000\nstatus_flush_interval_ms = 500\nbackoff_max_ms = 5000"
    );
    if let Some(ms) = args.owner_lease_ms {
        executors.push_str(&format!("\nowner_lease_ms = {ms}"));
    }
    let fed = procs.start_fedraft(&bin, &executors).await?;
    rep.note(match args.owner_lease_ms {
        Some(0) => "executors on the leader only".to_string(),
        Some(ms) => format!("executors on every node, ownership lease {ms} ms"),
        None => "executors as the server defaults them".to_string(),
    });
    let leader = procs::fedraft_target(&http, &fed.apis, Via::Leader).await?;
    let api = FedApi::new(&leader, &fed.token)?;
    let pids = procs.pids("fedraft");
    let sim_pids = procs.pids("kubesim");
    let gauges = fleet_gauges::scrape(&http, &fed).await;
    rep.sample(Phase::Start, &pids, &sim_pids, procs.path(), gauges);

    // 1. Register.
    let samples: Shared = Shared::default();
    let t = Instant::now();
    let regs: Vec<Value> = members
        .clusters
        .iter()
        .map(|(n, (r, u))| work::registration(n, r, u, args.failure_secs))
        .collect();
    write_all(
        &api,
        regs.into_iter()
            .map(|b| ("/v1/clusters".to_string(), reqwest::Method::POST, b)),
        16,
        &samples,
    )
    .await;
    work::wait_until(Duration::from_secs(600), "every cluster Ready", || async {
        let h = work::cluster_health(&api).await.ok()?;
        let ready = h.values().filter(|s| *s == "Ready").count();
        (ready == members.clusters.len()).then_some(())
    })
    .await?;
    rep.registered_s = t.elapsed().as_secs_f64();
    rep.phase(Phase::Register, &lock(&samples));
    let gauges = fleet_gauges::scrape(&http, &fed).await;
    rep.sample(Phase::Register, &pids, &sim_pids, procs.path(), gauges);
    println!(
        "registered {} clusters, all Ready, in {:.1} s",
        members.clusters.len(),
        rep.registered_s
    );

    // Spread ownership forms one lease after the first renewal, and until then the leader's
    // executors hold every cluster. Measuring across that handover would count the new owners'
    // first listings as convergence and distribution time.
    if args.owner_lease_ms != Some(0) {
        let formed = work::wait_until(Duration::from_secs(120), "ownership spread", || async {
            let owners = work::cluster_owners(&api).await.ok()?;
            (owners.len() == members.clusters.len() && owners.values().all(|o| o != "leader"))
                .then_some(())
        })
        .await;
        match formed {
            Ok(()) => {
                rep.note(format!(
                    "ownership spread over the nodes {:.1} s after registering began",
                    t.elapsed().as_secs_f64()
                ));
                let gauges = fleet_gauges::scrape(&http, &fed).await;
                rep.sample(Phase::Owned, &pids, &sim_pids, procs.path(), gauges);
            }
            Err(e) => rep.note(format!("measuring with leader-only executors: {e:#}")),
        }
    }

    // 2. Converge from empty.
    rep.manifest_bytes = manifest_bytes(&members, args, 0..args.objects);
    let samples: Shared = Shared::default();
    let reader = tokio::spawn(read_load(api.clone(), args.objects, samples.clone()));
    let t = Instant::now();
    let writes = object_writes(&members, args, 0..args.objects);
    let progress = tokio::spawn(track_convergence(api.clone(), args.objects, t, |p| {
        p.converged
    }));
    write_all(&api, writes, args.writers, &samples).await;
    rep.write_s = t.elapsed().as_secs_f64();
    println!(
        "wrote {} objects in {:.1} s ({:.0}/s)",
        args.objects,
        rep.write_s,
        args.objects as f64 / rep.write_s
    );
    let limit = Duration::from_secs(args.converge_timeout_secs);
    let (curve, placed) = match tokio::time::timeout(limit, progress).await {
        Ok(r) => r.context("convergence tracker")??,
        Err(_) => bail!("not converged within {limit:?}"),
    };
    reader.abort();
    rep.converged_s = t.elapsed().as_secs_f64();
    rep.curve = curve;
    rep.phase(Phase::Converge, &lock(&samples));
    let gauges = fleet_gauges::scrape(&http, &fed).await;
    rep.sample(Phase::Converge, &pids, &sim_pids, procs.path(), gauges);
    println!(
        "converged {} objects in {:.1} s",
        placed.len(),
        rep.converged_s
    );
    let member_http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let none = BTreeSet::new();
    let when = "after convergence";
    let placed = check_members(&mut rep, &api, &member_http, &members, &none, when).await?;
    rep.member_objects = placed.values().map(|p| p.placement.len() as u64).sum();
    if args.settle_secs > 0 {
        tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;
        let gauges = fleet_gauges::scrape(&http, &fed).await;
        rep.sample(Phase::Settled, &pids, &sim_pids, procs.path(), gauges);
    }

    // 3. Distribution latency at a steady write rate.
    if args.steady_secs > 0 {
        let samples: Shared = Shared::default();
        let reader = tokio::spawn(read_load(api.clone(), args.objects, samples.clone()));
        let last_region = members.regions.values().last().context("regions")?;
        let watched: Vec<String> = last_region.iter().take(10).cloned().collect();
        let lat = super::fleet_steady::steady(&api, &members, &watched, args, &samples).await?;
        reader.abort();
        rep.distribution = lat;
        rep.phase(Phase::Steady, &lock(&samples));
        let gauges = fleet_gauges::scrape(&http, &fed).await;
        rep.sample(Phase::Steady, &pids, &sim_pids, procs.path(), gauges);
    }

    // 4. A region goes dark.
    if !args.no_dark {
        let samples: Shared = Shared::default();
        let reader = tokio::spawn(read_load(api.clone(), args.objects, samples.clone()));
        let (region, names) = members.regions.iter().next().context("regions")?;
        let limit = Duration::from_secs(args.grace_secs + 600);
        let out = super::fleet_dark::run(&api, &http, &admin, region, names, limit).await?;
        reader.abort();
        rep.dark = out.figures;
        rep.phase(Phase::Dark, &lock(&samples));
        let gauges = fleet_gauges::scrape(&http, &fed).await;
        rep.sample(Phase::Dark, &pids, &sim_pids, procs.path(), gauges);
        let k = &rep.dark;
        match out.stuck {
            Some(why) => {
                println!("{why}");
                rep.errors.push(why);
            }
            None => {
                println!(
                    "region {region} dark: NotReady after {:.1} s, {} workloads re-placed after {:.1} s, {} replicas moved off healthy clusters",
                    k.not_ready_s, k.affected, k.replaced_s, k.moved_from_healthy
                );
                let dark: BTreeSet<String> = names.iter().cloned().collect();
                let when = "after the region went dark";
                let checked =
                    check_members(&mut rep, &api, &member_http, &members, &dark, when).await;
                // Kept as an error of the run: the brake phase still runs, and the report
                // keeps what was measured.
                if let Err(e) = checked {
                    let why = format!("{when}: {e:#}");
                    println!("{why}");
                    rep.errors.push(why);
                }
            }
        }
    }
    // 5. Most of the fleet dark at once: the brake.
    if args.brake_percent > 0 {
        let grace = Duration::from_secs(args.grace_secs);
        let fig = super::fleet_brake::run(&api, &http, &admin, &members, args.brake_percent, grace)
            .await?;
        println!(
            "{} of {} clusters dark at once: brake engaged after {:.1} s, {} replicas moved in {:.0} s held, released {:.1} s after the fault cleared",
            fig.dark, fig.total, fig.engaged_s, fig.moved, fig.held_s, fig.released_s
        );
        rep.brake = Some(fig);
        let gauges = fleet_gauges::scrape(&http, &fed).await;
        rep.sample(Phase::Brake, &pids, &sim_pids, procs.path(), gauges);
    }
    // 6. What one more object costs: more objects onto the healed, settled fleet. A single
    // run's growth over its objects also holds what comes with each cluster's first objects
    // (a watch and a connection per type), whatever their number.
    let more = args.more_objects.unwrap_or(args.objects / 2);
    if more > 0 {
        // Kept as an error of the run: the report keeps what the other phases measured.
        let measured = async {
            let limit = Duration::from_secs(args.converge_timeout_secs);
            let settle = Duration::from_secs(args.settle_secs);
            work::clear_faults(&http, &admin).await?;
            let healed =
                track_convergence(api.clone(), args.objects, Instant::now(), Placed::settled);
            tokio::time::timeout(limit, healed)
                .await
                .context("the fleet did not converge again after the fault phases")??;
            tokio::time::sleep(settle).await;
            let gauges = fleet_gauges::scrape(&http, &fed).await;
            rep.sample(Phase::BeforeMore, &pids, &sim_pids, procs.path(), gauges);
            let (from, to) = (args.objects, args.objects + more);
            rep.more = Some((more, manifest_bytes(&members, args, from..to)));
            let samples: Shared = Shared::default();
            let t = Instant::now();
            write_all(
                &api,
                object_writes(&members, args, from..to),
                args.writers,
                &samples,
            )
            .await;
            // The fleet was sized for the first objects: a few further ones may find their
            // candidate clusters full, and fedraft reports them short rather than placed.
            let progress = track_convergence(api.clone(), to, t, Placed::settled);
            let (_, placed) = tokio::time::timeout(limit, progress)
                .await
                .context("the further objects did not converge")??;
            let short = placed.values().filter(|p| !p.converged).count();
            rep.note(format!(
                "{more} further objects settled in {:.1} s ({short} of all objects short of capacity)",
                t.elapsed().as_secs_f64()
            ));
            rep.phase(Phase::More, &lock(&samples));
            let when = "after the further objects";
            check_members(&mut rep, &api, &member_http, &members, &none, when).await?;
            tokio::time::sleep(settle).await;
            let gauges = fleet_gauges::scrape(&http, &fed).await;
            rep.sample(Phase::More, &pids, &sim_pids, procs.path(), gauges);
            anyhow::Ok(())
        };
        if let Err(e) = measured.await {
            let why = format!("one more object: {e:#}");
            println!("{why}");
            rep.errors.push(why);
        }
    }
    println!("{}", rep.render());
    Ok(rep)
}

/// Compares every member with what fedraft placed once both settled (clusters in `skip`
/// aside), explains any difference and records the check as `when`; answers what was placed.
async fn check_members(
    rep: &mut Report,
    api: &FedApi,
    member_http: &reqwest::Client,
    members: &Members,
    skip: &BTreeSet<String>,
    when: &str,
) -> anyhow::Result<BTreeMap<String, Placed>> {
    let settled =
        super::fleet_members::settled_comparison(api, member_http, members, skip, 3).await?;
    if settled.differences > 0 {
        let (placed, lines) = (&settled.placed, &settled.lines);
        super::fleet_explain::explain(api, member_http, members, placed, lines, 10).await;
    }
    rep.check(when, settled.differences, settled.lines);
    Ok(settled.placed)
}

/// The PUT of each object numbered in `range`: the same objects for the same seed and fleet.
fn object_writes<'a>(
    members: &'a Members,
    args: &'a FleetArgs,
    range: std::ops::Range<u64>,
) -> impl Iterator<Item = (String, reqwest::Method, Value)> + 'a {
    range.map(|i| {
        let (ns, name) = work::object_id(i);
        let body = work::object_body(members, args.seed, i, args.grace_secs);
        let path = format!("/v1/namespaces/{ns}/objects/{name}");
        (path, reqwest::Method::PUT, body)
    })
}

/// Bytes of manifest (template text) of the objects numbered in `range`.
fn manifest_bytes(members: &Members, args: &FleetArgs, range: std::ops::Range<u64>) -> u64 {
    range
        .map(|i| {
            let body = work::object_body(members, args.seed, i, args.grace_secs);
            body["template"].to_string().len() as u64
        })
        .sum()
}

/// Sends every call with `concurrency` in flight, recording latencies and errors.
async fn write_all(
    api: &FedApi,
    calls: impl Iterator<Item = (String, reqwest::Method, Value)>,
    concurrency: usize,
    into: &Shared,
) {
    let mut results = futures::stream::iter(calls)
        .map(|(path, method, body)| {
            let api = api.clone();
            async move {
                // A loaded machine may lose its leader for a moment: retry, and count the
                // retries, rather than leave the object out (convergence would never come).
                let mut attempt = 0u32;
                loop {
                    match api.send(method.clone(), &path, &body).await {
                        Ok(took) => return Ok((Some(took), attempt)),
                        Err(e) if work::created_earlier(&e, &method, attempt) => {
                            return Ok((None, attempt))
                        }
                        Err(_) if attempt < WRITE_RETRIES => {
                            attempt += 1;
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        })
        .buffer_unordered(concurrency.max(1));
    let mut first_error = true;
    while let Some(r) = results.next().await {
        match r {
            Ok((took, retries)) => {
                let mut s = lock(into);
                s.writes.extend(took);
                s.retries += u64::from(retries);
            }
            Err(e) => {
                if first_error {
                    eprintln!("write failed (first of possibly many): {e:#}");
                    first_error = false;
                }
                lock(into).errors += 1;
            }
        }
    }
}

/// Polls namespaces until every one of the `total` objects `is_done`; returns the curve
/// (seconds since `t0`, objects done) and the final view.
async fn track_convergence(
    api: FedApi,
    total: u64,
    t0: Instant,
    is_done: fn(&Placed) -> bool,
) -> anyhow::Result<(Vec<(f64, u64)>, BTreeMap<String, Placed>)> {
    let per_ns = |n: usize| (total + (work::NAMESPACES - n - 1) as u64) / work::NAMESPACES as u64;
    let mut done: BTreeMap<usize, BTreeMap<String, Placed>> = BTreeMap::new();
    let mut partial: BTreeMap<usize, u64> = BTreeMap::new();
    let mut curve = vec![(0.0, 0)];
    loop {
        for n in 0..work::NAMESPACES {
            if done.contains_key(&n) {
                continue;
            }
            let Ok((_, objs)) = work::read_namespace(&api, &format!("fleet-{n:02}")).await else {
                continue;
            };
            let converged = objs.values().filter(|p| is_done(p)).count() as u64;
            if converged == per_ns(n) && objs.len() as u64 == per_ns(n) {
                partial.remove(&n);
                done.insert(n, objs);
            } else {
                partial.insert(n, converged);
            }
        }
        let finished: u64 = done.values().map(|m| m.len() as u64).sum();
        curve.push((
            t0.elapsed().as_secs_f64(),
            finished + partial.values().sum::<u64>(),
        ));
        if done.len() == work::NAMESPACES {
            return Ok((curve, done.into_values().flatten().collect()));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
