//! fedraft-secrets: member-cluster credentials encrypted at rest (envelope encryption).
//!
//! Credentials are sealed at the API edge, before the command that carries them is proposed, so
//! the raft log, the state, its snapshots, the audit archive and backups only ever hold
//! ciphertext. Every write draws a fresh 256-bit data key (DEK) and encrypts the credentials
//! with it (AES-256-GCM, the cluster name as associated data, so a blob copied onto another
//! cluster does not open); the DEK is then wrapped by a key-encryption key (KEK, AES-256-GCM,
//! the key id as associated data) that only the nodes' configuration holds. Rotation re-wraps
//! the DEK under the newest KEK and leaves the payload untouched, so it never needs the secret
//! in the clear outside this process and core can check that a rotation changed nothing else.
//!
//! Start at [`Keyring`] (`seal`, `unseal`, `rewrap`); [`KeyringConfig`] is the `[credentials]`
//! section of a node's config and loads the keys (`keys`). Crypto is `ring`'s, already in the
//! tree through rustls.
//!
//! Must not: log, print or put in an error any key or credential; hand core anything but the
//! sealed blob; accept a key file that others can read.

mod keys;

use std::collections::BTreeMap;
use std::fmt;

use fedraft_core::model::{Credentials, SealedCredentials};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use zeroize::Zeroizing;

pub use keys::{KeySource, KeyringConfig};

/// Key bytes as they are handed to [`Keyring::new`]: wiped when dropped.
pub type KeyBytes = Zeroizing<Vec<u8>>;

/// Bytes of a key-encryption key and of a data key (AES-256).
pub const KEY_BYTES: usize = 32;
/// Associated data prefixes: a blob of one kind never opens as the other.
const PAYLOAD_AAD: &[u8] = b"fedraft/credentials/v1\0";
const WRAP_AAD: &[u8] = b"fedraft/data-key/v1\0";
/// First byte of the sealed plaintext: which kind of credentials it holds.
const KIND_BEARER: u8 = 1;
const KIND_KUBECONFIG: u8 = 2;

/// Why sealing or opening failed. Never carries key material or credentials.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("credentials key {key_id:?} is not configured on this node")]
    UnknownKey { key_id: String },
    #[error("sealed credentials of cluster {cluster:?} do not open: {reason}")]
    Open {
        cluster: String,
        reason: &'static str,
    },
    #[error("the system random source failed")]
    Random,
    #[error("credentials key {key_id:?}: {reason}")]
    BadKey { key_id: String, reason: String },
    #[error("credentials keys: {0}")]
    Config(String),
}

/// The configured key-encryption keys, by id, and the one new writes are sealed with.
pub struct Keyring {
    current: String,
    keys: BTreeMap<String, LessSafeKey>,
    rng: SystemRandom,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("current", &self.current)
            .field("keys", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Keyring {
    /// A keyring of `keys` (id, 32 key bytes) sealing with `current`, which must be one of them.
    pub fn new(
        current: &str,
        keys: impl IntoIterator<Item = (String, KeyBytes)>,
    ) -> Result<Self, SecretsError> {
        let mut map = BTreeMap::new();
        for (id, bytes) in keys {
            if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(SecretsError::Config(format!(
                    "key id {id:?} must be 1 to 64 printable ASCII characters"
                )));
            }
            let key = aes_key(&bytes).map_err(|reason| SecretsError::BadKey {
                key_id: id.clone(),
                reason: reason.into(),
            })?;
            if map.insert(id.clone(), key).is_some() {
                return Err(SecretsError::Config(format!(
                    "key id {id:?} is listed twice"
                )));
            }
        }
        if !map.contains_key(current) {
            return Err(SecretsError::Config(format!(
                "the current key {current:?} is not among the listed keys"
            )));
        }
        Ok(Keyring {
            current: current.to_string(),
            keys: map,
            rng: SystemRandom::new(),
        })
    }

    /// The id of the key new writes are sealed with.
    pub fn current_id(&self) -> &str {
        &self.current
    }

    /// `creds` sealed for cluster `cluster` under the current key. `None` stays `None` (there
    /// is nothing to hide) and sealed credentials are returned as they are.
    pub fn seal(&self, cluster: &str, creds: &Credentials) -> Result<Credentials, SecretsError> {
        let (kind, text) = match creds {
            Credentials::None | Credentials::Sealed(_) => return Ok(creds.clone()),
            Credentials::BearerToken(t) => (KIND_BEARER, t),
            Credentials::Kubeconfig(k) => (KIND_KUBECONFIG, k),
        };
        let dek = Zeroizing::new(self.random::<KEY_BYTES>()?);
        let nonce = self.random::<NONCE_LEN>()?;
        let mut buf = Zeroizing::new(Vec::with_capacity(1 + text.len() + AES_256_GCM.tag_len()));
        buf.push(kind);
        buf.extend_from_slice(text.as_bytes());
        let key = aes_key(dek.as_slice()).map_err(|_| SecretsError::Random)?;
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(payload_aad(cluster)),
            &mut *buf,
        )
        .map_err(|_| SecretsError::Random)?;
        Ok(Credentials::Sealed(SealedCredentials {
            key_id: self.current.clone(),
            wrapped_key: self.wrap(&self.current, dek.as_slice())?,
            nonce: nonce.to_vec(),
            ciphertext: buf.to_vec(),
        }))
    }

