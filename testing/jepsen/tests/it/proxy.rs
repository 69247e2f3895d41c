//! The link proxy and mesh against real loopback sockets: bytes arrive intact and in order, a cut makes open
//! and new connections fail, a heal restores service, and a set delay adds at least that much per direction.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use fedraft_jepsen::{LinkProxy, Mesh};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Generous: the machine is shared and loaded.
const PATIENCE: Duration = Duration::from_secs(15);

fn any_port() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// An echo server that first sends `greeting` on every connection, so a test can tell servers apart.
async fn echo_server(greeting: u8) -> SocketAddr {
    let listener = TcpListener::bind(any_port()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if s.write_all(&[greeting]).await.is_err() {
                    return;
                }
                let mut buf = vec![0u8; 8192];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// Connects, reads the greeting, sends `payload` and reads it back; fails on any error or after 5 s.
async fn round_trip(addr: SocketAddr, payload: &[u8]) -> io::Result<(u8, Vec<u8>)> {
    let work = async {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let greeting = s.read_u8().await?;
        s.write_all(payload).await?;
        let mut back = vec![0u8; payload.len()];
        s.read_exact(&mut back).await?;
        Ok((greeting, back))
    };
    tokio::time::timeout(Duration::from_secs(5), work)
        .await
        .map_err(|_| io::Error::other("timed out"))?
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < PATIENCE, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn forwards_bytes_intact_and_in_order() {
    let server = echo_server(7).await;
    let proxy = LinkProxy::start(any_port(), server).await.unwrap();
    let payload: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let (greeting, back) = round_trip(proxy.local_addr(), &payload).await.unwrap();
    assert_eq!(greeting, 7);
    assert!(
        back == payload,
        "a megabyte through the proxy came back changed"
    );
}

#[tokio::test]
async fn cut_fails_open_and_new_connections_and_heal_restores() {
    let server = echo_server(1).await;
    let proxy = LinkProxy::start(any_port(), server).await.unwrap();
    let mut open = TcpStream::connect(proxy.local_addr()).await.unwrap();
    assert_eq!(open.read_u8().await.unwrap(), 1);

    proxy.cut();
    // The open connection ends: a read returns an error or end of stream instead of hanging.
    let read = tokio::time::timeout(PATIENCE, async {
        let _ = open.write_all(b"ping").await;
        let mut buf = [0u8; 4];
        open.read(&mut buf).await
    })
    .await
    .expect("an open connection through a cut link must not hang");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "read after cut returned data: {read:?}"
    );
    // New connections fail.
    for _ in 0..3 {
        assert!(round_trip(proxy.local_addr(), b"hello").await.is_err());
    }

    proxy.heal();
    let addr = proxy.local_addr();
    eventually("the healed link carries traffic", async || {
        round_trip(addr, b"hello").await.is_ok()
    })
    .await;
    assert_eq!(round_trip(addr, b"again").await.unwrap().1, b"again");
}

#[tokio::test]
async fn delay_adds_at_least_the_set_latency_each_way() {
    let server = echo_server(1).await;
    let proxy = LinkProxy::start(any_port(), server).await.unwrap();
    let delay = Duration::from_millis(30);
    proxy.set_delay(delay);
    let mut s = TcpStream::connect(proxy.local_addr()).await.unwrap();
    s.set_nodelay(true).unwrap();
    let connected = Instant::now();
    assert_eq!(s.read_u8().await.unwrap(), 1);
    // The greeting crossed the proxy once.
    assert!(
        connected.elapsed() >= delay,
        "greeting arrived after {:?}",
        connected.elapsed()
    );
    for round in 0..5u8 {
        let sent = Instant::now();
        s.write_all(&[round; 100]).await.unwrap();
        let mut back = [0u8; 100];
        s.read_exact(&mut back).await.unwrap();
        let rtt = sent.elapsed();
        assert!(
            rtt >= 2 * delay,
            "round trip {rtt:?} is below twice the one-way delay"
        );
        assert_eq!(back, [round; 100]);
    }
    // Many small writes in a burst stay in order under delay.
    let burst: Vec<u8> = (0..200u8).collect();
    for b in &burst {
        s.write_all(&[*b]).await.unwrap();
    }
    let mut back = vec![0u8; burst.len()];
    s.read_exact(&mut back).await.unwrap();
    assert_eq!(back, burst);
    // Removing the delay takes effect for later chunks.
    proxy.set_delay(Duration::ZERO);
    assert_eq!(proxy.state().delay, Duration::ZERO);
}

#[tokio::test]
async fn mesh_routes_each_pair_and_isolates_a_node() {
    let servers = [
        echo_server(0).await,
        echo_server(1).await,
        echo_server(2).await,
    ];
    let mesh = Mesh::start(&servers).await.unwrap();
    for from in 0..3 {
        assert_eq!(mesh.peer_addrs(from).len(), 2);
        for to in (0..3).filter(|&t| t != from) {
            let (greeting, _) = round_trip(mesh.addr(from, to).unwrap(), b"x")
                .await
                .unwrap();
            assert_eq!(
                usize::from(greeting),
                to,
                "link {from}->{to} reached the wrong node"
            );
        }
    }
    assert!(mesh.link(1, 1).is_err());

    mesh.isolate(2).unwrap();
    assert_eq!(mesh.cut_now(), vec![(0, 2), (1, 2), (2, 0), (2, 1)]);
    for (from, to) in [(0, 2), (2, 0), (1, 2), (2, 1)] {
        assert!(
            round_trip(mesh.addr(from, to).unwrap(), b"x")
                .await
                .is_err(),
            "{from}->{to} still open"
        );
    }
    assert!(round_trip(mesh.addr(0, 1).unwrap(), b"x").await.is_ok());
    assert!(round_trip(mesh.addr(1, 0).unwrap(), b"x").await.is_ok());

    mesh.heal_all();
    assert!(mesh.cut_now().is_empty());
    let addr = mesh.addr(2, 0).unwrap();
    eventually("2->0 works after heal", async || {
        round_trip(addr, b"x").await.is_ok()
    })
    .await;
}
