//! TLS on real processes: `fedraft certs` makes a CA and node certificates, three nodes run with
//! mutual TLS between peers and TLS on the API, and every refusal the deployment promises holds:
//! a certificate from another CA or none at all is refused on the peer port, the wrong cluster
//! secret is refused, plain HTTP to either TLS port fails, the API refuses the cluster secret and
//! the peer port refuses a client token. The CLI reaches the API with `--ca-file` and fails
//! without it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::deploy_common::*;
use fedraft_raft::network::client::CallError;
use fedraft_raft::network::tls::{client_config, server_config};
use fedraft_raft::{PeerClient, PeerTls};

fn certs(out: &Path, args: &[&str]) {
    let o = std::process::Command::new(BIN)
        .arg("certs")
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn peer_tls(ca: &Path, cert: &Path, key: &Path) -> PeerTls {
    let (ca, cert, key) = (
        std::fs::read(ca).unwrap(),
        std::fs::read(cert).unwrap(),
        std::fs::read(key).unwrap(),
    );
    PeerTls {
        client: Arc::new(client_config(&ca, Some((&cert, &key))).unwrap()),
        server: Arc::new(server_config(&cert, &key, Some(&ca)).unwrap()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_node_tls_cluster_and_its_refusals() {
    fedraft_raft::install_crypto_provider();
    let root = tempfile::tempdir().unwrap();
    let good = root.path().join("tls");
    let rogue = root.path().join("rogue");
    let nodes = [
        "--node",
        "1=127.0.0.1,localhost",
        "--node",
        "2=127.0.0.1",
        "--node",
        "3=127.0.0.1",
    ];
    certs(&good, &[&nodes[..], &["--client", "ops"]].concat());
    certs(
        &rogue,
        &["--node", "1=127.0.0.1", "--ca-name", "someone else's CA"],
    );

    // Keys are private to their owner; a second run without --force refuses to overwrite.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["ca.key", "node1.key", "client-ops.key"] {
            let mode = std::fs::metadata(good.join(f))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{f}");
        }
    }
    let again = std::process::Command::new(BIN)
        .args(["certs", "--out"])
        .arg(&good)
        .args(["--node", "1=127.0.0.1"])
        .output()
        .unwrap();
    assert!(!again.status.success());

    let layout = Layout {
        nodes: 3,
        tls: Some(TlsDir { dir: good.clone() }),
        ..layout()
    };
    let mut c = Cluster::layout(root.path(), "c", &layout);
    c.start_all();
    c.wait_all_ready(Duration::from_secs(60)).await;

    // Writes through a follower are forwarded over mutual TLS; reads on another node see them.
    register_cluster(&c, 1, "dc1").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    put_object_retrying(&c, 2, "default", "web", deadline)
        .await
        .unwrap();
    let v = c
        .get(0, "/v1/namespaces/default/objects/web")
        .await
        .unwrap();
    assert_eq!(v["template"]["metadata"]["name"], "web");

    let peer1 = c.nodes[0].peer.clone();
    let t = Duration::from_secs(5);
    // The control: a real node certificate and the right secret are accepted on the peer port.
    let node2 = peer_tls(
        &good.join("ca.crt"),
        &good.join("node2.crt"),
        &good.join("node2.key"),
    );
    let ok = PeerClient::with_tls(SECRET, Some(&node2)).unwrap();
    assert!(ok.status(&peer1, t).await.is_ok());

    // A certificate from another CA is refused during the handshake.
    let stranger = peer_tls(
        &good.join("ca.crt"),
        &rogue.join("node1.crt"),
        &rogue.join("node1.key"),
    );
    let bad = PeerClient::with_tls(SECRET, Some(&stranger)).unwrap();
    let e = bad.status(&peer1, t).await.unwrap_err();
    assert!(
        !matches!(e, CallError::Status(_)),
        "handshake should fail, got {e}"
    );

    // No client certificate at all is refused too.
    let ca = std::fs::read(good.join("ca.crt")).unwrap();
    let anon = PeerTls {
        client: Arc::new(client_config(&ca, None).unwrap()),
        server: node2.server.clone(),
    };
    let e = PeerClient::with_tls(SECRET, Some(&anon))
        .unwrap()
        .status(&peer1, t)
        .await
        .unwrap_err();
    assert!(
        !matches!(e, CallError::Status(_)),
        "handshake should fail, got {e}"
    );

    // A node that trusts another CA refuses our nodes' certificates (it verifies the server).
    let rogue_self = peer_tls(
        &rogue.join("ca.crt"),
        &rogue.join("node1.crt"),
        &rogue.join("node1.key"),
    );
    let e = PeerClient::with_tls(SECRET, Some(&rogue_self))
        .unwrap()
        .status(&peer1, t)
        .await
        .unwrap_err();
    assert!(
        !matches!(e, CallError::Status(_)),
        "server verification should fail, got {e}"
    );

    // A valid certificate with the wrong cluster secret, or with a client token: 401.
    let wrong = PeerClient::with_tls("not-the-cluster-secret-at-all", Some(&node2)).unwrap();
    assert!(matches!(
        wrong.status(&peer1, t).await,
        Err(CallError::Status(401))
    ));
    let token = PeerClient::with_tls(ADMIN, Some(&node2)).unwrap();
    assert!(matches!(
        token.status(&peer1, t).await,
        Err(CallError::Status(401))
    ));

    // Plain HTTP to the TLS peer port and to the TLS API port fails.
    let plain = PeerClient::new(SECRET).unwrap();
    assert!(plain.status(&peer1, t).await.is_err());
    let plain_http = reqwest::Client::new();
    assert!(plain_http
        .get(format!("http://{}/readyz", c.nodes[0].api))
        .timeout(t)
        .send()
        .await
        .is_err());

    // The API refuses the cluster secret as a bearer token; the admin token works.
    let r = c
        .http
        .get(c.url(0, "/v1/clusters"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(c.get(0, "/v1/clusters").await.is_some());

    // The CLI: --ca-file (or FEDRAFT_CA_FILE) reaches the API; without it the certificate is
    // unknown and the exit code says "unreachable".
    let ca_path = good.join("ca.crt");
    let ca_arg = ca_path.to_str().unwrap();
    let (code, out, err) = c.cli(0, &["--ca-file", ca_arg, "get", "clusters"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("dc1"), "{out}");
    let (code, _, _) = c.cli(2, &["get", "objects"], &[("FEDRAFT_CA_FILE", ca_arg)]);
    assert_eq!(code, 0);
    let (code, _, err) = c.cli(0, &["get", "clusters"], &[]);
    assert_eq!(code, 3, "{err}");
    // A client certificate is accepted by the API as well (it is optional there by default).
    let (cert, key) = (good.join("client-ops.crt"), good.join("client-ops.key"));
    let (code, _, err) = c.cli(
        1,
        &[
            "--ca-file",
            ca_arg,
            "--cert-file",
            cert.to_str().unwrap(),
            "--key-file",
            key.to_str().unwrap(),
            "get",
            "clusters",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
}