    /// The credentials in the clear: sealed ones opened, others returned as they are.
    pub fn unseal(&self, cluster: &str, creds: &Credentials) -> Result<Credentials, SecretsError> {
        let Credentials::Sealed(s) = creds else {
            return Ok(creds.clone());
        };
        let bad = |reason| SecretsError::Open {
            cluster: cluster.to_string(),
            reason,
        };
        let dek = self.unwrap_key(cluster, s)?;
        let key = aes_key(dek.as_slice()).map_err(|_| bad("malformed data key"))?;
        let nonce = Nonce::try_assume_unique_for_key(&s.nonce).map_err(|_| bad("bad nonce"))?;
        let mut buf = Zeroizing::new(s.ciphertext.clone());
        let plain = key
            .open_in_place(nonce, Aad::from(payload_aad(cluster)), &mut buf)
            .map_err(|_| bad("payload failed authentication"))?;
        let (&kind, rest) = plain.split_first().ok_or(bad("empty payload"))?;
        let text = String::from_utf8(rest.to_vec()).map_err(|_| bad("payload is not UTF-8"))?;
        match kind {
            KIND_BEARER => Ok(Credentials::BearerToken(text)),
            KIND_KUBECONFIG => Ok(Credentials::Kubeconfig(text)),
            _ => Err(bad("unknown credentials kind")),
        }
    }

    /// What rotation writes for `creds`: sealed credentials under an older key re-wrapped
    /// under the current one (payload unchanged), plaintext credentials sealed; `None` when
    /// there is nothing to do (no credentials, or already under the current key).
    pub fn rewrap(
        &self,
        cluster: &str,
        creds: &Credentials,
    ) -> Result<Option<SealedCredentials>, SecretsError> {
        match creds {
            Credentials::None => Ok(None),
            Credentials::Sealed(s) if s.key_id == self.current => Ok(None),
            Credentials::Sealed(s) => {
                let dek = self.unwrap_key(cluster, s)?;
                Ok(Some(SealedCredentials {
                    key_id: self.current.clone(),
                    wrapped_key: self.wrap(&self.current, dek.as_slice())?,
                    nonce: s.nonce.clone(),
                    ciphertext: s.ciphertext.clone(),
                }))
            }
            Credentials::BearerToken(_) | Credentials::Kubeconfig(_) => {
                match self.seal(cluster, creds)? {
                    Credentials::Sealed(s) => Ok(Some(s)),
                    _ => Err(SecretsError::Random),
                }
            }
        }
    }

    /// `nonce || AES-GCM(kek, dek)`, bound to the key id.
    fn wrap(&self, key_id: &str, dek: &[u8]) -> Result<Vec<u8>, SecretsError> {
        let kek = self.key(key_id)?;
        let nonce = self.random::<NONCE_LEN>()?;
        let mut sealed = dek.to_vec();
        kek.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(wrap_aad(key_id)),
            &mut sealed,
        )
        .map_err(|_| SecretsError::Random)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    fn unwrap_key(
        &self,
        cluster: &str,
        s: &SealedCredentials,
    ) -> Result<Zeroizing<Vec<u8>>, SecretsError> {
        let kek = self.key(&s.key_id)?;
        let bad = |reason| SecretsError::Open {
            cluster: cluster.to_string(),
            reason,
        };
        if s.wrapped_key.len() != NONCE_LEN + KEY_BYTES + AES_256_GCM.tag_len() {
            return Err(bad("wrapped data key has the wrong length"));
        }
        let (nonce, sealed) = s.wrapped_key.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| bad("bad nonce"))?;
        let mut buf = Zeroizing::new(sealed.to_vec());
        let dek = kek
            .open_in_place(nonce, Aad::from(wrap_aad(&s.key_id)), &mut buf)
            .map_err(|_| bad("data key failed authentication (wrong key?)"))?;
        Ok(Zeroizing::new(dek.to_vec()))
    }

    fn key(&self, key_id: &str) -> Result<&LessSafeKey, SecretsError> {
        self.keys
            .get(key_id)
            .ok_or_else(|| SecretsError::UnknownKey {
                key_id: key_id.to_string(),
            })
    }

    fn random<const N: usize>(&self) -> Result<[u8; N], SecretsError> {
        let mut out = [0u8; N];
        self.rng.fill(&mut out).map_err(|_| SecretsError::Random)?;
        Ok(out)
    }
}

fn aes_key(bytes: &[u8]) -> Result<LessSafeKey, &'static str> {
    if bytes.len() != KEY_BYTES {
        return Err("a key is exactly 32 bytes");
    }
    UnboundKey::new(&AES_256_GCM, bytes)
        .map(LessSafeKey::new)
        .map_err(|_| "not an AES-256 key")
}

fn payload_aad(cluster: &str) -> Vec<u8> {
    [PAYLOAD_AAD, cluster.as_bytes()].concat()
}

fn wrap_aad(key_id: &str) -> Vec<u8> {
    [WRAP_AAD, key_id.as_bytes()].concat()
}

#[cfg(test)]
mod tests;
