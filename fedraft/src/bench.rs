//! `fedraft bench put`: the API write benchmark, fedraft against etcd in one run; and
//! `fedraft bench fleet` (`fleet.rs`): three nodes converging a fleet of simulated clusters.
//!
//! Drives closed-loop PUTs of small objects (256-byte values by default) at several concurrency
//! levels against fedraft's API and the same load against etcd's v3 JSON gateway, with one HTTP
//! client implementation (`load.rs`: two request builders, everything else shared). The targets
//! are A/B interleaved: at each level, rounds alternate fedraft/etcd (and which goes first), so
//! a machine that gets busier or quieter during the run affects both alike.
//!
//! It starts both clusters itself (`procs.rs`: three `fedraft server` processes and three etcd
//! members on loopback, fsync on, in a temporary directory), or attaches to running ones
//! (`--fedraft URL`, `--etcd URL`). Every process it started is killed and reaped, and the
//! directory removed, on success, on error and on Ctrl-C / SIGTERM.
//!
//! Must not: signal any process it did not start, or report a figure without its errors.

mod fleet;
mod fleet_args;
mod fleet_brake;
mod fleet_dark;
mod fleet_explain;
mod fleet_gauges;
mod fleet_members;
mod fleet_plot;
mod fleet_quiet;
mod fleet_report;
mod fleet_steady;
mod fleet_work;
mod load;
mod procs;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use self::load::{System, Target};
use self::procs::Procs;
use self::report::Results;

#[derive(Debug, clap::Subcommand)]
pub enum BenchCmd {
    /// PUT small objects at several client concurrencies against fedraft and etcd.
    Put(PutArgs),
    /// Three nodes and a fleet of simulated member clusters: convergence from empty,
    /// distribution latency, a region going dark, API latency and resources throughout.
    Fleet(fleet::FleetArgs),
    /// The simulated clusters of `bench fleet`, in their own process (started by it).
    #[command(hide = true)]
    FleetHost(fleet::FleetHostArgs),
}

/// Which member of each cluster gets the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    Leader,
    Follower,
}

#[derive(Debug, clap::Args)]
pub struct PutArgs {
    /// Concurrency levels (closed-loop clients), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    pub clients: Vec<usize>,
    /// Rounds per target at each level (targets alternate round by round).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Measured seconds per round.
    #[arg(long, default_value_t = 5.0)]
    pub round_secs: f64,
    /// Unmeasured seconds at the start of every round.
    #[arg(long, default_value_t = 1.0)]
    pub warmup_secs: f64,
    /// Value bytes per put (keys are 8 bytes for etcd, `k` + 8 digits for fedraft).
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,
    /// Distinct keys; writes wrap around and overwrite.
    #[arg(long, default_value_t = 100_000)]
    pub key_space: u64,
    /// Send the load to each cluster's leader or to one of its followers.
    #[arg(long, value_enum, default_value = "leader")]
    pub via: Via,
    /// Attach to this fedraft API (e.g. http://127.0.0.1:8080) instead of starting three nodes.
    #[arg(long, requires = "fedraft_token")]
    pub fedraft: Option<String>,
    /// Bearer token for --fedraft (admin, or a member of the tenant owning --namespace).
    #[arg(long, hide_env_values = true, env = "FEDRAFT_BENCH_TOKEN")]
    pub fedraft_token: Option<String>,
    /// Attach to this etcd client URL instead of starting three members.
    #[arg(long, conflicts_with = "no_etcd")]
    pub etcd: Option<String>,
    /// Measure fedraft alone.
    #[arg(long)]
    pub no_etcd: bool,
    /// The etcd binary to start. When it is not installed (and --etcd is not given) etcd is
    /// skipped with a note.
    #[arg(long, default_value = "etcd")]
    pub etcd_bin: String,
    /// The fedraft binary for the started nodes. Default: this executable.
    #[arg(long)]
    pub fedraft_bin: Option<PathBuf>,
    /// Also load fedraft through its Kubernetes-compatible door (a server-side apply of a
    /// ConfigMap per put, as kubectl sends it), interleaved with the native API.
    #[arg(long)]
    pub door: bool,
    /// Namespace of the objects fedraft gets.
    #[arg(long, default_value = "bench")]
    pub namespace: String,
    /// Also write the result rows as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Keep the temporary directory (data, configs, logs) instead of removing it.
    #[arg(long)]
    pub keep: bool,
}

pub async fn run(cmd: BenchCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        BenchCmd::Put(args) => put(args).await,
        BenchCmd::Fleet(args) => fleet::run(args).await,
        BenchCmd::FleetHost(args) => fleet::host(args).await,
    }
}

async fn put(args: PutArgs) -> anyhow::Result<ExitCode> {
    check_args(&args)?;
    let mut procs = Procs::new(args.keep)?;
    println!("bench directory: {}", procs.path().display());
    let outcome = tokio::select! {
        r = measure(&args, &mut procs) => r.map(Some),
        _ = interrupted() => Ok(None),
    };
    // Whatever happened, nothing this run started outlives it.
    procs.stop().await;
    match outcome? {
        Some(all_ok) => Ok(if all_ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }),
        None => {
            eprintln!("interrupted");
            Ok(ExitCode::from(130))
        }
    }
}

