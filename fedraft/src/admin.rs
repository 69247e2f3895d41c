//! Operator verbs over the admin API: `fedraft status` (this node's raft position and state
//! hash), `fedraft members` (list, add a learner, set the voters) and `fedraft credentials
//! rotate` (re-seal every member's credentials under the newest key). Each is one request; the
//! answer is printed as JSON so runbooks can pipe it to `jq`.

use std::process::ExitCode;

use serde_json::json;

use crate::client::Client;

#[derive(Debug, clap::Subcommand)]
pub enum MembersCmd {
    /// Voters, learners, their peer addresses and the leader.
    List,
    /// Add a node as a learner and wait until it has caught up (run against the leader).
    Add {
        /// The new node's id (never reuse the id of a removed node).
        #[arg(long)]
        id: u64,
        /// The new node's advertised peer address (its `peer_advertise`).
        #[arg(long)]
        peer_addr: String,
    },
    /// Replace the voter set (run against the leader); members not listed are removed.
    Voters {
        /// Comma-separated node ids, e.g. 1,2,4.
        #[arg(value_delimiter = ',', required = true)]
        ids: Vec<u64>,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum CredentialsCmd {
    /// Re-wrap every cluster's credentials under the `current` key of `[credentials]` (and seal
    /// any stored in the clear), as one logged command. Afterwards older keys may be removed
    /// from every node's config.
    Rotate,
}

#[derive(Debug, clap::Subcommand)]
pub enum AdmissionCmd {
    /// The policy every object write is admitted by (any principal may read it).
    Get,
    /// Replace the policy from a JSON or YAML file, as `get` prints it (admin; one log entry).
    Set {
        /// The policy document; `-` reads standard input.
        #[arg(short = 'f', long = "filename")]
        file: String,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum HealthPolicyCmd {
    /// The failover brake's policy, and where the brake holds failover now.
    Get,
    /// Replace the policy from a JSON or YAML file, as `get` prints it (admin; one log entry).
    Set {
        /// The policy document; `-` reads standard input.
        #[arg(short = 'f', long = "filename")]
        file: String,
    },
}

fn print(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

pub async fn status(c: &Client, stale: bool) -> anyhow::Result<ExitCode> {
    let path = if stale {
        "/v1/status?stale=true"
    } else {
        "/v1/status"
    };
    print(&c.get_json(path).await?);
    Ok(ExitCode::SUCCESS)
}

pub async fn members(c: &Client, cmd: MembersCmd) -> anyhow::Result<ExitCode> {
    let v = match cmd {
        MembersCmd::List => c.get_json("/v1/admin/members").await?,
        MembersCmd::Add { id, peer_addr } => {
            let body = json!({"id": id, "peerAddr": peer_addr});
            c.write(
                reqwest::Method::POST,
                "/v1/admin/members",
                Some(&body),
                None,
            )
            .await?
        }
        MembersCmd::Voters { ids } => {
            let body = json!({ "voters": ids });
            c.write(reqwest::Method::PUT, "/v1/admin/voters", Some(&body), None)
                .await?
        }
    };
    print(&v);
    Ok(ExitCode::SUCCESS)
}

pub async fn credentials(c: &Client, cmd: CredentialsCmd) -> anyhow::Result<ExitCode> {
    let v = match cmd {
        CredentialsCmd::Rotate => {
            c.write(
                reqwest::Method::POST,
                "/v1/admin/credentials/rotate",
                None,
                None,
            )
            .await?
        }
    };
    print(&v);
    Ok(ExitCode::SUCCESS)
}

pub async fn admission(c: &Client, cmd: AdmissionCmd) -> anyhow::Result<ExitCode> {
    let v = match cmd {
        AdmissionCmd::Get => c.get_json("/v1/admin/admission").await?,
        AdmissionCmd::Set { file } => {
            let mut docs = crate::apply::read_docs(std::path::Path::new(&file))?;
            let (Some(body), None) = (docs.pop(), docs.pop()) else {
                anyhow::bail!("{file}: expected exactly one admission policy document");
            };
            c.write(
                reqwest::Method::PUT,
                "/v1/admin/admission",
                Some(&body),
                None,
            )
            .await?
        }
    };
    print(&v);
    Ok(ExitCode::SUCCESS)
}

pub async fn health_policy(c: &Client, cmd: HealthPolicyCmd) -> anyhow::Result<ExitCode> {
    let v = match cmd {
        HealthPolicyCmd::Get => c.get_json("/v1/admin/health-policy").await?,
        HealthPolicyCmd::Set { file } => {
            let mut docs = crate::apply::read_docs(std::path::Path::new(&file))?;
            let (Some(body), None) = (docs.pop(), docs.pop()) else {
                anyhow::bail!("{file}: expected exactly one health policy document");
            };
            c.write(
                reqwest::Method::PUT,
                "/v1/admin/health-policy",
                Some(&body),
                None,
            )
            .await?
        }
    };
    print(&v);
    Ok(ExitCode::SUCCESS)
}
