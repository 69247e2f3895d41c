//! Mutual TLS for the peer transport: one CA bundle, this node's certificate chain and key.
//!
//! [`PeerTls`] holds both sides, built once from PEM: the client side verifies the peer's
//! certificate against the CA (and the host in the peer address against its SANs) and presents
//! this node's certificate; the server side demands a client certificate signed by the same CA.
//! A node holding a certificate from another CA fails the handshake before any request is read,
//! and the cluster secret is still checked on every request on top of it.
//!
//! Only the ring provider is used. Must not: read files (callers pass PEM bytes) or relax
//! verification for any reason.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::error::RaftError;

/// Client and server TLS configurations of one node's peer transport.
#[derive(Debug, Clone)]
pub struct PeerTls {
    /// Used by the outbound peer client (verifies the server, presents our certificate).
    pub client: Arc<ClientConfig>,
    /// Used by the peer listener (requires a client certificate from the CA).
    pub server: Arc<ServerConfig>,
}

fn invalid(what: &str, e: impl std::fmt::Display) -> RaftError {
    RaftError::Invalid(format!("TLS {what}: {e}"))
}

/// The ring provider as an explicit value, so no process-wide default is needed.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM bundle; an empty bundle is an error.
pub fn certs_from_pem(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, RaftError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(what, e))?;
    if certs.is_empty() {
        return Err(invalid(what, "no certificate found in the PEM data"));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in PEM data.
pub fn key_from_pem(pem: &[u8]) -> Result<PrivateKeyDer<'static>, RaftError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| invalid("private key", e))
}

/// A root store holding every CA certificate of the bundle (several during a CA rotation).
pub fn roots_from_pem(ca_pem: &[u8]) -> Result<Arc<RootCertStore>, RaftError> {
    let mut roots = RootCertStore::empty();
    for c in certs_from_pem(ca_pem, "CA bundle")? {
        roots.add(c).map_err(|e| invalid("CA bundle", e))?;
    }
    Ok(Arc::new(roots))
}

/// A client configuration trusting only `ca_pem`, presenting `identity` (chain, key) if given.
pub fn client_config(
    ca_pem: &[u8],
    identity: Option<(&[u8], &[u8])>,
) -> Result<ClientConfig, RaftError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("client protocol versions", e))?
        .with_root_certificates(roots_from_pem(ca_pem)?);
    match identity {
        Some((chain, key)) => builder
            .with_client_auth_cert(
                certs_from_pem(chain, "certificate chain")?,
                key_from_pem(key)?,
            )
            .map_err(|e| invalid("client certificate", e)),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// A server configuration with this chain and key; `client_ca_pem` makes client certificates
/// from that CA mandatory.
pub fn server_config(
    chain_pem: &[u8],
    key_pem: &[u8],
    client_ca_pem: Option<&[u8]>,
) -> Result<ServerConfig, RaftError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("server protocol versions", e))?;
    let builder = match client_ca_pem {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(roots_from_pem(ca)?, provider())
                    .build()
                    .map_err(|e| invalid("client verifier", e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(
            certs_from_pem(chain_pem, "certificate chain")?,
            key_from_pem(key_pem)?,
        )
        .map_err(|e| invalid("server certificate", e))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

impl PeerTls {
    /// Builds both sides from the CA bundle and this node's certificate chain and key.
    pub fn from_pem(ca_pem: &[u8], chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, RaftError> {
        Ok(PeerTls {
            client: Arc::new(client_config(ca_pem, Some((chain_pem, key_pem)))?),
            server: Arc::new(server_config(chain_pem, key_pem, Some(ca_pem))?),
        })
    }
}
