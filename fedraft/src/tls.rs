//! TLS wiring of `fedraft server` and the CLI: loads the `[tls]` files of a node configuration
//! into rustls configurations (via fedraft-raft's `network::tls`). `listen.rs` serves a router
//! with them.
//!
//! The API listener gets server-side TLS (client certificates optional or required, per
//! `require_client_cert`); the peer listener always gets mutual TLS against the cluster CA.
//! Must not: fall back to plain HTTP when a `[tls]` section is present but unusable: the node
//! refuses to start instead.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use fedraft_apiserver::auth::read_private_file;
use fedraft_raft::network::tls::{client_config, server_config};
use fedraft_raft::PeerTls;
use rustls::ServerConfig;

use crate::config::TlsFiles;

fn read(path: &Path, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))
}

/// The TLS configurations of one node: mutual TLS for peers, server TLS for the API.
pub struct NodeTls {
    pub peer: PeerTls,
    pub api: Arc<ServerConfig>,
}

impl NodeTls {
    pub fn load(files: &TlsFiles) -> anyhow::Result<NodeTls> {
        let ca = read(&files.ca_file, "CA bundle")?;
        let chain = read(&files.cert_file, "certificate")?;
        // The key must be private to its owner; certificates and the CA are public.
        let key = read_private_file(&files.key_file, "private key")?;
        let peer = PeerTls::from_pem(&ca, &chain, &key).context("peer TLS")?;
        let client_ca = files.require_client_cert.then_some(ca.as_slice());
        let api = server_config(&chain, &key, client_ca).context("API TLS")?;
        Ok(NodeTls {
            peer,
            api: Arc::new(api),
        })
    }
}

/// A rustls client configuration for the CLI: trusts `ca_file`, presents `identity` if given.
pub fn cli_client_config(
    ca_file: &Path,
    identity: Option<(&Path, &Path)>,
) -> anyhow::Result<rustls::ClientConfig> {
    let ca = read(ca_file, "CA bundle")?;
    let ident = match identity {
        Some((cert, key)) => Some((read(cert, "certificate")?, read(key, "private key")?)),
        None => None,
    };
    let ident_ref = ident.as_ref().map(|(c, k)| (c.as_slice(), k.as_slice()));
    Ok(client_config(&ca, ident_ref)?)
}
