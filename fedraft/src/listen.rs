//! Serving a router on a TCP listener (the API's or the peers'), with or without TLS, within
//! limits a slow or hostile client cannot stretch: at most `max_connections` connections at once
//! (file descriptors are shared with RocksDB), a deadline for a connection's first request head
//! and for every later HTTP/1 request head (`header_read_timeout`: a client trickling its
//! headers byte by byte, or a TLS client that never finishes its handshake, is cut off), and an
//! idle timeout (`idle_timeout`: no byte either way for that long closes the connection, unless
//! a response is still being streamed, as a quiet watch is).
//!
//! Over the cap, a connection is accepted and closed at once: the client learns right away
//! (and may try another node) instead of waiting in the backlog behind connections that may be
//! an attacker's, and the process never runs out of descriptors because of clients. The
//! timeouts guarantee that held slots come free.
//!
//! Must not: serve plain HTTP when given a TLS configuration, hold a connection slot after the
//! connection is gone, or stop serving because one connection misbehaves.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::Request;
use axum::response::Response;
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::ServiceExt;

/// In-flight requests get this long to finish after a shutdown signal.
const GRACEFUL_SHUTDOWN_MS: u64 = 10_000;
/// Refused connections are logged at most this often.
const REFUSAL_LOG_EVERY_MS: u64 = 10_000;
/// After an accept error other than a failed connection (e.g. out of file descriptors), wait
/// this long before accepting again instead of spinning.
const ACCEPT_ERROR_PAUSE_MS: u64 = 100;

/// Limits of one listener; see the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `shutdown` resolves, over TLS when `tls` is given, within
/// `limits`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<ServerConfig>>,
    limits: ListenerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let mut refusals = Refusals::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            // Closed unread: the client sees the connection end at once.
            drop(stream);
            refusals.note(remote, limits.max_connections);
            continue;
        };
        let conn = Conn {
            router: router.clone(),
            builder: builder.clone(),
            watcher: graceful.watcher(),
            limits,
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            conn.run(stream, acceptor).await;
            tracing::trace!(%remote, "connection closed");
            drop(permit);
        });
    }
    drop(listener);
    let wait = Duration::from_millis(GRACEFUL_SHUTDOWN_MS);
    if tokio::time::timeout(wait, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("connections still open after the graceful shutdown period");
    }
    Ok(())
}

/// Connections refused over the cap, logged at most once per [`REFUSAL_LOG_EVERY_MS`] so a
/// flood cannot turn into a flood of log lines.
#[derive(Default)]
struct Refusals {
    since_log: u64,
    last_log: Option<Instant>,
}

impl Refusals {
    fn note(&mut self, remote: std::net::SocketAddr, cap: usize) {
        self.since_log += 1;
        let now = Instant::now();
        let due = self.last_log.is_none_or(|t| {
            now.saturating_duration_since(t) >= Duration::from_millis(REFUSAL_LOG_EVERY_MS)
        });
        if due {
            tracing::warn!(
                %remote,
                refused = self.since_log,
                max_connections = cap,
                "connection cap reached; refusing connections"
            );
            self.since_log = 0;
            self.last_log = Some(now);
        }
    }
}

/// Errors that concern one connection only (the listener is fine).
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Why a connection was closed by its watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cutoff {
    /// No request head arrived within `header_read_timeout` of the accept.
    NoRequest,
    /// No byte in either direction for `idle_timeout`.
    Idle,
}

/// What one connection's task needs.
struct Conn {
    router: Router,
    builder: Arc<Builder<TokioExecutor>>,
    watcher: Watcher,
    limits: ListenerLimits,
}

impl Conn {
    async fn run(self, stream: TcpStream, acceptor: Option<tokio_rustls::TlsAcceptor>) {
        let activity = Arc::new(Activity::new());
        let seen_request = Arc::new(AtomicBool::new(false));
        let io = Tracked {
            inner: stream,
            activity: activity.clone(),
        };
        let watchdog = watchdog(activity.clone(), seen_request.clone(), self.limits);
        let served = async move {
            match acceptor {
                Some(acceptor) => match acceptor.accept(io).await {
                    Ok(tls) => self.serve_io(tls, seen_request, activity).await,
                    Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
                },
                None => self.serve_io(io, seen_request, activity).await,
            }
        };
        tokio::select! {
            () = served => {}
            cut = watchdog => tracing::debug!(?cut, "connection cut off"),
        }
    }

