//! Service discovery in the state machine: validation with field names, observations applied
//! only on change, the derived view (eligibility, weights, fail-open, NODATA), follow-ups of
//! other commands, and the snapshot round trip.

use crate::state_support::Harness;
use fedraft_core::command::{Command, Heartbeat};
use fedraft_core::discovery::{
    endpoints_view, AnswerMode, DiscoverySpec, EndpointsReport, PortProtocol, ServicePort,
    Weighting,
};
use fedraft_core::model::{ClusterSpec, ObjectSpec};
use fedraft_core::state::State;
use serde_json::json;

fn service_spec() -> ObjectSpec {
    let t = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}});
    serde_json::from_value(json!({
        "template": t.to_string(),
        "placement": {"clusters": ["dc1", "dc2"], "replicas": {"mode": "Duplicated"}},
    }))
    .unwrap()
}

fn put(discovery: DiscoverySpec) -> Command {
    Command::PutObjectWithDiscovery {
        namespace: "default".into(),
        name: "web".into(),
        spec: service_spec(),
        discovery,
        expected_version: None,
    }
}

fn report(cluster: &str, ip: &str, ready: u32) -> EndpointsReport {
    EndpointsReport {
        namespace: "default".into(),
        name: "web".into(),
        cluster: cluster.into(),
        addresses: vec![ip.into()],
        ports: vec![ServicePort {
            name: "http".into(),
            protocol: PortProtocol::Tcp,
            port: 80,
        }],
        ready_endpoints: ready,
    }
}

fn heartbeat(h: &mut Harness, clusters: &[&str]) {
    h.ok(Command::Heartbeats(
        clusters
            .iter()
            .map(|c| Heartbeat {
                cluster: c.to_string(),
                capacity: None,
            })
            .collect(),
    ));
}

/// Two Ready clusters and the Service with discovery placed on both.
fn setup(spec: DiscoverySpec) -> Harness {
    let mut h = Harness::new();
    for c in ["dc1", "dc2"] {
        let mut s = ClusterSpec::new(c, format!("http://{c}"));
        s.failure_threshold_seconds = 2;
        s.success_threshold_seconds = 1;
        h.ok(Command::RegisterCluster(s));
    }
    heartbeat(&mut h, &["dc1", "dc2"]);
    h.ok(put(spec));
    h
}

fn view(s: &State) -> fedraft_core::discovery::EndpointsView {
    endpoints_view(s, "default", "web").unwrap()
}

#[test]
fn refusals_name_the_field_and_change_nothing() {
    let mut h = setup(DiscoverySpec::default());
    let before = h.state.state_hash();
    let r = h.refused(put(DiscoverySpec {
        ttl_seconds: 0,
        ..DiscoverySpec::default()
    }));
    assert_eq!(r.field.as_deref(), Some("discovery.ttlSeconds"));
    let mut not_service = service_spec();
    not_service.template = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"}})
    .to_string();
    let r = h.refused(Command::PutObjectWithDiscovery {
        namespace: "default".into(),
        name: "web".into(),
        spec: not_service,
        discovery: DiscoverySpec::default(),
        expected_version: None,
    });
    assert_eq!(r.field.as_deref(), Some("discovery"));
    let mut bad = report("dc1", "not an address!", 1);
    let r = h.refused(Command::ServiceEndpoints(vec![
        report("dc2", "10.0.0.2", 1),
        bad.clone(),
    ]));
    assert_eq!(r.field.as_deref(), Some("reports[1].addresses[0]"));
    bad.addresses = vec!["10.0.0.1".into()];
    bad.ports[0].port = 0;
    let r = h.refused(Command::ServiceEndpoints(vec![bad]));
    assert_eq!(r.field.as_deref(), Some("reports[0].ports[0].port"));
    assert_eq!(h.state.state_hash(), before);
}

#[test]
fn observations_apply_only_on_change() {
    let mut h = setup(DiscoverySpec::default());
    h.ok(Command::ServiceEndpoints(vec![report(
        "dc1", "10.0.0.1", 3,
    )]));
    let at = h.index;
    let hash = h.state.state_hash();
    h.ok(Command::ServiceEndpoints(vec![report(
        "dc1", "10.0.0.1", 3,
    )]));
    assert_eq!(
        h.state.state_hash(),
        hash,
        "an unchanged report changes nothing"
    );
    let seen = h.state.observed_endpoints("default", "web").unwrap();
    assert_eq!(seen["dc1"].changed_index, at);
    // Unknown objects and clusters are skipped, not refused (executors race deletes).
    let mut stray = report("dc9", "10.0.0.9", 1);
    h.ok(Command::ServiceEndpoints(vec![stray.clone()]));
    stray.cluster = "dc1".into();
    stray.name = "gone".into();
    h.ok(Command::ServiceEndpoints(vec![stray]));
    assert_eq!(h.state.state_hash(), hash);
}

