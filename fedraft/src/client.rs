//! The HTTP client behind the verbs: where the API is, who we are there, and how a request
//! is sent and its answer read. The verbs themselves live elsewhere (`verbs.rs`, `get.rs`,
//! `endpoints.rs`, ...) and depend on this module, never the other way round.
//!
//! Server and token come from `--server` / `--token`, else `FEDRAFT_SERVER` / `FEDRAFT_TOKEN`,
//! else the client config file's context (`--fed-context`, `FEDRAFT_CONTEXT`, or the file's
//! current context; see `context.rs`), else `http://127.0.0.1:8080` and no token. An `https://`
//! server is verified against `--ca-file` (`FEDRAFT_CA_FILE`, or `ca_file` in the config file)
//! when given, else the system roots; `--cert-file` / `--key-file` present a client
//! certificate to an API that requires one. Writes carry an Idempotency-Key, so a retry after
//! a 503 or a dropped connection is safe; they are retried a few times with the same key.
//!
//! Must not: print anything (the verbs decide what the user sees).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// Attempts for a write that meets 503 or a connection failure.
const WRITE_ATTEMPTS: u32 = 5;

#[derive(Debug, Clone, clap::Args)]
pub struct ClientOpts {
    /// API base URL.
    #[arg(long, global = true, env = "FEDRAFT_SERVER")]
    pub server: Option<String>,
    /// Bearer token.
    #[arg(long, global = true, env = "FEDRAFT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Client config file (TOML: contexts of server, token, ca_file, cert_file, key_file,
    /// namespace; default ~/.config/fedraft/client.toml).
    #[arg(long, global = true, env = "FEDRAFT_CLIENT_CONFIG")]
    pub client_config: Option<PathBuf>,
    /// The client config file's context (federation) to use instead of its current one.
    #[arg(long, global = true, env = "FEDRAFT_CONTEXT")]
    pub fed_context: Option<String>,
    /// CA bundle (PEM) that signed the API's certificate, for an https:// server.
    #[arg(long, global = true, env = "FEDRAFT_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM), for an API that requires one; needs --key-file.
    #[arg(long, global = true, env = "FEDRAFT_CERT_FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, global = true, env = "FEDRAFT_KEY_FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,
}

/// Why a request failed, with what the user needs to see.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach {server}: {message}")]
    Unreachable { server: String, message: String },
    #[error("{status} {code}: {message}{}", field.as_ref().map(|f| format!(" (field {f})")).unwrap_or_default())]
    Api {
        status: u16,
        code: String,
        message: String,
        field: Option<String>,
    },
}

pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// The context's default namespace, for verbs given no `-n`.
    namespace: Option<String>,
}

impl Client {
    pub fn new(opts: &ClientOpts) -> anyhow::Result<Client> {
        let file = crate::context::load(opts.client_config.as_deref())?
            .resolve(opts.fed_context.as_deref())?;
        let base = opts
            .server
            .clone()
            .or(file.server)
            .unwrap_or_else(|| "http://127.0.0.1:8080".into())
            .trim_end_matches('/')
            .to_string();
        let token = opts.token.clone().or(file.token);
        let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(5));
        let ca = opts.ca_file.clone().or(file.ca_file);
        let cert = opts.cert_file.clone().or(file.cert_file);
        let key = opts.key_file.clone().or(file.key_file);
        let identity = match (&cert, &key) {
            (Some(c), Some(k)) => Some((c.as_path(), k.as_path())),
            (None, None) => None,
            _ => anyhow::bail!("a client certificate needs both cert_file and key_file"),
        };
        match (&ca, identity) {
            (Some(ca), identity) => {
                let tls = crate::tls::cli_client_config(ca, identity)?;
                builder = builder.tls_backend_preconfigured(tls);
            }
            (None, Some(_)) => {
                anyhow::bail!("a client certificate needs --ca-file (the CA of the API)")
            }
            (None, None) => {}
        }
        let http = builder.build()?;
        Ok(Client {
            http,
            base,
            token,
            namespace: file.namespace,
        })
    }

    /// `-n` when given, else the context's namespace.
    pub fn namespace<'a>(&'a self, flag: Option<&'a str>) -> Option<&'a str> {
        flag.or(self.namespace.as_deref())
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let rb = self.http.request(method, self.url(path));
        match &self.token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    pub(crate) fn unreachable(&self, e: reqwest::Error) -> ClientError {
        // reqwest's own message is generic ("error sending request"); the cause (refused, TLS
        // certificate not trusted, ...) is in the source chain.
        let mut message = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            message.push_str(": ");
            message.push_str(&s.to_string());
            src = s.source();
        }
        ClientError::Unreachable {
            server: self.base.clone(),
            message,
        }
    }

    /// Sends a request once and returns the JSON body of a 2xx, or the API error.
    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Result<Value, ClientError> {
        let resp = rb.send().await.map_err(|e| self.unreachable(e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.unreachable(e))?;
        if status.is_success() {
            return Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)));
        }
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let e = &v["error"];
        Err(ClientError::Api {
            status: status.as_u16(),
            code: e["code"]
                .as_str()
                .unwrap_or(status.canonical_reason().unwrap_or("Error"))
                .to_string(),
            message: e["message"].as_str().map(str::to_string).unwrap_or(text),
            field: e["field"].as_str().map(str::to_string),
        })
    }

    /// Opens a long GET (a watch stream) and hands back the response once it answered 2xx; the
    /// body is then read as it arrives.
    pub async fn open_stream(&self, path: &str) -> Result<reqwest::Response, ClientError> {
        let resp = self
            .request(reqwest::Method::GET, path)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        Err(ClientError::Api {
            status,
            code: v["error"]["code"].as_str().unwrap_or("Error").into(),
            message: v["error"]["message"].as_str().unwrap_or("").into(),
            field: v["error"]["field"].as_str().map(str::to_string),
        })
    }

    pub async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    /// A write with an idempotency key, retried with the same key on 503 or connection loss.
    pub async fn write(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<u64>,
    ) -> Result<Value, ClientError> {
        let key = format!("cli-{:032x}", rand::random::<u128>());
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut rb = self
                .request(method.clone(), path)
                .header("Idempotency-Key", &key);
            if let Some(b) = body {
                rb = rb.json(b);
            }
            if let Some(v) = if_match {
                rb = rb.header("If-Match", format!("\"{v}\""));
            }
            match self.send(rb).await {
                Err(ClientError::Api { status: 503, .. } | ClientError::Unreachable { .. })
                    if attempt < WRITE_ATTEMPTS =>
                {
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                }
                other => return other,
            }
        }
    }
}

/// Splits `NS/NAME`.
pub fn split_object(name: &str) -> anyhow::Result<(&str, &str)> {
    name.split_once('/')
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
        .ok_or_else(|| anyhow::anyhow!("expected NAMESPACE/NAME, got {name:?}"))
}
