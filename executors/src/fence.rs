//! The fencing token of one cluster's owner: stamped on every object the executor writes
//! (annotation `fedraft.io/owner: <node>@<since_index>`) and compared before every write or
//! delete of a live object. A live token with a higher index means a newer owner wrote it: this
//! executor is stale, so it refuses, trips the fence and its reconciler stops.
//!
//! The token is added to the body sent, never to the prepared body the skip rule compares: an
//! owner change alone writes nothing, and the token is no part of drift. The write also carries
//! the live object's resourceVersion, so the check and the write are one compare-and-swap (a
//! newer owner's write in between makes the member answer 409, retried after a fresh look).
//!
//! Deletes go through [`delete`] here for the same reason: the check, then the delete with the
//! live resourceVersion as its precondition.
//!
//! Under a token the fence also holds this node's lease clock (`crate::lease`): while the lease
//! is not fresh every write is refused ([`Fence::may_write`]), the runner itself lives on. A
//! renewal that commits late only pauses writes; the runner keeps its watches and caches, so
//! the pause costs no relisting and ends with the next committed renewal.
//!
//! Releases ([`release`]) likewise: a copy whose template was deleted under Karmada's
//! `preserveResourcesOnDeletion` loses fedraft's labels instead of being deleted, checked and
//! conditioned on the live version the same way.
//!
//! Must not: decide ownership (core does, `fedraft_core::owners`), or write anything but the
//! fenced delete and release.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fedraft_core::owners::{parse_token, OWNER_ANNOTATION};
use serde_json::Value;

use fedraft_core::render::{MANAGED_BY_LABEL, OBJECT_ANNOTATION, OBJECT_LABEL};
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};

use crate::client::bounded;
use crate::error::ExecError;
use crate::lease::LeaseClock;
use crate::live_id::LiveId;
use crate::live_object::LiveObject;
use crate::reconciler::{api_for, ClusterCtx};

/// One runner's token, and whether a newer owner was seen.
#[derive(Debug, Default)]
pub struct Fence {
    /// `node@index`; None under leader-only ownership (no token in force).
    token: Option<(String, u64)>,
    /// This node's lease, consulted only under a token.
    lease: Option<Arc<LeaseClock>>,
    tripped: AtomicBool,
}

impl Fence {
    /// A fence for `token` (`fedraft_core::owners::Owner::token`), if any, writing only while
    /// `lease` is fresh.
    pub fn new(token: Option<String>, lease: Option<Arc<LeaseClock>>) -> Self {
        let token = token.and_then(|t| {
            let (node, index) = parse_token(&t)?;
            Some((node.to_string(), index))
        });
        Fence {
            token,
            lease,
            tripped: AtomicBool::new(false),
        }
    }

    /// Whether this runner may write now: always under leader-only ownership; under a token
    /// only while this node's lease is fresh (a token without a clock never writes).
    pub fn may_write(&self) -> bool {
        self.token.is_none() || self.lease.as_ref().is_some_and(|l| l.is_fresh())
    }

    /// Resolves when this node's lease turns fresh again after a pause; never without a lease.
    pub async fn lease_freshened(&self) {
        match (&self.token, &self.lease) {
            (Some(_), Some(l)) => l.freshened().await,
            _ => std::future::pending().await,
        }
    }

    /// Whether a newer owner was seen: the runner must stop.
    pub fn tripped(&self) -> bool {
        self.tripped.load(Ordering::Relaxed)
    }

    /// Refuses (and trips) when `live` carries a token newer than ours.
    /// Refuses, without tripping, while the lease is not fresh.
    pub fn check(&self, id: &LiveId, live: Option<&LiveObject>) -> Result<(), ExecError> {
        let Some((_, mine)) = &self.token else {
            return Ok(());
        };
        if !self.may_write() {
            return Err(ExecError::LeaseLapsed { id: id.to_string() });
        }
        let theirs = live.and_then(LiveObject::owner).and_then(parse_token);
        match theirs {
            Some((node, index)) if index > *mine => {
                self.tripped.store(true, Ordering::Relaxed);
                Err(ExecError::Fenced {
                    id: id.to_string(),
                    owner: format!("{node}@{index}"),
                })
            }
            _ => Ok(()),
        }
    }

    /// The body to send: `body` with our token and, for an existing object, its live
    /// resourceVersion as the precondition. `body` itself when no token is in force.
    pub fn stamp(&self, body: &Value, live: Option<&LiveObject>) -> Option<Value> {
        let (node, index) = self.token.as_ref()?;
        let mut out = body.clone();
        let meta = out.get_mut("metadata")?.as_object_mut()?;
        if let Some(rv) = live.and_then(|l| l.resource_version.as_deref()) {
            meta.insert("resourceVersion".into(), Value::from(rv));
        }
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                OWNER_ANNOTATION.into(),
                Value::from(format!("{node}@{index}")),
            );
        }
        Some(out)
    }
}

