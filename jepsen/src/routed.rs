//! A mesh for peers that all dial one address per destination. fedraft replicates each node's peer address in
//! the raft membership, so every node dials the same address for a given peer unless it is given its own route
//! table (`[peer_dial]`), which is what `mesh`'s per-pair listening ports need. [`RoutedMesh`] needs no such
//! table: it runs one listener per destination node and finds out which node opened each accepted connection
//! from the kernel's socket table: the client end of the connection is a socket whose local port is the
//! accepted peer port, and `/proc/<pid>/fd` says which process holds it. Linux only; it reads `/proc` of
//! processes this user started.
//!
//! The links it controls are still the ordered pairs `(from, to)`, with the same cut, heal and delay semantics
//! as `proxy::LinkProxy`. A connection whose opener cannot be identified is reset: failing closed keeps a
//! partition a partition. It knows nothing of which links a fault cuts (see `nemesis::Partition`).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::proxy::{reset, serve, LinkState};
use crate::Error;

type Links = Arc<BTreeMap<(usize, usize), watch::Sender<LinkState>>>;

/// One listener per destination; per ordered pair a cut/delay control. Dropping it stops every listener.
#[derive(Debug)]
pub struct RoutedMesh {
    nodes: usize,
    listen: Vec<SocketAddr>,
    acceptors: Vec<JoinHandle<()>>,
    links: Links,
    pids: Arc<RwLock<Vec<Option<u32>>>>,
}

impl RoutedMesh {
    /// Starts a listener on an ephemeral loopback port per node; `upstreams[i]` is node `i`'s real peer
    /// address. Node processes must be announced with [`RoutedMesh::set_pid`] before their connections pass.
    pub async fn start(upstreams: &[SocketAddr]) -> Result<RoutedMesh, Error> {
        let nodes = upstreams.len();
        let mut links = BTreeMap::new();
        for from in 0..nodes {
            for to in 0..nodes {
                if from != to {
                    links.insert((from, to), watch::channel(LinkState::default()).0);
                }
            }
        }
        let links: Links = Arc::new(links);
        let pids = Arc::new(RwLock::new(vec![None; nodes]));
        let mut listen = Vec::new();
        let mut acceptors = Vec::new();
        for (to, upstream) in upstreams.iter().enumerate() {
            let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
            let listener = TcpListener::bind(any)
                .await
                .map_err(|source| Error::ProxyBind { addr: any, source })?;
            let local = listener
                .local_addr()
                .map_err(|source| Error::ProxyBind { addr: any, source })?;
            listen.push(local);
            acceptors.push(tokio::spawn(accept_loop(
                listener,
                to,
                *upstream,
                links.clone(),
                pids.clone(),
            )));
        }
        Ok(RoutedMesh {
            nodes,
            listen,
            acceptors,
            links,
            pids,
        })
    }

    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The address every node dials to reach node `to`.
    pub fn addr(&self, to: usize) -> Option<SocketAddr> {
        self.listen.get(to).copied()
    }

    /// Records the process id of node `node` (after every start or restart); `None` while it is down.
    pub fn set_pid(&self, node: usize, pid: Option<u32>) {
        if let Ok(mut pids) = self.pids.write() {
            if let Some(slot) = pids.get_mut(node) {
                *slot = pid;
            }
        }
    }

    fn link(&self, from: usize, to: usize) -> Result<&watch::Sender<LinkState>, Error> {
        self.links.get(&(from, to)).ok_or(Error::NoSuchLink {
            from,
            to,
            nodes: self.nodes,
        })
    }

    /// Cuts each listed directed link: new connections from `from` to `to` are refused, open ones reset.
    pub fn cut_links(&self, links: &[(usize, usize)]) -> Result<(), Error> {
        for &(from, to) in links {
            self.link(from, to)?.send_modify(|s| s.cut = true);
        }
        tracing::info!(?links, "links cut");
        Ok(())
    }

    /// Heals every link.
    pub fn heal_all(&self) {
        for l in self.links.values() {
            l.send_modify(|s| s.cut = false);
        }
        tracing::info!("all links healed");
    }

    /// Sets the per-direction latency on every link.
    pub fn set_delay_all(&self, delay: Duration) {
        for l in self.links.values() {
            l.send_modify(|s| s.delay = delay);
        }
    }

    /// The directed links currently cut.
    pub fn cut_now(&self) -> Vec<(usize, usize)> {
        self.links
            .iter()
            .filter(|(_, l)| l.borrow().cut)
            .map(|(k, _)| *k)
            .collect()
    }
}

