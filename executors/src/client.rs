//! Building a kube-rs client for a member cluster from its registration.
//!
//! Credentials come from the log (`ClusterSpec::credentials`): nothing (plain http, e.g. the
//! simulator), a bearer token sent to `api_endpoint`, or a whole kubeconfig (token, client
//! certificate, or none). With a kubeconfig, its current context decides server, TLS and user;
//! the registered endpoint is used only when the kubeconfig names no server.
//!
//! kube's default retry of 429/503/504 is turned off: the reconciler retries with its own
//! backoff and must see every error to report it in the object's status. Only the `ring`
//! rustls provider is compiled in; it is installed as the process default once.
//!
//! Must not: log or return credentials.

use std::sync::Once;
use std::time::Duration;

use fedraft_core::model::{ClusterSpec, Credentials};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::ExecError;
use crate::metrics::ClusterMetrics;

static CRYPTO: Once = Once::new();

/// Installs the ring provider as rustls's process default (first caller wins; a provider
/// installed earlier by someone else is kept, since only ring can be compiled in anyway).
pub fn install_crypto_provider() {
    CRYPTO.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client for `spec`'s cluster. `connect_timeout` bounds connection setup; watches stay
/// long-lived, other requests are bounded by the caller.
pub async fn build_client(
    spec: &ClusterSpec,
    connect_timeout: Duration,
) -> Result<Client, ExecError> {
    let config = client_config(spec, connect_timeout).await?;
    Client::try_from(config).map_err(|e| client_error(spec, e))
}

/// [`build_client`] whose every request is timed and counted in `metrics`.
pub async fn build_measured_client(
    spec: &ClusterSpec,
    connect_timeout: Duration,
    metrics: &ClusterMetrics,
) -> Result<Client, ExecError> {
    let config = client_config(spec, connect_timeout).await?;
    let builder =
        kube::client::ClientBuilder::try_from(config).map_err(|e| client_error(spec, e))?;
    Ok(builder.with_layer(&metrics.call_layer()).build())
}

fn client_error(spec: &ClusterSpec, e: kube::Error) -> ExecError {
    ExecError::Credentials {
        cluster: spec.name.clone(),
        reason: format!("client: {e}"),
    }
}

async fn client_config(spec: &ClusterSpec, connect_timeout: Duration) -> Result<Config, ExecError> {
    install_crypto_provider();
    let bad = |reason: String| ExecError::Credentials {
        cluster: spec.name.clone(),
        reason,
    };
    let mut config = match &spec.credentials {
        Credentials::None => Config::new(parse_url(&spec.api_endpoint).map_err(bad)?),
        Credentials::BearerToken(token) => {
            let mut c = Config::new(parse_url(&spec.api_endpoint).map_err(bad)?);
            c.auth_info.token = Some(token.clone().into());
            c
        }
        Credentials::Kubeconfig(text) => {
            let mut kc =
                Kubeconfig::from_yaml(text).map_err(|e| bad(format!("kubeconfig: {e}")))?;
            fill_missing_server(&mut kc, &spec.api_endpoint);
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| bad(format!("kubeconfig: {e}")))?
        }
    };
    config.default_retry = false;
    config.connect_timeout = Some(connect_timeout);
    Ok(config)
}

fn parse_url(endpoint: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = endpoint
        .parse()
        .map_err(|e| format!("api endpoint {endpoint:?}: {e}"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => Ok(uri),
        _ => Err(format!(
            "api endpoint {endpoint:?}: scheme must be http or https"
        )),
    }
}

fn fill_missing_server(kc: &mut Kubeconfig, endpoint: &str) {
    for named in &mut kc.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            if cluster.server.as_deref().is_none_or(str::is_empty) {
                cluster.server = Some(endpoint.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_must_be_http() {
        assert!(parse_url("http://127.0.0.1:1").is_ok());
        assert!(parse_url("https://k8s.example:6443").is_ok());
        assert!(parse_url("ftp://x").is_err());
        assert!(parse_url("not a url").is_err());
    }

    #[tokio::test]
    async fn kubeconfig_token_and_plain_http() {
        let kc = r#"
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster: {}
users:
- name: u
  user: {token: secret-token}
contexts:
- name: c
  context: {cluster: sim, user: u}
current-context: c
"#;
        let mut spec = ClusterSpec::new("dc1", "http://127.0.0.1:6443");
        spec.credentials = Credentials::Kubeconfig(kc.to_string());
        assert!(build_client(&spec, Duration::from_secs(1)).await.is_ok());
        spec.credentials = Credentials::Kubeconfig("clusters: [".to_string());
        let Err(err) = build_client(&spec, Duration::from_secs(1)).await else {
            panic!("bad kubeconfig accepted")
        };
        assert!(err.to_string().contains("kubeconfig"), "{err}");
        assert!(!err.to_string().contains("secret-token"));
        spec.credentials = Credentials::BearerToken("t".into());
        assert!(build_client(&spec, Duration::from_secs(1)).await.is_ok());
    }
}
