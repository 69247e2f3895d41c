//! The `fedraft` binary: one node's server (`fedraft server`), the client verbs that talk to the
//! API (`apply`, `get`, `describe`, `delete`, `cordon`, `uncordon`, `drain`, `watch`), offline
//! scheduling (`schedule`), the load tool (`bench put`), the demo entry point, offline incident
//! analysis of a data directory (`audit`), and the operator tools `certs` (CA and certificates),
//! `backup` (online, through the API) and `restore` (offline, seeds a new cluster's data
//! directories).
//!
//! Start at [`Cli`]: one enum variant per verb, dispatched by one `match` in [`run`]. Exit codes:
//! 0 success; 1 the server refused the request or answered an error (or a demo step failed); 2
//! usage error or a feature that is not built yet; 3 the server could not be reached.

mod admin;
mod apply;
mod audit;
mod backup;
mod bench;
mod certs;
mod client;
mod config;
mod demo;
mod endpoints;
mod output;
mod schedule;
mod server;
mod tls;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::client::{Client, ClientError, ClientOpts};
use crate::output::Format;

/// jemalloc for the Rust side of the process. A server answers thousands of requests a second
/// from many threads, each allocating and freeing short-lived buffers that another thread often
/// frees; glibc's arenas spent about 16 % of a loaded cluster's CPU in `malloc`, `free` and their
/// consolidation (the A/B runs behind this choice are in docs/performance.md). Prefixed on purpose:
/// with jemalloc's unprefixed `malloc`, the process hangs at start under libfaketime, which the
/// fault harness's clock nemesis preloads (even `fedraft --version` never returns). RocksDB's
/// C++ allocations stay with glibc.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(
    name = "fedraft",
    version,
    about = "Raft-replicated federation of Kubernetes clusters"
)]
pub struct Cli {
    #[command(flatten)]
    pub client: ClientOpts,
    #[command(subcommand)]
    pub verb: Verb,
}

/// What `get`, `describe` and `delete` act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Resource {
    #[value(alias = "cluster")]
    Clusters,
    #[value(alias = "object", alias = "federatedobjects")]
    Objects,
    #[value(alias = "tenant")]
    Tenants,
    /// Service discovery views (`get endpoints`, `describe endpoints NS/NAME`).
    #[value(alias = "endpoint", alias = "ep")]
    Endpoints,
}

#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Run a node: `--config node.toml`, or `--dev` for a single-node development cluster.
    Server(server::ServerArgs),
    /// Create or replace every document (Cluster, FederatedObject, Tenant) in a YAML/JSON file.
    Apply {
        /// The file (multi-document YAML or JSON); `-` reads stdin.
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
    },
    /// List clusters, objects or tenants.
    Get {
        resource: Resource,
        /// Only objects in this namespace.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
        /// Serve from the node's local state instead of a linearizable read.
        #[arg(long)]
        stale: bool,
    },
    /// Show one resource in detail: `describe object NS/NAME` or `describe cluster NAME`.
    Describe {
        resource: Resource,
        /// NAME, or NS/NAME for objects.
        name: String,
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// Delete a resource: `delete cluster NAME`, `delete object NS/NAME`, `delete tenant NAME`.
    Delete {
        resource: Resource,
        name: String,
        /// Only if the resource is still at this version.
        #[arg(long)]
        resource_version: Option<u64>,
    },
    /// Stop placing new replicas on a cluster (existing ones stay).
    Cordon { cluster: String },
    /// Undo a cordon or drain.
    Uncordon { cluster: String },
    /// Cordon a cluster and move every replica off it.
    Drain { cluster: String },
    /// Stream events as JSON lines.
    Watch {
        /// Resume after this resource version (default: list then watch).
        #[arg(long)]
        resource_version: Option<u64>,
        /// Cluster, FederatedObject or Tenant.
        #[arg(long)]
        kind: Option<String>,
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Stop after this many events (default: run until interrupted).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Evaluate placement offline (no server): Cluster documents with reported capacity and
    /// current replicas plus one FederatedObject in, the decision record out.
    Schedule {
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// Load tool: PUT small objects at several concurrency levels, against fedraft and etcd.
    Bench {
        #[command(subcommand)]
        what: bench::BenchCmd,
    },
    /// Three nodes and three simulated clusters on loopback, driven through a failover.
    Demo(demo::DemoArgs),
    /// Incident analysis on a (copy of a) node's data directory, offline: replay, diff,
    /// explain, export, verify.
    Audit(audit::AuditArgs),
    /// Create a cluster CA (or reuse the one in --out) and node / client certificates.
    Certs(certs::CertsArgs),
    /// Download an online, consistent backup of the replicated state (admin token).
    Backup(backup::BackupArgs),
    /// Seed the data directories of a NEW cluster from a backup file (offline).
    Restore(backup::RestoreArgs),
    /// This node's raft position (term, leader, indexes) and the state hash.
    Status {
        /// Local state without a quorum round (works on a node that lost quorum).
        #[arg(long)]
        stale: bool,
    },
    /// Raft membership: list, add a learner, set the voters (admin).
    Members {
        #[command(subcommand)]
        cmd: admin::MembersCmd,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    fedraft_raft::install_crypto_provider();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            let code = match e.downcast_ref::<ClientError>() {
                Some(ClientError::Unreachable { .. }) => 3,
                _ => 1,
            };
            eprintln!("error: {e:#}");
            ExitCode::from(code)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let opts = cli.client;
    match cli.verb {
        Verb::Server(args) => server::run(args).await.map(|()| ExitCode::SUCCESS),
        Verb::Apply { file } => apply::run(&Client::new(&opts)?, &file).await,
        Verb::Get {
            resource,
            namespace,
            output,
            stale,
        } => {
            client::get(
                &Client::new(&opts)?,
                resource,
                namespace.as_deref(),
                output,
                stale,
            )
            .await
        }
        Verb::Describe {
            resource,
            name,
            output,
        } => client::describe(&Client::new(&opts)?, resource, &name, output).await,
        Verb::Delete {
            resource,
            name,
            resource_version,
        } => client::delete(&Client::new(&opts)?, resource, &name, resource_version).await,
        Verb::Cordon { cluster } => {
            client::cluster_action(&Client::new(&opts)?, &cluster, "cordon").await
        }
        Verb::Uncordon { cluster } => {
            client::cluster_action(&Client::new(&opts)?, &cluster, "uncordon").await
        }
        Verb::Drain { cluster } => {
            client::cluster_action(&Client::new(&opts)?, &cluster, "drain").await
        }
        Verb::Watch {
            resource_version,
            kind,
            namespace,
            limit,
        } => {
            client::watch(
                &Client::new(&opts)?,
                resource_version,
                kind,
                namespace,
                limit,
            )
            .await
        }
        Verb::Schedule { file, output } => schedule::run(&file, output),
        Verb::Bench { what } => bench::run(what).await,
        Verb::Demo(args) => demo::run(args).await,
        Verb::Audit(args) => audit::run(args),
        Verb::Certs(args) => certs::run(args).map(|()| ExitCode::SUCCESS),
        Verb::Backup(args) => backup::run_backup(&Client::new(&opts)?, &args).await,
        Verb::Restore(args) => backup::run_restore(&args),
        Verb::Status { stale } => admin::status(&Client::new(&opts)?, stale).await,
        Verb::Members { cmd } => admin::members(&Client::new(&opts)?, cmd).await,
    }
}
