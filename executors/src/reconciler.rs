//! One member cluster's reconciler: converges the cluster to the state's desired objects.
//!
//! Shape (as kube-runtime controllers): [`reconcile`] handles one desired object and is
//! idempotent; [`crate::retry`] picks when a failed object is retried (exponential backoff with
//! jitter, per object, so one broken manifest never slows the rest, and per cluster while the
//! cluster refuses connections); the loop always requeues
//! (a full pass at least every resync period, and whenever the log applies an entry or a watch
//! sees a managed object change).
//!
//! A pass: read the desired objects for this cluster from the local state, resolve their kinds,
//! make sure their types are watched, decide per object with [`crate::plan::verdict`] (nothing
//! is written when the live object already matches), create missing namespaces (labelled as
//! fedraft's), apply what differs with server-side apply (field manager `fedraft`, force), delete
//! managed objects no longer desired, and publish the per-object status for the reporter.
//! Nothing is written whose identity or member-discovered scope differs from what core
//! admitted ([`crate::plan::check_admitted`]); such an object's status says why.
//!
//! Must not: decide placement, touch objects without the ownership label, or block other
//! clusters (each reconciler is its own task with its own client).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use fedraft_core::model::ObjectKey;
use fedraft_core::render::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::{Mutex, Notify};
use tokio::time::Instant;

use crate::client::bounded;
use crate::config::ExecutorConfig;
use crate::desired::{DesiredCache, Entry, Prepared};
use crate::error::ExecError;
use crate::live::LiveCache;
use crate::live_id::LiveId;
use crate::live_object::LiveObject;
use crate::metrics::{ClusterMetrics, Reconciled};
use crate::node::ControlPlane;
use crate::plan::{self, ApplyReason, Memo, Verdict};
use crate::report::{object_report as report, Observations};
use crate::resolve::{Resolved, Resolver};
use crate::retry::{self, Refusal, Retries};
use crate::workload::reports_in_place;

/// Field manager of every fedraft write.
pub const FIELD_MANAGER: &str = "fedraft";

/// What a cluster's reconciler and probe share.
pub struct ClusterCtx {
    pub cluster: String,
    pub client: Client,
    pub resolver: Resolver,
    pub live: LiveCache,
    pub cfg: ExecutorConfig,
    /// This cluster's series (reconciles; the client records its own calls).
    pub metrics: ClusterMetrics,
    /// This runner's owner token (`crate::fence`); none under leader-only ownership.
    pub fence: crate::fence::Fence,
    known_namespaces: Mutex<BTreeSet<String>>,
    /// Pods Pending unschedulable per workload, as the probe last counted them.
    pub unschedulable: crate::probe::Unschedulable,
    /// What the last pass scanned as placed here, for the supervisor's wake-ups.
    pub interest: Arc<crate::wake::Interest>,
}

impl ClusterCtx {
    pub fn new(cluster: String, client: Client, cfg: ExecutorConfig, wake: Arc<Notify>) -> Self {
        ClusterCtx {
            resolver: Resolver::new(client.clone(), cfg.request_timeout),
            live: LiveCache::new(client.clone(), cluster.clone(), wake.clone()),
            metrics: cfg.metrics.cluster(&cluster),
            cluster,
            client,
            cfg,
            fence: Default::default(),
            known_namespaces: Mutex::new(BTreeSet::new()),
            unschedulable: crate::probe::Unschedulable::new(wake),
            interest: Default::default(),
        }
    }

    /// Shares `interest` with whoever decides when to wake this cluster's reconciler.
    pub fn with_interest(mut self, interest: Arc<crate::wake::Interest>) -> Self {
        self.interest = interest;
        self
    }
}

/// What [`reconcile`] did.
#[derive(Debug)]
pub enum Action {
    /// Nothing to write; `live` is the object as the watch sees it.
    UpToDate,
    /// Written; the member cluster answered with this object.
    Applied { reason: ApplyReason, object: Value },
}

pub(crate) fn api_for(ctx: &ClusterCtx, r: &Resolved, namespace: &str) -> Api<DynamicObject> {
    if r.namespaced {
        Api::namespaced_with(ctx.client.clone(), namespace, &r.resource)
    } else {
        Api::all_with(ctx.client.clone(), &r.resource)
    }
}

/// How soon a runner whose lease is not fresh looks again, should it miss the lease clock's wake.
const LEASE_RECHECK: Duration = Duration::from_millis(500);

