//! `fedraft get endpoints [-n NS]` and `fedraft describe endpoints NS/NAME`: the discovery view
//! of federated Services (the same view the DNS servers answer from), read through
//! `GET /v1/namespaces/{ns}/services/{name}/endpoints`. Presentation only.

use std::process::ExitCode;

use serde_json::Value;

use crate::client::{split_object, Client};
use crate::output::Format;

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn answering(view: &Value) -> String {
    let clusters = view["clusters"].as_array().cloned().unwrap_or_default();
    let names: Vec<String> = view["answering"]
        .as_array()
        .map(|a| a.iter().map(s).collect())
        .unwrap_or_default();
    let parts: Vec<String> = clusters
        .iter()
        .filter(|c| names.contains(&s(&c["cluster"])))
        .map(|c| format!("{}:{}", s(&c["cluster"]), s(&c["weight"])))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(",")
    }
}

fn ports(view: &Value) -> String {
    let p: Vec<String> = view["ports"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| format!("{}/{}", s(&p["port"]), s(&p["protocol"])))
                .collect()
        })
        .unwrap_or_default();
    if p.is_empty() {
        "-".into()
    } else {
        p.join(",")
    }
}

/// Lists the views of every Service object (in `ns`, or everywhere) that has one.
pub async fn get(
    c: &Client,
    ns: Option<&str>,
    fmt: Format,
    stale: bool,
) -> anyhow::Result<ExitCode> {
    let path = match ns {
        Some(ns) => format!("/v1/namespaces/{ns}/objects"),
        None => "/v1/objects".to_string(),
    };
    let q = if stale { "?stale=true" } else { "" };
    let list = c.get_json(&format!("{path}{q}")).await?;
    let mut views = Vec::new();
    for o in list["items"].as_array().cloned().unwrap_or_default() {
        if o["template"]["kind"] != "Service" {
            continue;
        }
        let (ns, name) = (s(&o["namespace"]), s(&o["name"]));
        // Services without a discovery section have no view (404): not listed.
        if let Ok(v) = c
            .get_json(&format!("/v1/namespaces/{ns}/services/{name}/endpoints{q}"))
            .await
        {
            views.push(v);
        }
    }
    let text = match fmt {
        Format::Json => serde_json::to_string_pretty(&views)? + "\n",
        Format::Yaml => serde_yaml::to_string(&views)?,
        _ => {
            let mut out = format!(
                "{:<16} {:<24} {:<9} {:<5} {:<32} {}\n",
                "NAMESPACE", "NAME", "MODE", "TTL", "ANSWERING", "PORTS"
            );
            for v in &views {
                out.push_str(&format!(
                    "{:<16} {:<24} {:<9} {:<5} {:<32} {}\n",
                    s(&v["namespace"]),
                    s(&v["name"]),
                    s(&v["mode"]),
                    s(&v["discovery"]["ttlSeconds"]),
                    answering(v),
                    ports(v)
                ));
            }
            out
        }
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// One Service's view, per cluster with the reason it is or is not answered.
pub async fn describe(c: &Client, name: &str, fmt: Format) -> anyhow::Result<ExitCode> {
    let (ns, n) = split_object(name)?;
    let v = c
        .get_json(&format!("/v1/namespaces/{ns}/services/{n}/endpoints"))
        .await?;
    let text = match fmt {
        Format::Json => serde_json::to_string_pretty(&v)? + "\n",
        Format::Yaml => serde_yaml::to_string(&v)?,
        _ => {
            let mut out = format!(
                "Service:    {ns}/{n}\nMode:       {}\nTTL:        {}s\nWeighting:  {}\nFailOpen:   {}\nPorts:      {}\nAnswering:  {}\nClusters:\n",
                s(&v["mode"]),
                s(&v["discovery"]["ttlSeconds"]),
                s(&v["discovery"]["weighting"]),
                s(&v["discovery"]["failOpen"]),
                ports(&v),
                answering(&v),
            );
            for c in v["clusters"].as_array().cloned().unwrap_or_default() {
                let addrs: Vec<String> = c["addresses"]
                    .as_array()
                    .map(|a| a.iter().map(s).collect())
                    .unwrap_or_default();
                out.push_str(&format!(
                    "  {:<12} health={:<9} ready={:<4} weight={:<4} addresses={} {}\n",
                    s(&c["cluster"]),
                    s(&c["health"]),
                    s(&c["readyEndpoints"]),
                    s(&c["weight"]),
                    if addrs.is_empty() {
                        "-".into()
                    } else {
                        addrs.join(",")
                    },
                    match &c["reason"] {
                        Value::Null => "eligible".to_string(),
                        r => format!("not eligible: {}", s(r)),
                    }
                ));
            }
            out
        }
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
