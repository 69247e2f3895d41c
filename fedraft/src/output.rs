//! Output formatting for client verbs: table, wide, json, yaml, and for `get` also name and
//! jsonpath.
//!
//! Works on the API's JSON documents (the CLI never links the server's wire types), so a table is a
//! list of columns, each a header and a function from one item (and how times show) to its cell.
//! Times are ages in tables and RFC 3339 with `-o wide` (`timefmt.rs`); the time column comes
//! last, as kubectl's AGE does. Everything else is deterministic, for golden files.

use serde_json::Value;

use crate::jsonpath::Template;
use crate::timefmt::Times;

/// `-o` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns; times as ages.
    Table,
    /// More columns; times as RFC 3339.
    Wide,
    /// The API's JSON document.
    Json,
    /// The API's document as YAML.
    Yaml,
}

/// `get -o`: a [`Format`], `name` (`cluster/dc1`, `object/NS/NAME`, `tenant/NAME`, one a line)
/// or `jsonpath=TEMPLATE` (kubectl's template syntax, see `jsonpath.rs`).
#[derive(Debug, Clone)]
pub enum Output {
    Format(Format),
    Name,
    JsonPath(std::sync::Arc<Template>),
}

impl Output {
    /// Parses an `-o` value (clap's value parser).
    pub fn parse(text: &str) -> Result<Output, String> {
        use clap::ValueEnum;
        if text == "name" {
            return Ok(Output::Name);
        }
        if let Some(t) = text.strip_prefix("jsonpath=") {
            return Template::parse(t)
                .map(|t| Output::JsonPath(std::sync::Arc::new(t)))
                .map_err(|e| e.to_string());
        }
        Format::from_str(text, false)
            .map(Output::Format)
            .map_err(|_| {
                format!("{text:?}: expected table, wide, json, yaml, name or jsonpath=TEMPLATE")
            })
    }
}

/// The kinds `get` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Clusters,
    Objects,
    Tenants,
}

type Cell = fn(&Value, Times) -> String;

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

/// A `...Ms` field as `times` shows it; `-` when absent or zero (never set).
fn time_cell(v: &Value, times: Times) -> String {
    match v.as_u64() {
        Some(ms) if ms > 0 => times.show(ms),
        _ => "-".into(),
    }
}

/// `cluster/dc1`, `object/NS/NAME`, `tenant/NAME`: what `-o name` prints and `describe` and
/// `delete` take (after the slash).
pub fn name_of(kind: ListKind, item: &Value) -> String {
    match kind {
        ListKind::Clusters => format!("cluster/{}", s(&item["name"])),
        ListKind::Objects => format!("object/{}/{}", s(&item["namespace"]), s(&item["name"])),
        ListKind::Tenants => format!("tenant/{}", s(&item["name"])),
    }
}