/// Converges one object: applies it unless the live object already matches.
pub async fn reconcile(
    p: &Prepared,
    live: Option<&LiveObject>,
    memo: Option<&Memo>,
    ctx: &ClusterCtx,
) -> Result<Action, ExecError> {
    let reason = match plan::verdict(p.body.as_deref(), p.hash, live, memo) {
        Verdict::UpToDate { .. } => return Ok(Action::UpToDate),
        Verdict::Apply(reason) => reason,
    };
    // Fenced before anything is written, the namespace included.
    ctx.fence.check(&p.id, live)?;
    if p.resolved.namespaced {
        ensure_namespace(ctx, p.id.namespace()).await?;
    }
    let body = p.body_value()?;
    let stamped = ctx.fence.stamp(&body, live);
    let body = stamped.as_ref().unwrap_or(&body);
    let api = api_for(ctx, &p.resolved, p.id.namespace());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // A member that does not answer (store/src/failpoints.rs lists every failpoint).
    fail::fail_point!("executors::member_write", |_| Err(
        crate::error::unanswered(&p.id)
    ));
    let applied = bounded(
        ctx.cfg.request_timeout,
        || format!("applying {}", p.id),
        async { api.patch(p.id.name(), &params, &Patch::Apply(body)).await },
    )
    .await;
    if let Err(ExecError::Kube {
        source: kube::Error::Api(s),
        ..
    }) = &applied
    {
        if s.code == 404 {
            // The namespace went away under us: look it up again on the retry.
            ctx.known_namespaces.lock().await.remove(p.id.namespace());
        }
    }
    let object = serde_json::to_value(applied?).unwrap_or(Value::Null);
    tracing::debug!(cluster = %ctx.cluster, id = %p.id, ?reason, "applied");
    Ok(Action::Applied { reason, object })
}

/// Creates `namespace`, labelled as fedraft's, unless it exists. Existing namespaces are left
/// exactly as they are.
async fn ensure_namespace(ctx: &ClusterCtx, namespace: &str) -> Result<(), ExecError> {
    if ctx.known_namespaces.lock().await.contains(namespace) {
        return Ok(());
    }
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    let limit = ctx.cfg.request_timeout;
    let found = bounded(
        limit,
        || format!("reading namespace {namespace}"),
        api.get_opt(namespace),
    )
    .await?;
    if found.is_none() {
        let body = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": { "name": namespace, "labels": { MANAGED_BY_LABEL: MANAGED_BY_VALUE } },
        });
        let params = PatchParams::apply(FIELD_MANAGER);
        bounded(limit, || format!("creating namespace {namespace}"), async {
            api.patch(namespace, &params, &Patch::Apply(&body)).await
        })
        .await?;
        tracing::info!(cluster = %ctx.cluster, %namespace, "created namespace");
    }
    ctx.known_namespaces
        .lock()
        .await
        .insert(namespace.to_string());
    Ok(())
}

/// The per-cluster reconcile loop's memory. Lost on restart (and on a leadership change) by
/// design: the skip rule works without it, it only saves comparisons. A memo lives from a write
/// until the copy answered to it is settled (`LiveObject::settled`), or on while a rule keeps
/// the copy whole.
pub struct Reconciler<C: ControlPlane> {
    ctrl: C,
    ctx: Arc<ClusterCtx>,
    obs: Arc<Observations>,
    wake: Arc<Notify>,
    memo: HashMap<LiveId, Memo>,
    retries: Retries,
    refusal: Refusal,
    sweep: crate::sweep::Sweep,
    desired: DesiredCache,
}

impl<C: ControlPlane> Reconciler<C> {
    pub fn new(ctrl: C, ctx: Arc<ClusterCtx>, obs: Arc<Observations>, wake: Arc<Notify>) -> Self {
        Reconciler {
            ctrl,
            ctx,
            obs,
            wake,
            memo: HashMap::new(),
            retries: Retries::default(),
            refusal: Refusal::default(),
            sweep: Default::default(),
            desired: DesiredCache::default(),
        }
    }

