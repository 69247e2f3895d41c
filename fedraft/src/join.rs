//! `fedraft join NAME --kubeconfig FILE [--context C] [--labels k=v,...]`: registers a member
//! cluster from a kubeconfig, as `karmadactl join` does. The chosen context's cluster and user
//! become one self-contained kubeconfig (one cluster, one user, one context), sent as the
//! registration's credentials; the context's server becomes `apiEndpoint`.
//!
//! fedraft's nodes, not this machine, will use those credentials, so nothing may point at
//! this machine: files the kubeconfig names (`certificate-authority`, `client-certificate`,
//! `client-key`, `tokenFile`) are read here and inlined (each noted on stderr), and users that
//! authenticate through an `exec` plugin or an `auth-provider` are refused, since no node could
//! run them.
//!
//! Must not: print the credentials, or send anything before the whole kubeconfig checked out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::client::Client;

#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    /// The member cluster's name in fedraft (a DNS label, e.g. dc1).
    pub name: String,
    /// The kubeconfig that reaches the member cluster.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
    /// Labels for placement, e.g. region=eu,zone=eu-1.
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
}

/// `name` in a kubeconfig list (`clusters`, `users`, `contexts`): the entry's inner map.
fn entry<'a>(kc: &'a Value, list: &str, inner: &str, name: &str) -> anyhow::Result<&'a Value> {
    kc[list]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"].as_str() == Some(name))
        .map(|e| &e[inner])
        .filter(|v| v.is_object())
        .with_context(|| format!("the kubeconfig has no {inner} named {name:?}"))
}

/// Reads a file the kubeconfig refers to (relative to the kubeconfig's own directory, as
/// kubectl resolves it).
fn read_ref(base: &Path, file: &str) -> anyhow::Result<Vec<u8>> {
    let p = base.join(file);
    std::fs::read(&p).with_context(|| format!("reading {} (named in the kubeconfig)", p.display()))
}

/// `map`'s file field `file_key` turned into its inline `data_key` (base64), noted in `notes`.
fn inline(
    map: &mut Map<String, Value>,
    file_key: &str,
    data_key: &str,
    base: &Path,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    let Some(file) = map.remove(file_key) else {
        return Ok(());
    };
    let file = file
        .as_str()
        .with_context(|| format!("{file_key} is not a file name"))?
        .to_string();
    if map.contains_key(data_key) {
        notes.push(format!(
            "{file_key} {file} ignored: {data_key} is given inline"
        ));
        return Ok(());
    }
    let bytes = read_ref(base, &file)?;
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    map.insert(data_key.into(), Value::String(data));
    notes.push(format!("{file_key} {file} inlined"));
    Ok(())
}

/// The registration document for `name`, built from kubeconfig text; `base` is the directory
/// relative file references resolve against. Returns it with notes for the user.
pub fn registration(
    text: &str,
    base: &Path,
    name: &str,
    context: Option<&str>,
    labels: &BTreeMap<String, String>,
) -> anyhow::Result<(Value, Vec<String>)> {
    let kc: Value = serde_yaml::from_str(text).context("parsing the kubeconfig")?;
    let ctx_name = match context {
        Some(c) => c.to_string(),
        None => kc["current-context"]
            .as_str()
            .filter(|c| !c.is_empty())
            .context("the kubeconfig has no current-context: name one with --context")?
            .to_string(),
    };
    let ctx = entry(&kc, "contexts", "context", &ctx_name)?;
    let cluster_name = ctx["cluster"]
        .as_str()
        .with_context(|| format!("context {ctx_name:?} names no cluster"))?;
    let mut cluster = entry(&kc, "clusters", "cluster", cluster_name)?
        .as_object()
        .cloned()
        .unwrap_or_default();
    let server = cluster
        .get("server")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .with_context(|| format!("cluster {cluster_name:?} has no server"))?
        .to_string();
    let mut notes = Vec::new();
    inline(
        &mut cluster,
        "certificate-authority",
        "certificate-authority-data",
        base,
        &mut notes,
    )?;
    let user_name = ctx["user"].as_str();
    let user = match user_name {
        None => Map::new(),
        Some(u) => {
            let mut user = entry(&kc, "users", "user", u)?
                .as_object()
                .cloned()
                .unwrap_or_default();
            if let Some(exec) = user.get("exec") {
                bail!(
                    "user {u:?} authenticates through an exec plugin ({}): fedraft's nodes cannot \
                     run it. Give the cluster a token or a client certificate (e.g. a service \
                     account's token) in the kubeconfig and join again",
                    exec["command"].as_str().unwrap_or("?")
                );
            }
            if user.contains_key("auth-provider") {
                bail!(
                    "user {u:?} authenticates through an auth-provider plugin: fedraft's nodes \
                     cannot run it. Give the cluster a token or a client certificate instead"
                );
            }
            inline(
                &mut user,
                "client-certificate",
                "client-certificate-data",
                base,
                &mut notes,
            )?;
            inline(&mut user, "client-key", "client-key-data", base, &mut notes)?;
            if let Some(file) = user.remove("tokenFile") {
                let file = file
                    .as_str()
                    .context("tokenFile is not a file name")?
                    .to_string();
                if user.contains_key("token") {
                    notes.push(format!("tokenFile {file} ignored: token is given inline"));
                } else {
                    let token = String::from_utf8(read_ref(base, &file)?)
                        .with_context(|| format!("tokenFile {file} is not text"))?;
                    user.insert("token".into(), Value::String(token.trim().to_string()));
                    notes.push(format!("tokenFile {file} inlined"));
                }
            }
            user
        }
    };
    let user_key = user_name.unwrap_or("fedraft");
    let mut context_map = Map::new();
    context_map.insert("cluster".into(), Value::String(cluster_name.into()));
    context_map.insert("user".into(), Value::String(user_key.into()));
    let own = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": user_key, "user": user}],
        "contexts": [{"name": ctx_name, "context": context_map}],
        "current-context": ctx_name,
    });
    let kubeconfig = serde_yaml::to_string(&own).context("encoding the kubeconfig")?;
    let doc = json!({
        "kind": "Cluster",
        "name": name,
        "labels": labels,
        "apiEndpoint": server,
        "credentials": {"kubeconfig": kubeconfig},
    });
    Ok((doc, notes))
}

