//! The shipped dashboard and alerting rules against a real server: both files parse, every alert
//! has a summary and a runbook link to a section that exists, and every metric either of them
//! names is in the `/metrics` of a running `fedraft server --dev` (executors on, DNS on, one
//! simulated member cluster registered). promtool is not available here; this is the check that
//! a renamed metric breaks the build instead of a dashboard.

use fedraft_testkit::net::free_port;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fedraft_kubesim::{SimConfig, Simulator};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
const TOKEN: &str = "metrics-test-admin-token";

fn repo_file(rel: &str) -> PathBuf {
    crate::manifest_dir().join("..").join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo_file(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every `fedraft_*` metric name in a PromQL expression.
fn metric_names(expr: &str, into: &mut BTreeSet<String>) {
    let mut rest = expr;
    while let Some(i) = rest.find("fedraft_") {
        let preceded_by_ident = rest[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !preceded_by_ident {
            into.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
}

/// GitHub's anchor of a Markdown heading: lower case, spaces to dashes, punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The alert rules (as YAML values) and the dashboard's target expressions.
fn shipped() -> (Vec<serde_yaml::Value>, Vec<String>) {
    let rules: serde_yaml::Value =
        serde_yaml::from_str(&read("deploy/prometheus/fedraft-alerts.yml")).unwrap();
    let groups = rules["groups"].as_sequence().expect("groups").clone();
    let alerts: Vec<serde_yaml::Value> = groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").clone())
        .collect();
    let dash: Value = serde_json::from_str(&read("deploy/grafana/fedraft-dashboard.json")).unwrap();
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().expect("target expr").to_string());
        }
    }
    (alerts, exprs)
}

#[test]
fn alerts_have_summaries_and_runbook_sections_and_the_dashboard_parses() {
    let (alerts, exprs) = shipped();
    assert!(alerts.len() >= 8, "{} alerts", alerts.len());
    assert!(exprs.len() >= 15, "{} dashboard queries", exprs.len());
    let runbook = read("deploy/RUNBOOK.md");
    let anchors: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("### ").or_else(|| l.strip_prefix("## ")))
        .map(anchor)
        .collect();
    let mut names = BTreeSet::new();
    for a in &alerts {
        let name = a["alert"].as_str().expect("alert name");
        let expr = a["expr"].as_str().unwrap_or_else(|| panic!("{name}: expr"));
        assert!(
            a["annotations"]["summary"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{name}: summary"
        );
        let url = a["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: runbook_url"));
        let (file, section) = url.split_once('#').expect("runbook_url has an anchor");
        assert!(file.ends_with("deploy/RUNBOOK.md"), "{name}: {url}");
        assert!(anchors.contains(section), "{name}: no section #{section}");
        assert!(
            matches!(
                a["labels"]["severity"].as_str(),
                Some("warning" | "critical")
            ),
            "{name}: severity"
        );
        metric_names(expr, &mut names);
    }
    // Each failure mode of the runbook has a rule.
    for needed in [
        "fedraft_raft_has_leader",
        "fedraft_raft_apply_lag",
        "fedraft_store_wal_fsync_seconds_bucket",
        "fedraft_store_disk_free_bytes",
        "fedraft_member_cluster_health",
        "fedraft_member_clusters",
    ] {
        assert!(names.contains(needed), "no alert on {needed}");
    }
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A minimal DNS query (id 7, recursion desired, one question `name` IN A).
fn dns_query(name: &str) -> Vec<u8> {
    let mut q = vec![0, 7, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_name_is_served() {
    let (alerts, exprs) = shipped();
    let mut wanted = BTreeSet::new();
    for a in &alerts {
        metric_names(a["expr"].as_str().unwrap(), &mut wanted);
    }
    for e in &exprs {
        metric_names(e, &mut wanted);
    }

    let sim = Simulator::start(SimConfig {
        name: "dc1".into(),
        nodes: 1,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let api = format!("127.0.0.1:{}", free_port());
    let dns = format!("127.0.0.1:{}", free_port());
    let _server = Server(
        Command::new(BIN)
            .args(["server", "--dev", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--listen", &api, "--dns-listen", &dns])
            .env("FEDRAFT_DEV_TOKEN", TOKEN)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let base = format!("http://{api}");
    let deadline = Instant::now() + Duration::from_secs(90);
    let wait = |what: &str| {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
    };
    loop {
        let ready = http.get(format!("{base}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        wait("the server to lead");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let registered = http
        .post(format!("{base}/v1/clusters"))
        .bearer_auth(TOKEN)
        .json(&json!({"name": "dc1", "apiEndpoint": sim.url()}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        registered.status(),
        201,
        "{}",
        registered.text().await.unwrap()
    );
    // A DNS question answered from the applied state (NXDOMAIN: no such service).
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.send_to(&dns_query("nothing.fed.internal"), &dns)
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    tokio::time::timeout(Duration::from_secs(10), udp.recv_from(&mut buf))
        .await
        .expect("DNS answer")
        .unwrap();

    // The executor's series appear once it has started for dc1 and called its API.
    let text = loop {
        let text = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains("fedraft_member_api_request_duration_seconds_count{cluster=\"dc1\"}")
            && !text
                .contains("fedraft_member_api_request_duration_seconds_count{cluster=\"dc1\"} 0")
        {
            break text;
        }
        wait("the executor's member API series");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let served: BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|n| !served.contains(n.as_str()))
        .collect();
    assert!(missing.is_empty(), "not served: {missing:?}\n{text}");
    assert!(
        text.contains("fedraft_dns_responses_total{rcode=\"NXDOMAIN\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("fedraft_member_cluster_health{cluster=\"dc1\",health="),
        "{text}"
    );
    assert!(text.contains(
        "fedraft_http_requests_total{route=\"/v1/clusters\",method=\"POST\",code=\"201\"} 1"
    ));
    sim.shutdown().await;
}
