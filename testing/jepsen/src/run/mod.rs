//! `fedraft-jepsen run`: one bounded fault-injection run against real processes. It starts the system
//! (`env`), runs client workers (`workload`) while executing a seeded nemesis schedule (`faults`) and
//! sampling log time, state hashes and cluster health (`monitor`), heals everything, waits for convergence
//! and agreement (`finish`), runs every checker and writes the results directory. Every process it started
//! is killed when the run ends, fails or panics (`procs::Proc` kills on drop).
//!
//! The rollout workload (`--workload rollout`) adds a sampler of what the members run (`floor`) and the
//! floor checker, fed with the audit's rollout steps after the run.
//!
//! Results directory: `history.jsonl`, `verdicts.json` (every checker) and `verdict-<checker>.json`,
//! `schedule.json` (planned and applied faults), `samples.json`, `latency.svg`, `logs/` (every process), the
//! node configs. Data directories are removed after a passing run and kept after a failing one.

pub mod api;
pub mod env;
pub mod faults;
pub mod finish;
pub mod floor;
pub mod membership;
pub mod monitor;
pub mod procs;
pub mod rollout;
pub mod workload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use tokio::sync::Mutex;

use crate::check::agreement::check_agreement;
use crate::check::clock::{check_clock, ClockCheck, DarkWindow};
use crate::check::floor::FloorCheck;
use crate::check::leadership::{check_leadership, terms_seen};
use crate::check::register::{check_registers, RegisterCheck};
use crate::check::set::check_sets;
use crate::check::{convergence, Verdict};
use crate::history::{write_jsonl, Outcome};
use crate::nemesis::{self, NemesisConfig, NemesisKind};
use crate::plot::{latency_svg, Shade};
use env::{Binaries, Env, CLUSTERS, SUCCESS_THRESHOLD_S};
use workload::FAILOVER_GRACE_S;
use workload::{Kind, Recorder};

/// The bound on leadership changes under slow links: latency below a fifth of the shortest election
/// timeout (`nemesis::SLOW_DELAY_MS`) must cause no election; one is allowed for a stall of the loaded
/// machine.
pub const SLOW_MAX_TERM_CHANGES: usize = 1;

/// Which workloads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadChoice {
    Register,
    Set,
    /// Register and set.
    All,
    /// A Deployment-like object under progressive rollouts and drains, judged by the floor checker.
    Rollout,
}

/// Which nemeses the schedule draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NemesisChoice {
    Kill,
    Pause,
    Partition,
    MemberDark,
    Clock,
    /// Replace-a-node membership changes, with kills and partitions between them.
    Membership,
    /// Slow peer links (latency on every link); judged also on leadership stability.
    Slow,
    All,
    /// No faults (a baseline).
    None,
}

