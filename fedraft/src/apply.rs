//! `fedraft apply -f FILE`: every document in a multi-document YAML or JSON file, in order.
//!
//! All documents are parsed and checked (known kind, names present) before the first request,
//! so a typo in the third document does not leave the first two applied alone.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use serde::Deserialize;
use serde_json::Value;

use crate::client::Client;

/// One document to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    pub kind: String,
    pub path: String,
    pub label: String,
    pub body: Value,
}

/// Reads a file (or stdin for `-`) into documents: YAML (multi-document) or JSON (an object,
/// an array of objects, or a list `{"items": [...]}`).
pub fn read_docs(file: &Path) -> anyhow::Result<Vec<Value>> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    parse_docs(&text).with_context(|| format!("parsing {}", file.display()))
}

pub fn parse_docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(de).with_context(|| format!("document {}", i + 1))?;
        match v {
            Value::Null => {}
            Value::Array(items) => out.extend(items),
            Value::Object(ref m)
                if m.get("items").is_some_and(Value::is_array) && !m.contains_key("kind") =>
            {
                out.extend(m["items"].as_array().cloned().unwrap_or_default())
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

fn field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).or_else(|| {
        v.get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
    })
}

/// Where a document goes.
pub fn plan(v: &Value, n: usize) -> anyhow::Result<Doc> {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = field(v, "name");
    let need = |what: &str| anyhow::anyhow!("document {n} ({kind}): missing {what}");
    let (path, label) = match kind {
        "Cluster" => {
            let name = name.ok_or_else(|| need("name"))?;
            (format!("/v1/clusters/{name}"), format!("cluster/{name}"))
        }
        "FederatedObject" => {
            let name = name.ok_or_else(|| need("name"))?;
            let ns = field(v, "namespace").ok_or_else(|| need("namespace"))?;
            (
                format!("/v1/namespaces/{ns}/objects/{name}"),
                format!("object/{ns}/{name}"),
            )
        }
        "Tenant" => {
            let name = name.ok_or_else(|| need("name"))?;
            (format!("/v1/tenants/{name}"), format!("tenant/{name}"))
        }
        "" => bail!("document {n}: missing kind (Cluster, FederatedObject or Tenant)"),
        other => bail!("document {n}: unknown kind {other:?} (Cluster, FederatedObject or Tenant)"),
    };
    Ok(Doc {
        kind: kind.to_string(),
        path,
        label,
        body: v.clone(),
    })
}

pub async fn run(c: &Client, file: &Path) -> anyhow::Result<ExitCode> {
    let docs = read_docs(file)?;
    if docs.is_empty() {
        bail!("{}: no documents", file.display());
    }
    let plans: Vec<Doc> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| plan(d, i + 1))
        .collect::<Result<_, _>>()?;
    for d in plans {
        let v = c
            .write(reqwest::Method::PUT, &d.path, Some(&d.body), None)
            .await
            .with_context(|| format!("applying {}", d.label))?;
        println!(
            "{} applied (resourceVersion {})",
            d.label, v["resourceVersion"]
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_json_lists() {
        let docs = parse_docs(
            "kind: Cluster\nname: a\napiEndpoint: http://x\n---\n---\nkind: Tenant\nname: t\n",
        )
        .unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(plan(&docs[0], 1).unwrap().path, "/v1/clusters/a");
        let docs = parse_docs(
            r#"[{"kind":"FederatedObject","metadata":{"namespace":"n","name":"o"},"template":{}}]"#,
        )
        .unwrap();
        assert_eq!(
            plan(&docs[0], 1).unwrap().path,
            "/v1/namespaces/n/objects/o"
        );
        assert!(plan(&serde_json::json!({"kind": "Pod"}), 1).is_err());
        assert!(plan(&serde_json::json!({"kind": "Cluster"}), 1).is_err());
    }
}
