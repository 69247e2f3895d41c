//! Member credentials at rest: what the API does with credentials before it proposes them.
//!
//! With a keyring configured, credentials are sealed here, at the edge, so that the command
//! carrying them, and therefore the raft log, the state, snapshots, the audit archive and
//! backups, hold only ciphertext (`fedraft_secrets`). Without one, development nodes store them
//! in the clear (the binary warns loudly at start) and production nodes refuse credentials.
//! Credentials a client sends already sealed are refused: only a node seals, and a blob lifted
//! from a backup must not become some other registration's credentials.
//!
//! Must not: put credentials, sealed or not, in an answer, a log line or an error.

use std::sync::Arc;

use fedraft_core::model::Credentials;
use fedraft_secrets::Keyring;

use crate::error::ApiError;

/// How this node stores the credentials of the clusters it registers.
#[derive(Debug, Clone, Default)]
pub enum CredentialsAtRest {
    /// As given, in the clear: development nodes, and embedders that protect the log otherwise.
    /// The library default; `fedraft server --config` never picks it.
    #[default]
    Plaintext,
    /// Sealed under the keyring's current key before the command is proposed.
    Sealed(Arc<Keyring>),
    /// No key is configured outside development: a request carrying credentials is refused.
    Refused,
}

impl CredentialsAtRest {
    /// The keyring, if this node has one.
    pub fn keyring(&self) -> Option<&Arc<Keyring>> {
        match self {
            CredentialsAtRest::Sealed(k) => Some(k),
            _ => None,
        }
    }

    /// The credentials to propose for cluster `cluster`: `given` (from the request body) or,
    /// when absent, `kept` (the stored ones, on an update).
    pub fn prepare(
        &self,
        cluster: &str,
        given: Option<Credentials>,
        kept: Credentials,
    ) -> Result<Credentials, ApiError> {
        let creds = match given {
            Some(Credentials::Sealed(_)) => {
                return Err(ApiError::invalid(
                    "credentials",
                    "sealed credentials are written by the server only; send bearerToken or \
                     kubeconfig",
                ))
            }
            Some(c) => {
                if c.is_plaintext() && matches!(self, CredentialsAtRest::Refused) {
                    return Err(ApiError::invalid(
                        "credentials",
                        "this node has no credentials key configured (`[credentials]` in its \
                         config) and does not store credentials in the clear",
                    ));
                }
                c
            }
            // Stored plaintext from before sealing was configured is sealed on its next write;
            // without a key it stays as it is (refusing would block unrelated updates).
            None => kept,
        };
        match self {
            CredentialsAtRest::Sealed(k) => k.seal(cluster, &creds).map_err(|e| {
                tracing::error!(cluster, error = %e, "sealing credentials failed");
                ApiError::internal("sealing credentials failed")
            }),
            CredentialsAtRest::Plaintext | CredentialsAtRest::Refused => Ok(creds),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fedraft_core::model::SealedCredentials;

    fn keyring() -> Arc<Keyring> {
        let key = fedraft_secrets::KeyBytes::new(vec![4; 32]);
        Arc::new(Keyring::new("k1", [("k1".to_string(), key)]).unwrap())
    }

    #[test]
    fn each_mode_stores_what_it_promises() {
        let token = Credentials::BearerToken("tok-secret".into());
        let k = keyring();
        let sealed = CredentialsAtRest::Sealed(k.clone())
            .prepare("dc1", Some(token.clone()), Credentials::None)
            .unwrap();
        assert!(matches!(sealed, Credentials::Sealed(_)));
        assert_eq!(k.unseal("dc1", &sealed).unwrap(), token);
        // Kept plaintext is sealed on the next write; kept sealed stays as it is.
        let resealed = CredentialsAtRest::Sealed(k.clone())
            .prepare("dc1", None, token.clone())
            .unwrap();
        assert!(matches!(resealed, Credentials::Sealed(_)));
        let kept = CredentialsAtRest::Sealed(k)
            .prepare("dc1", None, sealed.clone())
            .unwrap();
        assert_eq!(kept, sealed);
        assert_eq!(
            CredentialsAtRest::Plaintext
                .prepare("dc1", Some(token.clone()), Credentials::None)
                .unwrap(),
            token
        );
        let err = CredentialsAtRest::Refused
            .prepare("dc1", Some(token.clone()), Credentials::None)
            .unwrap_err();
        assert!(err.to_string().contains("[credentials]"), "{err}");
        assert!(!err.to_string().contains("tok-secret"));
        assert_eq!(
            CredentialsAtRest::Refused
                .prepare("dc1", None, token.clone())
                .unwrap(),
            token
        );
        assert_eq!(
            CredentialsAtRest::Refused
                .prepare("dc1", Some(Credentials::None), Credentials::None)
                .unwrap(),
            Credentials::None
        );
    }

    #[test]
    fn clients_cannot_send_sealed_blobs() {
        let blob = Credentials::Sealed(SealedCredentials {
            key_id: "k1".into(),
            wrapped_key: vec![0; 60],
            nonce: vec![0; 12],
            ciphertext: vec![0; 20],
        });
        for mode in [
            CredentialsAtRest::Plaintext,
            CredentialsAtRest::Refused,
            CredentialsAtRest::Sealed(keyring()),
        ] {
            let err = mode
                .prepare("dc1", Some(blob.clone()), Credentials::None)
                .unwrap_err();
            assert_eq!(err.status(), http::StatusCode::BAD_REQUEST);
        }
    }
}
