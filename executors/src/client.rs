//! Building a kube-rs client for a member cluster from its registration.
//!
//! Credentials come from the log (`ClusterSpec::credentials`): nothing (plain http, e.g. the
//! simulator), a bearer token sent to `api_endpoint`, or a whole kubeconfig (token, client
//! certificate, or none); sealed ones are opened first with the node's keyring
//! (`fedraft_secrets`), and only in memory. With a kubeconfig, its current context decides server, TLS and user;
//! the registered endpoint is used only when the kubeconfig names no server.
//!
//! A kubeconfig must be self-contained: one that runs a command (`exec`, `auth-provider`) or
//! reads a file on this node (`tokenFile`, `client-certificate`, `client-key`,
//! `certificate-authority`) is refused before kube-rs could act on it, whatever the API let into
//! the log (entries written before the API refused them are still there). `exec` is accepted for
//! the commands the node config allows (`ExecutorConfig::kubeconfig_exec_allow`, default none).
//!
//! kube's default retry of 429/503/504 is turned off: the reconciler retries with its own
//! backoff and must see every error to report it in the object's status. Only the `ring`
//! rustls provider is compiled in; it is installed as the process default once.
//!
//! Every member call of one node passes one [`CallGate`]: at most `limit` requests in flight
//! over all clusters, so converging a thousand clusters at once opens a bounded number of
//! sockets and loads the members (and this node) boundedly. Watches and health probes pass
//! without a permit: a watch holds its request open for good, and a probe stuck behind writes
//! to other clusters would turn a busy node into "every cluster NotReady". Waiting for a permit
//! counts toward the caller's request timeout.
//!
//! Must not: log or return credentials.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Once};
use std::task::{Context, Poll};
use std::time::Duration;

use fedraft_core::model::{ClusterSpec, Credentials};
use fedraft_secrets::Keyring;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::ExecError;
use crate::metrics::ClusterMetrics;

/// The header naming the fedraft node a member call comes from (`node2`): the member's access
/// log (and a test simulator's per-peer link cut) can tell the vantage points apart, which
/// share one source address when the nodes share a host.
pub const NODE_HEADER: &str = "x-fedraft-node";

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
/// `keyring` opens sealed credentials (None: this node has no key, and they cannot be used).
/// `vantage` names this node in [`NODE_HEADER`] on every request.
pub async fn build_client(
    spec: &ClusterSpec,
    connect_timeout: Duration,
    exec_allow: &[String],
    keyring: Option<&Keyring>,
    vantage: Option<&str>,
) -> Result<Client, ExecError> {
    let config = client_config(spec, connect_timeout, exec_allow, keyring, vantage).await?;
    let builder = pooled_builder(config).map_err(|e| client_error(spec, e))?;
    Ok(builder.build())
}

/// [`build_client`] whose every request is timed and counted in `metrics` and, apart from
/// watches and probes, waits for a permit of `gate` (shared by every cluster of the node).
pub async fn build_measured_client(
    spec: &ClusterSpec,
    connect_timeout: Duration,
    exec_allow: &[String],
    metrics: &ClusterMetrics,
    keyring: Option<&Keyring>,
    gate: &CallGate,
    vantage: Option<&str>,
) -> Result<Client, ExecError> {
    let config = client_config(spec, connect_timeout, exec_allow, keyring, vantage).await?;
    let builder = pooled_builder(config).map_err(|e| client_error(spec, e))?;
    // The gate outside the timing: the metrics measure the member, not the queue here.
    Ok(builder
        .with_layer(&metrics.call_layer())
        .with_layer(gate)
        .build())
}