/// Deletes a managed object no longer desired, unless a newer owner wrote it; with a token in
/// force, only the version this executor looked at (a 409 otherwise, retried after a fresh
/// look). Gone already is fine.
pub(crate) async fn delete(
    ctx: &ClusterCtx,
    id: &LiveId,
    live: Option<&LiveObject>,
) -> Result<(), ExecError> {
    ctx.fence.check(id, live)?;
    let r = ctx.resolver.resolve(id.api_version(), id.kind()).await?;
    let api = api_for(ctx, &r, id.namespace());
    let mut params = DeleteParams::background();
    if ctx.fence.token.is_some() {
        params.preconditions = Some(Preconditions {
            resource_version: live.and_then(|l| l.resource_version.as_deref().map(str::to_string)),
            uid: None,
        });
    }
    let res = bounded(
        ctx.cfg.request_timeout,
        || format!("deleting {id}"),
        async { api.delete(id.name(), &params).await },
    )
    .await;
    match res {
        Ok(_) => Ok(()),
        Err(ExecError::Kube {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// The `fedraft.io/object` annotations of objects whose member copies are released rather than
/// deleted (templates deleted under Karmada's `preserveResourcesOnDeletion`).
pub(crate) fn released(s: &fedraft_core::state::State) -> BTreeSet<String> {
    s.released().iter().map(ToString::to_string).collect()
}

/// Removes a managed object no longer desired: released if its object is in `released`,
/// deleted otherwise.
pub(crate) async fn remove(
    ctx: &ClusterCtx,
    id: &LiveId,
    live: Option<&LiveObject>,
    released: &BTreeSet<String>,
) -> Result<(), ExecError> {
    let preserved = live
        .and_then(LiveObject::federated_object)
        .is_some_and(|k| released.contains(k));
    if preserved {
        tracing::info!(cluster = %ctx.cluster, %id, "releasing a preserved copy");
        return release(ctx, id, live).await;
    }
    delete(ctx, id, live).await
}

/// Releases a managed object whose template was deleted with its copies preserved: fedraft's
/// labels and object annotation are taken off (a merge patch), so the watches stop seeing it
/// and nothing ever deletes it. Gone already is fine.
pub(crate) async fn release(
    ctx: &ClusterCtx,
    id: &LiveId,
    live: Option<&LiveObject>,
) -> Result<(), ExecError> {
    ctx.fence.check(id, live)?;
    let r = ctx.resolver.resolve(id.api_version(), id.kind()).await?;
    let api = api_for(ctx, &r, id.namespace());
    let mut meta = serde_json::json!({
        "labels": {MANAGED_BY_LABEL: null, OBJECT_LABEL: null},
        "annotations": {OBJECT_ANNOTATION: null, OWNER_ANNOTATION: null},
    });
    if ctx.fence.token.is_some() {
        if let Some(rv) = live.and_then(|l| l.resource_version.as_deref()) {
            meta["resourceVersion"] = Value::from(rv);
        }
    }
    let body = serde_json::json!({ "metadata": meta });
    let res = bounded(
        ctx.cfg.request_timeout,
        || format!("releasing {id}"),
        async {
            api.patch(id.name(), &PatchParams::default(), &Patch::Merge(&body))
                .await
        },
    )
    .await;
    match res {
        Ok(_) => Ok(()),
        Err(ExecError::Kube {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

impl ClusterCtx {
    /// The same context, writing as the owner holding `token` while `lease` is fresh.
    pub fn with_token(mut self, token: Option<String>, lease: Option<Arc<LeaseClock>>) -> Self {
        self.fence = Fence::new(token, lease);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn live(token: &str) -> LiveObject {
        LiveObject::from_value(json!({
            "metadata": {"name": "a", "resourceVersion": "7", "annotations": {OWNER_ANNOTATION: token}}
        }))
    }

    fn id() -> LiveId {
        LiveId::new("v1", "ConfigMap", "ns", "a")
    }

    /// A lease clock fresh for the next minute.
    fn fresh() -> Option<Arc<LeaseClock>> {
        let c = LeaseClock::default();
        c.renewed(tokio::time::Instant::now() + std::time::Duration::from_secs(60));
        Some(Arc::new(c))
    }

    #[test]
    fn a_newer_token_trips_an_older_or_equal_one_does_not() {
        let f = Fence::new(Some("node1@10".into()), fresh());
        assert!(f.check(&id(), Some(&live("node2@9"))).is_ok());
        assert!(f.check(&id(), Some(&live("node1@10"))).is_ok());
        assert!(f.check(&id(), None).is_ok());
        assert!(!f.tripped());
        let e = f.check(&id(), Some(&live("node2@11"))).unwrap_err();
        assert!(e.to_string().contains("node2@11"), "{e}");
        assert!(f.tripped());
        // Leader-only ownership: no token, no check.
        assert!(Fence::new(None, None)
            .check(&id(), Some(&live("node2@11")))
            .is_ok());
    }

    #[test]
    fn a_lease_that_is_not_fresh_refuses_every_write_without_tripping() {
        let never = Fence::new(Some("node1@10".into()), Some(Arc::default()));
        assert!(!never.may_write());
        let e = never.check(&id(), None).unwrap_err();
        assert!(matches!(e, ExecError::LeaseLapsed { .. }), "{e}");
        assert!(e.is_transient());
        assert!(
            !never.tripped(),
            "a lapse pauses the runner, it does not stop it"
        );
        assert!(!Fence::new(Some("node1@10".into()), None).may_write());
        assert!(Fence::new(Some("node1@10".into()), fresh()).may_write());
        assert!(Fence::new(None, None).may_write());
    }

    #[test]
    fn the_stamp_carries_the_token_and_the_precondition_only_on_the_wire() {
        let f = Fence::new(Some("node3@4".into()), fresh());
        let body = json!({"metadata": {"name": "a", "annotations": {"x": "y"}}});
        let sent = f.stamp(&body, Some(&live("node1@2"))).unwrap();
        assert_eq!(sent["metadata"]["annotations"][OWNER_ANNOTATION], "node3@4");
        assert_eq!(sent["metadata"]["annotations"]["x"], "y");
        assert_eq!(sent["metadata"]["resourceVersion"], "7");
        assert!(body["metadata"]["annotations"]
            .get(OWNER_ANNOTATION)
            .is_none());
        let created = f.stamp(&body, None).unwrap();
        assert!(created["metadata"].get("resourceVersion").is_none());
        assert!(Fence::new(None, None).stamp(&body, None).is_none());
    }
}
