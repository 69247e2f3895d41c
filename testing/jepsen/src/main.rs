//! The `fedraft-jepsen` command: `run` is one bounded fault-injection run against real fedraft processes
//! (see `fedraft_jepsen::run`); `mesh` runs delaying, cuttable TCP proxies between nodes, one per ordered
//! pair, driven by commands on stdin, for processes that can be given a per-pair peer table.

use std::io::BufRead;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use fedraft_jepsen::run::env::Binaries;
use fedraft_jepsen::run::{NemesisChoice, RunConfig, WorkloadChoice};
use fedraft_jepsen::{campaign, Mesh};

#[derive(Parser)]
#[command(name = "fedraft-jepsen", about = "Fault injection for fedraft")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// One fault-injection run: three `fedraft server` processes behind cuttable links, three simulated
    /// member clusters, client workers, a seeded nemesis, then every checker. Prints one summary line and
    /// exits 0 only when every checker passed (1 when one failed, 2 when the run could not be carried out).
    Run(RunArgs),
    /// Print the fault schedule a `run` with these arguments would execute (JSON), without starting anything.
    Schedule(RunArgs),
    /// Many bounded runs one after another (seeds `first-seed`, `first-seed + 1`, ...), rotating the
    /// workloads and nemeses; writes `OUT/summary.md` (runs, operations, faults, verdicts, failing seeds with
    /// the command that replays each) after every run. Exits 0 only when every run passed.
    Campaign(CampaignArgs),
    /// Proxy every ordered pair of nodes. Link `a -> b` listens on 127.0.0.1:(listen_base + a * N + b), where
    /// N is the number of nodes; node `a` must dial that port to reach node `b`. Prints one line per link,
    /// then reads commands from stdin: `cut A B`, `isolate N`, `heal`, `delay MS`, `status`, `quit`.
    Mesh {
        /// A node's real peer address, in node order (repeat per node).
        #[arg(long = "node", required = true)]
        nodes: Vec<SocketAddr>,
        /// First listening port; 0 picks ephemeral ports (printed).
        #[arg(long, default_value_t = 0)]
        listen_base: u16,
        /// Latency added per direction on every link, in milliseconds.
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    #[arg(long, value_enum, default_value = "all")]
    workload: WorkloadChoice,
    #[arg(long, value_enum, default_value = "all")]
    nemesis: NemesisChoice,
    /// Seconds of workload and faults; setup and the final checks add at most a few minutes.
    #[arg(long, default_value_t = 60)]
    time_limit: u64,
    /// Seed of the fault schedule and the workers' choices (random when absent; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// Results directory (created; history, verdicts, plot, logs).
    #[arg(long)]
    out: PathBuf,
    /// The fedraft binary (default: next to this one).
    #[arg(long, env = "FEDRAFT_BIN")]
    fedraft_bin: Option<PathBuf>,
    /// The fedraft-kubesim binary (default: next to this one).
    #[arg(long, env = "KUBESIM_BIN")]
    kubesim_bin: Option<PathBuf>,
    /// Client requests over the whole run, at most.
    #[arg(long, default_value_t = 200_000)]
    max_requests: u64,
    /// Client workers per workload.
    #[arg(long, default_value_t = 4)]
    workers: u64,
    /// Largest backward clock step of the clock nemesis, in seconds.
    #[arg(long, default_value_t = 120)]
    max_clock_shift_s: u64,
    /// Largest forward clock leap of the clock nemesis, in seconds.
    #[arg(long, default_value_t = 120)]
    max_clock_leap_s: u64,
    /// How far log time may run ahead of real time before the clock checker fails the run, in ms.
    #[arg(long, default_value_t = 2_000)]
    clock_tolerance_ms: u64,
    /// Member clusters' failure threshold: seconds without heartbeats (in log time) before NotReady.
    #[arg(long, default_value_t = fedraft_jepsen::run::env::FAILURE_THRESHOLD_S)]
    failure_threshold_s: u64,
    /// Seconds member clusters get to converge after healing.
    #[arg(long, default_value_t = 90)]
    converge_limit: u64,
}

