//! The client verbs that act on named resources, each one or a few requests: `describe`,
//! `delete` (by name, or every document of `-f FILE`), `cordon` / `uncordon` / `drain`, and
//! `watch` (the raw event stream as JSON lines). `get` has its own module (`get.rs`).
//!
//! Objects are named `NS/NAME`, or `NAME` with `-n NS` (or the context's namespace).
//!
//! Must not: build HTTP requests by hand (`client.rs` does) or lay out tables (`output.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::client::{split_object, Client, ClientError};
use crate::output::{self, Format};
use crate::timefmt::Times;
use crate::usage::UsageError;

/// What `get`, `describe` and `delete` act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Resource {
    /// Member clusters.
    #[value(alias = "cluster")]
    Clusters,
    /// Federated objects (namespaced).
    #[value(alias = "object", alias = "federatedobjects")]
    Objects,
    /// Tenants and their namespaces.
    #[value(alias = "tenant")]
    Tenants,
    /// Service discovery views (`get endpoints`, `describe endpoints NS/NAME`).
    #[value(alias = "endpoint", alias = "ep")]
    Endpoints,
}

/// `NS/NAME`, or `NAME` in `ns`.
fn object_name<'a>(name: &'a str, ns: Option<&'a str>) -> anyhow::Result<(&'a str, &'a str)> {
    if name.contains('/') {
        return split_object(name);
    }
    match ns {
        Some(ns) if !name.is_empty() => Ok((ns, name)),
        _ => Err(UsageError(format!(
            "expected NAMESPACE/NAME (or NAME with -n NAMESPACE), got {name:?}"
        ))
        .into()),
    }
}

pub async fn describe(
    c: &Client,
    r: Resource,
    name: &str,
    ns: Option<&str>,
    fmt: Format,
) -> anyhow::Result<ExitCode> {
    let ns = c.namespace(ns);
    let path = match r {
        Resource::Objects => {
            let (ns, n) = object_name(name, ns)?;
            format!("/v1/namespaces/{ns}/objects/{n}")
        }
        Resource::Clusters => format!("/v1/clusters/{name}"),
        Resource::Tenants => format!("/v1/tenants/{name}"),
        Resource::Endpoints => {
            let (ns, n) = object_name(name, ns)?;
            return crate::endpoints::describe(c, &format!("{ns}/{n}"), fmt).await;
        }
    };
    let doc = c.get_json(&path).await?;
    let times = Times::of(fmt == Format::Wide);
    let text = match (fmt, r) {
        (Format::Json, _) => serde_json::to_string_pretty(&doc)? + "\n",
        (Format::Yaml, _) | (_, Resource::Tenants | Resource::Endpoints) => {
            serde_yaml::to_string(&doc)?
        }
        (_, Resource::Objects) => {
            let mut text = output::describe_object(&doc, times);
            text.push_str(&describe_failback(c, &doc).await?);
            text
        }
        (_, Resource::Clusters) => output::describe_cluster(&doc, times),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// The object's fail-back and descheduling sections (from its rollout document) when there is
/// anything to say: a choice other than `never`, a fail-back pending or done, replicas Pending
/// unschedulable, a cluster held to what it could run.
async fn describe_failback(c: &Client, obj: &serde_json::Value) -> anyhow::Result<String> {
    let (ns, name) = (
        obj["namespace"].as_str().unwrap_or_default(),
        obj["name"].as_str().unwrap_or_default(),
    );
    let doc = c
        .get_json(&format!("/v1/namespaces/{ns}/objects/{name}/rollout"))
        .await?;
    let fb = &doc["failBack"];
    let quiet = fb["policy"] == "never"
        && fb["pending"].as_array().is_none_or(Vec::is_empty)
        && fb["last"].is_null();
    let mut out = if quiet || fb.is_null() {
        String::new()
    } else {
        crate::rollout::failback_lines(&doc)
    };
    out.push_str(&crate::rollout::descheduling_lines(&doc));
    Ok(out)
}

/// `delete RESOURCE NAME` or `delete -f FILE`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// clusters, objects or tenants (not with -f).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub resource: Option<Resource>,
    /// The resource's name; NS/NAME (or NAME with -n) for objects.
    #[arg(required_unless_present = "file")]
    pub name: Option<String>,
    /// The objects' namespace when NAME has none (default: the context's namespace).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Delete every document (Cluster, FederatedObject, Tenant) in this YAML/JSON file, in
    /// order; `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    pub file: Option<PathBuf>,
    /// Only if the resource is still at this version (not with -f).
    #[arg(long, conflicts_with = "file")]
    pub resource_version: Option<u64>,
}

pub async fn delete(c: &Client, a: DeleteArgs) -> anyhow::Result<ExitCode> {
    if let Some(file) = &a.file {
        return delete_file(c, file).await;
    }
    let (Some(r), Some(name)) = (a.resource, a.name.as_deref()) else {
        return Err(UsageError("delete needs RESOURCE NAME or -f FILE".into()).into());
    };
    let ns = c.namespace(a.namespace.as_deref());
    let (path, what) = match r {
        Resource::Objects => {
            let (ns, n) = object_name(name, ns)?;
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
    let v = c
        .write(reqwest::Method::DELETE, &path, None, a.resource_version)
        .await?;
    println!("{what} deleted (resourceVersion {})", v["resourceVersion"]);
    Ok(ExitCode::SUCCESS)
}

/// Every document of the file, in order. One already gone is reported and the rest still
/// deleted (exit 1 at the end), as `kubectl delete -f` does; any other refusal stops.
async fn delete_file(c: &Client, file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let docs = crate::apply::read_docs(file)?;
    if docs.is_empty() {
        anyhow::bail!("{}: no documents", file.display());
    }
    let plans: Vec<crate::apply::Doc> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| crate::apply::plan(d, i + 1))
        .collect::<Result<_, _>>()?;
    let mut missing = 0;
    for d in plans {
        match c.write(reqwest::Method::DELETE, &d.path, None, None).await {
            Ok(v) => println!(
                "{} deleted (resourceVersion {})",
                d.label, v["resourceVersion"]
            ),
            Err(ClientError::Api { status: 404, .. }) => {
                eprintln!("error: {} not found", d.label);
                missing += 1;
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("deleting {}", d.label))),
        }
    }
    Ok(if missing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `fedraft queue TENANT`: the tenant's work waiting for capacity, in the fleet's fair order.
pub async fn queue(c: &Client, tenant: &str, json: bool) -> anyhow::Result<ExitCode> {
    let v = c.get_json(&format!("/v1/tenants/{tenant}/queue")).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let items = v["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        println!("nothing of tenant {tenant} is waiting");
        return Ok(ExitCode::SUCCESS);
    }
    println!("POSITION  OBJECT  REPLICAS  PRIORITY  WAITING FOR");
    for w in &items {
        println!(
            "{}  {}/{}  {}  {}  {}",
            w["position"],
            w["namespace"].as_str().unwrap_or(""),
            w["name"].as_str().unwrap_or(""),
            w["replicas"],
            w["priority"],
            w["waitingFor"].as_str().unwrap_or(""),
        );
    }
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
    let resp = c.open_stream(&path).await?;
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
