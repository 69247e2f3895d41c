//! Credentials key rotation (`Command::RewrapCredentials`).
//!
//! Propose (the API's rotation route, `apiserver/src/routes/rotate.rs`): the leader's API reads
//! every cluster's credentials, re-wraps sealed ones whose key is not the newest and seals those
//! still stored in the clear, and proposes them as one command. Apply (here): every item is
//! checked before anything changes, so a rotation lands whole or not at all. An item applies
//! only while its cluster still holds what the rotation read (`CredentialsRewrap`): a write of
//! new credentials between the read and the commit wins, and the rotation is refused with a
//! conflict naming that cluster (the route reads again and retries). Caller gets: the entry's
//! index as the resource version of every re-sealed cluster.
//!
//! Must not: open, compare or judge the secret itself; core never holds a key, it only checks
//! that the sealed payload is the one it already stores.

use std::collections::BTreeSet;

use super::validate;
use crate::command::CredentialsRewrap;
use crate::model::Credentials;
use crate::state::{Ctx, HandlerResult, RejectCode, Rejection, State};

impl State {
    pub(crate) fn on_rewrap_credentials(
        &mut self,
        batch: &[CredentialsRewrap],
        ctx: &mut Ctx,
    ) -> HandlerResult {
        if batch.is_empty() {
            return Err(Rejection::new(
                RejectCode::Invalid,
                Some("clusters"),
                "a rotation names at least one cluster",
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, item) in batch.iter().enumerate() {
            let field = format!("clusters[{i}]");
            validate::dns_label(&item.cluster, &format!("{field}.cluster"))?;
            if !seen.insert(item.cluster.as_str()) {
                return Err(Rejection::new(
                    RejectCode::Invalid,
                    Some(&field),
                    format!("cluster {:?} named twice", item.cluster),
                ));
            }
            if item.credentials.key_id.is_empty() {
                return Err(Rejection::new(
                    RejectCode::Invalid,
                    Some(&format!("{field}.credentials.keyId")),
                    "a sealed credential names its key",
                ));
            }
            let c = self.d.clusters.get(&item.cluster).ok_or_else(|| {
                Rejection::not_found(&field, format!("cluster {:?}", item.cluster))
            })?;
            let unchanged = match &c.spec.credentials {
                // Rotation re-wraps the data key only: the payload must be the stored one.
                Credentials::Sealed(now) => {
                    now.nonce == item.credentials.nonce
                        && now.ciphertext == item.credentials.ciphertext
                }
                Credentials::BearerToken(_) | Credentials::Kubeconfig(_) => {
                    c.resource_version == item.expected_version
                }
                Credentials::None => {
                    return Err(Rejection::new(
                        RejectCode::FailedPrecondition,
                        Some(&field),
                        format!("cluster {:?} has no credentials to seal", item.cluster),
                    ))
                }
            };
            if !unchanged {
                return Err(Rejection::new(
                    RejectCode::Conflict,
                    Some(&field),
                    format!(
                        "the credentials of cluster {:?} changed since the rotation read them \
                         (resource version {} then, {} now)",
                        item.cluster, item.expected_version, c.resource_version
                    ),
                ));
            }
        }
        for item in batch {
            let sealed = Credentials::Sealed(item.credentials.clone());
            self.update_cluster(&item.cluster, ctx, |c| c.spec.credentials = sealed);
        }
        Ok(Some(ctx.index))
    }
}