#[derive(clap::Args)]
struct CampaignArgs {
    /// Runs to do.
    #[arg(long, default_value_t = 20)]
    runs: u64,
    /// Seed of the first run; run i uses first-seed + i.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Seconds of workload and faults per run.
    #[arg(long, default_value_t = 20)]
    time_limit: u64,
    /// Results directory (created): summary.md and one directory per run.
    #[arg(long)]
    out: PathBuf,
    /// Client workers per workload.
    #[arg(long, default_value_t = 4)]
    workers: u64,
    /// Client requests per run, at most.
    #[arg(long, default_value_t = 200_000)]
    max_requests: u64,
    #[arg(long, env = "FEDRAFT_BIN")]
    fedraft_bin: Option<PathBuf>,
    #[arg(long, env = "KUBESIM_BIN")]
    kubesim_bin: Option<PathBuf>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,fedraft_jepsen=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fedraft-jepsen: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Run(args) => return runtime.block_on(run(args)),
        Command::Campaign(args) => return runtime.block_on(campaign(args)),
        Command::Schedule(args) => print_schedule(args),
        Command::Mesh {
            nodes,
            listen_base,
            delay_ms,
        } => runtime.block_on(mesh(nodes, listen_base, delay_ms)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fedraft-jepsen: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: RunArgs) -> ExitCode {
    let config = match run_config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fedraft-jepsen: {e:#}");
            return ExitCode::from(2);
        }
    };
    tracing::info!(seed = config.seed, out = %config.out.display(), "run starting");
    // Setup, healing, convergence and the final reads are bounded separately; this is the backstop.
    let backstop = config.time_limit + Duration::from_secs(420);
    let seed = config.seed;
    let run = tokio::time::timeout(backstop, fedraft_jepsen::run::run(config));
    // Dropping the run future on a signal drops the environment, which kills every child process.
    let outcome = tokio::select! {
        r = run => r,
        _ = shutdown_signal() => {
            eprintln!("fedraft-jepsen: interrupted (seed {seed}); every process it started is stopped");
            return ExitCode::from(130);
        }
    };
    match outcome {
        Ok(Ok(report)) => {
            println!("{}", report.summary);
            if report.pass {
                ExitCode::SUCCESS
            } else {
                for (name, v) in &report.verdicts {
                    if !v.is_valid() {
                        eprintln!("{name}: {v:?}");
                    }
                }
                ExitCode::from(1)
            }
        }
        Ok(Err(e)) => {
            eprintln!("fedraft-jepsen: run failed (seed {seed}): {e:#}");
            ExitCode::from(2)
        }
        Err(_) => {
            eprintln!("fedraft-jepsen: run exceeded its {backstop:?} backstop (seed {seed})");
            ExitCode::from(2)
        }
    }
}

async fn campaign(a: CampaignArgs) -> ExitCode {
    let setup = || -> Result<(RunConfig, campaign::Plan)> {
        if a.time_limit == 0 {
            bail!("--time-limit must be at least 1 second");
        }
        let faketime = Binaries::faketime_lib().ok();
        let nemeses = campaign::NEMESES
            .into_iter()
            .filter(|n| {
                faketime.is_some() || !matches!(n, NemesisChoice::Clock | NemesisChoice::All)
            })
            .collect();
        let base = RunConfig {
            workload: WorkloadChoice::All,
            nemesis: NemesisChoice::All,
            time_limit: Duration::from_secs(a.time_limit),
            seed: a.first_seed,
            out: a.out.clone(),
            bins: Binaries {
                fedraft: Binaries::locate(a.fedraft_bin.clone(), "FEDRAFT_BIN", "fedraft")?,
                kubesim: Binaries::locate(a.kubesim_bin.clone(), "KUBESIM_BIN", "fedraft-kubesim")?,
                faketime,
            },
            max_requests: a.max_requests,
            max_clock_shift: Duration::from_secs(120),
            max_clock_leap: Duration::from_secs(120),
            clock_tolerance: Duration::from_millis(2_000),
            converge_limit: Duration::from_secs(90),
            workers: a.workers.max(1),
            failure_threshold_s: fedraft_jepsen::run::env::FAILURE_THRESHOLD_S,
        };
        let plan = campaign::Plan {
            runs: a.runs,
            first_seed: a.first_seed,
            nemeses,
            backstop_extra: Duration::from_secs(420),
        };
        Ok((base, plan))
    };
    let (base, plan) = match setup() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fedraft-jepsen: {e:#}");
            return ExitCode::from(2);
        }
    };
    let rows = tokio::select! {
        r = campaign::campaign(&base, &plan) => r,
        _ = shutdown_signal() => {
            eprintln!("fedraft-jepsen: campaign interrupted; {} holds the runs done", base.out.join("summary.md").display());
            return ExitCode::from(130);
        }
    };
    match rows {
        Ok(rows) => {
            println!("{}", base.out.join("summary.md").display());
            if rows
                .iter()
                .all(|r| matches!(r.ending, campaign::Ending::Pass))
            {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("fedraft-jepsen: writing the campaign summary: {e}");
            ExitCode::from(2)
        }
    }
}