impl Drop for RoutedMesh {
    fn drop(&mut self) {
        for a in &self.acceptors {
            a.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    to: usize,
    upstream: SocketAddr,
    links: Links,
    pids: Arc<RwLock<Vec<Option<u32>>>>,
) {
    // Attribution reads /proc and can take milliseconds when nodes hold many sockets, so each connection is
    // attributed on its own task: a burst of reconnects must not queue behind one slow lookup, or the kernel's
    // backlog fills and healthy links look cut. The semaphore bounds the blocking threads used for it.
    let lookups = Arc::new(tokio::sync::Semaphore::new(8));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (client, peer) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                tracing::warn!(%error, "routed mesh accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (links, pids, lookups) = (links.clone(), pids.clone(), lookups.clone());
        connections.spawn(async move {
            let Ok(local) = client.local_addr() else {
                return reset(client);
            };
            let known: Vec<Option<u32>> = pids.read().map(|p| p.clone()).unwrap_or_default();
            let from = match lookups.acquire().await {
                Ok(_permit) => tokio::task::spawn_blocking(move || opener(peer, local, &known))
                    .await
                    .ok()
                    .flatten(),
                Err(_) => None,
            };
            let Some(state) = from
                .and_then(|f| links.get(&(f, to)))
                .map(|l| l.subscribe())
            else {
                tracing::debug!(%peer, to, "connection from an unknown process reset");
                return reset(client);
            };
            if state.borrow().cut {
                return reset(client);
            }
            serve(client, upstream, state).await;
        });
    }
}

/// Attempts at attributing one connection: `/proc/net/tcp` is read in pages while sockets come and go, so
/// an entry can be skipped now and then on a busy machine.
const LOOKUP_ATTEMPTS: usize = 6;

/// The node whose process holds the client end of the connection `peer -> local`.
fn opener(peer: SocketAddr, local: SocketAddr, pids: &[Option<u32>]) -> Option<usize> {
    for attempt in 0..LOOKUP_ATTEMPTS {
        if let Some(node) = opener_once(peer, local, pids) {
            return Some(node);
        }
        std::thread::sleep(Duration::from_millis(5 << attempt.min(4)));
    }
    None
}

fn opener_once(peer: SocketAddr, local: SocketAddr, pids: &[Option<u32>]) -> Option<usize> {
    let inode = diag_inode(peer.port(), local.port())
        .or_else(|| client_inode(peer.port(), local.port()))?;
    let wanted = format!("socket:[{inode}]");
    pids.iter().position(|pid| {
        let Some(pid) = pid else { return false };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
        })
    })
}

/// The inode of the loopback TCP socket `127.0.0.1:client_port -> 127.0.0.1:server_port`, asked of the
/// kernel directly (sock_diag exact lookup over netlink): one socket, no table walk, so it stays fast and
/// exact on a busy machine. `None` when netlink is unavailable or the socket is gone.
fn diag_inode(client_port: u16, server_port: u16) -> Option<u64> {
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    const REQ_LEN: usize = 16 + 56;
    let mut req = [0u8; REQ_LEN];
    req[0..4].copy_from_slice(&(REQ_LEN as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid.
    req[16] = libc::AF_INET as u8;
    req[17] = libc::IPPROTO_TCP as u8;
    req[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
    req[24..26].copy_from_slice(&client_port.to_be_bytes());
    req[26..28].copy_from_slice(&server_port.to_be_bytes());
    req[28..32].copy_from_slice(&[127, 0, 0, 1]);
    req[44..48].copy_from_slice(&[127, 0, 0, 1]);
    // Cookie "none": the lookup goes by addresses and ports only.
    req[64..72].copy_from_slice(&[0xff; 8]);
    // SAFETY: plain socket syscalls on a descriptor owned and closed here; buffers outlive the calls.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        );
        if fd < 0 {
            return None;
        }
        let timeout = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        let mut addr: libc::sockaddr_nl = std::mem::zeroed();
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let sent = libc::sendto(
            fd,
            req.as_ptr().cast(),
            REQ_LEN,
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        );
        let mut buf = [0u8; 4096];
        let got = if sent == REQ_LEN as isize {
            libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0)
        } else {
            -1
        };
        libc::close(fd);
        if got < 88 {
            return None;
        }
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if kind == NLMSG_ERROR || kind != SOCK_DIAG_BY_FAMILY {
            return None;
        }
        // inet_diag_msg: 4 bytes, sockid (48), expires, rqueue, wqueue, uid, then the inode.
        let inode = u32::from_ne_bytes([buf[84], buf[85], buf[86], buf[87]]);
        (inode != 0).then_some(u64::from(inode))
    }
}

/// The inode of the TCP socket whose local port is `client_port` and remote port `server_port`.
fn client_inode(client_port: u16, server_port: u16) -> Option<u64> {
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 10 {
                continue;
            }
            if hex_port(fields[1]) == Some(client_port) && hex_port(fields[2]) == Some(server_port)
            {
                if let Ok(inode) = fields[9].parse::<u64>() {
                    if inode != 0 {
                        return Some(inode);
                    }
                }
            }
        }
    }
    None
}

/// The port of a `/proc/net/tcp` address such as `0100007F:1F90`.
fn hex_port(field: &str) -> Option<u16> {
    u16::from_str_radix(field.rsplit(':').next()?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_ports() {
        assert_eq!(hex_port("0100007F:1F90"), Some(8080));
        assert_eq!(hex_port("00000000000000000000000001000000:0050"), Some(80));
        assert_eq!(hex_port("garbage"), None);
    }

    #[tokio::test]
    async fn finds_the_process_holding_a_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(server).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        let me = Some(std::process::id());
        let by_diag = diag_inode(peer.port(), server.port());
        assert!(by_diag.is_some(), "sock_diag finds the client socket");
        assert_eq!(by_diag, client_inode(peer.port(), server.port()));
        assert_eq!(opener(peer, server, &[None, me]), Some(1));
        assert_eq!(opener(peer, server, &[None]), None);
        drop(client);
    }
}
