//! `fedraft get`: list clusters, objects, tenants or endpoints, with kubectl's habits: `-n` (or
//! the context's namespace) and `-A/--all-namespaces`, `-l/--selector` (matched here, see
//! `selector.rs`), `-o table|wide|json|yaml|name|jsonpath=...`, and `-w/--watch`, which follows
//! the API's watch stream (`GET /v1/watch`) and prints each change as it happens.
//!
//! Must not: write anything, or decide a table's columns (`output.rs` does).

use std::collections::BTreeMap;
use std::process::ExitCode;

use futures::StreamExt;
use serde_json::Value;

use crate::client::Client;
use crate::output::{self, Format, ListKind, Output};
use crate::selector::Selector;
use crate::timefmt::Times;
use crate::usage::UsageError;
use crate::verbs::Resource;

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// What to list: clusters, objects, tenants or endpoints.
    pub resource: Resource,
    /// Only objects in this namespace (default: the context's namespace, else all).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Objects in every namespace, whatever the context says.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    /// Only items whose labels match, e.g. `region=eu,tier!=gold` or `env in (prod,stage)`.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// After listing, keep printing each change (follows the API's watch stream).
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// table, wide (more columns, times as RFC 3339), json, yaml, name, or
    /// jsonpath=TEMPLATE (kubectl's syntax, e.g. 'jsonpath={.items[*].name}').
    #[arg(short = 'o', long, default_value = "table", value_parser = Output::parse)]
    pub output: Output,
    /// Serve from the node's local state instead of a linearizable read.
    #[arg(long)]
    pub stale: bool,
}

fn labels_of(kind: ListKind, item: &Value) -> BTreeMap<String, String> {
    let v = match kind {
        ListKind::Clusters => &item["labels"],
        ListKind::Objects => &item["template"]["metadata"]["labels"],
        ListKind::Tenants => &Value::Null,
    };
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

pub async fn run(c: &Client, a: GetArgs) -> anyhow::Result<ExitCode> {
    let selector = a
        .selector
        .as_deref()
        .map(Selector::parse)
        .transpose()
        .map_err(|e| UsageError(e.to_string()))?;
    let ns = if a.all_namespaces {
        None
    } else {
        c.namespace(a.namespace.as_deref())
    };
    let kind = match a.resource {
        Resource::Clusters => ListKind::Clusters,
        Resource::Objects => ListKind::Objects,
        Resource::Tenants => ListKind::Tenants,
        Resource::Endpoints => {
            let Output::Format(fmt) = a.output else {
                return Err(
                    UsageError("endpoints support -o table, wide, json or yaml".into()).into(),
                );
            };
            if a.watch || selector.is_some() {
                return Err(
                    UsageError("endpoints support neither --watch nor --selector".into()).into(),
                );
            }
            return crate::endpoints::get(c, ns, fmt, a.stale).await;
        }
    };
    if a.watch {
        return watch(c, kind, ns, selector.as_ref(), &a.output).await;
    }
    let path = match (kind, ns) {
        (ListKind::Clusters, _) => "/v1/clusters".to_string(),
        (ListKind::Objects, Some(ns)) => format!("/v1/namespaces/{ns}/objects"),
        (ListKind::Objects, None) => "/v1/objects".to_string(),
        (ListKind::Tenants, _) => "/v1/tenants".to_string(),
    };
    let path = if a.stale {
        format!("{path}?stale=true")
    } else {
        path
    };
    let mut doc = c.get_json(&path).await?;
    if let (Some(sel), Some(items)) = (
        &selector,
        doc.get_mut("items").and_then(Value::as_array_mut),
    ) {
        items.retain(|it| sel.matches(&labels_of(kind, it)));
    }
    print!("{}", render_list(kind, &doc, &a.output)?);
    Ok(ExitCode::SUCCESS)
}

/// A whole list document in the chosen output.
pub fn render_list(kind: ListKind, doc: &Value, out: &Output) -> anyhow::Result<String> {
    let items = doc["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(match out {
        Output::Format(f) => output::format_list(kind, doc, *f)?,
        Output::Name => items
            .iter()
            .map(|it| output::name_of(kind, it) + "\n")
            .collect(),
        Output::JsonPath(t) => t.render(doc),
    })
}

