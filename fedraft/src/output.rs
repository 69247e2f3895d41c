//! Output formatting for client verbs: table, wide, json, yaml.
//!
//! Works on the API's JSON documents (the CLI never links the server's wire types), so a table is a
//! list of columns, each a header and a function from one item to its cell. Output is deterministic
//! (no ages or clocks) so it can be compared against golden files.

use serde_json::Value;

/// `-o` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Wide,
    Json,
    Yaml,
}

/// The kinds `get` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Clusters,
    Objects,
    Tenants,
}

type Cell = fn(&Value) -> String;

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn kv_map(v: &Value) -> String {
    match v.as_object() {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| format!("{k}={}", s(v)))
            .collect::<Vec<_>>()
            .join(","),
        _ => "-".into(),
    }
}

fn list(v: &Value) -> String {
    match v.as_array() {
        Some(a) if !a.is_empty() => a.iter().map(s).collect::<Vec<_>>().join(","),
        _ => "-".into(),
    }
}

fn columns(kind: ListKind, wide: bool) -> Vec<(&'static str, Cell)> {
    let mut cols: Vec<(&'static str, Cell)> = match kind {
        ListKind::Clusters => vec![
            ("NAME", |v| s(&v["name"])),
            ("HEALTH", |v| s(&v["status"]["health"])),
            ("CORDONED", |v| s(&v["cordoned"])),
            ("TAINTS", |v| match v["taints"].as_array() {
                Some(a) if !a.is_empty() => a
                    .iter()
                    .map(|t| format!("{}={}:{}", s(&t["key"]), s(&t["value"]), s(&t["effect"])))
                    .collect::<Vec<_>>()
                    .join(","),
                _ => "-".into(),
            }),
            ("VERSION", |v| s(&v["resourceVersion"])),
        ],
        ListKind::Objects => vec![
            ("NAMESPACE", |v| s(&v["namespace"])),
            ("NAME", |v| s(&v["name"])),
            ("KIND", |v| s(&v["template"]["kind"])),
            ("READY", |v| s(&v["status"]["readyReplicas"])),
            ("PLACEMENT", |v| kv_map(&v["status"]["placement"])),
            ("VERSION", |v| s(&v["resourceVersion"])),
        ],
        ListKind::Tenants => vec![
            ("NAME", |v| s(&v["name"])),
            ("NAMESPACES", |v| list(&v["namespaces"])),
            ("MEMBERS", |v| list(&v["members"])),
            ("VERSION", |v| s(&v["resourceVersion"])),
        ],
    };
    if wide {
        match kind {
            ListKind::Clusters => {
                cols.push(("ENDPOINT", |v| s(&v["apiEndpoint"])));
                cols.push(("LABELS", |v| kv_map(&v["labels"])));
            }
            ListKind::Objects => {
                cols.push(("MODE", |v| s(&v["placement"]["replicas"]["mode"])));
                cols.push(("CONDITIONS", |v| {
                    match v["status"]["conditions"].as_array() {
                        Some(a) if !a.is_empty() => a
                            .iter()
                            .map(|c| format!("{}={}", s(&c["type"]), s(&c["status"])))
                            .collect::<Vec<_>>()
                            .join(","),
                        _ => "-".into(),
                    }
                }));
            }
            ListKind::Tenants => cols.push(("QUOTA", |v| kv_map(&v["quota"]))),
        }
    }
    cols
}

/// Renders rows as an aligned table: columns separated by at least three spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// Formats a list document (`{"items": [...]}`) for `get`.
pub fn format_list(kind: ListKind, doc: &Value, format: Format) -> anyhow::Result<String> {
    match format {
        Format::Json => Ok(serde_json::to_string_pretty(doc)? + "\n"),
        Format::Yaml => Ok(serde_yaml::to_string(doc)?),
        Format::Table | Format::Wide => {
            let cols = columns(kind, format == Format::Wide);
            let items = doc["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                return Ok("No resources found.\n".into());
            }
            let headers: Vec<&str> = cols.iter().map(|(h, _)| *h).collect();
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|it| cols.iter().map(|(_, f)| f(it)).collect())
                .collect();
            Ok(table(&headers, &rows))
        }
    }
}

