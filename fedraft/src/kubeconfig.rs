//! `fedraft kubeconfig`: prints a kubeconfig that points kubectl (or any Kubernetes client) at
//! a fedraft node's Kubernetes-compatible door, with a fedraft bearer token and, when the node
//! serves TLS, its CA inline. Must not: contact the server, or write the token anywhere but
//! standard output.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use base64::Engine as _;
use serde_json::json;

use crate::usage::UsageError;

#[derive(Debug, clap::Args)]
pub struct KubeconfigArgs {
    /// A file holding the bearer token (as `fedraft server`'s token files do); the global
    /// `--token` works too.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// The CA certificate (PEM) of a node that serves TLS; embedded in the kubeconfig.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// The name of the cluster, user and context written.
    #[arg(long, default_value = "fedraft")]
    name: String,
    /// The context's default namespace.
    #[arg(short = 'n', long)]
    namespace: Option<String>,
}

pub fn run(
    server: Option<&str>,
    token: Option<&str>,
    args: KubeconfigArgs,
) -> anyhow::Result<ExitCode> {
    let server = server.ok_or_else(|| {
        UsageError("kubeconfig needs --server URL (the node's client address)".into())
    })?;
    let token = match (&args.token_file, token) {
        (Some(f), _) => read_token(f)?,
        (None, Some(t)) => t.trim().to_string(),
        (None, None) => {
            return Err(UsageError("kubeconfig needs --token-file FILE (or --token)".into()).into())
        }
    };
    let mut cluster = json!({ "server": server.trim_end_matches('/') });
    if let Some(ca) = &args.ca {
        let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    let mut context = json!({ "cluster": args.name, "user": args.name });
    if let Some(ns) = &args.namespace {
        context["namespace"] = json!(ns);
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": args.name, "cluster": cluster }],
        "users": [{ "name": args.name, "user": { "token": token } }],
        "contexts": [{ "name": args.name, "context": context }],
        "current-context": args.name,
        "preferences": {},
    });
    print!("{}", serde_yaml::to_string(&doc)?);
    Ok(ExitCode::SUCCESS)
}

fn read_token(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let token = text.trim();
    if token.is_empty() || token.contains(char::is_whitespace) {
        return Err(UsageError(format!(
            "{} must hold one token (no spaces, not empty)",
            path.display()
        ))
        .into());
    }
    Ok(token.to_string())
}
