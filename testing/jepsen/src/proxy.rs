//! A TCP proxy for one directed link between two fedraft nodes, so faults can be injected without root:
//! forward bytes, cut the link (refuse new connections and reset existing ones), heal it, and add a fixed
//! latency. It owns only sockets it accepted or opened; it knows nothing of the protocol it carries.
//!
//! Latency: every chunk read from either side is stamped `now + delay` and written once that time has come,
//! in order, so one-way latency rises by `delay` (a round trip by twice that) without limiting throughput.
//! A new delay applies to chunks read after the change; an earlier chunk never overtakes a later one.
//! A link `a -> b` carries the connections `a` opens to `b` (both directions of their bytes); to separate two
//! nodes completely, cut both `a -> b` and `b -> a` (see `mesh`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::Error;

/// Bytes read per chunk; also the granularity at which latency is applied.
const CHUNK_BYTES: usize = 16 * 1024;
/// Chunks in flight per direction: 256 x 16 KiB = 4 MiB buffered per direction at most, after which reading
/// from the sender pauses (TCP back-pressure does the rest).
const IN_FLIGHT_CHUNKS: usize = 256;
/// How long to wait for the upstream to accept a connection before giving up on the client.
const CONNECT_TIMEOUT_MS: u64 = 5_000;

/// The controls of a link, shared with every connection through a watch channel so changes act at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkState {
    pub cut: bool,
    pub delay: Duration,
}

/// A running proxy. Dropping it stops the listener and every connection it carries.
#[derive(Debug)]
pub struct LinkProxy {
    local: SocketAddr,
    upstream: SocketAddr,
    control: Arc<watch::Sender<LinkState>>,
    acceptor: JoinHandle<()>,
}

impl LinkProxy {
    /// Binds `listen` (port 0 picks a free one) and forwards each accepted connection to `upstream`.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> Result<LinkProxy, Error> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| Error::ProxyBind {
                addr: listen,
                source,
            })?;
        let local = listener.local_addr().map_err(|source| Error::ProxyBind {
            addr: listen,
            source,
        })?;
        let (control, _) = watch::channel(LinkState::default());
        let control = Arc::new(control);
        let acceptor = tokio::spawn(accept_loop(listener, upstream, control.clone()));
        tracing::debug!(%local, %upstream, "link proxy started");
        Ok(LinkProxy {
            local,
            upstream,
            control,
            acceptor,
        })
    }

    /// The address clients must dial instead of the upstream.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Refuses new connections and resets every open one; bytes in flight are dropped.
    pub fn cut(&self) {
        self.control.send_modify(|s| s.cut = true);
    }

    /// Lets connections through again (existing ones were reset by the cut and stay gone).
    pub fn heal(&self) {
        self.control.send_modify(|s| s.cut = false);
    }

    /// Sets the latency added to each chunk in each direction.
    pub fn set_delay(&self, delay: Duration) {
        self.control.send_modify(|s| s.delay = delay);
    }

    pub fn state(&self) -> LinkState {
        *self.control.borrow()
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    control: Arc<watch::Sender<LinkState>>,
) {
    // Connection tasks die with the acceptor: aborting the JoinSet's owner aborts them all.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let client = match accepted {
            Ok((client, _)) => client,
            Err(error) => {
                // Running out of descriptors is transient; back off instead of spinning.
                tracing::warn!(%error, "link proxy accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = control.subscribe();
        if state.borrow().cut {
            reset(client);
            continue;
        }
        connections.spawn(serve(client, upstream, state));
    }
}

/// Closes with RST instead of FIN, so the peer sees a failed connection rather than a clean end of stream.
fn reset(stream: TcpStream) {
    if let Err(error) = stream.set_zero_linger() {
        tracing::debug!(%error, "could not set zero linger");
    }
    drop(stream);
}

async fn serve(client: TcpStream, upstream: SocketAddr, mut state: watch::Receiver<LinkState>) {
    let _ = client.set_nodelay(true);
    let connect = tokio::time::timeout(
        Duration::from_millis(CONNECT_TIMEOUT_MS),
        TcpStream::connect(upstream),
    );
    let server = match connect.await {
        Ok(Ok(server)) => server,
        Ok(Err(error)) => {
            tracing::debug!(%upstream, %error, "link proxy upstream refused");
            return reset(client);
        }
        Err(_) => return reset(client),
    };
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let was_cut = {
        let forward = pump(&mut client_read, &mut server_write, state.clone());
        let backward = pump(&mut server_read, &mut client_write, state.clone());
        // Ends on a cut, or when the proxy (the sender) is gone.
        let cut = state.wait_for(|s| s.cut);
        tokio::select! {
            _ = async { tokio::join!(forward, backward) } => false,
            _ = cut => true,
        }
    };
    if was_cut {
        // Reset rather than close, so both ends see a failed connection, not a clean end of stream. Only on a
        // cut: after a normal close a reset could discard data the peer has not read yet.
        tracing::debug!(%upstream, "link cut: connection reset");
        let _ = client_read.as_ref().set_zero_linger();
        let _ = server_read.as_ref().set_zero_linger();
    }
}

/// Copies one direction: a reader task stamps chunks with their due time, this task writes them when due.
async fn pump(
    from: &mut OwnedReadHalf,
    to: &mut OwnedWriteHalf,
    state: watch::Receiver<LinkState>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT_CHUNKS);
    let reader = async move {
        loop {
            let mut buf = vec![0u8; CHUNK_BYTES];
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.truncate(n);
                    let due = Instant::now() + state.borrow().delay;
                    if tx.send((due, buf)).await.is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping tx tells the writer the stream ended.
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // Pass the half-close on so request/response protocols that shut down writing still work.
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
