//! The accept loop: serves HTTP/1.1 connections and carries out going dark and coming back.
//!
//! axum's own `serve` cannot close its listener and later reopen the same address, so this loop
//! owns the socket. While `Refuse` is on, the listener is dropped and every open connection is
//! cut (kube-rs keeps connections alive; they must fail too). While `Hang` is on, new
//! connections are accepted and held unanswered. On coming back the held connections are
//! dropped and the listener is bound again on the very same address. This module must not
//! know about Kubernetes.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;

use crate::faults::DarkMode;

/// Pending connections the kernel queues before accept.
const LISTEN_BACKLOG: u32 = 1024;
/// Pause between attempts to rebind the address after coming back.
const REBIND_RETRY_MS: u64 = 50;

/// Binds with SO_REUSEADDR so the address can be taken again right after going dark.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

async fn accept(l: Option<&TcpListener>) -> std::io::Result<TcpStream> {
    match l {
        Some(l) => l.accept().await.map(|(s, _)| s),
        None => std::future::pending().await,
    }
}

/// Serves `app` on `listener` until `shutdown` turns true.
pub async fn run(
    listener: TcpListener,
    app: Router,
    mut dark: watch::Receiver<Option<DarkMode>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "listener has no local address");
            return;
        }
    };
    let mut listener = Some(listener);
    // Bumping this epoch cuts every open connection.
    let (cut, _) = watch::channel(0u64);
    let mut held: Vec<TcpStream> = Vec::new();
    loop {
        if *shutdown.borrow() {
            break;
        }
        let mode = *dark.borrow_and_update();
        match mode {
            Some(DarkMode::Refuse) => {
                if listener.take().is_some() {
                    tracing::info!(%addr, "going dark: refusing connections");
                }
                held.clear();
                cut.send_modify(|e| *e += 1);
            }
            Some(DarkMode::Hang) | None => {
                if mode.is_none() && !held.is_empty() {
                    held.clear();
                }
                if listener.is_none() {
                    match bind(addr) {
                        Ok(l) => {
                            tracing::info!(%addr, "listening again");
                            listener = Some(l);
                        }
                        Err(e) => {
                            tracing::warn!(%addr, error = %e, "rebind failed; retrying");
                            tokio::time::sleep(Duration::from_millis(REBIND_RETRY_MS)).await;
                            continue;
                        }
                    }
                }
            }
        }
        tokio::select! {
            _ = shutdown.changed() => break,
            r = dark.changed() => if r.is_err() { break },
            conn = accept(listener.as_ref()) => match conn {
                Ok(stream) if mode == Some(DarkMode::Hang) => held.push(stream),
                Ok(stream) => spawn_connection(stream, app.clone(), cut.subscribe(), shutdown.clone()),
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(REBIND_RETRY_MS)).await;
                }
            },
        }
    }
    cut.send_modify(|e| *e += 1);
}

fn spawn_connection(
    stream: TcpStream,
    app: Router,
    mut cut: watch::Receiver<u64>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    tokio::spawn(async move {
        let service = TowerToHyperService::new(app);
        let conn = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service);
        tokio::select! {
            r = conn => if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended with error");
            },
            // Dropping the connection future closes the socket.
            _ = cut.changed() => {}
            _ = shutdown.changed() => {}
        }
    });
}