fn columns(kind: ListKind, wide: bool) -> Vec<(&'static str, Cell)> {
    let mut cols: Vec<(&'static str, Cell)> = match kind {
        ListKind::Clusters => vec![
            ("NAME", |v, _| s(&v["name"])),
            ("HEALTH", |v, _| {
                match v["status"]["failoverHeld"].as_bool() {
                    Some(true) => format!("{} (failover paused)", s(&v["status"]["health"])),
                    _ => s(&v["status"]["health"]),
                }
            }),
            ("CORDONED", |v, _| s(&v["cordoned"])),
            ("TAINTS", |v, _| match v["taints"].as_array() {
                Some(a) if !a.is_empty() => a
                    .iter()
                    .map(|t| format!("{}={}:{}", s(&t["key"]), s(&t["value"]), s(&t["effect"])))
                    .collect::<Vec<_>>()
                    .join(","),
                _ => "-".into(),
            }),
            ("VERSION", |v, _| s(&v["resourceVersion"])),
        ],
        ListKind::Objects => vec![
            ("NAMESPACE", |v, _| s(&v["namespace"])),
            ("NAME", |v, _| s(&v["name"])),
            ("KIND", |v, _| s(&v["template"]["kind"])),
            ("READY", |v, _| s(&v["status"]["readyReplicas"])),
            ("PLACEMENT", |v, _| kv_map(&v["status"]["placement"])),
            ("VERSION", |v, _| s(&v["resourceVersion"])),
        ],
        ListKind::Tenants => vec![
            ("NAME", |v, _| s(&v["name"])),
            ("NAMESPACES", |v, _| list(&v["namespaces"])),
            ("MEMBERS", |v, _| list(&v["members"])),
            ("VERSION", |v, _| s(&v["resourceVersion"])),
        ],
    };
    if wide {
        match kind {
            ListKind::Clusters => {
                cols.push(("ENDPOINT", |v, _| s(&v["apiEndpoint"])));
                cols.push(("LABELS", |v, _| kv_map(&v["labels"])));
                cols.push(("EXT-FREE", |v, _| {
                    kv_map(&v["status"]["extended"]["available"])
                }));
                cols.push(("EXT-NODE-MAX", |v, _| {
                    kv_map(&v["status"]["extended"]["largestFreeOnNode"])
                }));
            }
            ListKind::Objects => {
                cols.push(("MODE", |v, _| s(&v["placement"]["replicas"]["mode"])));
                cols.push(("CONDITIONS", |v, _| {
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
            ListKind::Tenants => {
                cols.push(("QUOTA", |v, _| kv_map(&v["quota"])));
                cols.push(("EXTENDED", |v, _| kv_map(&v["extendedQuota"])));
                cols.push(("PER-CLUSTER", |v, _| per_cluster_cell(&v["perCluster"])));
                cols.push(("EXT-USED", |v, _| kv_map(&v["status"]["extendedUsed"])));
                cols.push(("WAITING", |v, _| s(&v["status"]["waiting"])));
            }
        }
    }
    // How long the cluster has been in its health state; last, like kubectl's AGE.
    if kind == ListKind::Clusters {
        cols.push(("SINCE", |v, t| time_cell(&v["status"]["healthSinceMs"], t)));
    }
    cols
}

/// Column widths of a table: the widest of the header and every row, per column.
pub fn widths(headers: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    widths
}

/// One table line: every cell but the last padded to its width, three spaces between.
pub fn line<S: AsRef<str>>(cells: &[S], widths: &[usize]) -> String {
    let mut l = String::new();
    for (i, c) in cells.iter().enumerate() {
        let c = c.as_ref();
        if i + 1 == cells.len() {
            l.push_str(c);
        } else {
            let w = widths.get(i).copied().unwrap_or(0);
            l.push_str(&format!("{c:<w$}   "));
        }
    }
    let mut l = l.trim_end().to_string();
    l.push('\n');
    l
}

/// Renders rows as an aligned table: columns separated by at least three spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let w = widths(headers, rows);
    let mut out = line(headers, &w);
    for row in rows {
        out.push_str(&line(row, &w));
    }
    out
}

/// The header and cells of `kind`'s table (`wide` adds columns).
pub fn table_parts(
    kind: ListKind,
    items: &[Value],
    wide: bool,
    times: Times,
) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let cols = columns(kind, wide);
    let headers = cols.iter().map(|(h, _)| *h).collect();
    let rows = items
        .iter()
        .map(|it| cols.iter().map(|(_, f)| f(it, times)).collect())
        .collect();
    (headers, rows)
}

/// Formats a list document (`{"items": [...]}`) for `get`.
pub fn format_list(kind: ListKind, doc: &Value, format: Format) -> anyhow::Result<String> {
    match format {
        Format::Json => Ok(serde_json::to_string_pretty(doc)? + "\n"),
        Format::Yaml => Ok(serde_yaml::to_string(doc)?),
        Format::Table | Format::Wide => {
            let items = doc["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                return Ok("No resources found.\n".into());
            }
            let times = Times::of(format == Format::Wide);
            let (headers, rows) = table_parts(kind, &items, format == Format::Wide, times);
            Ok(table(&headers, &rows))
        }
    }
}

/// Formats one cluster for `describe`: identity, placement constraints, health with how long
/// it has held, the last heartbeat and the reported capacity. Never the credentials (the API
/// does not return them).
pub fn describe_cluster(c: &Value, times: Times) -> String {
    let mut out = String::new();
    let mut kv = |k: &str, v: String| out.push_str(&format!("{k:<18}{v}\n"));
    let st = &c["status"];
    kv("Name:", s(&c["name"]));
    kv("Endpoint:", s(&c["apiEndpoint"]));
    kv("Labels:", kv_map(&c["labels"]));
    let taints = match c["taints"].as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|t| format!("{}={}:{}", s(&t["key"]), s(&t["value"]), s(&t["effect"])))
            .collect::<Vec<_>>()
            .join(","),
        _ => "-".into(),
    };
    kv("Taints:", taints);
    kv("Cordoned:", s(&c["cordoned"]));
    kv("Drained:", s(&c["drained"]));
    let health = match st["healthSinceMs"].as_u64() {
        Some(ms) if ms > 0 => format!("{} {}", s(&st["health"]), times.since(ms)),
        _ => s(&st["health"]),
    };
    kv("Health:", health);
    if let Some(token) = c["owner"]["token"].as_str() {
        kv(
            "Owner:",
            format!("{} (token {token})", s(&c["owner"]["node"])),
        );
    }
    if let Some(why) = st["condition"].as_str() {
        kv("Condition:", why.to_string());
    }
    if let Some(views) = st["reachability"].as_array().filter(|a| !a.is_empty()) {
        kv("Reachability:", String::new());
        for v in views {
            let node = s(&v["node"]);
            let node = node.rsplit(':').next().unwrap_or(&node).to_string();
            let line = match v["reachable"].as_bool() {
                Some(true) => "reaches it".to_string(),
                _ => format!(
                    "cannot reach it {}: {}",
                    v["sinceMs"]
                        .as_u64()
                        .map(|ms| times.since(ms))
                        .unwrap_or_default(),
                    s(&v["error"])
                ),
            };
            kv(&format!("  {node}:"), line);
        }
    }
    let ago = |v: &Value| match v.as_u64() {
        Some(ms) if ms > 0 => times.ago(ms),
        _ => "never".into(),
    };
    kv("Last heartbeat:", ago(&st["lastHeartbeatMs"]));
    let reported = ago(&st["capacityReportedMs"]);
    kv("Capacity:", format!("reported {reported}"));
    kv("  allocatable:", kv_map(&st["capacity"]["allocatable"]));
    kv("  available:", kv_map(&st["capacity"]["available"]));
    let ext = &st["extended"];
    if ext.is_object() {
        kv("Extended:", String::new());
        kv("  allocatable:", kv_map(&ext["allocatable"]));
        kv("  available:", kv_map(&ext["available"]));
        kv("  largest on node:", kv_map(&ext["largestFreeOnNode"]));
        let shapes = ext["nodeShapes"].as_array().map_or(0, Vec::len);
        kv("  node shapes:", shapes.to_string());
    }
    kv("Resource version:", s(&c["resourceVersion"]));
    out
}