#[test]
fn view_weights_eligibility_and_fail_open() {
    let mut h = setup(DiscoverySpec::default());
    let v = view(&h.state);
    assert_eq!(v.mode, AnswerMode::NoData, "nothing observed yet");
    h.ok(Command::ServiceEndpoints(vec![
        report("dc1", "10.0.0.1", 3),
        report("dc2", "10.0.0.2", 1),
    ]));
    let v = view(&h.state);
    assert_eq!(v.mode, AnswerMode::Eligible);
    let w: Vec<(String, u32)> = v
        .answering()
        .map(|c| (c.cluster.clone(), c.weight))
        .collect();
    assert_eq!(w, [("dc1".to_string(), 3), ("dc2".to_string(), 1)]);
    assert_eq!(v.ports().len(), 1);

    // No ready endpoints: not eligible, with the reason.
    h.ok(Command::ServiceEndpoints(vec![report(
        "dc2", "10.0.0.2", 0,
    )]));
    let v = view(&h.state);
    let dc2 = v.clusters.iter().find(|c| c.cluster == "dc2").unwrap();
    assert!(!dc2.eligible);
    assert_eq!(dc2.reason.as_deref(), Some("no ready endpoints"));
    assert_eq!(v.answering().count(), 1);

    // Both clusters silent past the threshold: NotReady; fail-open answers both addresses.
    h.now_ms += 3_000;
    h.ok(Command::Tick);
    let v = view(&h.state);
    assert_eq!(v.mode, AnswerMode::FailOpen);
    assert_eq!(v.answering().count(), 2);
}

#[test]
fn without_fail_open_no_eligible_cluster_is_nodata_and_equal_weighs_one() {
    let mut h = setup(DiscoverySpec {
        fail_open: false,
        weighting: Weighting::Equal,
        ..DiscoverySpec::default()
    });
    h.ok(Command::ServiceEndpoints(vec![
        report("dc1", "10.0.0.1", 5),
        report("dc2", "10.0.0.2", 2),
    ]));
    assert!(view(&h.state).answering().all(|c| c.weight == 1));
    h.now_ms += 3_000;
    h.ok(Command::Tick);
    let v = view(&h.state);
    assert_eq!(v.mode, AnswerMode::NoData);
    assert_eq!(v.answering().count(), 0);
}

#[test]
fn plain_put_and_delete_drop_discovery_and_snapshot_round_trips() {
    let mut h = setup(DiscoverySpec {
        ttl_seconds: 30,
        ..DiscoverySpec::default()
    });
    h.ok(Command::ServiceEndpoints(vec![report(
        "dc1", "10.0.0.1", 1,
    )]));
    let restored = State::from_snapshot(&h.state.to_snapshot()).unwrap();
    assert_eq!(restored.state_hash(), h.state.state_hash());
    assert_eq!(view(&restored), view(&h.state));
    assert_eq!(
        restored.discovery("default", "web").unwrap().ttl_seconds,
        30
    );

    h.ok(Command::PutObject {
        namespace: "default".into(),
        name: "web".into(),
        spec: service_spec(),
        expected_version: None,
    });
    assert!(h.state.discovery("default", "web").is_none());
    assert!(endpoints_view(&h.state, "default", "web").is_none());
    h.ok(put(DiscoverySpec::default()));
    h.ok(Command::DeleteObject {
        namespace: "default".into(),
        name: "web".into(),
        expected_version: None,
    });
    assert!(h.state.observed_endpoints("default", "web").is_none());
}

#[test]
fn a_section_change_alone_moves_the_resource_version() {
    let mut h = setup(DiscoverySpec::default());
    let rv = h.state.object("default", "web").unwrap().resource_version;
    h.ok(put(DiscoverySpec {
        ttl_seconds: 9,
        ..DiscoverySpec::default()
    }));
    let now = h.state.object("default", "web").unwrap().resource_version;
    assert!(now > rv);
    assert_eq!(h.state.discovery("default", "web").unwrap().ttl_seconds, 9);
}
