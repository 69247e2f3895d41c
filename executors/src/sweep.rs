//! Finding fedraft's objects in kinds nothing desires on a cluster now: objects placed there
//! earlier (possibly under another leader or owner) that must be found to be removed.
//!
//! Each of [`DEFAULT_KINDS`] that no desired object has made the live cache watch is listed,
//! filtered by fedraft's ownership label and one item long, when the runner starts and then
//! once per resync period. A kind that holds such an object is watched from then on, so the
//! reconciler removes it like any other object no longer desired. Watching every default kind
//! for good would hold a connection per kind and cluster (members speak HTTP/1.1 to kube-rs):
//! a thousand members would cost a node over ten thousand sockets for kinds that hold nothing.
//! An object labelled by hand in a kind nobody watches is found at the next sweep, not at once.
//!
//! Must not: write to the cluster, or watch a kind it found nothing of.

use std::collections::BTreeSet;

use fedraft_core::render::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use kube::api::{Api, DynamicObject, ListParams};
use tokio::time::Instant;

use crate::error::ExecError;
use crate::reconciler::ClusterCtx;

/// Kinds swept even when nothing of theirs is desired.
pub const DEFAULT_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("networking.k8s.io/v1", "Ingress"),
];

/// One runner's sweeps.
#[derive(Default)]
pub struct Sweep {
    /// Default kinds this cluster does not serve.
    unserved: BTreeSet<(String, String)>,
    /// When the last sweep found every kind (a failed one is tried again on the next pass).
    done_at: Option<Instant>,
}

impl Sweep {
    /// Sweeps the default kinds not in `watched` when due; adds the kinds it started watching
    /// to `watched`.
    pub async fn run(&mut self, ctx: &ClusterCtx, watched: &mut BTreeSet<(String, String)>) {
        let now = Instant::now();
        if self
            .done_at
            .is_some_and(|t| now.duration_since(t) < ctx.cfg.resync_period)
        {
            return;
        }
        let mut complete = true;
        for (av, kind) in DEFAULT_KINDS {
            let key = (av.to_string(), kind.to_string());
            if watched.contains(&key) || self.unserved.contains(&key) {
                continue;
            }
            match self.holds_managed(ctx, av, kind).await {
                Ok(true) => {
                    watched.insert(key);
                }
                Ok(false) => {}
                Err(ExecError::UnknownKind { .. }) => {
                    self.unserved.insert(key);
                }
                Err(e) => {
                    complete = false;
                    tracing::debug!(cluster = %ctx.cluster, error = %e, %kind, "cannot sweep a default kind yet");
                }
            }
        }
        if complete {
            self.done_at = Some(now);
        }
    }

    /// Whether the cluster holds any object of the kind with fedraft's label; if so, the live
    /// cache watches the kind from now on.
    async fn holds_managed(
        &self,
        ctx: &ClusterCtx,
        api_version: &str,
        kind: &str,
    ) -> Result<bool, ExecError> {
        let r = ctx.resolver.resolve(api_version, kind).await?;
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &r.resource);
        let params = ListParams::default()
            .labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"))
            .limit(1);
        let action = format!("list {kind} labelled {MANAGED_BY_LABEL}");
        let waited = ctx.cfg.request_timeout;
        let list = tokio::time::timeout(waited, api.list_metadata(&params))
            .await
            .map_err(|_| ExecError::Timeout {
                action: action.clone(),
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            })?
            .map_err(|e| ExecError::kube(action, e))?;
        let found = !list.items.is_empty();
        if found {
            ctx.live.ensure(&r);
        }
        Ok(found)
    }
}
