//! The `fedraft-jepsen` command. For now it offers `mesh`: run delaying, cuttable TCP proxies between
//! fedraft nodes for scripts such as `deploy/local-3dc.sh`, driven by commands on stdin. The fault-run
//! harness (`run`) builds on the same library.

use std::io::BufRead;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use fedraft_jepsen::Mesh;

#[derive(Parser)]
#[command(name = "fedraft-jepsen", about = "Fault injection for fedraft")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().context("start the async runtime")?;
    match cli.command {
        Command::Mesh {
            nodes,
            listen_base,
            delay_ms,
        } => runtime.block_on(mesh(nodes, listen_base, delay_ms)),
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
