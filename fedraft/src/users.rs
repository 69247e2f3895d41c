//! `fedraft user ...` and `fedraft token ...`: the replicated user database over the API
//! (`/v1/users`). Each verb is one request; answers print as JSON for `jq`, except `token issue
//! --token-only`, which prints the token text alone for a script to keep. Must not: write a
//! token to any file or log; the server shows it once, this prints it once.

use std::process::ExitCode;

use serde_json::json;

use crate::client::Client;

#[derive(Debug, clap::Subcommand)]
pub enum UserCmd {
    /// Create a user or service account (admin; one log entry).
    Create {
        /// The user's name (a DNS label).
        name: String,
        /// admin, operator, auditor, tenant:TENANT, or scoped to some of its namespaces:
        /// tenant:TENANT/NS1,NS2 (a member there) or tenant-reader:TENANT/NS1,NS2 (reads there).
        #[arg(long)]
        role: String,
        /// A service account rather than a person.
        #[arg(long)]
        service_account: bool,
    },
    /// Set a user's role (admin).
    SetRole {
        /// The user's name.
        name: String,
        /// admin, operator, auditor, tenant:TENANT, or scoped to some of its namespaces:
        /// tenant:TENANT/NS1,NS2 (a member there) or tenant-reader:TENANT/NS1,NS2 (reads there).
        #[arg(long)]
        role: String,
    },
    /// Every user with its role.
    List,
    /// Delete a user and every token it holds (admin).
    Delete {
        /// The user's name.
        name: String,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum TokenCmd {
    /// Issue a token for a user (admin); the answer is the only place its text appears.
    Issue {
        /// The user's name.
        user: String,
        /// Lifetime in seconds (default: no expiry).
        #[arg(long)]
        ttl_seconds: Option<u64>,
        /// Print the token text alone.
        #[arg(long)]
        token_only: bool,
    },
    /// A user's tokens: id, times, revoked, live (never their text or hash).
    List {
        /// The user's name.
        user: String,
    },
    /// Revoke a token (admin): refused on each node as soon as that node applied it.
    Revoke {
        /// The user's name.
        user: String,
        /// The token's id (from `token list` or `token issue`).
        id: String,
    },
}

fn print(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

/// A path segment as the API's names are: refused here rather than sent as another path.
fn segment(s: &str, what: &str) -> anyhow::Result<String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(crate::usage::UsageError(format!(
            "{what} {s:?}: expected letters, digits and '-'"
        ))
        .into());
    }
    Ok(s.to_string())
}

pub async fn user(c: &Client, cmd: UserCmd) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    let v = match cmd {
        UserCmd::Create {
            name,
            role,
            service_account,
        } => {
            let kind = if service_account {
                "serviceAccount"
            } else {
                "user"
            };
            let body = json!({"name": name, "role": role, "userKind": kind});
            c.write(Method::POST, "/v1/users", Some(&body), None)
                .await?
        }
        UserCmd::SetRole { name, role } => {
            let path = format!("/v1/users/{}", segment(&name, "user")?);
            let current = c.get_json(&path).await?;
            let body = json!({"role": role, "userKind": current["userKind"]});
            c.write(Method::PUT, &path, Some(&body), None).await?
        }
        UserCmd::List => c.get_json("/v1/users").await?,
        UserCmd::Delete { name } => {
            let path = format!("/v1/users/{}", segment(&name, "user")?);
            c.write(Method::DELETE, &path, None, None).await?
        }
    };
    print(&v);
    Ok(ExitCode::SUCCESS)
}

pub async fn token(c: &Client, cmd: TokenCmd) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    let v = match cmd {
        TokenCmd::Issue {
            user,
            ttl_seconds,
            token_only,
        } => {
            let path = format!("/v1/users/{}/tokens", segment(&user, "user")?);
            let body = json!({"ttlSeconds": ttl_seconds});
            // Sent once, not retried: a retry would draw another secret, and the first one,
            // if it was recorded, would then be a token nobody has seen.
            let v = c.send(c.request(Method::POST, &path).json(&body)).await?;
            if token_only {
                let Some(t) = v["token"].as_str() else {
                    anyhow::bail!("the server's answer holds no token");
                };
                println!("{t}");
                return Ok(ExitCode::SUCCESS);
            }
            v
        }
        TokenCmd::List { user } => {
            let path = format!("/v1/users/{}/tokens", segment(&user, "user")?);
            c.get_json(&path).await?
        }
        TokenCmd::Revoke { user, id } => {
            let path = format!(
                "/v1/users/{}/tokens/{}",
                segment(&user, "user")?,
                segment(&id, "token id")?
            );
            c.write(Method::DELETE, &path, None, None).await?
        }
    };
    print(&v);
    Ok(ExitCode::SUCCESS)
}