/// Idle connections kept per member. A pass's burst of writes opens up to
/// `apply_concurrency` connections; kube's default pool kept all of them for 90 s, so a node
/// converging a thousand plain-HTTP/1.1 members held over twenty sockets each, past common file
/// descriptor limits. A few stay warm for the next pass; the rest close once idle.
const IDLE_CONNECTIONS_PER_MEMBER: usize = 2;
/// How long an idle member connection stays open: longer than a resync period's quiet pass
/// gap is not worth a socket.
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The boxed service stack under a member client (kube's own builder yields the same type).
type MemberService = tower::util::BoxService<
    http::Request<kube::client::Body>,
    http::Response<Box<kube::client::DynBody>>,
    tower::BoxError,
>;

/// kube's client stack (base URI, credentials, extra headers, connect and write timeouts, TLS
/// as the config says) over a connection pool bounded per member. Configs that need kube's
/// own builder keep it: a proxy (its tunnel connectors) and exec credentials (a client that
/// expires with its certificate).
fn pooled_builder(
    config: Config,
) -> Result<kube::client::ClientBuilder<MemberService>, kube::Error> {
    use kube::client::{ConfigExt, DynBody};
    use tower::{BoxError, ServiceBuilder, ServiceExt};

    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return kube::client::ClientBuilder::try_from(config);
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let https = if config.cluster_url.scheme_str() == Some("http") {
        hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(plain_http_tls()?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http)
    } else {
        config.rustls_https_connector_with_connector(http)?
    };
    let mut timed = hyper_timeout::TimeoutConnector::new(https);
    timed.set_connect_timeout(config.connect_timeout);
    timed.set_read_timeout(config.read_timeout);
    timed.set_write_timeout(config.write_timeout);
    let pool: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_MEMBER)
            .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
            .build(timed);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(pool)
        .map_response(|r| {
            r.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .boxed();
    Ok(kube::client::ClientBuilder::new(
        service,
        config.default_namespace,
    ))
}

/// The TLS config of members reached over plain HTTP, which never negotiate TLS but whose
/// connector type needs one. kube builds a config per member with the platform's verifier,
/// which parses every system root certificate: about 400 KiB per member, for nothing. Built
/// once; clones share the verifier.
fn plain_http_tls() -> Result<rustls::ClientConfig, kube::Error> {
    static SHARED: std::sync::OnceLock<rustls::ClientConfig> = std::sync::OnceLock::new();
    if let Some(c) = SHARED.get() {
        return Ok(c.clone());
    }
    let built = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| kube::Error::Service(Box::new(e)))?
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    Ok(SHARED.get_or_init(|| built).clone())
}

/// Member calls in flight at once on one node, over all its clusters (cheap to clone; clones
/// share the permits). Default [`CallGate::DEFAULT_LIMIT`].
#[derive(Debug, Clone)]
pub struct CallGate {
    permits: Arc<tokio::sync::Semaphore>,
    limit: usize,
}

impl CallGate {
    /// Enough that 16 clusters converge at full `apply_concurrency` at once, few enough that a
    /// node keeps a few hundred member sockets busy, not thousands.
    pub const DEFAULT_LIMIT: usize = 256;

    pub fn new(limit: usize) -> CallGate {
        let limit = limit.max(1);
        CallGate {
            permits: Arc::new(tokio::sync::Semaphore::new(limit)),
            limit,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Calls holding a permit now.
    pub fn in_flight(&self) -> usize {
        self.limit - self.permits.available_permits()
    }
}

impl Default for CallGate {
    fn default() -> Self {
        CallGate::new(Self::DEFAULT_LIMIT)
    }
}

/// Whether a request passes without a permit: a watch (long-lived) or a health probe.
fn ungated<B>(req: &http::Request<B>) -> bool {
    let uri = req.uri();
    let probe = ["/readyz", "/livez", "/healthz"]
        .iter()
        .any(|p| uri.path().ends_with(p));
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    probe || watch
}

impl<S> tower::Layer<S> for CallGate {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Gated<S> {
        Gated {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            permits: self.permits.clone(),
        }
    }
}

/// The service [`CallGate`] wraps around a client's stack. The stack below is not `Clone`, so
/// it is shared behind a lock held only while a request is handed to it (kube's client drives
/// it from one buffer task anyway), never while the answer is awaited.
pub struct Gated<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    permits: Arc<tokio::sync::Semaphore>,
}

type GatedCall<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for Gated<S>
where
    S: tower::Service<http::Request<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    S::Response: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = GatedCall<S::Response, S::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // Readiness of the stack below is awaited per call, after the permit.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let permits = (!ungated(&req)).then(|| self.permits.clone());
        Box::pin(async move {
            // The permit lives until the answer's headers arrive (or the caller gives up).
            let _permit = match permits {
                Some(p) => p.acquire_owned().await.ok(),
                None => None,
            };
            let answer = {
                let mut svc = inner.lock().await;
                std::future::poll_fn(|cx| svc.poll_ready(cx)).await?;
                svc.call(req)
            };
            answer.await
        })
    }
}

fn client_error(spec: &ClusterSpec, e: kube::Error) -> ExecError {
    ExecError::Credentials {
        cluster: spec.name.clone(),
        reason: format!("client: {e}"),
    }
}

