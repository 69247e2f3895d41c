//! The `fedraft` binary: one node's server (`fedraft server`), the client verbs that talk to the
//! API (`apply`, `get`, `describe`, `delete`, `cordon`, `uncordon`, `drain`, `watch`, `join`),
//! the client's contexts (`config`), a kubeconfig for kubectl (`kubeconfig`), shell completions
//! (`completion`), offline scheduling (`schedule`), the load tool (`bench put`), the demo entry
//! point, offline incident analysis of a data directory (`audit`), the operator tools `certs` (CA
//! and certificates), `backup` (online, through the API) and `restore` (offline, seeds a new
//! cluster's data directories), and the replicated user database (`user`, `token`).
//!
//! Start at [`Cli`]: one enum variant per verb, dispatched by one `match` in [`run`]. Exit codes:
//! 0 success; 1 the server refused the request or answered an error (or a demo step failed); 2
//! usage error or a feature that is not built yet; 3 the server could not be reached; 4 (`fedraft
//! server`) the node stopped because a write to its data directory failed.

mod admin;
mod apply;
mod audit;
mod backup;
mod bench;
mod certs;
mod client;
mod config;
mod context;
mod demo;
mod endpoints;
mod executor_lane;
mod get;
mod heap;
mod join;
mod jsonpath;
mod kubeconfig;
mod listen;
mod output;
mod rollout;
mod schedule;
mod selector;
mod server;
mod timefmt;
mod tls;
mod usage;
mod users;
mod verbs;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::client::{Client, ClientError, ClientOpts};
use crate::output::Format;
use crate::usage::UsageError;
use crate::verbs::Resource;

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
    /// List clusters, objects, tenants or endpoints (-n/-A, -l, -w, -o as kubectl has them).
    Get(get::GetArgs),
    /// Show one resource in detail: `describe object NS/NAME` (or NAME with -n) or
    /// `describe cluster NAME`.
    Describe {
        /// What to show: cluster, object, tenant or endpoints.
        resource: Resource,
        /// NAME, or NS/NAME for objects and endpoints.
        name: String,
        /// The namespace when NAME has none (default: the context's namespace).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// table (times as ages), wide (times as RFC 3339), json or yaml.
        #[arg(short = 'o', long, value_enum, default_value = "table")]
        output: Format,
    },
    /// Delete a resource (`delete cluster NAME`, `delete object NS/NAME`, `delete tenant
    /// NAME`) or every document of a file (`delete -f FILE`).
    Delete(verbs::DeleteArgs),
    /// A tenant's work waiting for capacity: its place in the fair order and what it waits for.
    Queue {
        /// The tenant's name.
        tenant: String,
        /// Print the JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Stop placing new replicas on a cluster (existing ones stay).
    Cordon {
        /// The cluster's name.
        cluster: String,
    },
    /// Undo a cordon or drain.
    Uncordon {
        /// The cluster's name.
        cluster: String,
    },
    /// Cordon a cluster and move every replica off it.
    Drain {
        /// The cluster's name.
        cluster: String,
    },
    /// Register a member cluster from a kubeconfig (its credentials travel inline).
    Join(join::JoinArgs),
    /// The client config file's contexts: one per federation.
    Config {
        #[command(subcommand)]
        cmd: context::ConfigCmd,
    },
    /// Print a kubeconfig for kubectl: `fedraft kubeconfig --server URL --token-file F [--ca
    /// CA.pem] > fed.kubeconfig`, then `kubectl --kubeconfig fed.kubeconfig get clusters`.
    Kubeconfig(kubeconfig::KubeconfigArgs),
    /// Print a shell completion script: `source <(fedraft completion bash)`.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Stream events as JSON lines.
    Watch {
        /// Resume after this resource version (default: list then watch).
        #[arg(long)]
        resource_version: Option<u64>,
        /// Cluster, FederatedObject or Tenant.
        #[arg(long)]
        kind: Option<String>,
        /// Only objects in this namespace.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Stop after this many events (default: run until interrupted).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Evaluate placement offline (no server): Cluster documents with reported capacity and
    /// current replicas plus one FederatedObject in, the decision record out.
    Schedule {
        /// Cluster, FederatedObject and optional Scenario documents (YAML or JSON).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// table (ages from the scenario's nowMs), wide (RFC 3339), json or yaml.
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
    /// Member-cluster credentials at rest: re-seal them under the newest key (admin).
    Credentials {
        #[command(subcommand)]
        cmd: admin::CredentialsCmd,
    },
    /// The admission policy: which cluster-scoped kinds admins may federate, the ClusterRoles
    /// tenants may bind, tenant object and byte limits (set: admin).
    Admission {
        #[command(subcommand)]
        cmd: admin::AdmissionCmd,
    },
    /// The failover brake: how many clusters may turn NotReady together before failover pauses,
    /// and where it holds now (set: admin).
    HealthPolicy {
        #[command(subcommand)]
        cmd: admin::HealthPolicyCmd,
    },
    /// Forget an object's placement and schedule it from scratch (fail-back to a recovered
    /// cluster, or a rebalance of one object); prints the placement after it.
    Reschedule {
        /// The object, NS/NAME.
        object: String,
    },
    /// Progressive rollouts: `rollout status NS/NAME [-w]`, `pause`, `resume`, `abort`, `undo`,
    /// `promote`.
    Rollout {
        #[command(subcommand)]
        cmd: rollout::RolloutCmd,
    },
    /// Users and service accounts of the replicated user database (create, set-role, list,
    /// delete; writes: admin).
    User {
        #[command(subcommand)]
        cmd: users::UserCmd,
    },
    /// API tokens of the replicated user database (issue, list, revoke; issue and revoke:
    /// admin). Only a token's hash is stored; `issue` shows its text once.
    Token {
        #[command(subcommand)]
        cmd: users::TokenCmd,
    },
}

/// The client settings typed on the command line itself, for `config set-context` (which
/// must not store what merely sits in the environment).
fn given_flags(m: &ArgMatches, opts: &ClientOpts) -> context::GivenFlags {
    let typed = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    context::GivenFlags {
        server: opts.server.clone().filter(|_| typed("server")),
        token: opts.token.clone().filter(|_| typed("token")),
        ca_file: opts.ca_file.clone().filter(|_| typed("ca_file")),
        cert_file: opts.cert_file.clone().filter(|_| typed("cert_file")),
        key_file: opts.key_file.clone().filter(|_| typed("key_file")),
    }
}

/// Where a global argument ended up: clap records it on the deepest subcommand that was typed.
fn leaf(m: &ArgMatches) -> &ArgMatches {
    match m.subcommand() {
        Some((_, sub)) => leaf(sub),
        None => m,
    }
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let given = given_flags(leaf(&matches), &cli.client);
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
    match rt.block_on(run(cli, given)) {
        Ok(code) => code,
        Err(e) => {
            let code = match e.downcast_ref::<ClientError>() {
                Some(ClientError::Unreachable { .. }) => 3,
                _ if e.downcast_ref::<UsageError>().is_some() => 2,
                _ => 1,
            };
            eprintln!("error: {e:#}");
            ExitCode::from(code)
        }
    }
}

async fn run(cli: Cli, given: context::GivenFlags) -> anyhow::Result<ExitCode> {
    let opts = cli.client;
    match cli.verb {
        Verb::Server(args) => server::run(args).await.map(|()| ExitCode::SUCCESS),
        Verb::Apply { file } => apply::run(&Client::new(&opts)?, &file).await,
        Verb::Get(args) => get::run(&Client::new(&opts)?, args).await,
        Verb::Describe {
            resource,
            name,
            namespace,
            output,
        } => {
            let c = Client::new(&opts)?;
            verbs::describe(&c, resource, &name, namespace.as_deref(), output).await
        }
        Verb::Delete(args) => verbs::delete(&Client::new(&opts)?, args).await,
        Verb::Queue { tenant, json } => verbs::queue(&Client::new(&opts)?, &tenant, json).await,
        Verb::Cordon { cluster } => {
            verbs::cluster_action(&Client::new(&opts)?, &cluster, "cordon").await
        }
        Verb::Uncordon { cluster } => {
            verbs::cluster_action(&Client::new(&opts)?, &cluster, "uncordon").await
        }
        Verb::Drain { cluster } => {
            verbs::cluster_action(&Client::new(&opts)?, &cluster, "drain").await
        }
        Verb::Join(args) => join::run(&Client::new(&opts)?, args).await,
        Verb::Config { cmd } => context::run(opts.client_config.as_deref(), cmd, given),
        Verb::Kubeconfig(args) => {
            kubeconfig::run(opts.server.as_deref(), opts.token.as_deref(), args)
        }
        Verb::Completion { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "fedraft", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Verb::Watch {
            resource_version,
            kind,
            namespace,
            limit,
        } => {
            verbs::watch(
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
        Verb::Credentials { cmd } => admin::credentials(&Client::new(&opts)?, cmd).await,
        Verb::Admission { cmd } => admin::admission(&Client::new(&opts)?, cmd).await,
        Verb::HealthPolicy { cmd } => admin::health_policy(&Client::new(&opts)?, cmd).await,
        Verb::Rollout { cmd } => rollout::run(&Client::new(&opts)?, cmd).await,
        Verb::Reschedule { object } => rollout::reschedule(&Client::new(&opts)?, &object).await,
        Verb::User { cmd } => users::user(&Client::new(&opts)?, cmd).await,
        Verb::Token { cmd } => users::token(&Client::new(&opts)?, cmd).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every positional argument of every verb says what it is in `--help`.
    #[test]
    fn help_describes_every_positional() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_positionals() {
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} <{}>", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        let mut missing = Vec::new();
        walk(&cmd, "fedraft", &mut missing);
        assert!(missing.is_empty(), "positionals without help: {missing:?}");
    }
}
