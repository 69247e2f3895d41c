//! Loopback ports and temporary directories for the things a test starts. Owns choosing, not
//! holding: a port returned here is free when chosen and may be taken by anyone afterwards, so
//! callers that can bind `127.0.0.1:0` themselves should.

use std::net::TcpListener;

/// One free loopback port (for processes that must be told their port in a config file).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free loopback ports: every listener is held until all are chosen, so no port is
/// handed out twice within one call.
pub fn free_ports(n: usize) -> Vec<u16> {
    try_free_ports(n).expect("choosing free loopback ports")
}

/// [`free_ports`] for callers that report errors instead of panicking (the fault harness).
pub fn try_free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// A fresh temporary directory named after `what`, removed when dropped (keep it with
/// `TempDir::keep` to inspect a failure).
pub fn temp_dir(what: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fedraft-{what}-"))
        .tempdir()
        .expect("creating a temporary directory")
}