    /// Runs passes forever: after every wake-up, and at the latest when a retry or the resync
    /// is due.
    pub async fn run(&mut self) {
        loop {
            let next = self.pass().await;
            if self.ctx.fence.tripped() {
                return tracing::error!(cluster = %self.ctx.cluster, "newer owner seen: stopping");
            }
            tokio::select! {
                _ = self.wake.notified() => {
                    // Let a burst of wake-ups (an applied batch, our own writes echoing back
                    // through the watch) collapse into one pass.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                // Paused for a stale lease: no entry wakes a runner for a renewal.
                _ = self.ctx.fence.lease_freshened() => {}
                _ = tokio::time::sleep_until(next) => {}
            }
        }
    }

    /// One full pass; returns when the next one is due at the latest.
    ///
    /// Its cost is proportional to what changed: objects are rendered and prepared only when
    /// their version moved ([`DesiredCache`]), the live snapshot shares the watched objects,
    /// and an object whose live version was already verified is not compared again.
    pub async fn pass(&mut self) -> Instant {
        let ctx = self.ctx.clone();
        let cluster = ctx.cluster.clone();
        let now = Instant::now();
        if !ctx.fence.may_write() {
            // Paused until a renewal commits (its entry wakes this runner); the watches live on.
            return now + LEASE_RECHECK;
        }
        let mut next = now + ctx.cfg.resync_period;
        // A write refused mid-pass because the lease lapsed: this pass reports nothing.
        let mut lapsed = false;
        let cache = &mut self.desired;
        // What this pass reports holds for the state at this index (`report.rs`).
        // Published under the same read, so an entry applied after it is judged against it.
        let (scan, as_of) = self.ctrl.read_state(|s| {
            let scan = cache.scan(s, &cluster);
            ctx.interest
                .set(scan.keys.iter().map(ObjectKey::path).collect());
            (scan, s.applied_index())
        });
        let rules = self.ctrl.read_state(|s| s.health_rules());
        let preserve = self
            .ctrl
            .read_state(|s| crate::preserve::paths_for(s, &scan.keys));
        let mut values = Vec::new();

        let mut statuses = Vec::with_capacity(scan.keys.len());
        let mut workloads = Vec::new();
        let mut unresolved: BTreeSet<String> = BTreeSet::new();
        let mut not_prepared = self.desired.prepare_rendered(&ctx, scan.rendered).await;
        self.desired.retain(&scan.keys);
        let mut prepared: Vec<Arc<Prepared>> = Vec::with_capacity(scan.keys.len());
        for key in &scan.keys {
            let message = match self.desired.get(key) {
                Some(Entry::Ready(p)) => {
                    prepared.push(p.clone());
                    continue;
                }
                Some(Entry::Unusable(m)) => m.clone(),
                None => not_prepared.remove(key).unwrap_or_default(),
            };
            unresolved.insert(key.to_string());
            statuses.push(report(&Arc::new(key.clone()), false, 0, Some(message)));
        }

        // Watch every type in use, and any default kind holding fedraft objects (`sweep`),
        // before trusting the cache.
        let mut types: BTreeSet<(String, String)> = ctx.live.watched().into_iter().collect();
        for p in &prepared {
            let key = p.id.type_key();
            if !types.contains(&key) {
                ctx.live.ensure(&p.resolved);
                types.insert(key);
            }
        }
        self.sweep.run(&ctx, &mut types).await;
        let types: Vec<(String, String)> = types.into_iter().collect();
        ctx.live.wait_ready(&types, ctx.cfg.request_timeout).await;
        let mut snapshot = ctx.live.snapshot();
        // A health rule or preserved path reads the whole object, which settled copies lack.
        let whole = |p: &Prepared| rules.contains_key(&p.key) || preserve.contains_key(&p.key);
        let reread: Vec<_> = prepared
            .iter()
            .filter(|p| whole(p))
            .map(|p| (p.resolved.clone(), p.id.clone()))
            .collect();
        let unread = ctx
            .live
            .reread(&mut snapshot, reread, ctx.cfg.request_timeout)
            .await;
        let mut verified = Vec::new();
        let unrestored = crate::desired::restore_bodies(
            &self.ctrl,
            (&mut self.desired, &cluster),
            &mut prepared,
            (&snapshot, &self.memo),
        );

        // Decide per object; collect the writes.
        let mut work = Vec::new();
        // Read once: the hold only changes when this pass's writes settle, after both loops.
        let hold = self
            .refusal
            .holding(now)
            .map(|(until, m)| (until, m.to_string()));
        for p in &prepared {
            let type_key = p.id.type_key();
            let Some(objects) = snapshot.get(&type_key) else {
                let e = ExecError::CacheNotReady {
                    resource: format!("{}/{}", p.id.api_version(), p.id.kind()),
                    cause: ctx
                        .live
                        .list_error(p.id.api_version(), p.id.kind())
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default(),
                };
                statuses.push(report(&p.key, false, 0, Some(e.to_string())));
                next = next.min(now + ctx.cfg.backoff_min);
                continue;
            };
            if let Some(r) = self
                .retries
                .get(&p.id)
                .filter(|r| r.hash == Some(p.hash) && r.next_at > now)
            {
                statuses.push(report(&p.key, false, 0, Some(r.message.clone())));
                next = next.min(r.next_at);
                continue;
            }
            if let Some(e) = unread.get(&p.id) {
                statuses.push(report(&p.key, false, 0, Some(e.clone())));
                next = next.min(now + ctx.cfg.backoff_min);
                continue;
            }
            if unrestored.contains(&p.key) {
                // Changed since the scan: the entry that changed it wakes the next pass, which
                // prepares it anew; its last report stands until then.
                next = next.min(now + ctx.cfg.backoff_min);
                continue;
            }
            let live = objects.get(&p.id);
            let memo = self.memo.get(&p.id);
            match plan::verdict(p.body.as_deref(), p.hash, live.map(|l| &**l), memo) {
                Verdict::UpToDate { verified: v } => {
                    ctx.metrics.reconciled(Reconciled::Unchanged);
                    self.retries.remove(&p.id);
                    if v && !whole(p) {
                        // Settled, the copy is never compared again: the memo and the body
                        // have done their job.
                        verified.extend(
                            live.filter(|l| !l.is_settled())
                                .map(|l| (p.id.clone(), l.clone())),
                        );
                        self.memo.remove(&p.id);
                        if p.body.is_some() {
                            self.desired.settle(&p.key);
                        }
                    } else if let Some(m) = plan::verified_memo(p.hash, live.map(|l| &**l), memo) {
                        self.memo.insert(p.id.clone(), m);
                    }
                    let (status, workload, value) = reports_in_place(
                        p,
                        &cluster,
                        live.map(|l| &**l),
                        (rules.get(&p.key), preserve.get(&p.key)),
                        ctx.unschedulable.of(&p.key),
                    );
                    statuses.push(status);
                    workloads.extend(workload);
                    values.extend(value);
                }
                Verdict::Apply(_) => match &hold {
                    Some((until, message)) => {
                        statuses.push(report(&p.key, false, 0, Some(message.clone())));
                        next = next.min(*until);
                    }
                    None => work.push((p.clone(), live.cloned(), memo.cloned())),
                },
            }
        }
        ctx.live.settle(&verified);
        // Owned inputs: the futures run concurrently and must not borrow the pass's locals.
        // A write skipped because the cluster refused another in this pass has no result.
        type Done = (
            Arc<Prepared>,
            Option<Arc<LiveObject>>,
            Option<Result<Action, ExecError>>,
        );
        let (flag, concurrency) = (self.refusal.flag(), self.refusal.concurrency(&ctx.cfg));
        let (mut refused, mut through) = (None, false);
        let results: Vec<Done> = futures::stream::iter(work.into_iter().map(|(p, live, memo)| {
            let (ctx, flag) = (ctx.clone(), flag.clone());
            async move {
                if flag.skip() {
                    return (p, live, None);
                }
                let r = reconcile(&p, live.as_deref(), memo.as_ref(), &ctx).await;
                flag.note(&r);
                (p, live, Some(r))
            }
        }))
        .buffer_unordered(concurrency)
        .collect()
        .await;
        for (p, live, result) in results {
            let result = match result {
                Some(Err(e)) if retry::refused_connection(&e) => {
                    ctx.metrics.reconciled(Reconciled::ApplyFailed);
                    statuses.push(report(&p.key, false, 0, Some(e.to_string())));
                    refused.get_or_insert(e);
                    continue;
                }
                Some(r) => r,
                None => {
                    let message = "not tried: the cluster refused a connection".to_string();
                    statuses.push(report(&p.key, false, 0, Some(message)));
                    continue;
                }
            };
            through |= result.is_ok();
            match result {
                Ok(action) => {
                    self.retries.remove(&p.id);
                    let applied = match action {
                        Action::UpToDate => {
                            ctx.metrics.reconciled(Reconciled::Unchanged);
                            None
                        }
                        Action::Applied { object, .. } => {
                            ctx.metrics.reconciled(Reconciled::Applied);
                            let rv = object
                                .pointer("/metadata/resourceVersion")
                                .and_then(Value::as_str);
                            self.memo.insert(
                                p.id.clone(),
                                Memo {
                                    hash: p.hash,
                                    resource_version: rv.map(str::to_string),
                                },
                            );
                            Some(LiveObject::from_value(object))
                        }
                    };
                    let (status, workload, value) = reports_in_place(
                        &p,
                        &cluster,
                        applied.as_ref().or(live.as_deref()),
                        (rules.get(&p.key), preserve.get(&p.key)),
                        ctx.unschedulable.of(&p.key),
                    );
                    statuses.push(status);
                    workloads.extend(workload);
                    values.extend(value);
                }
                Err(ExecError::LeaseLapsed { .. }) => lapsed = true,
                Err(e) => {
                    ctx.metrics.reconciled(Reconciled::ApplyFailed);
                    let at = self.retries.fail(&p.id, Some(p.hash), &e, now, &ctx.cfg);
                    next = next.min(at);
                    tracing::warn!(%cluster, id = %p.id, error = %e, "apply failed");
                    statuses.push(report(&p.key, false, 0, Some(e.to_string())));
                }
            }
        }

        // Remove what fedraft placed here and no longer wants.
        let desired_ids: BTreeSet<LiveId> = prepared.iter().map(|p| p.id.clone()).collect();
        // Namespaces any object placed here lives in, prepared or not: none of them is pruned.
        let mut in_use = plan::namespaces_needed(&desired_ids);
        in_use.extend(scan.keys.iter().map(|k| k.namespace.clone()));
        let mut doomed = Vec::new();
        let released = self.ctrl.read_state(crate::fence::released);
        let released = &released;
        for held in snapshot.values() {
            let objects = held.iter().map(|(id, o)| (id, &**o));
            for id in plan::prunable(objects, &desired_ids, &unresolved, &in_use) {
                match (self.retries.get(&id), &hold) {
                    (_, Some((until, _))) => next = next.min(*until),
                    (Some(r), None) if r.next_at > now => next = next.min(r.next_at),
                    _ => doomed.push((held.get(&id).cloned(), id)),
                }
            }
        }
        let deleted: Vec<_> = futures::stream::iter(doomed.into_iter().map(|(live, id)| {
            let (ctx, flag) = (ctx.clone(), flag.clone());
            async move {
                if flag.skip() {
                    return (id, live, None);
                }
                let r = crate::fence::remove(&ctx, &id, live.as_deref(), released).await;
                flag.note(&r);
                (id, live, Some(r))
            }
        }))
        .buffer_unordered(concurrency)
        .collect()
        .await;
        let mut gone = Vec::new();
        for (id, live, r) in deleted {
            let r = match r {
                Some(Err(e)) if retry::refused_connection(&e) => {
                    ctx.metrics.reconciled(Reconciled::DeleteFailed);
                    refused.get_or_insert(e);
                    continue;
                }
                Some(r) => r,
                None => continue,
            };
            through |= r.is_ok();
            match r {
                Ok(()) => {
                    ctx.metrics.reconciled(Reconciled::Deleted);
                    tracing::info!(%cluster, %id, "deleted object no longer desired");
                    self.memo.remove(&id);
                    self.retries.remove(&id);
                    gone.extend(live.map(|l| (id, l)));
                }
                Err(ExecError::LeaseLapsed { .. }) => lapsed = true,
                Err(e) => {
                    ctx.metrics.reconciled(Reconciled::DeleteFailed);
                    tracing::warn!(%cluster, %id, error = %e, "delete failed");
                    let at = self.retries.fail(&id, None, &e, now, &ctx.cfg);
                    next = next.min(at);
                }
            }
        }
        ctx.live.forget(&gone);
        let held = self
            .refusal
            .settle(&cluster, refused.as_ref(), through, now, &ctx.cfg);
        next = held.map_or(next, |at| next.min(at));
        self.memo.retain(|id, _| desired_ids.contains(id));
        // Memos live from a write until its copy settles: after a burst of writes the table
        // would keep room for all of them.
        crate::report::release_spare_room(&mut self.memo);
        // Derived tenant quotas have no federated object to take a status.
        statuses.retain(|r| r.key.name != fedraft_core::state::TENANT_QUOTA_KEY);
        if lapsed {
            // Its statuses would call objects it could not write failed: the next pass reports.
            return next.min(now + LEASE_RECHECK);
        }
        self.obs.set_statuses(&cluster, as_of, statuses, workloads);
        self.obs.values.set(&cluster, values);
        next
    }

    /// After the cluster was deregistered: removes every object fedraft placed there. With the
    /// cluster gone from the state nothing is desired, so a pass deletes every managed object
    /// the watches see; passes repeat until every watched type is listed and holds none.
    /// Returns at once if the cluster is still registered. Namespaces stay, as always.
    pub async fn farewell(&mut self) {
        let cluster = self.ctx.cluster.clone();
        loop {
            if self.ctrl.read_state(|s| s.cluster(&cluster).is_some()) {
                return;
            }
            let _ = self.pass().await;
            if self.ctx.live.is_clean() {
                return;
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(self.ctx.cfg.backoff_min) => {}
            }
        }
    }
}
