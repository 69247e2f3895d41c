//! Injected faults as a client sees them: latency, 5xx errors, refusing and hanging
//! connections, coming back on the same address; one peer's link cut; and bearer-token auth.

use std::time::{Duration, Instant};

use crate::common::{api_error, client, eventually, raw, PATIENCE};
use fedraft_kubesim::{DarkMode, FaultSettings, SimConfig, Simulator};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn latency_and_error_rate() {
    let sim = Simulator::start(SimConfig {
        seed: Some(1),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let api: Api<Namespace> = Api::all(client(&sim.url()));
    api.list(&ListParams::default()).await.unwrap();

    sim.admin().set_latency(Duration::from_millis(300));
    let t = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    sim.admin().set_latency(Duration::ZERO);

    sim.admin().set_error_rate(1.0).unwrap();
    assert_eq!(
        api_error(api.list(&ListParams::default()).await.unwrap_err()),
        (500, "InternalError".into())
    );
    sim.admin()
        .set_faults(FaultSettings {
            error_rate: 1.0,
            error_code: 503,
            ..FaultSettings::default()
        })
        .unwrap();
    assert_eq!(
        api_error(api.list(&ListParams::default()).await.unwrap_err()).0,
        503
    );
    // Admin endpoints are never faulted.
    let (code, _) = raw(sim.addr(), "GET", "/_sim/stats", &[], "").await;
    assert_eq!(code, 200);
    assert!(sim.admin().stats().injected_errors >= 2);
    assert!(sim.admin().set_error_rate(1.5).is_err());
    sim.admin().set_error_rate(0.0).unwrap();
    api.list(&ListParams::default()).await.unwrap();
    sim.shutdown().await;
}

#[tokio::test]
async fn refuse_then_come_back_on_the_same_address() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let addr = sim.addr();
    let api: Api<Namespace> = Api::all(client(&sim.url()));
    // The client now holds a kept-alive connection; going dark must cut it too.
    api.list(&ListParams::default()).await.unwrap();

    sim.admin().go_dark(DarkMode::Refuse);
    eventually(PATIENCE, "connections to be refused", || async {
        TcpStream::connect(addr).await.is_err().then_some(())
    })
    .await;
    assert!(api.list(&ListParams::default()).await.is_err());

    sim.admin().come_back();
    assert_eq!(sim.addr(), addr);
    eventually(PATIENCE, "the API to serve again", || async {
        api.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;

    // Timed outage: back by itself.
    sim.admin()
        .go_dark_for(DarkMode::Refuse, Duration::from_millis(300));
    eventually(PATIENCE, "connections to be refused", || async {
        TcpStream::connect(addr).await.is_err().then_some(())
    })
    .await;
    eventually(PATIENCE, "the API to come back by itself", || async {
        api.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;
    sim.shutdown().await;
}

#[tokio::test]
async fn hang_accepts_but_never_answers() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let addr = sim.addr();
    sim.admin().go_dark(DarkMode::Hang);
    // Give the accept loop a moment to see the mode; then a request gets no answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(800), s.read(&mut buf)).await;
    assert!(read.is_err(), "a hung simulator answered: {read:?}");

    sim.admin().come_back();
    // The held connection is dropped (EOF or reset), and new ones are served.
    let r = tokio::time::timeout(crate::common::PATIENCE, s.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    let (code, _) = raw(addr, "GET", "/version", &[], "").await;
    assert_eq!(code, 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_cut_peer_hangs_while_other_peers_are_served() {
    use fedraft_kubesim::faults::PEER_HEADER;
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let addr = sim.addr();
    sim.admin().cut_peer("node2");
    assert_eq!(sim.admin().cut_peers().len(), 1);
    let (code, _) = raw(addr, "GET", "/readyz", &[(PEER_HEADER, "node1")], "").await;
    assert_eq!(code, 200, "another peer is served");
    let (code, _) = raw(addr, "GET", "/readyz", &[], "").await;
    assert_eq!(code, 200, "a client naming no peer is served");
    let cut =
        tokio::spawn(
            async move { raw(addr, "GET", "/readyz", &[(PEER_HEADER, "node2")], "").await },
        );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!cut.is_finished(), "the cut peer was answered");

    // Restored over the admin API: the hung request fails, new ones are served.
    let (code, _) = raw(
        addr,
        "PUT",
        "/_sim/cuts",
        &[("content-type", "application/json")],
        r#"{"peers":[]}"#,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = tokio::time::timeout(PATIENCE, cut).await.unwrap().unwrap();
    assert_eq!(code, 503);
    let (code, _) = raw(addr, "GET", "/readyz", &[(PEER_HEADER, "node2")], "").await;
    assert_eq!(code, 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn bearer_token_is_required_when_configured() {
    let sim = Simulator::start(SimConfig {
        token: Some("s3cret".into()),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let addr = sim.addr();
    let (code, body) = raw(addr, "GET", "/api/v1/namespaces", &[], "").await;
    assert_eq!(code, 401, "{body}");
    let (code, _) = raw(
        addr,
        "GET",
        "/api/v1/namespaces",
        &[("Authorization", "Bearer wrong")],
        "",
    )
    .await;
    assert_eq!(code, 401);
    let (code, _) = raw(
        addr,
        "GET",
        "/api/v1/namespaces",
        &[("Authorization", "Bearer s3cret")],
        "",
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = raw(addr, "GET", "/healthz", &[], "").await;
    assert_eq!(code, 200);
    sim.shutdown().await;
}

#[tokio::test]
async fn admin_http_endpoints() {
    let sim = Simulator::start(SimConfig {
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let admin = sim.admin_addr().unwrap();
    let json = [("Content-Type", "application/json")];
    let (code, _) = raw(admin, "POST", "/_sim/dark", &json, r#"{"mode":"refuse"}"#).await;
    assert_eq!(code, 200);
    eventually(PATIENCE, "connections to be refused", || async {
        TcpStream::connect(sim.addr()).await.is_err().then_some(())
    })
    .await;
    let (code, _) = raw(admin, "POST", "/_sim/light", &[], "").await;
    assert_eq!(code, 200);
    eventually(PATIENCE, "the API to serve again", || async {
        let c = TcpStream::connect(sim.addr()).await.ok()?;
        drop(c);
        Some(())
    })
    .await;
    let (code, body) = raw(
        sim.addr(),
        "PUT",
        "/_sim/faults",
        &json,
        r#"{"latencyMs":5}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(sim.admin().faults().latency_ms, 5);
    let (code, body) = raw(
        sim.addr(),
        "POST",
        "/_sim/drift",
        &json,
        r#"{"apiVersion":"v1","resource":"namespaces","name":"default","patch":{"metadata":{"labels":{"x":"y"}}}}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = raw(sim.addr(), "GET", "/_sim/stats", &[], "").await;
    assert_eq!(code, 200);
    assert!(body.contains("mutatingRequests"), "{body}");
    let (code, body) = raw(sim.addr(), "GET", "/_sim/capacity", &[], "").await;
    assert_eq!(code, 200);
    assert!(body.contains("allocatable"), "{body}");
    sim.shutdown().await;
}
