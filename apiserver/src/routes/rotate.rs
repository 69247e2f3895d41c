//! `POST /v1/admin/credentials/rotate`: credentials key rotation (admin only).
//!
//! Propose: the node that takes the request reads every cluster's credentials linearizably,
//! re-wraps each sealed one whose key is not its keyring's current key (the payload stays as it
//! is) and seals any still stored in the clear, then proposes them all as one
//! `Command::RewrapCredentials` with the caller as actor, so the rotation is in the log and the
//! audit archive like any other write. Apply (core, `state/handlers/credentials.rs`) refuses the
//! whole batch if any cluster's credentials changed since the read; the route then reads again,
//! a bounded number of times. Answer: how many clusters were re-sealed, their names, and the
//! key id they are now sealed with. Re-running it when everything is current proposes nothing.
//!
//! Every node lists the same keys in its config, so whichever node takes the request seals
//! under the key the operator made current. Must not: answer with, or log, any credential.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Extension, Json};
use fedraft_core::command::{Command, CredentialsRewrap};
use fedraft_core::model::Credentials;
use fedraft_secrets::SecretsError;
use serde_json::json;

use super::common::{read, resource_version, submit};
use crate::auth::{Principal, Role};
use crate::error::ApiError;
use crate::App;

/// Rotations refused because a cluster's credentials changed under them, before giving up.
const ROTATE_ATTEMPTS: u32 = 3;

pub async fn rotate(
    State(app): State<App>,
    Extension(p): Extension<Principal>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if p.role != Role::Admin {
        return Err(ApiError::forbidden(format!(
            "{} may not rotate the credentials key",
            p.name
        )));
    }
    let Some(keyring) = app.cfg.credentials.keyring().cloned() else {
        return Err(ApiError::Unprocessable {
            message: "this node has no credentials key configured (`[credentials]` in its config)"
                .into(),
            field: None,
        });
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let stored: Vec<(String, u64, Credentials)> = read(&app, false, |s| {
            s.clusters()
                .map(|c| {
                    (
                        c.spec.name.clone(),
                        c.resource_version,
                        c.spec.credentials.clone(),
                    )
                })
                .collect()
        })
        .await?;
        let mut batch = Vec::new();
        for (cluster, version, creds) in &stored {
            let rewrapped = keyring
                .rewrap(cluster, creds)
                .map_err(|e| rewrap_error(cluster, e))?;
            if let Some(sealed) = rewrapped {
                batch.push(CredentialsRewrap {
                    cluster: cluster.clone(),
                    expected_version: *version,
                    credentials: sealed,
                });
            }
        }
        let names: Vec<String> = batch.iter().map(|r| r.cluster.clone()).collect();
        if batch.is_empty() {
            return Ok(Json(json!({
                "kind": "CredentialsRotation",
                "currentKey": keyring.current_id(),
                "rewrapped": 0,
                "clusters": names,
            })));
        }
        // No idempotency key: a retry after a conflict must be a new proposal, and a repeated
        // rotation finds nothing left to do.
        match submit(
            &app,
            &p,
            &HeaderMap::new(),
            Command::RewrapCredentials(batch),
        )
        .await
        {
            Ok(applied) => {
                tracing::info!(actor = %p.name, key = keyring.current_id(), clusters = names.len(),
                    index = applied.index, "credentials re-sealed under the current key");
                return Ok(Json(json!({
                    "kind": "CredentialsRotation",
                    "currentKey": keyring.current_id(),
                    "rewrapped": names.len(),
                    "clusters": names,
                    "resourceVersion": resource_version(&applied),
                })));
            }
            Err(ApiError::Conflict { .. }) if attempt < ROTATE_ATTEMPTS => continue,
            Err(e) => return Err(e),
        }
    }
}

fn rewrap_error(cluster: &str, e: SecretsError) -> ApiError {
    match e {
        SecretsError::UnknownKey { key_id } => ApiError::Unprocessable {
            message: format!(
                "cluster {cluster:?} is sealed under key {key_id:?}, which this node's config \
                 does not list; add it back to `[credentials].keys` until rotation is done"
            ),
            field: None,
        },
        SecretsError::Open { .. } => ApiError::Unprocessable {
            message: e.to_string(),
            field: None,
        },
        other => {
            tracing::error!(cluster, error = %other, "re-sealing credentials failed");
            ApiError::internal("re-sealing credentials failed")
        }
    }
}