/// The watch stream's kind filter for `kind`.
fn watch_kind(kind: ListKind) -> &'static str {
    match kind {
        ListKind::Clusters => "Cluster",
        ListKind::Objects => "FederatedObject",
        ListKind::Tenants => "Tenant",
    }
}

/// How `get -w` prints: the first batch (the list) at once, then a line or document per
/// change. Tables keep the widths of the first batch so the columns stay put.
struct Printer<'a> {
    kind: ListKind,
    out: &'a Output,
    times: Times,
    widths: Option<Vec<usize>>,
}

impl Printer<'_> {
    fn wide(&self) -> bool {
        matches!(self.out, Output::Format(Format::Wide))
    }

    fn batch(&mut self, items: &[Value]) -> anyhow::Result<String> {
        if let Output::Format(Format::Table | Format::Wide) = self.out {
            let (headers, rows) = output::table_parts(self.kind, items, self.wide(), self.times);
            let w = output::widths(&headers, &rows);
            let mut text = output::line(&headers, &w);
            for r in &rows {
                text.push_str(&output::line(r, &w));
            }
            self.widths = Some(w);
            return Ok(text);
        }
        items.iter().map(|it| self.one(it)).collect()
    }

    fn one(&mut self, item: &Value) -> anyhow::Result<String> {
        Ok(match self.out {
            Output::Format(Format::Table | Format::Wide) => {
                let (_, rows) = output::table_parts(
                    self.kind,
                    std::slice::from_ref(item),
                    self.wide(),
                    self.times,
                );
                let w = self.widths.clone().unwrap_or_default();
                rows.iter().map(|r| output::line(r, &w)).collect()
            }
            Output::Format(Format::Json) => serde_json::to_string_pretty(item)? + "\n",
            Output::Format(Format::Yaml) => format!("---\n{}", serde_yaml::to_string(item)?),
            Output::Name => output::name_of(self.kind, item) + "\n",
            Output::JsonPath(t) => t.render(item),
        })
    }
}

/// `get -w`: the stream's initial ADDED events (up to its first BOOKMARK) are the list; every
/// later event prints the resource as it now is (a deletion prints it as it last was, as
/// kubectl does). Runs until the server ends the stream or the user interrupts.
async fn watch(
    c: &Client,
    kind: ListKind,
    ns: Option<&str>,
    selector: Option<&Selector>,
    out: &Output,
) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut path = format!("/v1/watch?kind={}", watch_kind(kind));
    if let (ListKind::Objects, Some(ns)) = (kind, ns) {
        path.push_str(&format!("&namespace={ns}"));
    }
    let resp = c.open_stream(&path).await?;
    let mut printer = Printer {
        kind,
        out,
        // Ages are measured once: a streamed row's age is its age when it arrived.
        times: match out {
            Output::Format(Format::Wide) => Times::Absolute,
            _ => Times::Age {
                now_ms: crate::timefmt::now_ms(),
            },
        },
        widths: None,
    };
    let mut last: BTreeMap<String, Value> = BTreeMap::new();
    let mut initial: Option<Vec<Value>> = Some(Vec::new());
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    let stdout = std::io::stdout();
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk.map_err(|e| c.unreachable(e))?);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let key = format!(
                "{}/{}",
                ev["namespace"].as_str().unwrap_or(""),
                ev["name"].as_str().unwrap_or("")
            );
            let item = match ev["type"].as_str() {
                Some("BOOKMARK") => {
                    if let Some(items) = initial.take() {
                        let text = printer.batch(&items)?;
                        let mut o = stdout.lock();
                        o.write_all(text.as_bytes())?;
                        o.flush()?;
                    }
                    continue;
                }
                Some("ERROR") => anyhow::bail!(
                    "the watch ended: {} (run the command again to list afresh)",
                    ev["object"]
                ),
                Some("DELETED") => match last.remove(&key) {
                    Some(v) => v,
                    None => continue,
                },
                _ => {
                    let obj = ev["object"].clone();
                    last.insert(key, obj.clone());
                    obj
                }
            };
            if selector.is_some_and(|s| !s.matches(&labels_of(kind, &item))) {
                continue;
            }
            match &mut initial {
                Some(items) => items.push(item),
                None => {
                    let text = printer.one(&item)?;
                    let mut o = stdout.lock();
                    o.write_all(text.as_bytes())?;
                    o.flush()?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
