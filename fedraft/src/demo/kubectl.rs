//! The demo's entrance for kubectl: the demo's API router served a second time, over TLS with a
//! certificate made for this run, and a kubeconfig that reaches it. kubectl sends a bearer token
//! only over TLS, so the plain-HTTP API the narration uses would leave it unauthenticated.
//!
//! Must not: reuse a key across runs, or write the kubeconfig (it holds the admin token) anywhere
//! but a directory only its owner can read.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use fedraft_raft::network::tls::server_config;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::listen::{self, ListenerLimits};

/// Generous for one person's kubectl; the point is only that no limit is missing.
const LIMITS: ListenerLimits = ListenerLimits {
    header_read_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(120),
    max_connections: 64,
};

pub(super) struct KubectlDoor {
    pub url: String,
    pub kubeconfig: PathBuf,
    task: JoinHandle<()>,
}

/// Serves `router` over TLS on a free loopback port and writes `DIR/fed.kubeconfig` for it.
pub(super) async fn start(router: Router, token: &str, dir: &Path) -> anyhow::Result<KubectlDoor> {
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .context("making the demo's TLS certificate")?;
    let cert_pem = certified.cert.pem();
    let key_pem = certified.signing_key.serialize_pem();
    let tls = server_config(cert_pem.as_bytes(), key_pem.as_bytes(), None)
        .context("the demo's TLS configuration")?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the kubectl port")?;
    let url = format!("https://{}", listener.local_addr()?);
    let task = tokio::spawn(async move {
        let serving = listen::serve(
            listener,
            router,
            Some(Arc::new(tls)),
            LIMITS,
            std::future::pending(),
        );
        if let Err(e) = serving.await {
            tracing::error!(error = %e, "the demo's kubectl listener stopped");
        }
    });

    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let kubeconfig = dir.join("fed.kubeconfig");
    // The certificate is its own CA: kubectl trusts exactly this run's server.
    let doc =
        crate::kubeconfig::document(&url, token, Some(cert_pem.as_bytes()), "fedraft-demo", None);
    let text = serde_yaml::to_string(&doc)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&kubeconfig)
        .with_context(|| format!("creating {}", kubeconfig.display()))?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    Ok(KubectlDoor {
        url,
        kubeconfig,
        task,
    })
}

impl KubectlDoor {
    pub(super) fn stop(&self) {
        self.task.abort();
    }

    /// `kubectl get clusters` through this door, if kubectl is installed: Some(the names it
    /// printed), or None when there is no kubectl to ask.
    pub(super) async fn clusters_seen_by_kubectl(&self) -> Option<anyhow::Result<Vec<String>>> {
        let kubeconfig = self.kubeconfig.clone();
        let run = tokio::task::spawn_blocking(move || {
            Command::new("kubectl")
                .args(["get", "clusters", "-o", "name", "--request-timeout=10s"])
                .env("KUBECONFIG", &kubeconfig)
                .output()
        })
        .await;
        let output = match run {
            Ok(Ok(o)) => o,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Ok(Err(e)) => return Some(Err(e).context("running kubectl")),
            Err(e) => return Some(Err(e).context("running kubectl")),
        };
        if !output.status.success() {
            return Some(Err(anyhow::anyhow!(
                "kubectl get clusters failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let names = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| l.rsplit('/').next())
            .map(str::to_string)
            .collect();
        Some(Ok(names))
    }
}