fn parse_labels(items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    items
        .iter()
        .filter(|s| !s.is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(
                crate::usage::UsageError(format!("--labels: expected KEY=VALUE, got {kv:?}"))
                    .into(),
            ),
        })
        .collect()
}

pub async fn run(c: &Client, a: JoinArgs) -> anyhow::Result<ExitCode> {
    let labels = parse_labels(&a.labels)?;
    let text = std::fs::read_to_string(&a.kubeconfig)
        .with_context(|| format!("reading {}", a.kubeconfig.display()))?;
    let base = a
        .kubeconfig
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let (doc, notes) = registration(&text, &base, &a.name, a.context.as_deref(), &labels)
        .with_context(|| format!("{}", a.kubeconfig.display()))?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    let v = c
        .write(
            reqwest::Method::PUT,
            &format!("/v1/clusters/{}", a.name),
            Some(&doc),
            None,
        )
        .await
        .with_context(|| format!("registering cluster {}", a.name))?;
    println!(
        "cluster/{} joined at {} (resourceVersion {})",
        a.name,
        doc["apiEndpoint"].as_str().unwrap_or("?"),
        v["resourceVersion"]
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod-cluster
  cluster:
    server: https://10.1.0.1:6443
    certificate-authority: certs/ca.pem
- name: other
  cluster: {server: https://10.9.9.9:6443}
users:
- name: admin
  user:
    tokenFile: token.txt
- name: sso
  user:
    exec: {command: kubelogin, apiVersion: client.authentication.k8s.io/v1}
contexts:
- name: prod
  context: {cluster: prod-cluster, user: admin}
- name: sso
  context: {cluster: other, user: sso}
"#;

    #[test]
    fn inlines_referenced_files_and_keeps_one_context() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("certs")).unwrap();
        std::fs::write(dir.path().join("certs/ca.pem"), "CA-PEM").unwrap();
        std::fs::write(dir.path().join("token.txt"), "tok-123\n").unwrap();
        let labels = BTreeMap::from([("region".to_string(), "eu".to_string())]);
        let (doc, notes) = registration(KUBECONFIG, dir.path(), "dc1", None, &labels).unwrap();
        assert_eq!(doc["apiEndpoint"], "https://10.1.0.1:6443");
        assert_eq!(doc["labels"]["region"], "eu");
        assert_eq!(notes.len(), 2, "{notes:?}");
        let kc: Value =
            serde_yaml::from_str(doc["credentials"]["kubeconfig"].as_str().unwrap()).unwrap();
        assert_eq!(kc["current-context"], "prod");
        assert_eq!(kc["clusters"].as_array().unwrap().len(), 1);
        assert_eq!(
            kc["clusters"][0]["cluster"]["certificate-authority-data"],
            base64::engine::general_purpose::STANDARD.encode("CA-PEM")
        );
        assert!(kc["clusters"][0]["cluster"]
            .get("certificate-authority")
            .is_none());
        assert_eq!(kc["users"][0]["user"]["token"], "tok-123");
        assert!(kc["users"][0]["user"].get("tokenFile").is_none());
    }

    #[test]
    fn refuses_plugins_and_missing_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let none = BTreeMap::new();
        let e = registration(KUBECONFIG, dir.path(), "dc1", Some("sso"), &none).unwrap_err();
        assert!(
            format!("{e:#}").contains("exec plugin (kubelogin)"),
            "{e:#}"
        );
        let e = registration(KUBECONFIG, dir.path(), "dc1", Some("nope"), &none).unwrap_err();
        assert!(
            format!("{e:#}").contains("no context named \"nope\""),
            "{e:#}"
        );
        // The default context names files that are not there.
        let e = registration(KUBECONFIG, dir.path(), "dc1", None, &none).unwrap_err();
        assert!(format!("{e:#}").contains("ca.pem"), "{e:#}");
        assert!(parse_labels(&["a=b".into(), "c".into()]).is_err());
    }
}
