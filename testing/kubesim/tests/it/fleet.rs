//! The fleet host as clients see it: every cluster on its own address with its own objects,
//! a region going dark while its neighbours keep serving, slowness and flapping per group, the
//! same faults over the `/_fleet` HTTP endpoints, and what a small fleet costs in memory.

use std::time::{Duration, Instant};

use crate::common::{client, eventually, raw, PATIENCE};
use fedraft_kubesim::{DarkMode, Fleet, FleetConfig, FleetFault, FleetSelector};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{json, Value};

async fn reachable(url: &str) -> bool {
    let api: Api<Node> = Api::all(client(url));
    tokio::time::timeout(Duration::from_secs(2), api.list(&ListParams::default()))
        .await
        .is_ok_and(|r| r.is_ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_are_separate_and_faults_follow_groups() {
    let fleet = Fleet::start(FleetConfig {
        clusters: 6,
        regions: 3,
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..FleetConfig::default()
    })
    .await
    .unwrap();
    let names: Vec<&str> = fleet.members().iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["m0000", "m0001", "m0002", "m0003", "m0004", "m0005"]
    );
    let regions: Vec<&str> = fleet.members().iter().map(|m| m.region.as_str()).collect();
    assert_eq!(
        regions,
        [
            "region-00",
            "region-00",
            "region-01",
            "region-01",
            "region-02",
            "region-02"
        ]
    );

    // Own objects: a ConfigMap made in one cluster is absent from the others.
    let first = fleet.get("m0000").unwrap().url();
    let cms: Api<ConfigMap> = Api::namespaced(client(&first), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "only-here"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let other: Api<ConfigMap> =
        Api::namespaced(client(&fleet.get("m0001").unwrap().url()), "default");
    assert!(other.get_opt("only-here").await.unwrap().is_none());
    assert_eq!(fleet.stats().total_changes, 1);

    // A region dark at once; the rest keep serving.
    let dark = fleet.fault(
        &FleetSelector {
            regions: vec!["region-01".into()],
            ..FleetSelector::default()
        },
        &FleetFault::Dark {
            mode: DarkMode::Refuse,
        },
    );
    assert_eq!(dark, ["m0002", "m0003"]);
    for m in fleet.members() {
        let expect = m.region != "region-01";
        eventually(
            PATIENCE,
            &format!("{} reachable={expect}", m.name),
            || async { (reachable(&m.url()).await == expect).then_some(()) },
        )
        .await;
    }

    // Slow by name, over HTTP; it also clears the darkness of the clusters it names.
    let admin = fleet.admin_addr().unwrap();
    let call = |method: &'static str, path: &'static str, body: Value| async move {
        let json = [("Content-Type", "application/json")];
        let (code, text) = raw(admin, method, path, &json, &body.to_string()).await;
        assert_eq!(code, 200, "{method} {path}: {text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let slow = json!({"select": {"names": ["m0002"]}, "fault": {"kind": "slow", "latencyMs": 300}});
    let r = call("POST", "/_fleet/faults", slow).await;
    assert_eq!(r["affected"], json!(["m0002"]));
    let slow = fleet.get("m0002").unwrap().url();
    let t = Instant::now();
    assert!(reachable(&slow).await);
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(!reachable(&fleet.get("m0003").unwrap().url()).await);

    // Flapping: the cluster is seen both dark and back within a few periods.
    fleet.fault(
        &FleetSelector {
            names: vec!["m0005".into()],
            ..FleetSelector::default()
        },
        &FleetFault::Flapping {
            mode: DarkMode::Refuse,
            dark_ms: 300,
            light_ms: 300,
        },
    );
    let flap = fleet.get("m0005").unwrap();
    let (mut seen_dark, mut seen_light) = (false, false);
    let until = Instant::now() + PATIENCE;
    while !(seen_dark && seen_light) && Instant::now() < until {
        match flap.admin().dark() {
            Some(_) => seen_dark = true,
            None => seen_light = true,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen_dark && seen_light, "m0005 did not flap");

    // Clear everything over HTTP: all reachable, no latency, no flapping.
    let clusters = call(
        "POST",
        "/_fleet/faults",
        json!({"fault": {"kind": "clear"}}),
    )
    .await;
    assert_eq!(clusters["affected"].as_array().map(Vec::len), Some(6));
    tokio::time::sleep(Duration::from_millis(400)).await;
    for m in fleet.members() {
        assert_eq!(m.admin().dark(), None, "{} still dark", m.name);
        assert!(reachable(&m.url()).await, "{} unreachable", m.name);
    }
    let listed = call("GET", "/_fleet/clusters", Value::Null).await;
    assert_eq!(listed[3]["name"], "m0003");
    assert_eq!(listed[3]["url"], json!(fleet.get("m0003").unwrap().url()));
    let one = call("GET", "/_fleet/clusters/m0000/stats", Value::Null).await;
    assert_eq!(one["totalChanges"], 1);
}