impl NemesisChoice {
    fn kinds(self) -> Vec<NemesisKind> {
        match self {
            NemesisChoice::Kill => vec![NemesisKind::Kill],
            NemesisChoice::Pause => vec![NemesisKind::Pause],
            NemesisChoice::Partition => vec![NemesisKind::Partition],
            NemesisChoice::MemberDark => vec![NemesisKind::MemberDark],
            NemesisChoice::Clock => vec![NemesisKind::Clock],
            NemesisChoice::Slow => vec![NemesisKind::Slow],
            NemesisChoice::Membership => vec![
                NemesisKind::Membership,
                NemesisKind::Kill,
                NemesisKind::Partition,
            ],
            NemesisChoice::All => vec![
                NemesisKind::Kill,
                NemesisKind::Pause,
                NemesisKind::Partition,
                NemesisKind::MemberDark,
                NemesisKind::Clock,
            ],
            NemesisChoice::None => vec![],
        }
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub workload: WorkloadChoice,
    pub nemesis: NemesisChoice,
    /// Length of the fault and workload phase; setup and the final checks come on top (bounded too).
    pub time_limit: Duration,
    pub seed: u64,
    pub out: PathBuf,
    pub bins: Binaries,
    /// Client requests over the whole run, at most.
    pub max_requests: u64,
    /// Largest backward step and forward leap the clock nemesis draws.
    pub max_clock_shift: Duration,
    pub max_clock_leap: Duration,
    /// How far log time may run ahead of real time.
    pub clock_tolerance: Duration,
    /// How long member clusters get to converge after healing.
    pub converge_limit: Duration,
    /// Client workers per workload.
    pub workers: u64,
    /// Member clusters' failure threshold (seconds without heartbeats in log time before NotReady).
    pub failure_threshold_s: u64,
}

/// The outcome of a run.
#[derive(Debug)]
pub struct Report {
    pub verdicts: BTreeMap<&'static str, Verdict>,
    pub summary: String,
    pub pass: bool,
    /// Operations the clients recorded, and faults the nemesis applied.
    pub operations: u64,
    pub faults: u64,
}

fn nemesis_config(cfg: &RunConfig) -> NemesisConfig {
    let run_length = cfg.time_limit.saturating_sub(Duration::from_secs(2));
    let mut n = NemesisConfig::three_nodes(cfg.nemesis.kinds(), run_length);
    n.max_clock_shift = cfg.max_clock_shift;
    n.max_clock_leap = cfg.max_clock_leap;
    n.member_clusters = CLUSTERS.len();
    if cfg.time_limit < Duration::from_secs(60) {
        // Short runs (CI): more, shorter faults, so each nemesis is exercised at least twice.
        n.fault_length = (Duration::from_secs(3), Duration::from_secs(6));
        n.quiet_length = (Duration::from_secs(3), Duration::from_secs(5));
    }
    // Dark long enough to pass the failure threshold and the failover grace, so replicas really move.
    let dark = cfg.failure_threshold_s + 4;
    n.dark_length = (Duration::from_secs(dark), Duration::from_secs(dark + 4));
    n
}

/// The fault windows a run with `cfg` executes.
pub fn planned_schedule(cfg: &RunConfig) -> Result<Vec<nemesis::Window>> {
    Ok(if cfg.nemesis == NemesisChoice::None {
        Vec::new()
    } else {
        nemesis::schedule(cfg.seed, &nemesis_config(cfg))?
    })
}

/// Runs everything; `Err` only when the environment could not be set up or the results not written.
pub async fn run(cfg: RunConfig) -> Result<Report> {
    std::fs::create_dir_all(&cfg.out).with_context(|| format!("creating {}", cfg.out.display()))?;
    let windows = planned_schedule(&cfg)?;
    tracing::info!(windows = windows.len(), seed = cfg.seed, "schedule drawn");
    let request_timeout = Duration::from_secs(5);
    let env = Env::start(
        &cfg.out,
        cfg.bins.clone(),
        request_timeout,
        cfg.failure_threshold_s,
    )
    .await?;
    let api = env.api.clone();
    let sims: Vec<(String, String)> = env
        .sims
        .iter()
        .map(|s| (s.name.clone(), s.url.clone()))
        .collect();
    let env = Arc::new(Mutex::new(env));

    let start = Instant::now();
    let start_wall_ms = monitor::wall_ms();
    let stop_at = start + cfg.time_limit;
    let rec = Recorder::new(start, cfg.max_requests);
    let now_ns = {
        let rec = rec.clone();
        move || rec.now_ns()
    };
    let samples = Arc::new(StdMutex::new(monitor::Samples::default()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    let monitor = tokio::spawn(monitor::run(
        api.clone(),
        samples.clone(),
        now_ns.clone(),
        Duration::from_millis(500),
        stop_rx.clone(),
    ));

    let rollouts = cfg.workload == WorkloadChoice::Rollout;
    let floor_samples = Arc::new(StdMutex::new(Vec::new()));
    let mut floor_sampler = None;
    if rollouts {
        floor_sampler = Some(tokio::spawn(floor::run(
            api.clone(),
            sims.clone(),
            floor_samples.clone(),
            now_ns.clone(),
            Duration::from_millis(250),
            stop_rx.clone(),
        )));
        workers.push(tokio::spawn(rollout::roller(
            cfg.seed,
            api.clone(),
            rec.clone(),
            stop_at,
            CLUSTERS.to_vec(),
        )));
        workers.push(tokio::spawn(rollout::drainer(
            cfg.seed,
            api.clone(),
            rec.clone(),
            stop_at,
            CLUSTERS.to_vec(),
        )));
    }
    let mut kinds = Vec::new();
    if matches!(cfg.workload, WorkloadChoice::Register | WorkloadChoice::All) {
        kinds.push(Kind::Register);
    }
    if matches!(cfg.workload, WorkloadChoice::Set | WorkloadChoice::All) {
        kinds.push(Kind::Set);
    }
    for (k, kind) in kinds.iter().enumerate() {
        for w in 0..cfg.workers {
            workers.push(tokio::spawn(workload::worker(
                *kind,
                k as u64 * 100 + w,
                cfg.seed,
                api.clone(),
                rec.clone(),
                stop_at,
                CLUSTERS.to_vec(),
            )));
        }
    }
    let applied = faults::execute(&env, &windows, start, stop_at).await;
    for w in workers {
        let _ = w.await;
    }
    let workload_end_ns = rec.now_ns();
    let heal_errors = faults::heal_everything(&env).await;
    let leader_after = env.lock().await.wait_leader(Duration::from_secs(60)).await;
    if kinds.contains(&Kind::Set) {
        workload::final_set_read(&api, &rec, Duration::from_secs(30)).await;
    }
    if rollouts {
        // A drain the deadline left in place would keep a member empty for good.
        rollout::uncordon_all(&api, &rec, &CLUSTERS, Duration::from_secs(30)).await;
    }
    let final_from_ns = rec.now_ns();
    let (last_diff, waited_ms, objects) = finish::converge(&api, &sims, cfg.converge_limit).await;
    let settled = finish::settle_states(&api, now_ns.clone(), Duration::from_secs(20)).await;
    let _ = stop_tx.send(true);
    let _ = monitor.await;
    if let Some(f) = floor_sampler {
        let _ = f.await;
    }
    let cluster_names: Vec<String> = CLUSTERS.iter().map(|c| c.to_string()).collect();
    let rolled = if rollouts {
        Some(floor::rolled_out(&api, &cluster_names, start_wall_ms).await)
    } else {
        None
    };
    let end_ns = rec.now_ns();
    env.lock().await.stop_all();

    let history = rec.take();
    let (mut states, health, terms) = match samples.lock() {
        Ok(mut s) => (
            std::mem::take(&mut s.states),
            std::mem::take(&mut s.health),
            std::mem::take(&mut s.terms),
        ),
        Err(_) => (Vec::new(), Vec::new(), Vec::new()),
    };
    states.extend(settled);

    let mut verdicts: BTreeMap<&'static str, Verdict> = BTreeMap::new();
    if let Err(e) = &leader_after {
        verdicts.insert(
            "recovery",
            Verdict::Invalid {
                description: format!("after healing: {e:#}"),
            },
        );
    }
    if kinds.contains(&Kind::Register) {
        let limits = RegisterCheck {
            version_bumps: true,
            ..RegisterCheck::default()
        };
        let v = match check_registers(&history, &limits) {
            Ok((v, _)) => v,
            Err(e) => Verdict::Unknown {
                reason: format!("history unusable: {e}"),
            },
        };
        verdicts.insert("linearizable", v);
    }
    if kinds.contains(&Kind::Set) {
        let (v, reports) = check_sets(&history);
        write_json(&cfg.out.join("set-report.json"), &json!(reports))?;
        verdicts.insert("set", v);
    }
    verdicts.insert(
        "convergence",
        convergence::verdict(&last_diff, waited_ms, objects),
    );
    verdicts.insert("agreement", check_agreement(&states, 3, final_from_ns));
    let dark: Vec<DarkWindow> = applied
        .iter()
        .filter_map(|a| {
            Some(DarkWindow {
                cluster: CLUSTERS.get(a.cluster?)?.to_string(),
                start_ns: a.start_ns,
                end_ns: a.end_ns,
            })
        })
        .collect();
    let clock_limits = ClockCheck {
        max_ahead_ms: cfg.clock_tolerance.as_millis() as u64,
        // NotReady may linger: success threshold of heartbeats, probes and replication, on a loaded machine.
        recovery_ns: Duration::from_secs(SUCCESS_THRESHOLD_S + 10).as_nanos() as u64,
    };
    verdicts.insert("clock", check_clock(&states, &health, &dark, &clock_limits));
    let floor_samples = floor_samples
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    let mut floor_doc = None;
    if let Some(rolled) = &rolled {
        let limits = FloorCheck {
            floor: u64::from(rollout::REPLICAS - rollout::ALLOWED_UNAVAILABLE),
            // Past a dark window: the failover grace and the time the re-placed replicas take to
            // report ready on a loaded machine. Dark windows outlast the failure threshold and the
            // grace (`nemesis_config`), so failover has started before one ends.
            excuse_ns: Duration::from_secs(FAILOVER_GRACE_S + 8).as_nanos() as u64,
            skew_ns: cfg.clock_tolerance.max(Duration::from_secs(1)).as_nanos() as u64,
        };
        let (v, doc) = floor::judge(&floor_samples, &dark, rolled, &limits);
        verdicts.insert("floor", v);
        floor_doc = Some(doc);
    }
    if cfg.nemesis == NemesisChoice::Slow {
        verdicts.insert(
            "leadership",
            check_leadership(&terms, SLOW_MAX_TERM_CHANGES),
        );
    }
    let pass = verdicts.values().all(Verdict::is_valid) && heal_errors.is_empty();

    // Results.
    let file =
        std::fs::File::create(cfg.out.join("history.jsonl")).context("creating history.jsonl")?;
    write_jsonl(std::io::BufWriter::new(file), &history)?;
    for (name, v) in &verdicts {
        write_json(&cfg.out.join(format!("verdict-{name}.json")), &json!(v))?;
    }
    if let Some(doc) = &floor_doc {
        write_json(&cfg.out.join("verdict-floor.json"), doc)?;
    }
    let count = |f: fn(&Outcome) -> bool| history.iter().filter(|o| f(&o.outcome)).count();
    let (ok, fail, info) = (
        count(|o| matches!(o, Outcome::Ok { .. })),
        count(|o| matches!(o, Outcome::Fail { .. })),
        count(|o| matches!(o, Outcome::Info { .. })),
    );
    write_json(
        &cfg.out.join("verdicts.json"),
        &json!({
            "pass": pass,
            "seed": cfg.seed,
            "workload": format!("{:?}", cfg.workload),
            "nemesis": format!("{:?}", cfg.nemesis),
            "timeLimitS": cfg.time_limit.as_secs(),
            "operations": {"total": history.len(), "ok": ok, "fail": fail, "info": info},
            "faults": applied.len(),
            "termsSeen": terms_seen(&terms),
            "healErrors": heal_errors,
            "workloadEndS": workload_end_ns as f64 / 1e9,
            "endS": end_ns as f64 / 1e9,
            "verdicts": verdicts,
        }),
    )?;
    write_json(
        &cfg.out.join("schedule.json"),
        &json!({"planned": windows, "applied": applied}),
    )?;
    write_json(
        &cfg.out.join("samples.json"),
        &json!({"states": states, "health": health, "terms": terms, "floor": floor_samples}),
    )?;
    let shades: Vec<Shade> = applied
        .iter()
        .map(|a| Shade {
            start_s: a.start_ns as f64 / 1e9,
            end_s: a.end_ns as f64 / 1e9,
            kind: a.kind.to_string(),
        })
        .collect();
    let title = format!(
        "fedraft-jepsen: workload {:?}, nemesis {:?}, seed {}",
        cfg.workload, cfg.nemesis, cfg.seed
    );
    if let Err(e) = latency_svg(&cfg.out.join("latency.svg"), &history, &shades, &title) {
        tracing::warn!(error = %e, "latency plot not written");
    }
    if pass {
        // RocksDB directories are large and prove nothing once every checker passed.
        let _ = std::fs::remove_dir_all(cfg.out.join("data"));
    }
    let parts: Vec<String> = verdicts
        .iter()
        .map(|(k, v)| {
            let word = match v {
                Verdict::Valid => "valid",
                Verdict::Invalid { .. } => "INVALID",
                Verdict::Unknown { .. } => "unknown",
            };
            format!("{k}={word}")
        })
        .collect();
    let summary = format!(
        "{} seed={} workload={:?} nemesis={:?} ops={} (ok {ok}, fail {fail}, info {info}) faults={} {} out={}",
        if pass { "PASS" } else { "FAIL" },
        cfg.seed,
        cfg.workload,
        cfg.nemesis,
        history.len(),
        applied.len(),
        parts.join(" "),
        cfg.out.display()
    );
    Ok(Report {
        verdicts,
        summary,
        pass,
        operations: history.len() as u64,
        faults: applied.len() as u64,
    })
}

fn write_json(path: &std::path::Path, value: &serde_json::Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("encoding JSON")?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}
