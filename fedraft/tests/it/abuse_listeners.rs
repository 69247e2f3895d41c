//! Slow and greedy clients against the real binary's listeners: hundreds of connections
//! trickling their request headers are all cut off at the header deadline (the default one)
//! while the node answers a normal request at once; a connection that never speaks (nor starts a
//! TLS handshake) is cut likewise; connections past the cap are closed at once while the node
//! keeps serving and stays up. The API listener is configured with flags (`--dev`), the peer
//! listener with `[listeners]` in a configuration file.
//!
//! Every client here is a raw TCP socket, so no connection pool holds a slot the test did not
//! open.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fedraft_testkit::net::free_port;

const BIN: &str = env!("CARGO_BIN_EXE_fedraft");
/// `[listeners] header_read_timeout_ms` of the configuration-file node.
const HEADER_MS: u64 = 3_000;
/// fedraft's default header deadline, which the trickling flood runs against.
const DEFAULT_HEADER_MS: u64 = 10_000;
/// A cut comes within this long after its deadline on a loaded two-core machine.
const SLACK: Duration = Duration::from_secs(5);
const TRICKLERS: usize = 300;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Kills the server when the test ends, whichever way.
struct Server(Child);

impl Server {
    fn spawn(args: &[&str]) -> Server {
        let child = Command::new(BIN)
            .arg("server")
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Server(child)
    }

