//! The HTTP client behind the verbs, and the verbs that are one request each.
//!
//! Server and token come from `--server` / `--token`, else `FEDRAFT_SERVER` / `FEDRAFT_TOKEN`,
//! else the client config file (`--client-config`, `FEDRAFT_CLIENT_CONFIG`, or
//! `~/.config/fedraft/client.toml` with `server = "..."` and `token = "..."`), else
//! `http://127.0.0.1:8080` and no token. An `https://` server is verified against `--ca-file`
//! (`FEDRAFT_CA_FILE`, or `ca_file` in the config file) when given, else the system roots;
//! `--cert-file` / `--key-file` present a client certificate to an API that requires one. Writes carry an Idempotency-Key, so a retry after a 503
//! or a dropped connection is safe; they are retried a few times with the same key.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use crate::output::{self, Format, ListKind};
use crate::Resource;

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
    /// Client config file (TOML: server, token, ca_file, cert_file, key_file).
    #[arg(long, global = true, env = "FEDRAFT_CLIENT_CONFIG")]
    pub client_config: Option<PathBuf>,
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

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientFile {
    server: Option<String>,
    token: Option<String>,
    ca_file: Option<PathBuf>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
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
}

impl Client {
    pub fn new(opts: &ClientOpts) -> anyhow::Result<Client> {
        let file = load_file(opts.client_config.as_ref())?;
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
        Ok(Client { http, base, token })
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

fn load_file(explicit: Option<&PathBuf>) -> anyhow::Result<ClientFile> {
    let path = match explicit {
        Some(p) => p.clone(),
        None => match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".config/fedraft/client.toml"),
            None => return Ok(ClientFile::default()),
        },
    };
    if explicit.is_none() && !path.exists() {
        return Ok(ClientFile::default());
    }
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Splits `NS/NAME`.
pub fn split_object(name: &str) -> anyhow::Result<(&str, &str)> {
    name.split_once('/')
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
        .ok_or_else(|| anyhow::anyhow!("expected NAMESPACE/NAME, got {name:?}"))
}

pub async fn get(
    c: &Client,
    r: Resource,
    ns: Option<&str>,
    fmt: Format,
    stale: bool,
) -> anyhow::Result<ExitCode> {
    let (path, kind) = match (r, ns) {
        (Resource::Clusters, _) => ("/v1/clusters".to_string(), ListKind::Clusters),
        (Resource::Objects, Some(ns)) => {
            (format!("/v1/namespaces/{ns}/objects"), ListKind::Objects)
        }
        (Resource::Objects, None) => ("/v1/objects".to_string(), ListKind::Objects),
        (Resource::Tenants, _) => ("/v1/tenants".to_string(), ListKind::Tenants),
        (Resource::Endpoints, _) => return crate::endpoints::get(c, ns, fmt, stale).await,
    };
    let path = if stale {
        format!("{path}?stale=true")
    } else {
        path
    };
    let doc = c.get_json(&path).await?;
    print!("{}", output::format_list(kind, &doc, fmt)?);
    Ok(ExitCode::SUCCESS)
}

pub async fn describe(
    c: &Client,
    r: Resource,
    name: &str,
    fmt: Format,
) -> anyhow::Result<ExitCode> {
    let path = match r {
        Resource::Objects => {
            let (ns, n) = split_object(name)?;
            format!("/v1/namespaces/{ns}/objects/{n}")
        }
        Resource::Clusters => format!("/v1/clusters/{name}"),
        Resource::Tenants => format!("/v1/tenants/{name}"),
        Resource::Endpoints => return crate::endpoints::describe(c, name, fmt).await,
    };
    let doc = c.get_json(&path).await?;
    let text = match (fmt, r) {
        (Format::Json, _) => serde_json::to_string_pretty(&doc)? + "\n",
        (Format::Yaml, _) | (_, Resource::Clusters | Resource::Tenants | Resource::Endpoints) => {
            serde_yaml::to_string(&doc)?
        }
        (_, Resource::Objects) => output::describe_object(&doc),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

pub async fn delete(
    c: &Client,
    r: Resource,
    name: &str,
    rv: Option<u64>,
) -> anyhow::Result<ExitCode> {
    let (path, what) = match r {
        Resource::Objects => {
            let (ns, n) = split_object(name)?;
            (
                format!("/v1/namespaces/{ns}/objects/{n}"),
                format!("object/{ns}/{n}"),
            )
        }
        Resource::Clusters => (format!("/v1/clusters/{name}"), format!("cluster/{name}")),
        Resource::Tenants => (format!("/v1/tenants/{name}"), format!("tenant/{name}")),
        Resource::Endpoints => {
            anyhow::bail!("endpoints are derived from the Service object: delete the object")
        }
    };
    let v = c.write(reqwest::Method::DELETE, &path, None, rv).await?;
    println!("{what} deleted (resourceVersion {})", v["resourceVersion"]);
    Ok(ExitCode::SUCCESS)
}

pub async fn cluster_action(c: &Client, cluster: &str, action: &str) -> anyhow::Result<ExitCode> {
    let v = c
        .write(
            reqwest::Method::POST,
            &format!("/v1/clusters/{cluster}/{action}"),
            None,
            None,
        )
        .await?;
    let done = match action {
        "cordon" => "cordoned",
        "uncordon" => "uncordoned",
        _ => "drained",
    };
    println!(
        "cluster/{cluster} {done} (resourceVersion {})",
        v["resourceVersion"]
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn watch(
    c: &Client,
    rv: Option<u64>,
    kind: Option<String>,
    ns: Option<String>,
    limit: Option<usize>,
) -> anyhow::Result<ExitCode> {
    use futures::StreamExt;
    let mut q: Vec<(String, String)> = Vec::new();
    if let Some(rv) = rv {
        q.push(("resourceVersion".into(), rv.to_string()));
    }
    if let Some(k) = kind {
        q.push(("kind".into(), k));
    }
    if let Some(n) = ns {
        q.push(("namespace".into(), n));
    }
    // Values are plain numbers and DNS labels; kind names are letters only.
    let query: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let path = if query.is_empty() {
        "/v1/watch".to_string()
    } else {
        format!("/v1/watch?{}", query.join("&"))
    };
    let resp = c
        .request(reqwest::Method::GET, &path)
        .send()
        .await
        .map_err(|e| c.unreachable(e))?;
    if !resp.status().is_success() {
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        return Err(ClientError::Api {
            status,
            code: v["error"]["code"].as_str().unwrap_or("Error").into(),
            message: v["error"]["message"].as_str().unwrap_or("").into(),
            field: None,
        }
        .into());
    }
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk.map_err(|e| c.unreachable(e))?);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            print!("{}", String::from_utf8_lossy(&line));
            seen += 1;
            if limit.is_some_and(|l| seen >= l) {
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