    async fn serve_io<I>(self, io: I, seen_request: Arc<AtomicBool>, activity: Arc<Activity>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        // Marks the first request head as arrived (hyper calls the service only once a head is
        // parsed), which ends the connection's first-request deadline; and counts a response
        // as streaming from its head until hyper drops its body, which holds off the idle cut.
        let service = self
            .router
            .map_request(move |req: Request<Incoming>| {
                seen_request.store(true, Ordering::Relaxed);
                req
            })
            .map_response(move |resp: Response| {
                let guard = Streaming::start(activity.clone());
                resp.map(|inner| {
                    Body::new(TrackedBody {
                        inner,
                        _guard: guard,
                    })
                })
            });
        let conn = self
            .builder
            .serve_connection_with_upgrades(TokioIo::new(io), TowerToHyperService::new(service));
        if let Err(e) = self.watcher.watch(conn).await {
            tracing::debug!(error = %e, "connection ended with an error");
        }
    }
}

/// Resolves when the connection has to go: no request head within the header deadline of the
/// accept, or no byte either way for the idle timeout. Later HTTP/1 heads are bounded by
/// hyper's own header timer; the idle timer covers the rest (HTTP/2 included).
async fn watchdog(
    activity: Arc<Activity>,
    seen_request: Arc<AtomicBool>,
    limits: ListenerLimits,
) -> Cutoff {
    let first_deadline = activity.start + limits.header_read_timeout;
    loop {
        let now = Instant::now();
        let seen = seen_request.load(Ordering::Relaxed);
        if !seen && now >= first_deadline {
            return Cutoff::NoRequest;
        }
        let idle_until = activity.last() + limits.idle_timeout;
        if now >= idle_until {
            if activity.streaming.load(Ordering::Relaxed) == 0 {
                return Cutoff::Idle;
            }
            // A response still being produced (a quiet watch) is not idleness: look again one
            // idle period from now.
            activity.touch();
            continue;
        }
        let next = if seen {
            idle_until
        } else {
            idle_until.min(first_deadline)
        };
        tokio::time::sleep_until(next).await;
    }
}

/// When a connection last moved a byte, in milliseconds after `start`, and how many of its
/// responses are being streamed.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
    streaming: AtomicU64,
}

/// One response counted in [`Activity::streaming`] from its head until its body is dropped.
struct Streaming(Arc<Activity>);

impl Streaming {
    fn start(activity: Arc<Activity>) -> Streaming {
        activity.streaming.fetch_add(1, Ordering::Relaxed);
        Streaming(activity)
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        self.0.streaming.fetch_sub(1, Ordering::Relaxed);
        self.0.touch();
    }
}

/// A response body that keeps its [`Streaming`] count while hyper holds it.
struct TrackedBody {
    inner: Body,
    _guard: Streaming,
}

impl hyper::body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            streaming: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A stream that records its activity (bytes read or written) for the idle timeout.
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(header_ms: u64, idle_ms: u64) -> ListenerLimits {
        ListenerLimits {
            header_read_timeout: Duration::from_millis(header_ms),
            idle_timeout: Duration::from_millis(idle_ms),
            max_connections: 1,
        }
    }

    #[tokio::test]
    async fn the_watchdog_cuts_silent_and_idle_connections() {
        // Nothing ever arrives: cut at the header deadline.
        let a = Arc::new(Activity::new());
        let seen = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let cut = watchdog(a, seen, limits(200, 60_000)).await;
        assert_eq!(cut, Cutoff::NoRequest);
        assert!(t0.elapsed() >= Duration::from_millis(200));

        // A request arrived; bytes keep the connection alive until they stop for the idle time.
        let a = Arc::new(Activity::new());
        let seen = Arc::new(AtomicBool::new(true));
        let dog = tokio::spawn(watchdog(a.clone(), seen, limits(200, 1_000)));
        for _ in 0..15 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            a.touch();
        }
        assert!(!dog.is_finished(), "activity keeps the connection");
        let last = Instant::now();
        assert_eq!(dog.await.unwrap(), Cutoff::Idle);
        assert!(last.elapsed() >= Duration::from_millis(900));

        // A response being streamed holds off the idle cut however quiet it is; once its body
        // is dropped, the idle timer runs again.
        let a = Arc::new(Activity::new());
        let seen = Arc::new(AtomicBool::new(true));
        let streaming = Streaming::start(a.clone());
        let dog = tokio::spawn(watchdog(a.clone(), seen, limits(200, 300)));
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert!(!dog.is_finished(), "a quiet stream keeps its connection");
        drop(streaming);
        let dropped = Instant::now();
        assert_eq!(dog.await.unwrap(), Cutoff::Idle);
        assert!(dropped.elapsed() >= Duration::from_millis(250));
    }
}