    fn assert_running(&mut self) {
        assert!(
            self.0.try_wait().unwrap().is_none(),
            "the server process stopped"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request on its own connection; the status line, or None when nothing came in `wait`.
fn get(port: u16, path: &str, wait: Duration) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr(port), wait).ok()?;
    s.set_read_timeout(Some(wait)).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    text.lines().next().map(str::to_string)
}

fn ok(port: u16, path: &str) -> bool {
    get(port, path, Duration::from_secs(5)).is_some_and(|l| l.contains(" 200 "))
}

fn wait_until_serving(server: &mut Server, port: u16, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        server.assert_running();
        if get(port, path, Duration::from_secs(2)).is_some() {
            return;
        }
        assert!(Instant::now() < deadline, "{path} on {port} never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// True once the server closed `s` (EOF or reset); `s` must be non-blocking.
fn closed_by_server(s: &TcpStream) -> bool {
    let mut buf = [0u8; 512];
    match (&*s).read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

/// Sends a request head one byte every 100 ms (it would take 20 s) and returns how long the
/// server let it go on before closing the connection.
fn trickle(port: u16) -> Duration {
    let s = TcpStream::connect(addr(port)).unwrap();
    // Bounded even if the server never closed: the assertions below then fail.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reader = s.try_clone().unwrap();
    let start = Instant::now();
    let closed = std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        // Whatever the server says (a 408, or nothing), the connection ends with EOF or reset.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        start.elapsed()
    });
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: {}\r\n\r\n",
        "a".repeat(160)
    );
    let mut w = &s;
    for b in head.bytes() {
        if closed.is_finished() || w.write_all(&[b]).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(closed.is_finished(), "the whole trickled head was read");
    closed.join().unwrap()
}

/// Opens `n` connections that the listener must accept and close at once (its cap is taken)
/// and returns how many it did close within `within`.
fn refused_promptly(port: u16, n: usize, within: Duration) -> usize {
    let extra: Vec<TcpStream> = (0..n)
        .filter_map(|_| TcpStream::connect(addr(port)).ok())
        .collect();
    for s in &extra {
        s.set_nonblocking(true).unwrap();
    }
    let deadline = Instant::now() + within;
    let mut closed = vec![false; extra.len()];
    while Instant::now() < deadline && closed.iter().any(|c| !c) {
        for (i, s) in extra.iter().enumerate() {
            closed[i] = closed[i] || closed_by_server(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Connections refused before `connect` returned count as refused too.
    closed.iter().filter(|c| **c).count() + (n - extra.len())
}

/// `n` silent connections the server holds open, which then fill a cap of `n`. One the server
/// refused is made again until `deadline`: the connection that asked whether the node serves may
/// still hold its slot for a moment after the client closed it, and the server may take a while
/// to accept on a loaded machine.
fn hold_every_slot(port: u16, n: usize, deadline: Instant) -> Vec<TcpStream> {
    let mut held: Vec<TcpStream> = Vec::with_capacity(n);
    loop {
        let made = n - held.len();
        while held.len() < n {
            let s = TcpStream::connect(addr(port)).unwrap();
            s.set_nonblocking(true).unwrap();
            held.push(s);
        }
        // A refused connection is closed as soon as it is accepted: give the server time to
        // accept every one before counting those still open, and trust only a round that made
        // none and lost none.
        std::thread::sleep(Duration::from_millis(300));
        held.retain(|s| !closed_by_server(s));
        if held.len() == n && made == 0 {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {n} connections were held",
            held.len()
        );
    }
}

/// A connection the server holds open (one refused at the cap is closed within a second; such
/// ones are tried again until `deadline`), and when it was made.
fn held_connection(port: u16, deadline: Instant) -> (TcpStream, Instant) {
    loop {
        let s = TcpStream::connect(addr(port)).unwrap();
        let start = Instant::now();
        s.set_nonblocking(true).unwrap();
        let mut closed = false;
        while !closed && start.elapsed() < Duration::from_secs(1) {
            closed = closed_by_server(&s);
            std::thread::sleep(Duration::from_millis(20));
        }
        if !closed {
            s.set_nonblocking(false).unwrap();
            return (s, start);
        }
        assert!(
            Instant::now() < deadline,
            "every connection is still refused after the held ones were dropped"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn dev_server(root: &Path, extra: &[&str]) -> (Server, u16) {
    let api = free_port();
    let listen = format!("127.0.0.1:{api}");
    let data = root.join("data");
    let mut args = vec!["--dev", "--data-dir", data.to_str().unwrap(), "--listen"];
    args.push(&listen);
    args.extend_from_slice(extra);
    let mut server = Server::spawn(&args);
    wait_until_serving(&mut server, api, "/healthz");
    (server, api)
}

#[test]
fn hundreds_of_trickling_connections_are_cut_at_the_default_deadline_while_the_node_serves() {
    let _slot = fedraft_testkit::heavy_slot();
    let root = fedraft_testkit::temp_dir("abuse-trickle");
    let (mut server, api) = dev_server(root.path(), &[]);

    let start = Instant::now();
    let conns: Vec<TcpStream> = (0..TRICKLERS)
        .map(|_| {
            let s = TcpStream::connect(addr(api)).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    let head: Vec<u8> = format!(
        "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: {}\r\n\r\n",
        "a".repeat(400)
    )
    .into_bytes();
    let mut closed_at: Vec<Option<Duration>> = vec![None; TRICKLERS];
    let mut sent = 0;
    let mut normal = None;
    let give_up = Duration::from_millis(DEFAULT_HEADER_MS) + SLACK * 2;
    // One byte per connection every 250 ms: the head would take two minutes to arrive.
    while closed_at.iter().any(Option::is_none) && start.elapsed() < give_up {
        for (i, s) in conns.iter().enumerate() {
            if closed_at[i].is_none() {
                let wrote = (&*s).write(&head[sent % head.len()..][..1]);
                if matches!(wrote, Err(ref e) if e.kind() != ErrorKind::WouldBlock)
                    || closed_by_server(s)
                {
                    closed_at[i] = Some(start.elapsed());
                }
            }
        }
        sent += 1;
        if normal.is_none() && start.elapsed() > Duration::from_secs(2) {
            // In the middle of the flood, a normal client is answered at once.
            let asked = Instant::now();
            let status = get(api, "/healthz", Duration::from_secs(10));
            normal = Some((status, asked.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let (status, took) = normal.expect("a normal request was made during the flood");
    println!("normal request during {TRICKLERS} trickling connections: {status:?} in {took:?}");
    assert!(status.is_some_and(|l| l.contains(" 200 ")));
    assert!(took < Duration::from_secs(3), "answered in {took:?}");

    let cut: Vec<Duration> = closed_at.iter().flatten().copied().collect();
    assert_eq!(cut.len(), TRICKLERS, "every trickling connection was cut");
    let (first, last) = (cut.iter().min().unwrap(), cut.iter().max().unwrap());
    println!("trickling connections cut between {first:?} and {last:?}");
    assert!(*first >= Duration::from_millis(DEFAULT_HEADER_MS - 500));
    assert!(*last <= Duration::from_millis(DEFAULT_HEADER_MS) + SLACK);
    server.assert_running();
    assert!(ok(api, "/healthz"));
}

#[test]
fn the_api_cap_refuses_extra_connections_and_the_node_stays_up() {
    let root = fedraft_testkit::temp_dir("abuse-cap");
    let (mut server, api) = dev_server(root.path(), &["--api-max-connections", "20"]);
    // Twenty silent connections take every slot until the header deadline (10 s).
    let held = hold_every_slot(api, 20, Instant::now() + Duration::from_secs(10));
    let refused = refused_promptly(api, 50, Duration::from_secs(2));
    assert_eq!(
        refused, 50,
        "every connection past the cap is closed at once"
    );
    server.assert_running();
    // Slots free as soon as their connections go.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok(api, "/healthz") {
        assert!(
            Instant::now() < deadline,
            "the node serves again once slots free"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A silent connection is cut at the deadline, so slots never stay taken. The server may
    // still be closing some of the dropped twenty (a loaded machine takes a while), so one it
    // refuses at the cap is tried again: the one measured is one the server took.
    let (silent, start) = held_connection(api, deadline + Duration::from_secs(10));
    silent
        .set_read_timeout(Some(Duration::from_millis(DEFAULT_HEADER_MS) + SLACK * 2))
        .unwrap();
    let _ = (&silent).read(&mut [0u8; 64]);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(DEFAULT_HEADER_MS - 500),
        "{took:?}"
    );
    assert!(
        took < Duration::from_millis(DEFAULT_HEADER_MS) + SLACK,
        "{took:?}"
    );
    server.assert_running();
}

fn write_node(dir: &Path, api: u16, peer: u16, extra: &str) -> PathBuf {
    let tokens = dir.join("tokens");
    std::fs::write(
        &tokens,
        "abuse-listeners-admin-token-0123456789abcdef admin admin\n",
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "node_id = 1\napi_listen = \"127.0.0.1:{api}\"\npeer_listen = \"127.0.0.1:{peer}\"\n\
             data_dir = \"{data}\"\ntoken_file = \"{tokens}\"\n\
             cluster_secret = \"abuse-listeners-cluster-secret-0123456789\"\n\
             [peers]\n1 = \"127.0.0.1:{peer}\"\n\n[executors]\nenabled = false\n\n\
             [listeners]\nheader_read_timeout_ms = {HEADER_MS}\npeer_max_connections = 3\n{extra}",
            data = dir.join("data").display(),
            tokens = tokens.display(),
        ),
    )
    .unwrap();
    config
}

#[test]
fn peer_listener_limits_come_from_the_configuration_file() {
    let root = fedraft_testkit::temp_dir("abuse-peer");
    let (api, peer) = (free_port(), free_port());
    let config = write_node(root.path(), api, peer, "");
    let mut server = Server::spawn(&["--config", config.to_str().unwrap()]);
    wait_until_serving(&mut server, api, "/healthz");
    // The peer port answers (401 without the cluster secret).
    let status = get(peer, "/raft/status", Duration::from_secs(5)).unwrap();
    assert!(status.contains(" 401 "), "{status}");

    let cut = trickle(peer);
    println!("peer: trickled head cut off after {cut:?}");
    assert!(cut >= Duration::from_millis(HEADER_MS - 100), "{cut:?}");
    assert!(cut < Duration::from_millis(HEADER_MS) + SLACK, "{cut:?}");

    // The cap: three held connections (the node's own raft client may hold one too, so some
    // of the three may be refused already), and every further one is closed at once.
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(addr(peer)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(refused_promptly(peer, 10, Duration::from_secs(2)), 10);
    // The API listener has its own cap: the node keeps serving clients.
    assert!(ok(api, "/healthz"));
    server.assert_running();
    drop(held);
}

#[test]
fn a_tls_handshake_that_never_starts_is_cut_off() {
    let root = fedraft_testkit::temp_dir("abuse-tls");
    let tls = root.path().join("tls");
    let o = Command::new(BIN)
        .args(["certs", "--out"])
        .arg(&tls)
        .args(["--node", "1=127.0.0.1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (api, peer) = (free_port(), free_port());
    let extra = format!(
        "\n[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\nca_file = \"{}\"\n",
        tls.join("node1.crt").display(),
        tls.join("node1.key").display(),
        tls.join("ca.crt").display()
    );
    let config = write_node(root.path(), api, peer, &extra);
    let mut server = Server::spawn(&["--config", config.to_str().unwrap()]);
    // Plain HTTP to a TLS port gets no HTTP answer; wait for the port to accept instead.
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(addr(api)).is_err() {
        server.assert_running();
        assert!(Instant::now() < deadline, "the API never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    for port in [api, peer] {
        let silent = TcpStream::connect(addr(port)).unwrap();
        silent
            .set_read_timeout(Some(Duration::from_millis(HEADER_MS) + SLACK * 2))
            .unwrap();
        let start = Instant::now();
        let mut buf = [0u8; 64];
        let n = (&silent).read(&mut buf).unwrap_or(0);
        let took = start.elapsed();
        println!("port {port}: silent TLS connection closed after {took:?}");
        assert_eq!(n, 0, "nothing is sent before a ClientHello");
        assert!(took >= Duration::from_millis(HEADER_MS - 100), "{took:?}");
        assert!(took < Duration::from_millis(HEADER_MS) + SLACK, "{took:?}");
    }
    server.assert_running();
}