/// `dc1{cpuMillis=2000,nvidia.com/gpu=4} dc2{...}`: a tenant's per-cluster quotas in one cell.
fn per_cluster_cell(v: &Value) -> String {
    match v.as_object() {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(c, q)| format!("{c}{{{}}}", kv_map(q)))
            .collect::<Vec<_>>()
            .join(" "),
        _ => "-".into(),
    }
}

/// A drop reason as a phrase, its time shown as `times` says; `reasonText` (the API's own
/// sentence, which carries raw milliseconds) only for reasons without a time.
fn reason_text(x: &Value, times: Times) -> String {
    let r = &x["reason"];
    let since = |v: &Value| {
        let ms = v.get("since_ms").or_else(|| v.get("sinceMs"));
        ms.and_then(Value::as_u64).map(|ms| times.since(ms))
    };
    let timed = if let Some(ms) = since(&r["notReady"]) {
        Some(format!("NotReady {ms}"))
    } else if let Some(ms) = since(&r["unknown"]) {
        Some(format!("health Unknown {ms}"))
    } else {
        since(&r["failedOver"])
            .map(|ms| format!("unhealthy {ms}, beyond the failover grace period"))
    };
    timed.unwrap_or_else(|| {
        x["reasonText"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| s(r))
    })
}

/// `text` with each dropped cluster's API sentence (raw milliseconds) replaced by ours: the
/// decision summary and the conditions quote those sentences.
fn with_times(text: &str, decision: &Value, times: Times) -> String {
    let mut out = text.to_string();
    for x in decision["dropped"].as_array().into_iter().flatten() {
        let ours = reason_text(x, times);
        if let Some(api) = x["reasonText"].as_str().filter(|api| *api != ours) {
            out = out.replace(api, &ours);
        }
    }
    out
}