fn print_schedule(a: RunArgs) -> Result<()> {
    let seed = a.seed.unwrap_or_default();
    let config = RunConfig {
        workload: a.workload,
        nemesis: a.nemesis,
        time_limit: Duration::from_secs(a.time_limit),
        seed,
        out: a.out,
        bins: Binaries {
            fedraft: PathBuf::new(),
            kubesim: PathBuf::new(),
            faketime: None,
        },
        max_requests: a.max_requests,
        max_clock_shift: Duration::from_secs(a.max_clock_shift_s.max(1)),
        max_clock_leap: Duration::from_secs(a.max_clock_leap_s.max(1)),
        clock_tolerance: Duration::from_millis(a.clock_tolerance_ms),
        converge_limit: Duration::from_secs(a.converge_limit),
        workers: a.workers.max(1),
        failure_threshold_s: a.failure_threshold_s.max(1),
    };
    let windows = fedraft_jepsen::run::planned_schedule(&config)?;
    println!("{}", serde_json::to_string_pretty(&windows)?);
    Ok(())
}

fn run_config(a: RunArgs) -> Result<RunConfig> {
    let fedraft = Binaries::locate(a.fedraft_bin, "FEDRAFT_BIN", "fedraft")?;
    let kubesim = Binaries::locate(a.kubesim_bin, "KUBESIM_BIN", "fedraft-kubesim")?;
    let faketime = if matches!(a.nemesis, NemesisChoice::Clock | NemesisChoice::All) {
        Some(Binaries::faketime_lib()?)
    } else {
        None
    };
    if a.time_limit == 0 {
        bail!("--time-limit must be at least 1 second");
    }
    Ok(RunConfig {
        workload: a.workload,
        nemesis: a.nemesis,
        time_limit: Duration::from_secs(a.time_limit),
        seed: a.seed.unwrap_or_else(rand::random),
        out: a.out,
        bins: Binaries {
            fedraft,
            kubesim,
            faketime,
        },
        max_requests: a.max_requests,
        max_clock_shift: Duration::from_secs(a.max_clock_shift_s.max(1)),
        max_clock_leap: Duration::from_secs(a.max_clock_leap_s.max(1)),
        clock_tolerance: Duration::from_millis(a.clock_tolerance_ms),
        converge_limit: Duration::from_secs(a.converge_limit),
        workers: a.workers.max(1),
        failure_threshold_s: a.failure_threshold_s.max(1),
    })
}

async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

async fn mesh(nodes: Vec<SocketAddr>, listen_base: u16, delay_ms: u64) -> Result<()> {
    let n = nodes.len();
    let port = |from: usize, to: usize| -> u16 {
        if listen_base == 0 {
            0
        } else {
            // Fits in u16: checked before any port is used.
            listen_base + (from * n + to) as u16
        }
    };
    if listen_base != 0 && usize::from(listen_base) + n * n > usize::from(u16::MAX) {
        bail!("listen_base {listen_base} leaves no room for {n} x {n} ports");
    }
    let mesh = Mesh::start_on(&nodes, |f, t| {
        SocketAddr::from((Ipv4Addr::LOCALHOST, port(f, t)))
    })
    .await?;
    mesh.set_delay_all(Duration::from_millis(delay_ms));
    for from in 0..n {
        for (to, addr) in mesh.peer_addrs(from) {
            println!("link {from} -> {to}: {addr} -> {}", nodes[to]);
        }
    }
    println!("ready");

    let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    loop {
        let line = tokio::select! {
            line = rx.recv() => match line { Some(l) => l, None => break },
            _ = tokio::signal::ctrl_c() => break,
        };
        match command(&mesh, &line) {
            Ok(Some(reply)) => println!("{reply}"),
            Ok(None) => break,
            Err(error) => println!("error: {error:#}"),
        }
    }
    Ok(())
}

/// Runs one stdin command; `None` means quit.
fn command(mesh: &Mesh, line: &str) -> Result<Option<String>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| -> Result<usize> {
        words
            .get(i)
            .context("missing argument")?
            .parse()
            .context("not a number")
    };
    match words.first().copied() {
        Some("cut") => mesh.cut_links(&[(num(1)?, num(2)?)])?,
        Some("isolate") => mesh.isolate(num(1)?)?,
        Some("heal") => mesh.heal_all(),
        Some("delay") => mesh.set_delay_all(Duration::from_millis(num(1)? as u64)),
        Some("status") => {}
        Some("quit") | Some("exit") => return Ok(None),
        Some(other) => bail!("unknown command {other:?}"),
        None => return Ok(Some(String::new())),
    }
    Ok(Some(format!("ok; cut links: {:?}", mesh.cut_now())))
}
