//! `fedraft kubeconfig`: prints a kubeconfig that points kubectl (or any Kubernetes client) at
//! a fedraft node's Kubernetes-compatible door, with a fedraft bearer token and, when the node
//! serves TLS, its CA inline. Must not: contact the server, or write the token anywhere but
//! standard output.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use base64::Engine as _;
use serde_json::{json, Value};

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
    let ca = match &args.ca {
        Some(path) => {
            Some(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let doc = document(
        server,
        &token,
        ca.as_deref(),
        &args.name,
        args.namespace.as_deref(),
    );
    print!("{}", serde_yaml::to_string(&doc)?);
    Ok(ExitCode::SUCCESS)
}

/// The kubeconfig itself: one cluster (with its CA inline when given), one user holding the
/// bearer token, and one context joining them, named `name`.
pub fn document(
    server: &str,
    token: &str,
    ca_pem: Option<&[u8]>,
    name: &str,
    namespace: Option<&str>,
) -> Value {
    let mut cluster = json!({ "server": server.trim_end_matches('/') });
    if let Some(pem) = ca_pem {
        cluster["certificate-authority-data"] =
            json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    let mut context = json!({ "cluster": name, "user": name });
    if let Some(ns) = namespace {
        context["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": name, "cluster": cluster }],
        "users": [{ "name": name, "user": { "token": token } }],
        "contexts": [{ "name": name, "context": context }],
        "current-context": name,
        "preferences": {},
    })
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