/// Formats one object for `describe`: its spec summary, placement, per-cluster status and the last
/// decision with its reasons. Times as `times` says (ages, or RFC 3339 with `-o wide`).
pub fn describe_object(obj: &Value, times: Times) -> String {
    let decision = &obj["status"]["lastDecision"];
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
            let headers = ["  CLUSTER", "APPLIED", "READY", "MESSAGE", "REPORTED"];
            let rows: Vec<Vec<String>> = m
                .iter()
                .map(|(c, st)| {
                    vec![
                        format!("  {c}"),
                        s(&st["applied"]),
                        s(&st["readyReplicas"]),
                        s(&st["message"]),
                        time_cell(&st["reportedMs"], times),
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
                let msg = with_times(&s(&c["message"]), decision, times);
                out.push_str(
                    &format!("  {}={} {}\n", s(&c["type"]), s(&c["status"]), msg)
                        .replace(" -\n", "\n"),
                );
            }
        }
        _ => out.push_str("  (none)\n"),
    }
    out.push_str("Last decision:\n");
    out.push_str(&describe_decision(decision, "  ", times));
    out
}

/// Formats a decision record (also the text output of `schedule`).
pub fn describe_decision(d: &Value, indent: &str, times: Times) -> String {
    if d.is_null() {
        return format!("{indent}(none)\n");
    }
    let mut out = String::new();
    if let Some(sum) = d["summary"].as_str() {
        out.push_str(&format!("{indent}Summary: {}\n", with_times(sum, d, times)));
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
            let reason = reason_text(x, times);
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

    #[test]
    fn wide_shows_extended_capacity_and_per_cluster_quotas() {
        let clusters = serde_json::json!({"items": [{
            "name": "dc2", "status": {"health": "Ready", "extended": {
                "available": {"nvidia.com/gpu": 6},
                "largestFreeOnNode": {"nvidia.com/gpu": 4}}}}]});
        let out = format_list(ListKind::Clusters, &clusters, Format::Wide).unwrap();
        assert!(out.contains("EXT-FREE"), "{out}");
        assert!(out.contains("nvidia.com/gpu=6"), "{out}");
        assert!(out.contains("nvidia.com/gpu=4"), "{out}");
        let tenants = serde_json::json!({"items": [{
            "name": "a", "perCluster": {"dc1": {"cpuMillis": 2000, "nvidia.com/gpu": 4}}}]});
        let out = format_list(ListKind::Tenants, &tenants, Format::Wide).unwrap();
        assert!(
            out.contains("dc1{cpuMillis=2000,nvidia.com/gpu=4}"),
            "{out}"
        );
    }
}