/// Formats one object for `describe`: its spec summary, placement, per-cluster status and the last
/// decision with its reasons.
pub fn describe_object(obj: &Value) -> String {
    let mut out = String::new();
    let mut kv = |k: &str, v: String| out.push_str(&format!("{k:<18}{v}\n"));
    kv("Namespace:", s(&obj["namespace"]));
    kv("Name:", s(&obj["name"]));
    kv("Kind:", s(&obj["template"]["kind"]));
    kv("Resource version:", s(&obj["resourceVersion"]));
    kv("Replica mode:", s(&obj["placement"]["replicas"]["mode"]));
    kv("Ready replicas:", s(&obj["status"]["readyReplicas"]));
    out.push_str("Placement:\n");
    match obj["status"]["placement"].as_object() {
        Some(m) if !m.is_empty() => {
            for (cluster, n) in m {
                out.push_str(&format!("  {cluster}: {}\n", s(n)));
            }
        }
        _ => out.push_str("  (none)\n"),
    }
    out.push_str("Clusters:\n");
    match obj["status"]["clusters"].as_object() {
        Some(m) if !m.is_empty() => {
            let headers = ["  CLUSTER", "APPLIED", "READY", "MESSAGE"];
            let rows: Vec<Vec<String>> = m
                .iter()
                .map(|(c, st)| {
                    vec![
                        format!("  {c}"),
                        s(&st["applied"]),
                        s(&st["readyReplicas"]),
                        s(&st["message"]),
                    ]
                })
                .collect();
            out.push_str(&table(&headers, &rows));
        }
        _ => out.push_str("  (no reports yet)\n"),
    }
    out.push_str("Conditions:\n");
    match obj["status"]["conditions"].as_array() {
        Some(a) if !a.is_empty() => {
            for c in a {
                let msg = s(&c["message"]);
                out.push_str(
                    &format!("  {}={} {}\n", s(&c["type"]), s(&c["status"]), msg)
                        .replace(" -\n", "\n"),
                );
            }
        }
        _ => out.push_str("  (none)\n"),
    }
    out.push_str("Last decision:\n");
    out.push_str(&describe_decision(&obj["status"]["lastDecision"], "  "));
    out
}

/// Formats a decision record (also the text output of `schedule`).
pub fn describe_decision(d: &Value, indent: &str) -> String {
    if d.is_null() {
        return format!("{indent}(none)\n");
    }
    let mut out = String::new();
    if let Some(sum) = d["summary"].as_str() {
        out.push_str(&format!("{indent}Summary: {sum}\n"));
    }
    out.push_str(&format!("{indent}Result: {}\n", kv_map(&d["placement"])));
    out.push_str(&format!("{indent}Candidates: {}\n", list(&d["candidates"])));
    if let Some(w) = d["weights"].as_object().filter(|w| !w.is_empty()) {
        let _ = w;
        out.push_str(&format!("{indent}Weights: {}\n", kv_map(&d["weights"])));
    }
    if let Some(dropped) = d["dropped"].as_array().filter(|a| !a.is_empty()) {
        out.push_str(&format!("{indent}Dropped:\n"));
        for x in dropped {
            let reason = x["reasonText"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| s(&x["reason"]));
            out.push_str(&format!("{indent}  {}: {reason}\n", s(&x["cluster"])));
        }
    }
    if let Some(u) = d["unschedulable"].as_object() {
        out.push_str(&format!(
            "{indent}Unschedulable: {} replicas short: {}\n",
            s(&u.get("replicas").cloned().unwrap_or(Value::Null)),
            s(&u.get("message").cloned().unwrap_or(Value::Null))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let t = table(
            &["NAME", "X"],
            &[
                vec!["a".into(), "1".into()],
                vec!["long-name".into(), "22".into()],
            ],
        );
        assert_eq!(t, "NAME        X\na           1\nlong-name   22\n");
    }

    #[test]
    fn empty_list_says_so() {
        let doc = serde_json::json!({"items": []});
        assert_eq!(
            format_list(ListKind::Clusters, &doc, Format::Table).unwrap(),
            "No resources found.\n"
        );
    }
}
