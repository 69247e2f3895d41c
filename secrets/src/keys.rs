//! Where key-encryption keys come from: the `[credentials]` section of a node's config names
//! the current key and every key still needed to open older blobs, each read from a file (mode
//! 0600 or stricter: 32 raw bytes, or their base64 text) or from an environment variable
//! (base64 text).
//!
//! Must not: accept a key file that group or others may read (as ssh refuses such a private
//! key), name a key's bytes in an error, or keep read bytes around after building the keyring.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;
use zeroize::Zeroizing;

use crate::{Keyring, SecretsError, KEY_BYTES};

/// Largest key file read: a key is 32 bytes, 44 as base64 text; anything far bigger is not one.
const MAX_KEY_FILE_BYTES: u64 = 1024;

/// The `[credentials]` section of a node's config. Every node of a cluster lists the same keys
/// (any node's executors may have to open any cluster's credentials).
///
/// ```toml
/// [credentials]
/// current = "2026-12"
/// keys = [
///   { id = "2026-12", file = "/etc/fedraft/credentials-2026-12.key" },
///   { id = "2026-06", env = "FEDRAFT_CREDENTIALS_KEY_2026_06" },
/// ]
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyringConfig {
    /// Id of the key new credentials are sealed with, and rotation re-wraps under. Required.
    pub current: String,
    /// The current key and every older one still needed to open stored credentials. Required.
    pub keys: Vec<KeySource>,
}

/// One key-encryption key: its id (stored next to every blob it wraps) and where its bytes are.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySource {
    pub id: String,
    /// A file of 32 random bytes, or their base64 text (`head -c 32 /dev/urandom > k; chmod 600 k`).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// An environment variable holding the 32 bytes as base64 text.
    #[serde(default)]
    pub env: Option<String>,
}

impl KeyringConfig {
    /// Reads every key and builds the keyring.
    pub fn load(&self) -> Result<Keyring, SecretsError> {
        self.load_with(|name| std::env::var(name).ok())
    }

    /// [`KeyringConfig::load`] reading environment variables through `env`.
    pub fn load_with(&self, env: impl Fn(&str) -> Option<String>) -> Result<Keyring, SecretsError> {
        let mut keys = Vec::new();
        for k in &self.keys {
            let bad = |reason: String| SecretsError::BadKey {
                key_id: k.id.clone(),
                reason,
            };
            let bytes = match (&k.file, &k.env) {
                (Some(path), None) => read_key_file(path).map_err(bad)?,
                (None, Some(var)) => {
                    let text = Zeroizing::new(
                        env(var)
                            .ok_or_else(|| bad(format!("environment variable {var} is unset")))?,
                    );
                    decode_text(text.as_bytes())
                        .map_err(|r| bad(format!("environment variable {var}: {r}")))?
                }
                _ => return Err(bad("set exactly one of `file` and `env`".into())),
            };
            keys.push((k.id.clone(), bytes));
        }
        Keyring::new(&self.current, keys)
    }
}

fn read_key_file(path: &Path) -> Result<Zeroizing<Vec<u8>>, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "{shown} may be read by group or others (mode {mode:03o}); chmod 600 it"
            ));
        }
    }
    if meta.len() > MAX_KEY_FILE_BYTES {
        return Err(format!("{shown} is {} bytes, not a key", meta.len()));
    }
    let raw = Zeroizing::new(std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?);
    if raw.len() == KEY_BYTES {
        return Ok(raw);
    }
    decode_text(&raw).map_err(|r| format!("{shown}: {r}"))
}

/// Base64 text (standard or URL-safe alphabet, padding optional) of exactly 32 bytes.
fn decode_text(text: &[u8]) -> Result<Zeroizing<Vec<u8>>, String> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let trimmed = text.trim_ascii();
    let unpadded = trimmed
        .strip_suffix(b"==")
        .or_else(|| trimmed.strip_suffix(b"="));
    let body = unpadded.unwrap_or(trimmed);
    let decoded = STANDARD_NO_PAD
        .decode(body)
        .or_else(|_| URL_SAFE_NO_PAD.decode(body))
        .map(Zeroizing::new)
        .map_err(|_| "neither 32 raw bytes nor base64 text".to_string())?;
    if decoded.len() != KEY_BYTES {
        return Err(format!(
            "decodes to {} bytes; a key is {KEY_BYTES}",
            decoded.len()
        ));
    }
    Ok(decoded)
}