async fn client_config(
    spec: &ClusterSpec,
    connect_timeout: Duration,
    exec_allow: &[String],
    keyring: Option<&Keyring>,
    vantage: Option<&str>,
) -> Result<Config, ExecError> {
    install_crypto_provider();
    let bad = |reason: String| ExecError::Credentials {
        cluster: spec.name.clone(),
        reason,
    };
    let opened = match (&spec.credentials, keyring) {
        (Credentials::Sealed(s), None) => {
            return Err(bad(format!(
                "sealed under key {:?} but this node has no credentials keys configured",
                s.key_id
            )))
        }
        (_, Some(k)) => k
            .unseal(&spec.name, &spec.credentials)
            .map_err(|e| bad(e.to_string()))?,
        (plain, None) => plain.clone(),
    };
    let mut config = match &opened {
        Credentials::None => Config::new(parse_url(&spec.api_endpoint).map_err(bad)?),
        Credentials::BearerToken(token) => {
            let mut c = Config::new(parse_url(&spec.api_endpoint).map_err(bad)?);
            c.auth_info.token = Some(token.clone().into());
            c
        }
        Credentials::Kubeconfig(text) => {
            let mut kc =
                Kubeconfig::from_yaml(text).map_err(|e| bad(format!("kubeconfig: {e}")))?;
            self_contained(&kc, exec_allow).map_err(bad)?;
            fill_missing_server(&mut kc, &spec.api_endpoint);
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| bad(format!("kubeconfig: {e}")))?
        }
        Credentials::Sealed(_) => return Err(bad("credentials still sealed".into())),
    };
    config.default_retry = false;
    config.connect_timeout = Some(connect_timeout);
    if let Some(v) = vantage.and_then(|v| http::HeaderValue::from_str(v).ok()) {
        config
            .headers
            .push((http::HeaderName::from_static(NODE_HEADER), v));
    }
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

/// Refuses what would run a command or read a file on this node, naming the kubeconfig field
/// (never its value).
fn self_contained(kc: &Kubeconfig, exec_allow: &[String]) -> Result<(), String> {
    let refuse = |path: String, why: &str| Err(format!("kubeconfig: {path} {why}"));
    for (i, named) in kc.auth_infos.iter().enumerate() {
        let Some(user) = named.auth_info.as_ref() else {
            continue;
        };
        let at = |field: &str| format!("users[{i}].user.{field}");
        if let Some(exec) = &user.exec {
            let command = exec.command.as_deref().unwrap_or("");
            if !exec_allow.iter().any(|c| c == command) {
                return refuse(at("exec"), "runs a command not in the allowed plugins");
            }
        }
        if user.auth_provider.is_some() {
            return refuse(at("auth-provider"), "runs an auth-provider plugin");
        }
        for (field, set) in [
            ("tokenFile", user.token_file.is_some()),
            ("client-certificate", user.client_certificate.is_some()),
            ("client-key", user.client_key.is_some()),
        ] {
            if set {
                return refuse(at(field), "reads a file on this node");
            }
        }
    }
    for (i, named) in kc.clusters.iter().enumerate() {
        if named
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return refuse(
                format!("clusters[{i}].cluster.certificate-authority"),
                "reads a file on this node",
            );
        }
    }
    Ok(())
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