fn check_args(args: &PutArgs) -> anyhow::Result<()> {
    if args.clients.is_empty() || args.clients.contains(&0) {
        bail!("--clients needs positive levels, e.g. 1,16,64");
    }
    if args.rounds == 0
        || args.round_secs.is_nan()
        || args.round_secs <= 0.0
        || args.warmup_secs.is_nan()
        || args.warmup_secs < 0.0
    {
        bail!("--rounds and --round-secs must be positive, --warmup-secs not negative");
    }
    if args.value_size < 16 || args.value_size > 64 * 1024 {
        bail!("--value-size must be 16..=65536 bytes");
    }
    Ok(())
}

async fn interrupted() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

fn etcd_installed(bin: &str) -> bool {
    std::process::Command::new(bin)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts or attaches to the targets, runs the interleaved rounds and prints the table.
/// Ok(false) when some target completed no put at all.
async fn measure(args: &PutArgs, procs: &mut Procs) -> anyhow::Result<bool> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let background = report::busy_cores(Duration::from_secs(1)).await;
    println!(
        "machine: {cpus} CPUs, {} busy before start; fedraft build: {}",
        background.map_or("?".into(), |b| format!("{b:.2}")),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let http = procs::discovery_client()?;
    let value: Vec<u8> = (0..args.value_size).map(|_| rand::random::<u8>()).collect();
    let mut targets = Vec::new();

    let fedraft = match &args.fedraft {
        Some(url) => {
            let token = args
                .fedraft_token
                .clone()
                .context("--fedraft needs --fedraft-token")?;
            (url.trim_end_matches('/').to_string(), token, "attached")
        }
        None => {
            let bin = match &args.fedraft_bin {
                Some(b) => b.clone(),
                None => std::env::current_exe().context("locating the fedraft binary")?,
            };
            let c = procs.start_fedraft(&bin, "enabled = false").await?;
            let url = procs::fedraft_target(&http, &c.apis, args.via).await?;
            (url, c.token, "started here")
        }
    };
    println!("fedraft: {} ({}, via {:?})", fedraft.0, fedraft.2, args.via);
    let mut target = Target::new(
        "fedraft",
        System::Fedraft {
            base: fedraft.0.clone(),
            token: fedraft.1.clone(),
            namespace: args.namespace.clone(),
        },
        &value,
    )?;
    target.pids = procs.pids("fedraft");
    targets.push(target);
    if args.door {
        let mut target = Target::new(
            "door",
            System::Door {
                base: fedraft.0,
                token: fedraft.1,
                namespace: args.namespace.clone(),
            },
            &value,
        )?;
        target.pids = procs.pids("fedraft");
        targets.push(target);
    }

    if let Some(url) = &args.etcd {
        let url = url.trim_end_matches('/').to_string();
        println!("etcd: {url} (attached)");
        targets.push(Target::new("etcd", System::Etcd { base: url }, &value)?);
    } else if args.no_etcd {
        println!("etcd: skipped (--no-etcd)");
    } else if !etcd_installed(&args.etcd_bin) {
        println!(
            "etcd: skipped ({} not found; Debian: apt-get install etcd-server)",
            args.etcd_bin
        );
    } else {
        let urls = procs.start_etcd(&args.etcd_bin).await?;
        let url = procs::etcd_target(&http, &urls, args.via).await?;
        println!("etcd: {url} (started here, via {:?})", args.via);
        let mut target = Target::new("etcd", System::Etcd { base: url }, &value)?;
        target.pids = procs.pids("etcd");
        targets.push(target);
    }

    let targets: Vec<Arc<Target>> = targets.into_iter().map(Arc::new).collect();
    // One put each before timing: a wrong token or URL fails here, with its message.
    for t in &targets {
        t.put(0, 0)
            .await
            .map_err(|e| anyhow::anyhow!("first put to {} failed: {e}", t.name))?;
    }
    let warmup = Duration::from_secs_f64(args.warmup_secs);
    let measure = Duration::from_secs_f64(args.round_secs);
    println!(
        "load: {} rounds x {:.1} s (+{:.1} s warm-up) per target and level, value {} B, {} keys",
        args.rounds, args.round_secs, args.warmup_secs, args.value_size, args.key_space
    );
    let mut results = Results::default();
    let mut first_key = 0u64;
    for &clients in &args.clients {
        for round in 0..args.rounds {
            // Alternate who goes first, so neither always runs on a freshly quiet machine.
            let order: Vec<&Arc<Target>> = if round % 2 == 0 {
                targets.iter().collect()
            } else {
                targets.iter().rev().collect()
            };
            for t in order {
                let r = load::round(
                    t.clone(),
                    clients,
                    warmup,
                    measure,
                    args.key_space,
                    first_key,
                )
                .await?;
                first_key = first_key.wrapping_add(1_000_003);
                println!(
                    "  {:<7} clients={clients:<3} round {}: {:>8.0} puts/s, errors {}",
                    t.name,
                    round + 1,
                    r.latencies_us.len() as f64 / measure.as_secs_f64(),
                    r.errors
                );
                results.add(t.name, clients, r);
            }
        }
    }
    let rows = results.rows();
    println!();
    print!("{}", report::render(&rows));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&rows)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(rows.iter().all(|r| r.puts > 0))
}