/// `fut`, a member call, given at most `limit`: a member that does not answer is an error that
/// names `action`, like one that answers with an error.
pub(crate) async fn bounded<T>(
    limit: Duration,
    action: impl Fn() -> String,
    fut: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, ExecError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(|e| ExecError::kube(action(), e)),
        Err(_) => Err(ExecError::Timeout {
            action: action(),
            waited_ms: limit.as_millis() as u64,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_bounds_calls_but_not_watches_or_probes() {
        use tower::{Layer, Service, ServiceExt};
        let gate = CallGate::new(2);
        let (release, released) = tokio::sync::watch::channel(false);
        let stuck = tower::service_fn(move |_req: http::Request<()>| {
            let mut released = released.clone();
            async move {
                let _ = released.wait_for(|r| *r).await;
                Ok::<_, std::convert::Infallible>(())
            }
        });
        let mut svc = gate.layer(stuck);
        let req = |uri: &str| http::Request::get(uri).body(()).unwrap();
        let mut calls = Vec::new();
        for _ in 0..3 {
            let call = svc.ready().await.unwrap().call(req("/api/v1/nodes"));
            calls.push(tokio::spawn(call));
        }
        for uri in ["/api/v1/pods?watch=true&resourceVersion=5", "/readyz"] {
            let call = svc.ready().await.unwrap().call(req(uri));
            calls.push(tokio::spawn(call));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Two listed calls hold both permits; the third waits; watch and probe need none.
        assert_eq!(gate.in_flight(), 2);
        release.send_replace(true);
        for c in calls {
            assert!(c.await.unwrap().is_ok());
        }
        assert_eq!(gate.in_flight(), 0);
        assert!(ungated(&req("/prefix/readyz")));
        assert!(!ungated(&req("/api/v1/pods?watchx=true")));
    }

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
        assert!(build_client(&spec, Duration::from_secs(1), &[], None, None)
            .await
            .is_ok());
        spec.credentials = Credentials::Kubeconfig("clusters: [".to_string());
        let Err(err) = build_client(&spec, Duration::from_secs(1), &[], None, None).await else {
            panic!("bad kubeconfig accepted")
        };
        assert!(err.to_string().contains("kubeconfig"), "{err}");
        assert!(!err.to_string().contains("secret-token"));
        spec.credentials = Credentials::BearerToken("t".into());
        assert!(build_client(&spec, Duration::from_secs(1), &[], None, None)
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn sealed_credentials_need_the_key() {
        let key = fedraft_secrets::KeyBytes::new(vec![9; 32]);
        let keyring = Keyring::new("k1", [("k1".to_string(), key)]).unwrap();
        let mut spec = ClusterSpec::new("dc1", "http://127.0.0.1:6443");
        let plain = Credentials::BearerToken("sealed-secret-token".into());
        spec.credentials = keyring.seal("dc1", &plain).unwrap();
        let t = Duration::from_secs(1);
        assert!(build_client(&spec, t, &[], Some(&keyring), None)
            .await
            .is_ok());
        let Err(err) = build_client(&spec, t, &[], None, None).await else {
            panic!("sealed credentials used without a key")
        };
        assert!(err.to_string().contains("\"k1\""), "{err}");
        // A blob registered for another cluster does not open for this one.
        let mut moved = ClusterSpec::new("dc2", "http://127.0.0.1:6443");
        moved.credentials = spec.credentials.clone();
        let Err(err) = build_client(&moved, t, &[], Some(&keyring), None).await else {
            panic!("a blob opened on another cluster")
        };
        assert!(!err.to_string().contains("sealed-secret-token"), "{err}");
    }

    #[tokio::test]
    async fn kubeconfigs_that_run_commands_or_read_files_are_refused() {
        let good = "clusters:\n- name: sim\n  cluster: {server: 'http://127.0.0.1:6443'}\nusers:\n- name: u\n  user: {token: secret-token}\ncontexts:\n- name: c\n  context: {cluster: sim, user: u}\ncurrent-context: c\n";
        let user = |u: &str| good.replace("{token: secret-token}", u);
        let cases = [
            (user("{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'touch /tmp/pwned']}}"), "users[0].user.exec"),
            (user("{auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}}"), "users[0].user.auth-provider"),
            (user("{tokenFile: /etc/shadow}"), "users[0].user.tokenFile"),
            (user("{client-certificate: /a, client-key: /b}"), "users[0].user.client-certificate"),
            (user("{client-key: /b}"), "users[0].user.client-key"),
            (good.replace("{server: 'http://127.0.0.1:6443'}", "{server: 'https://k:6443', certificate-authority: /etc/x}"), "clusters[0].cluster.certificate-authority"),
        ];
        let mut spec = ClusterSpec::new("dc1", "http://127.0.0.1:6443");
        for (text, path) in cases {
            spec.credentials = Credentials::Kubeconfig(text.clone());
            let Err(err) = build_client(&spec, Duration::from_secs(1), &[], None, None).await
            else {
                panic!("accepted {text}")
            };
            assert!(err.to_string().contains(path), "{err}");
        }
        // An allowed plugin gets past the check (kube-rs may then fail to run a plugin that
        // does not exist); without the allowance the check refuses it.
        let exec = user(
            "{exec: {apiVersion: client.authentication.k8s.io/v1, command: fedraft-test-plugin}}",
        );
        spec.credentials = Credentials::Kubeconfig(exec);
        let refusal = "not in the allowed plugins";
        let Err(err) = build_client(&spec, Duration::from_secs(1), &[], None, None).await else {
            panic!("exec accepted without an allowance")
        };
        assert!(err.to_string().contains(refusal), "{err}");
        let allow = ["fedraft-test-plugin".to_string()];
        if let Err(err) = build_client(&spec, Duration::from_secs(1), &allow, None, None).await {
            assert!(!err.to_string().contains(refusal), "{err}");
        }
    }
}
